// R-TABLE-1: in a typed pipeline, a flow other than an append flow into a
// managed table fails to compile with the reference code.
// expect-error: MANAGED_TABLE_DOES_NOT_SUPPORT_CDC
#include "shared/row.hpp"

int main() {
  pipeline_rig<Row, flowlib::ManagedTable<Row>> r;
#ifdef FLOWLIB_CONTROL
  r.p.flow("f").from(r.feed).into(r.t, flowlib::Append{"f"});
#else
  r.p.flow("f").from(r.feed).into(r.t, RowUsing{"f"});
#endif
}
