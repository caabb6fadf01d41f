// A flow policy takes the rows of its source: REPLACE USING its Key/Seq row
// type (here a source of another row type).
// expect-error: the flow policy does not take the rows
#include "shared/row.hpp"

int main() {
#ifdef FLOWLIB_CONTROL
  flowlib::MemorySource<Row> feed{"feed"};
#else
  flowlib::MemorySource<Other> feed{"feed"};
#endif
  flowlib::StreamingTable<Row> t{"t"};
  flowlib::MemoryCheckpoint ckpt;
  flowlib::Pipeline p{"p", ckpt};
  p.flow("f").from(feed).into(t, RowUsing{"f"});
}
