// R-CDC column mapping: a target column whose type differs from the change
// column of the same name is a compile error that names the column.
// expect-error: cdc_target_column_check<.*city.*TARGET_COLUMN_TYPE_MISMATCH
#include <flowlib/flows/auto_cdc.hpp>
#include <flowlib/table.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace fl = flowlib;

struct Change {
  std::int64_t id;
  std::optional<std::string> name;
  std::optional<std::string> city;
  std::string op;
  std::int64_t seq;
};
FLOWLIB_SCHEMA(Change, id, name, city, op, seq);

struct Row {
  std::int64_t id;
  std::optional<std::string> name;
  std::optional<std::string> city;
};
FLOWLIB_SCHEMA(Row, id, name, city);

struct IsDelete {
  bool operator()(const Change& c) const { return c.op == "DELETE"; }
};

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
  using Flow = fl::AutoCdc<fl::Key<&Change::id>, fl::Seq<&Change::seq>, fl::Scd1,
                           fl::apply_as_deletes<IsDelete>, fl::except_column_list<"op", "seq">>;
  fl::StreamingTable<Target> t{"t"};
  Flow flow{"f"};
  flow.apply(t, std::vector<Change>{});
}
