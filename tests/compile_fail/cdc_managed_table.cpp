// R-TABLE-1: AUTO CDC into a managed table fails to compile with the
// reference error code.
// expect-error: MANAGED_TABLE_DOES_NOT_SUPPORT_CDC
#include "shared/cdc.hpp"

#ifdef FLOWLIB_CONTROL
using Target = fl::StreamingTable<Row>;
#else
using Target = fl::ManagedTable<Row>;
#endif

int main() {
  Target t{"t"};
  apply_nothing<CdcFlow<fl::Scd1, NotStored>>(t);
}
