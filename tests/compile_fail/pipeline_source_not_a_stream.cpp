// R-USING-9: a pipeline flow reads a stream, a source with positions; a
// container of rows is not one.
// expect-error: a flow reads a stream, a source with positions
#include "shared/row.hpp"

int main() {
#ifdef FLOWLIB_CONTROL
  flowlib::MemorySource<Row> feed{"feed"};
#else
  std::vector<Row> feed{{1, 1}};
#endif
  flowlib::StreamingTable<Row> t{"t"};
  flowlib::MemoryCheckpoint ckpt;
  flowlib::Pipeline p{"p", ckpt};
  p.flow("f").from(feed).into(t, RowUsing{"f"});
}
