// R-CDC column mapping: a selected change column that the target lacks
// would lose data: a compile error that names the column.
// expect-error: cdc_selected_column_check<[a-z:_]*fixed_string<3>..op...*SELECTED_COLUMN_MISSING_FROM_TARGET
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

int main() {
#ifdef FLOWLIB_CONTROL
  using Flow = fl::AutoCdc<fl::Key<&Change::id>, fl::Seq<&Change::seq>, fl::Scd1,
                           fl::apply_as_deletes<IsDelete>, fl::except_column_list<"op", "seq">>;
#else
  using Flow = fl::AutoCdc<fl::Key<&Change::id>, fl::Seq<&Change::seq>, fl::Scd1,
                           fl::apply_as_deletes<IsDelete>, fl::except_column_list<"seq">>;
#endif
  fl::StreamingTable<Row> t{"t"};
  Flow flow{"f"};
  flow.apply(t, std::vector<Change>{});
}
