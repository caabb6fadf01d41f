// map(fn): fn takes the rows of the stage before it (here the source's
// Row), not another row type (R-STAGE-1).
// expect-error: map.fn.: fn must take the rows of the stage before it
#include "shared/row.hpp"

int main() {
  pipeline_rig r;
#ifdef FLOWLIB_CONTROL
  r.p.flow("f").from(r.feed).map([](const Row& x) { return Row{x.id, x.seq + 1}; }).into(r.t, RowUsing{"f"});
#else
  r.p.flow("f").from(r.feed).map([](const Other& x) { return Row{x.id, x.seq + 1}; }).into(r.t, RowUsing{"f"});
#endif
}
