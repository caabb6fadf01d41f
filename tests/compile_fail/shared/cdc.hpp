// The rows of the AUTO CDC negative tests: a change feed (Change), its
// SCD1 target (Row) and SCD2 target (History), and the delete and truncate
// predicates. Correct code only: each test's mistake is in the test itself.
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

struct IsDelete {
  bool operator()(const Change& c) const { return c.op == "DELETE"; }
};

struct IsTruncate {
  bool operator()(const Change& c) const { return c.op == "TRUNCATE"; }
};

/// The key, the sequence and the stored columns every test starts from.
using ChangeKey = fl::Key<&Change::id>;
using ChangeSeq = fl::Seq<&Change::seq>;
using NotStored = fl::except_column_list<"op", "seq">;

/// Applies an empty batch: instantiates everything apply() checks.
template <class Flow, class Table>
void apply_nothing(Table& t) {
  Flow flow{"f"};
  flow.apply(t, std::vector<Change>{});
}
