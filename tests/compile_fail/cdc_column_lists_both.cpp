// R-CDC column selection: column_list and except_column_list are mutually
// exclusive.
// expect-error: COLUMN_LIST_EXCLUSIVE
#include "shared/cdc.hpp"

#ifdef FLOWLIB_CONTROL
using Flow = CdcFlow<fl::Scd1, NotStored>;
#else
using Flow = CdcFlow<fl::Scd1, NotStored, fl::column_list<"id", "name", "city">>;
#endif

int main() {
  fl::StreamingTable<Row> t{"t"};
  apply_nothing<Flow>(t);
}
