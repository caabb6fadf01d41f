// map(fn, quarantine): the quarantine table holds Quarantined<Row>, Row being
// the map's input (the rejected row is kept whole), not its output (R-STAGE-5).
// expect-error: a quarantine table holds flowlib::Quarantined<Row> rows, Row being the flow's row type at this stage
#include "shared/row.hpp"

int main() {
  flowlib::MemorySource<Row> feed{"feed"};
  flowlib::StreamingTable<Row> t{"t"};
#ifdef FLOWLIB_CONTROL
  flowlib::StreamingTable<flowlib::Quarantined<Row>> q{"q"};
#else
  flowlib::StreamingTable<flowlib::Quarantined<Other>> q{"q"};
#endif
  flowlib::MemoryCheckpoint ckpt;
  flowlib::Pipeline p{"p", ckpt};
  p.flow("f")
      .from(feed)
      .map([](const Row& r) { return Other{r.id, r.seq}; }, q)
      .map([](const Other& o) { return Row{o.id, o.seq}; })
      .into(t, RowUsing{"f"});
}
