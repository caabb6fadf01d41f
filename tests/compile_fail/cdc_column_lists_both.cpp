// R-CDC column selection: column_list and except_column_list are mutually
// exclusive.
// expect-error: COLUMN_LIST_EXCLUSIVE
#include "shared/cdc.hpp"

int main() {
#ifdef FLOWLIB_CONTROL
  using Flow = fl::AutoCdc<ChangeKey, ChangeSeq, fl::Scd1, fl::apply_as_deletes<IsDelete>,
                           NotStored>;
#else
  using Flow = fl::AutoCdc<ChangeKey, ChangeSeq, fl::Scd1, fl::apply_as_deletes<IsDelete>,
                           NotStored, fl::column_list<"id", "name", "city">>;
#endif
  fl::StreamingTable<Row> t{"t"};
  apply_nothing<Flow>(t);
}
