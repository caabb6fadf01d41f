// R-USING-9: a pipeline flow reads a stream, a source with positions; a
// container of rows is not one.
// expect-error: a flow reads a stream, a source with positions
#include "shared/row.hpp"

int main() {
  pipeline_rig r;
#ifdef FLOWLIB_CONTROL
  auto& rows = r.feed;
#else
  std::vector<Row> rows{{1, 1}};
#endif
  r.p.flow("f").from(rows).into(r.t, RowUsing{"f"});
}
