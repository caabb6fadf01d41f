// filter(pred): pred takes the rows as const Row& and returns bool (R-STAGE-2).
// expect-error: filter.pred.: pred must take the rows of the stage before it
#include "shared/row.hpp"

int main() {
  flowlib::MemorySource<Row> feed{"feed"};
  flowlib::StreamingTable<Row> t{"t"};
  flowlib::MemoryCheckpoint ckpt;
  flowlib::Pipeline p{"p", ckpt};
#ifdef FLOWLIB_CONTROL
  p.flow("f").from(feed).filter([](const Row& r) { return r.id > 0; }).into(t, RowUsing{"f"});
#else
  p.flow("f").from(feed).filter([](const Row& r) { return r; }).into(t, RowUsing{"f"});  // not a bool
#endif
}
