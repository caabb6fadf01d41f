// R-CDC-6: ignore_null_updates_column_list and
// ignore_null_updates_except_column_list are mutually exclusive.
// expect-error: IGNORE_NULL_UPDATES_EXCLUSIVE
#include "shared/cdc.hpp"

int main() {
#ifdef FLOWLIB_CONTROL
  using Flow = fl::AutoCdc<ChangeKey, ChangeSeq, fl::Scd2<>, NotStored,
                           fl::ignore_null_updates_except_column_list<"city">>;
#else
  using Flow = fl::AutoCdc<ChangeKey, ChangeSeq, fl::Scd2<>, NotStored,
                           fl::ignore_null_updates_column_list<"name">,
                           fl::ignore_null_updates_except_column_list<"city">>;
#endif
  Flow flow{"f"};
  (void)flow;
}
