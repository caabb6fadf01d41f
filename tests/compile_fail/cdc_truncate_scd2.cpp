// R-CDC-4: SCD type 2 does not support truncate; configuring it fails to
// compile.
// expect-error: SCD2_DOES_NOT_SUPPORT_TRUNCATE
#include "shared/cdc.hpp"

int main() {
#ifdef FLOWLIB_CONTROL
  using Flow = fl::AutoCdc<ChangeKey, ChangeSeq, fl::Scd1, fl::apply_as_deletes<IsDelete>,
                           fl::apply_as_truncates<IsTruncate>, NotStored>;
#else
  using Flow = fl::AutoCdc<ChangeKey, ChangeSeq, fl::Scd2<>, fl::apply_as_deletes<IsDelete>,
                           fl::apply_as_truncates<IsTruncate>, NotStored>;
#endif
  Flow flow{"f"};
  (void)flow;
}
