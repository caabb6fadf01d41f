// .from(a).from(b): the sources of one flow have one row type (R-STAGE-4).
// expect-error: the sources of one flow must have the same row type
#include "shared/row.hpp"

int main() {
  flowlib::MemorySource<Row> a{"a"};
#ifdef FLOWLIB_CONTROL
  flowlib::MemorySource<Row> b{"b"};
#else
  flowlib::MemorySource<Other> b{"b"};
#endif
  flowlib::StreamingTable<Row> t{"t"};
  flowlib::MemoryCheckpoint ckpt;
  flowlib::Pipeline p{"p", ckpt};
  p.flow("f").from(a).from(b).into(t, RowUsing{"f"});
}
