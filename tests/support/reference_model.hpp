// tests/support/reference_model.hpp
//
// A deliberately naive model of REPLACE USING, written straight from the
// rules in docs/semantics.md#replace-using, for tests to compare flowlib against.
// It uses std::map and whole-vector copies: clarity over speed.
//
//   flowtest::ReplaceUsingModel<Key, Seq> model;
//   BatchStats expected = model.apply(batch);          // R-USING-1/2/3
//   CHECK(table.sorted_rows() == model.sorted_rows());
//
//   flowtest::final_state<Key, Seq>(all_rows)          // R-USING-4
//   CHECK(flowtest::counts_of(stats) == flowtest::using_counts{.input = 5, ...});
//
// Rows are compared and sorted with flowtest::sort_rows (support/rows.hpp),
// the order StreamingTable::sorted_rows() uses, so the two vectors compare with ==.
#pragma once

#include "rows.hpp"

#include <flowlib/columns.hpp>
#include <flowlib/error.hpp>
#include <flowlib/stats.hpp>
#include <flowlib/table.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <initializer_list>
#include <cstdint>
#include <map>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string_view>
#include <utility>
#include <vector>

namespace flowtest {

/// The model's answer when a batch holds a (kept) row with a null sequence.
struct model_null_sequence : std::runtime_error {
  model_null_sequence() : std::runtime_error("null sequence") {}
};

template <class K, class S>
class ReplaceUsingModel {
 public:
  using Row = typename K::row_type;
  using key_type = typename K::value_type;
  using seq_type = typename S::value_type;

  struct entry {
    seq_type seq;
    std::vector<Row> rows;
  };

  explicit ReplaceUsingModel(K key = K{}, S seq = S{}) : key_(std::move(key)), seq_(std::move(seq)) {}

  /// Applies one batch by the rules. `keep(row)` is the expectations' verdict
  /// (false: dropped, R-USING-8). Throws model_null_sequence, leaving the
  /// model unchanged, when a kept row's sequence is null (R-USING-7).
  template <class Keep>
  flowlib::BatchStats apply(const std::vector<Row>& batch, Keep keep) {
    flowlib::BatchStats st;
    std::map<key_type, entry> groups;  // R-USING-1: per key, the batch's max-sequence rows
    for (const Row& r : batch) {
      ++st.input_rows;
      if (!keep(r)) {  // R-USING-8: as if the source never produced it
        ++st.dropped_rows;
        continue;
      }
      const std::optional<seq_type> s = seq_(r);
      if (!s) throw model_null_sequence();
      const key_type k = key_(r);
      auto it = groups.find(k);
      if (it == groups.end()) {
        groups.emplace(k, entry{*s, {r}});
      } else if (it->second.seq < *s) {
        st.superseded_rows += it->second.rows.size();
        it->second = entry{*s, {r}};
      } else if (*s < it->second.seq) {
        ++st.superseded_rows;
      } else {
        it->second.rows.push_back(r);
      }
    }
    for (auto& [k, g] : groups) {  // R-USING-2; keys not in the batch untouched (R-USING-3)
      const std::uint64_t n = g.rows.size();
      auto it = keys_.find(k);
      if (it == keys_.end()) {
        st.inserted_rows += n;
        st.applied_rows += n;
        keys_.emplace(k, std::move(g));
      } else if (it->second.seq < g.seq) {
        st.replaced_rows += it->second.rows.size();
        st.applied_rows += n;
        it->second = std::move(g);
      } else if (g.seq < it->second.seq) {
        st.ignored_late_rows += n;
      } else {
        st.appended_rows += n;
        st.applied_rows += n;
        for (auto& r : g.rows) it->second.rows.push_back(std::move(r));
      }
    }
    return st;
  }
  flowlib::BatchStats apply(const std::vector<Row>& batch) {
    return apply(batch, [](const Row&) { return true; });
  }

  std::vector<Row> sorted_rows() const {
    std::vector<Row> out;
    for (const auto& [k, e] : keys_) out.insert(out.end(), e.rows.begin(), e.rows.end());
    sort_rows(out);
    return out;
  }
  std::size_t key_count() const { return keys_.size(); }
  std::optional<seq_type> sequence_of(const key_type& k) const {
    auto it = keys_.find(k);
    if (it == keys_.end()) return std::nullopt;
    return it->second.seq;
  }
  const std::map<key_type, entry>& keys() const { return keys_; }

 private:
  K key_;
  S seq_;
  std::map<key_type, entry> keys_;
};

/// R-USING-4's statement, computed directly: for each key, all rows carrying
/// that key's maximum sequence over the whole input, as a sorted multiset.
template <class K, class S, class Row>
std::vector<Row> final_state(const std::vector<Row>& input, K key = K{}, S seq = S{}) {
  std::map<typename K::value_type, typename S::value_type> max_seq;
  for (const Row& r : input) {
    const auto s = *seq(r);
    auto [it, fresh] = max_seq.emplace(key(r), s);
    if (!fresh && it->second < s) it->second = s;
  }
  std::vector<Row> out;
  for (const Row& r : input) {
    if (*seq(r) == max_seq.at(key(r))) out.push_back(r);
  }
  sort_rows(out);
  return out;
}

/// The counters of a REPLACE USING batch (BatchStats' own names without
/// `_rows`), compared at once and printed whole when they differ.
struct using_counts {
  std::uint64_t input = 0, dropped = 0, superseded = 0, ignored_late = 0, applied = 0, inserted = 0,
                appended = 0, replaced = 0;
  friend bool operator==(const using_counts&, const using_counts&) = default;
  friend std::ostream& operator<<(std::ostream& os, const using_counts& c) {
    return os << "{input " << c.input << ", dropped " << c.dropped << ", superseded " << c.superseded
              << ", ignored_late " << c.ignored_late << ", applied " << c.applied << ", inserted "
              << c.inserted << ", appended " << c.appended << ", replaced " << c.replaced << "}";
  }
};
inline using_counts counts_of(const flowlib::BatchStats& s) {
  return {s.input_rows,   s.dropped_rows,  s.superseded_rows, s.ignored_late_rows,
          s.applied_rows, s.inserted_rows, s.appended_rows,   s.replaced_rows};
}

/// A flow's error (an expectation's failure, a null sequence): its code,
/// and the flow, column and key it names, in its fields and in what(),
/// which also holds each of `more`.
inline void check_flow_error(const flowlib::error& e, flowlib::errc code, std::string_view flow,
                             std::string_view column, std::string_view key,
                             std::initializer_list<std::string_view> more = {}) {
  CHECK(e.code() == code);
  CHECK(e.flow() == flow);
  CHECK(e.column() == column);
  CHECK(e.key() == key);
  const std::string_view what = e.what();
  for (const std::string_view part : {flow, column, key}) CHECK(what.find(part) != std::string_view::npos);
  for (const std::string_view part : more) CHECK(what.find(part) != std::string_view::npos);
}

/// BatchStats accounting that holds for every REPLACE USING batch.
inline bool rows_accounted(const flowlib::BatchStats& s) {
  return s.input_rows == s.dropped_rows + s.superseded_rows + s.ignored_late_rows + s.applied_rows &&
         s.inserted_rows + s.appended_rows <= s.applied_rows;
}

}  // namespace flowtest
