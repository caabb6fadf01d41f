// R-CDC-4: SCD type 2 does not support truncate; configuring it fails to
// compile.
// expect-error: SCD2_DOES_NOT_SUPPORT_TRUNCATE
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

struct IsTruncate {
  bool operator()(const Change& c) const { return c.op == "TRUNCATE"; }
};

int main() {
#ifdef FLOWLIB_CONTROL
  using Flow = fl::AutoCdc<fl::Key<&Change::id>, fl::Seq<&Change::seq>, fl::Scd1,
                           fl::apply_as_deletes<IsDelete>, fl::apply_as_truncates<IsTruncate>,
                           fl::except_column_list<"op", "seq">>;
#else
  using Flow = fl::AutoCdc<fl::Key<&Change::id>, fl::Seq<&Change::seq>, fl::Scd2<>,
                           fl::apply_as_deletes<IsDelete>, fl::apply_as_truncates<IsTruncate>,
                           fl::except_column_list<"op", "seq">>;
#endif
  Flow flow{"f"};
  (void)flow;
}
