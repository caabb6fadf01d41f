// R-TABLE-1: AUTO CDC into a managed table fails to compile with the
// reference error code.
// expect-error: MANAGED_TABLE_DOES_NOT_SUPPORT_CDC
#include "shared/cdc.hpp"

int main() {
#ifdef FLOWLIB_CONTROL
  fl::StreamingTable<Row> t{"t"};
#else
  fl::ManagedTable<Row> t{"t"};
#endif
  using Flow = fl::AutoCdc<ChangeKey, ChangeSeq, fl::Scd1, fl::apply_as_deletes<IsDelete>,
                           NotStored>;
  apply_nothing<Flow>(t);
}
