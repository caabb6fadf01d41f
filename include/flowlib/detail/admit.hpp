// flowlib/detail/admit.hpp
//
// The admit step every flow runs on each row of a batch, in this order
// (R-USING-8, R-USING-7, R-CDC-5, R-EXPECT-1):
//
//   1. the flow's expectations: a `drop` violation drops the row (counted in
//      dropped_rows), a `warn` one is counted and the row kept, a `fail` one
//      throws errc::expectation_failed naming the flow, the expectation and
//      the row's key;
//   2. the null-sequence check (sequenced flows only): a row whose sequence
//      is null throws errc::null_sequence naming the flow, the sequence
//      column and the row's key, with the rule it breaks (R-USING-7 for
//      REPLACE USING, R-CDC-5 for AUTO CDC): nothing of the batch is applied;
//   3. the counts: every row read is counted in input_rows, each
//      expectation's passes and failures in its metrics.
//
// The counters live in the admit object (on the stack of one apply), so a
// batch that throws leaves no trace in the flow; finish() writes them into
// the batch's BatchStats once the batch has been read. Per row the cost is
// what a hand-written loop pays: an increment, the inlined predicates, the
// sequence's extraction; no std::function, no virtual call, no allocation
// (the error's message is built only when it is thrown).
//
//   detail::admit_sequenced<K, S, P...> admit{checks, key_, seq_, name_, null_sequence_rule::using7};
//   for (const Row& r : batch)
//     if (std::optional<Seq> s = admit(r)) group(r, std::move(*s));
//   admit.finish(stats);
//
//   detail::admit_rows<Source, Describe, P...> admit{checks, name_, describe};  // unsequenced
//   for (const Source& s : batch) if (admit(s)) stage(s);
//   admit.finish(stats);
//
// Expectations declared on a table (evaluated by the flows writing it, over
// a contiguous staged batch) go through apply_table_expectations(), which
// runs every set once per batch and compacts the kept rows in place.
//
// AUTO CDC adopts it by replacing each of its three loops' expectation and
// null-sequence blocks with `admit(r)` of an admit_sequenced built with
// null_sequence_rule::cdc5, and its checks.report(...) with finish(stats).
// Internal.
#pragma once

#include <flowlib/error.hpp>
#include <flowlib/expect.hpp>
#include <flowlib/stats.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace flowlib::detail {

/// Which rule a null sequence breaks, for the error message.
enum class null_sequence_rule { using7, cdc5 };

/// Throws the null-sequence error (cold: built only when thrown).
[[noreturn]] inline void throw_null_sequence(std::string_view flow, std::string_view column,
                                             std::string key, null_sequence_rule rule) {
  throw error(errc::null_sequence, std::string(flow), std::string(column), std::move(key),
              rule == null_sequence_rule::using7
                  ? "the row's sequence is null; nothing of the batch was applied and the "
                    "source position does not advance (R-USING-7)"
                  : "the change's sequence is null; nothing of the batch was applied and the "
                    "source position does not advance (R-CDC-5)");
}

/// Admit step without a sequence (append flows): expectations, then counts.
/// `Describe` renders a row's key (or the row) for expectation errors.
template <class Row, class Describe, class... P>
class admit_rows {
 public:
  admit_rows(const Expectations<P...>& checks, std::string_view flow, Describe describe)
      : checks_(checks), flow_(flow), describe_(std::move(describe)) {}

  /// Counts `r` as read and runs the expectations on it: false when the row
  /// is dropped (counted). Throws on a `fail` violation.
  bool operator()(const Row& r) {
    ++input_rows_;
    if constexpr (sizeof...(P) > 0) {
      if (!checks_.check(r, counts_, flow_, describe_)) {
        ++dropped_rows_;
        return false;
      }
    }
    return true;
  }

  /// Rows read so far, and of those, dropped.
  std::uint64_t input_rows() const noexcept { return input_rows_; }
  std::uint64_t dropped_rows() const noexcept { return dropped_rows_; }

  /// Adds the counts to `stats` (input_rows, dropped_rows, one metrics
  /// entry per expectation, after those already there).
  void finish(BatchStats& stats) const {
    stats.input_rows += input_rows_;
    stats.dropped_rows += dropped_rows_;
    if constexpr (sizeof...(P) > 0) checks_.report(counts_, stats.expectations);
  }

 protected:
  const Expectations<P...>& checks_;
  std::string_view flow_;
  Describe describe_;
  typename Expectations<P...>::counts_type counts_{};
  std::uint64_t input_rows_ = 0;
  std::uint64_t dropped_rows_ = 0;
};

/// Renders a row's key with the flow's key extractor (for error messages).
template <class K>
struct describe_key {
  const K* key;
  std::string operator()(const typename K::row_type& r) const { return key->describe(r); }
};

/// Admit step of a sequenced flow (key K, sequence S): expectations, then
/// the null-sequence check, then counts.
template <class K, class S, class... P>
class admit_sequenced : public admit_rows<typename K::row_type, describe_key<K>, P...> {
  using base = admit_rows<typename K::row_type, describe_key<K>, P...>;

 public:
  using row_type = typename K::row_type;
  using sequence_type = typename S::value_type;

  admit_sequenced(const Expectations<P...>& checks, const K& key, const S& seq,
                  std::string_view flow, null_sequence_rule rule)
      : base(checks, flow, describe_key<K>{&key}), key_(key), seq_(seq), rule_(rule) {}

  /// The row's sequence when it is admitted, std::nullopt when an
  /// expectation dropped it. Throws on a `fail` violation and on a null
  /// sequence.
  std::optional<sequence_type> operator()(const row_type& r) {
    if (!base::operator()(r)) return std::nullopt;
    std::optional<sequence_type> s = seq_(r);
    if (!s) [[unlikely]] throw_null_sequence(this->flow_, seq_.name(), key_.describe(r), rule_);
    return s;
  }

 private:
  const K& key_;
  const S& seq_;
  null_sequence_rule rule_;
};

/// Runs a table's expectation sets (type-erased per batch: one indirect call
/// per set) over `rows[0, used)`, then compacts the rows to keep to the
/// front, in order, by noexcept moves. `keep` is scratch kept by the flow.
/// Adds the dropped rows and the sets' metrics to `stats`; throws on a
/// `fail` violation before anything is moved. Returns the rows kept.
template <class Row, class Sets>
std::size_t apply_table_expectations(const Sets& sets, std::vector<Row>& rows, std::size_t used,
                                     std::vector<unsigned char>& keep, BatchStats& stats,
                                     std::string_view flow) {
  if (sets.empty()) return used;
  keep.assign(used, 1);
  const std::span<const Row> staged(rows.data(), used);
  for (const auto& set : sets) set->evaluate(staged, keep.data(), stats, flow);
  std::size_t kept = 0;
  for (std::size_t i = 0; i < used; ++i) {  // stable compaction
    if (keep[i] == 0) continue;
    if (i != kept) rows[kept] = std::move(rows[i]);
    ++kept;
  }
  stats.dropped_rows += used - kept;
  return kept;
}

}  // namespace flowlib::detail
