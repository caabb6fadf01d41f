// A quarantine table holds flowlib::Quarantined<Row> rows.
// expect-error: a quarantine table holds flowlib::Quarantined<Row> rows
#include "shared/row.hpp"

int main() {
  flowlib::MemorySource<Row> feed{"feed"};
  flowlib::StreamingTable<Row> t{"t"};
#ifdef FLOWLIB_CONTROL
  flowlib::StreamingTable<flowlib::Quarantined<Row>> q{"q"};
#else
  flowlib::StreamingTable<Row> q{"q"};
#endif
  flowlib::MemoryCheckpoint ckpt;
  flowlib::Pipeline p{"p", ckpt};
  const auto positive = flowlib::expect_or_quarantine("pos", [](const Row& r) { return r.id > 0; });
  p.flow("f").from(feed).quarantine(q, flowlib::expectations(positive)).into(t, flowlib::Append{"f"});
}
