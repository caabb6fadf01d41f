// R-CDC-4: an SCD type 2 target needs __START_AT and __END_AT columns.
// expect-error: SCD2_TARGET_NEEDS_START_AT_END_AT
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

struct History {
  std::int64_t id;
  std::optional<std::string> name;
  std::optional<std::string> city;
  std::int64_t start_at;
  std::optional<std::int64_t> end_at;
};
#ifdef FLOWLIB_CONTROL
FLOWLIB_SCHEMA(History, id, name, city, (start_at, "__START_AT"), (end_at, "__END_AT"));
#else
FLOWLIB_SCHEMA(History, id, name, city, (start_at, "__START_AT"), (end_at, "END_AT"));
#endif

int main() {
  using Flow = fl::AutoCdc<fl::Key<&Change::id>, fl::Seq<&Change::seq>, fl::Scd2<>,
                           fl::apply_as_deletes<IsDelete>, fl::except_column_list<"op", "seq">>;
  fl::StreamingTable<History> t{"t"};
  Flow flow{"f"};
  flow.apply(t, std::vector<Change>{});
}
