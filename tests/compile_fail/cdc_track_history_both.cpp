// R-CDC-4: track_history_column_list and track_history_except_column_list
// are mutually exclusive.
// expect-error: TRACK_HISTORY_LISTS_EXCLUSIVE
#include "shared/cdc.hpp"

int main() {
#ifdef FLOWLIB_CONTROL
  using Scd = fl::Scd2<fl::track_history_column_list<"name">>;
#else
  using Scd = fl::Scd2<fl::track_history_column_list<"name">,
                       fl::track_history_except_column_list<"city">>;
#endif
  fl::StreamingTable<History> t{"t"};
  apply_nothing<CdcFlow<Scd, NotStored>>(t);
}
