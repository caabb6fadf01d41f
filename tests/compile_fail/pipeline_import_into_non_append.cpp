// R-TABLE-4: IMPORT CHECKPOINT is allowed only on append flows.
// expect-error: IMPORT CHECKPOINT is allowed only on append flows
#include "shared/row.hpp"

int main() {
  flowlib::MemorySource<Row> feed{"feed"};
  flowlib::StreamingTable<Row> t{"t"};
  flowlib::MemoryCheckpoint ckpt;
  flowlib::MemoryCheckpoint stream;
  flowlib::Pipeline p{"p", ckpt};
#ifdef FLOWLIB_CONTROL
  p.flow("f").from(feed).import_checkpoint(stream, "s").into(t, flowlib::Append{"f"});
#else
  p.flow("f").from(feed).import_checkpoint(stream, "s").into(t, RowUsing{"f"});
#endif
}
