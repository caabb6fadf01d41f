// R-CDC column mapping: a selected change column that the target lacks
// would lose data: a compile error that names the column.
// expect-error: cdc_selected_column_check<[a-z:_]*fixed_string<3>..op...*SELECTED_COLUMN_MISSING_FROM_TARGET
#include "shared/cdc.hpp"

int main() {
#ifdef FLOWLIB_CONTROL
  using Flow = fl::AutoCdc<ChangeKey, ChangeSeq, fl::Scd1, fl::apply_as_deletes<IsDelete>,
                           NotStored>;
#else
  using Flow = fl::AutoCdc<ChangeKey, ChangeSeq, fl::Scd1, fl::apply_as_deletes<IsDelete>,
                           fl::except_column_list<"seq">>;
#endif
  fl::StreamingTable<Row> t{"t"};
  apply_nothing<Flow>(t);
}
