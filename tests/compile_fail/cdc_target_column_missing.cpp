// R-CDC column mapping: a target column that the change row lacks is a
// compile error that names the column.
// expect-error: cdc_target_column_check<.*country.*TARGET_COLUMN_MISSING_FROM_CHANGE
#include "shared/cdc.hpp"

#ifdef FLOWLIB_CONTROL
using Target = Row;
#else
struct Target {
  std::int64_t id;
  std::optional<std::string> name;
  std::optional<std::string> country;  // not a column of Change
};
FLOWLIB_SCHEMA(Target, id, name, country);
#endif

int main() {
  fl::StreamingTable<Target> t{"t"};
  apply_nothing<CdcFlow<fl::Scd1, fl::column_list<"id", "name", "city">>>(t);
}
