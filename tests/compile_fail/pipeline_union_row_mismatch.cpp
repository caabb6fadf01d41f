// .from(a).from(b): the sources of one flow have one row type (R-STAGE-4).
// expect-error: the sources of one flow must have the same row type
#include "shared/row.hpp"

int main() {
  pipeline_rig r;
#ifdef FLOWLIB_CONTROL
  flowlib::MemorySource<Row> b{"b"};
#else
  flowlib::MemorySource<Other> b{"b"};
#endif
  r.p.flow("f").from(r.feed).from(b).into(r.t, RowUsing{"f"});
}
