// R-TABLE-1: a managed table accepts only append flows; REPLACE USING into
// one fails to compile with the reference error code.
// expect-error: MANAGED_TABLE_DOES_NOT_SUPPORT_CDC
#include "shared/row.hpp"

int main() {
#ifdef FLOWLIB_CONTROL
  flowlib::StreamingTable<Row> t{"rows"};
#else
  flowlib::ManagedTable<Row> t{"rows"};
#endif
  RowUsing flow{"f"};
  flow.apply(t, std::vector<Row>{{1, 1}});
}
