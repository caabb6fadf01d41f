// The rows of the AUTO CDC negative tests: a change feed (Change), its
// SCD1 target (Row) and SCD2 target (History), the delete and truncate
// predicates, and the flow most tests change one thing of (CdcFlow).
// Correct code only: each test's mistake is in the test itself.
#pragma once

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

struct History {
  std::int64_t id;
  std::optional<std::string> name;
  std::optional<std::string> city;
  std::int64_t start_at;
  std::optional<std::int64_t> end_at;
};
FLOWLIB_SCHEMA(History, id, name, city, (start_at, "__START_AT"), (end_at, "__END_AT"));

/// Whether a change's op is Op: the delete and truncate predicates.
template <fl::detail::fixed_string Op>
struct OpIs {
  bool operator()(const Change& c) const { return c.op == Op.view(); }
};
using IsDelete = OpIs<"DELETE">;
using IsTruncate = OpIs<"TRUNCATE">;

/// The key, the sequence and the stored columns every test starts from.
using ChangeKey = fl::Key<&Change::id>;
using ChangeSeq = fl::Seq<&Change::seq>;
using NotStored = fl::except_column_list<"op", "seq">;

/// AUTO CDC with that key and sequence, deletes by IsDelete, SCD type Scd
/// and the options More.
template <class Scd, class... More>
using CdcFlow = fl::AutoCdc<ChangeKey, ChangeSeq, Scd, fl::apply_as_deletes<IsDelete>, More...>;

/// Applies an empty batch: instantiates everything apply() checks.
template <class Flow, class Table>
void apply_nothing(Table& t) {
  Flow flow{"f"};
  flow.apply(t, std::vector<Change>{});
}
