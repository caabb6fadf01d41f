// The flow policy takes the rows of the flow's last stage: a map into
// another row type needs a policy (or a table) for that type (R-STAGE-1).
// expect-error: the flow policy does not take the rows of the flow's last stage
#include "shared/row.hpp"

#ifdef FLOWLIB_CONTROL
using Mapped = Row;
#else
using Mapped = Other;
#endif

int main() {
  pipeline_rig r;
  r.p.flow("f").from(r.feed).map([](const Row& x) { return Mapped{x.id, x.seq}; }).into(r.t, RowUsing{"f"});
}
