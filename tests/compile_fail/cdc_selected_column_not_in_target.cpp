// R-CDC column mapping: a selected change column that the target lacks
// would lose data: a compile error that names the column.
// expect-error: cdc_selected_column_check<[a-z:_]*fixed_string<3>..op...*SELECTED_COLUMN_MISSING_FROM_TARGET
#include "shared/cdc.hpp"

#ifdef FLOWLIB_CONTROL
using Flow = CdcFlow<fl::Scd1, NotStored>;
#else
using Flow = CdcFlow<fl::Scd1, fl::except_column_list<"seq">>;  // op is selected too
#endif

int main() {
  fl::StreamingTable<Row> t{"t"};
  apply_nothing<Flow>(t);
}
