// filter(pred): pred takes the rows as const Row& and returns bool (R-STAGE-2).
// expect-error: filter.pred.: pred must take the rows of the stage before it
#include "shared/row.hpp"

int main() {
  pipeline_rig r;
#ifdef FLOWLIB_CONTROL
  r.p.flow("f").from(r.feed).filter([](const Row& x) { return x.id > 0; }).into(r.t, RowUsing{"f"});
#else
  r.p.flow("f").from(r.feed).filter([](const Row& x) { return x; }).into(r.t, RowUsing{"f"});  // not a bool
#endif
}
