// R-TABLE-4: IMPORT CHECKPOINT is allowed only on append flows.
// expect-error: IMPORT CHECKPOINT is allowed only on append flows
#include "shared/row.hpp"

int main() {
  pipeline_rig r;
  flowlib::MemoryCheckpoint stream;
#ifdef FLOWLIB_CONTROL
  r.p.flow("f").from(r.feed).import_checkpoint(stream, "s").into(r.t, flowlib::Append{"f"});
#else
  r.p.flow("f").from(r.feed).import_checkpoint(stream, "s").into(r.t, RowUsing{"f"});
#endif
}
