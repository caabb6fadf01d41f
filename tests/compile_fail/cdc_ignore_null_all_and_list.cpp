// R-CDC-6: ignore_null_updates for all columns and for a list are mutually
// exclusive.
// expect-error: IGNORE_NULL_UPDATES_EXCLUSIVE
#include "shared/cdc.hpp"

int main() {
#ifdef FLOWLIB_CONTROL
  using Flow = fl::AutoCdc<ChangeKey, ChangeSeq, fl::Scd1, NotStored, fl::ignore_null_updates>;
#else
  using Flow = fl::AutoCdc<ChangeKey, ChangeSeq, fl::Scd1, NotStored, fl::ignore_null_updates,
                           fl::ignore_null_updates_column_list<"name">>;
#endif
  fl::StreamingTable<Row> t{"t"};
  apply_nothing<Flow>(t);
}
