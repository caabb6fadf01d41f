// map(fn, quarantine): the quarantine table holds Quarantined<Row>, Row being
// the map's input (the rejected row is kept whole), not its output (R-STAGE-5).
// expect-error: a quarantine table holds flowlib::Quarantined<Row> rows, Row being the flow's row type at this stage
#include "shared/row.hpp"

#ifdef FLOWLIB_CONTROL
using Rejected = flowlib::Quarantined<Row>;
#else
using Rejected = flowlib::Quarantined<Other>;  // the map's output
#endif

int main() {
  pipeline_rig r;
  flowlib::StreamingTable<Rejected> q{"q"};
  r.p.flow("f")
      .from(r.feed)
      .map([](const Row& x) { return Other{x.id, x.seq}; }, q)
      .map([](const Other& o) { return Row{o.id, o.seq}; })
      .into(r.t, RowUsing{"f"});
}
