// R-TABLE-1: in a typed pipeline, a flow other than an append flow into a
// managed table fails to compile with the reference code.
// expect-error: MANAGED_TABLE_DOES_NOT_SUPPORT_CDC
#include "shared/row.hpp"

int main() {
  flowlib::MemorySource<Row> feed{"feed"};
  flowlib::ManagedTable<Row> t{"t"};
  flowlib::MemoryCheckpoint ckpt;
  flowlib::Pipeline p{"p", ckpt};
#ifdef FLOWLIB_CONTROL
  p.flow("f").from(feed).into(t, flowlib::Append{"f"});
#else
  p.flow("f").from(feed).into(t, RowUsing{"f"});
#endif
}
