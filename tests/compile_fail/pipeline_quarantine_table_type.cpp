// A quarantine table holds flowlib::Quarantined<Row> rows.
// expect-error: a quarantine table holds flowlib::Quarantined<Row> rows
#include "shared/row.hpp"

#ifdef FLOWLIB_CONTROL
using Rejected = flowlib::Quarantined<Row>;
#else
using Rejected = Row;  // the rows themselves
#endif

int main() {
  pipeline_rig r;
  flowlib::StreamingTable<Rejected> q{"q"};
  const auto positive = flowlib::expect_or_quarantine("pos", [](const Row& x) { return x.id > 0; });
  r.p.flow("f").from(r.feed).quarantine(q, flowlib::expectations(positive)).into(r.t, flowlib::Append{"f"});
}
