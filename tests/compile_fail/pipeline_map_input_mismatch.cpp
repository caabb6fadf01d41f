// map(fn): fn takes the rows of the stage before it (here the source's
// Row), not another row type (R-STAGE-1).
// expect-error: map.fn.: fn must take the rows of the stage before it
#include "shared/row.hpp"

int main() {
  flowlib::MemorySource<Row> feed{"feed"};
  flowlib::StreamingTable<Row> t{"t"};
  flowlib::MemoryCheckpoint ckpt;
  flowlib::Pipeline p{"p", ckpt};
#ifdef FLOWLIB_CONTROL
  p.flow("f").from(feed).map([](const Row& r) { return Row{r.id, r.seq + 1}; }).into(t, RowUsing{"f"});
#else
  p.flow("f").from(feed).map([](const Other& r) { return Row{r.id, r.seq + 1}; }).into(t, RowUsing{"f"});
#endif
}
