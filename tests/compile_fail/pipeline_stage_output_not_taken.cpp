// The flow policy takes the rows of the flow's last stage: a map into
// another row type needs a policy (or a table) for that type (R-STAGE-1).
// expect-error: the flow policy does not take the rows of the flow's last stage
#include "shared/row.hpp"

int main() {
  flowlib::MemorySource<Row> feed{"feed"};
  flowlib::StreamingTable<Row> t{"t"};
  flowlib::MemoryCheckpoint ckpt;
  flowlib::Pipeline p{"p", ckpt};
#ifdef FLOWLIB_CONTROL
  p.flow("f").from(feed).map([](const Row& r) { return Row{r.id, r.seq}; }).into(t, RowUsing{"f"});
#else
  p.flow("f").from(feed).map([](const Row& r) { return Other{r.id, r.seq}; }).into(t, RowUsing{"f"});
#endif
}
