// R-CDC column mapping: a target column whose type differs from the change
// column of the same name is a compile error that names the column.
// expect-error: cdc_target_column_check<.*city.*TARGET_COLUMN_TYPE_MISMATCH
#include "shared/cdc.hpp"

struct Target {
  std::int64_t id;
  std::optional<std::string> name;
#ifdef FLOWLIB_CONTROL
  std::optional<std::string> city;
#else
  std::string city;  // Change::city is std::optional<std::string>
#endif
};
FLOWLIB_SCHEMA(Target, id, name, city);

int main() {
  fl::StreamingTable<Target> t{"t"};
  apply_nothing<CdcFlow<fl::Scd1, NotStored>>(t);
}
