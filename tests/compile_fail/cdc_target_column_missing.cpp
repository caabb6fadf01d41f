// R-CDC column mapping: a target column that the change row lacks is a
// compile error that names the column.
// expect-error: cdc_target_column_check<.*country.*TARGET_COLUMN_MISSING_FROM_CHANGE
#include "shared/cdc.hpp"

struct Target {
  std::int64_t id;
  std::optional<std::string> name;
#ifdef FLOWLIB_CONTROL
  std::optional<std::string> city;
#else
  std::optional<std::string> country;  // not a column of Change
#endif
};
#ifdef FLOWLIB_CONTROL
FLOWLIB_SCHEMA(Target, id, name, city);
#else
FLOWLIB_SCHEMA(Target, id, name, country);
#endif

int main() {
  using Flow = fl::AutoCdc<ChangeKey, ChangeSeq, fl::Scd1, fl::apply_as_deletes<IsDelete>,
                           fl::column_list<"id", "name", "city">>;
  fl::StreamingTable<Target> t{"t"};
  apply_nothing<Flow>(t);
}
