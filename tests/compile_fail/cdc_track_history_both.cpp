// R-CDC-4: track_history_column_list and track_history_except_column_list
// are mutually exclusive.
// expect-error: TRACK_HISTORY_LISTS_EXCLUSIVE
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
FLOWLIB_SCHEMA(History, id, name, city, (start_at, "__START_AT"), (end_at, "__END_AT"));

int main() {
#ifdef FLOWLIB_CONTROL
  using Scd = fl::Scd2<fl::track_history_column_list<"name">>;
#else
  using Scd = fl::Scd2<fl::track_history_column_list<"name">,
                       fl::track_history_except_column_list<"city">>;
#endif
  using Flow = fl::AutoCdc<fl::Key<&Change::id>, fl::Seq<&Change::seq>, Scd,
                           fl::apply_as_deletes<IsDelete>, fl::except_column_list<"op", "seq">>;
  fl::StreamingTable<History> t{"t"};
  Flow flow{"f"};
  flow.apply(t, std::vector<Change>{});
}
