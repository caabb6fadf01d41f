// R-CDC-6: ignore_null_updates_column_list and
// ignore_null_updates_except_column_list are mutually exclusive.
// expect-error: IGNORE_NULL_UPDATES_EXCLUSIVE
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
  using Flow = fl::AutoCdc<fl::Key<&Change::id>, fl::Seq<&Change::seq>, fl::Scd2<>,
                           fl::except_column_list<"op", "seq">,
                           fl::ignore_null_updates_except_column_list<"city">>;
#else
  using Flow = fl::AutoCdc<fl::Key<&Change::id>, fl::Seq<&Change::seq>, fl::Scd2<>,
                           fl::except_column_list<"op", "seq">,
                           fl::ignore_null_updates_column_list<"name">,
                           fl::ignore_null_updates_except_column_list<"city">>;
#endif
  Flow flow{"f"};
  (void)flow;
}
