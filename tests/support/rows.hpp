// tests/support/rows.hpp
//
// Row types that several test programs use, and how tests sort rows. A
// test names them through a local alias or a using-declaration
// (`using flowtest::Item;`), so that its body reads as before.
//
//   Event         an event with an id and a bucket (tables, append logs)
//   Item          a key and a value: the rows of snapshots (AUTO CDC FROM
//                 SNAPSHOT) in pipelines; ItemHistory is its SCD2 target
//   Entry         an id and two columns: the reference vector of
//                 docs/semantics.md#auto-cdc (R-CDC-8); EntryHistory is its
//                 SCD2 target
//
// sort_rows() and sorted() order rows as StreamingTable::sorted_rows() does
// (flowlib::detail::canonical_less: operator< when the row has one, else its
// FLOWLIB_SCHEMA columns left to right), so that vectors compare with ==.
#pragma once

#include <flowlib/schema.hpp>
#include <flowlib/table.hpp>

#include <algorithm>
#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace flowtest {

template <class Row>
void sort_rows(std::vector<Row>& rows) {
  std::sort(rows.begin(), rows.end(),
            [](const Row& a, const Row& b) { return flowlib::detail::canonical_less(a, b); });
}

/// `rows`, sorted as sorted_rows() sorts a table's rows.
template <class Row>
std::vector<Row> sorted(std::vector<Row> rows) {
  sort_rows(rows);
  return rows;
}

struct Event {
  std::int64_t id = 0;
  std::string bucket;
  friend auto operator<=>(const Event&, const Event&) = default;
};
FLOWLIB_SCHEMA(Event, id, bucket);

struct Item {
  std::int64_t k = 0;
  std::string v;
  friend bool operator==(const Item&, const Item&) = default;
  friend auto operator<=>(const Item&, const Item&) = default;
};
FLOWLIB_SCHEMA(Item, k, v);

struct ItemHistory {
  std::int64_t k = 0;
  std::string v;
  std::int64_t start_at = 0;
  std::optional<std::int64_t> end_at;
  friend bool operator==(const ItemHistory&, const ItemHistory&) = default;
  friend auto operator<=>(const ItemHistory&, const ItemHistory&) = default;
};
FLOWLIB_SCHEMA(ItemHistory, k, v, (start_at, "__START_AT"), (end_at, "__END_AT"));

struct Entry {
  std::int64_t id;
  std::string a;
  std::string b;
  friend bool operator==(const Entry&, const Entry&) = default;
};
FLOWLIB_SCHEMA(Entry, id, a, b);

struct EntryHistory {
  std::int64_t id;
  std::string a;
  std::string b;
  std::int64_t start_at;
  std::optional<std::int64_t> end_at;
  friend bool operator==(const EntryHistory&, const EntryHistory&) = default;
};
FLOWLIB_SCHEMA(EntryHistory, id, a, b, (start_at, "__START_AT"), (end_at, "__END_AT"));

}  // namespace flowtest
