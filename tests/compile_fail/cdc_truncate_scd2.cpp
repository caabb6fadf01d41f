// R-CDC-4: SCD type 2 does not support truncate; configuring it fails to
// compile.
// expect-error: SCD2_DOES_NOT_SUPPORT_TRUNCATE
#include "shared/cdc.hpp"

#ifdef FLOWLIB_CONTROL
using Scd = fl::Scd1;
#else
using Scd = fl::Scd2<>;
#endif

int main() {
  [[maybe_unused]] CdcFlow<Scd, fl::apply_as_truncates<IsTruncate>, NotStored> flow{"f"};
}
