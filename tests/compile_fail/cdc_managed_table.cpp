// R-TABLE-1: AUTO CDC into a managed table fails to compile with the
// reference error code.
// expect-error: MANAGED_TABLE_DOES_NOT_SUPPORT_CDC
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
  fl::StreamingTable<Row> t{"t"};
#else
  fl::ManagedTable<Row> t{"t"};
#endif
  using Flow = fl::AutoCdc<fl::Key<&Change::id>, fl::Seq<&Change::seq>, fl::Scd1,
                           fl::apply_as_deletes<IsDelete>, fl::except_column_list<"op", "seq">>;
  Flow flow{"f"};
  flow.apply(t, std::vector<Change>{});
}
