// R-TABLE-1: a managed table accepts only append flows; REPLACE USING into
// one fails to compile with the reference error code.
// expect-error: MANAGED_TABLE_DOES_NOT_SUPPORT_CDC
#include "shared/row.hpp"

#ifdef FLOWLIB_CONTROL
using Target = flowlib::StreamingTable<Row>;
#else
using Target = flowlib::ManagedTable<Row>;  // append flows only
#endif

int main() { return apply_one_row(Target{"rows"}); }
