// flowlib/expect.hpp
//
// Expectations: named data-quality predicates on rows, each with an action
// (R-EXPECT-1): `warn` keeps the row and counts the violation, `drop` removes
// the row as if the source never produced it, `fail` stops the update with a
// flowlib::error naming the expectation and the row's key, and nothing of the
// batch is committed. Per-batch passed/failed counts go to BatchStats
// (R-EXPECT-2).
//
//   auto checks = flowlib::expectations(
//       flowlib::expect_or_drop("positive_amount", [](const Booking& b) { return b.total_amount > 0; }),
//       flowlib::expect("has_status", [](const Booking& b) { return !b.status.empty(); }));
//   flow.apply(table, batch, checks);
//
// Every expectation is evaluated on every row, so each one's counts are
// complete even when another drops the row. Predicates are stored by type (no
// std::function): evaluating them costs what calling them costs.
#pragma once

#include <flowlib/error.hpp>
#include <flowlib/stats.hpp>

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <ranges>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace flowlib {

/// @brief A named predicate with an action. Build one with expect(),
/// expect_or_drop() or expect_or_fail().
template <class Pred>
struct Expectation {
  std::string name;
  on_violation action = on_violation::warn;
  Pred pred;
};

/// @brief `warn`: keep violating rows, count them.
template <class Pred>
Expectation<std::decay_t<Pred>> expect(std::string name, Pred&& pred) {
  return {std::move(name), on_violation::warn, std::forward<Pred>(pred)};
}
/// @brief An expectation with an explicit action.
template <class Pred>
Expectation<std::decay_t<Pred>> expect(std::string name, Pred&& pred, on_violation action) {
  return {std::move(name), action, std::forward<Pred>(pred)};
}
/// @brief `drop`: remove violating rows before the flow sees them.
template <class Pred>
Expectation<std::decay_t<Pred>> expect_or_drop(std::string name, Pred&& pred) {
  return {std::move(name), on_violation::drop, std::forward<Pred>(pred)};
}
/// @brief `fail`: a violating row fails the whole batch.
template <class Pred>
Expectation<std::decay_t<Pred>> expect_or_fail(std::string name, Pred&& pred) {
  return {std::move(name), on_violation::fail, std::forward<Pred>(pred)};
}

/// @brief `quarantine`: a pipeline moves violating rows to the flow's
/// quarantine table (see Pipeline's flow declaration, quarantine()).
template <class Pred>
Expectation<std::decay_t<Pred>> expect_or_quarantine(std::string name, Pred&& pred) {
  return {std::move(name), on_violation::quarantine, std::forward<Pred>(pred)};
}

/// @brief Per-batch counters of an expectation set; lives on the stack of
/// one apply() so that a failed batch leaves no trace.
template <std::size_t N>
struct ExpectationCounts {
  std::array<std::uint64_t, N> passed{};
  std::array<std::uint64_t, N> failed{};
};

/// @brief An ordered set of expectations over one row type.
template <class... Preds>
class Expectations {
 public:
  static constexpr std::size_t size = sizeof...(Preds);
  using counts_type = ExpectationCounts<size>;

  Expectations() = default;
  explicit Expectations(Expectation<Preds>... es)
    requires(sizeof...(Preds) > 0)
      : es_(std::move(es)...) {}

  /// Evaluates every expectation on `row`. Returns false when the row is to
  /// be dropped. Throws flowlib::error (errc::expectation_failed) when a
  /// `fail` expectation is violated; `describe_key(row)` renders the row's
  /// key for the message and `flow` names the flow.
  template <class Row, class DescribeKey>
  bool check(const Row& row, counts_type& counts, std::string_view flow,
             DescribeKey&& describe_key) const {
    const std::string* quarantined = nullptr;
    return check(row, counts, flow, describe_key, quarantined);
  }

  /// As check(); `quarantined` is set to the name of the first `quarantine`
  /// expectation the row violates (left as it is when none).
  template <class Row, class DescribeKey>
  bool check(const Row& row, counts_type& counts, std::string_view flow,
             DescribeKey&& describe_key, const std::string*& quarantined) const {
    bool keep = true;
    const std::string* failed = nullptr;
    std::size_t i = 0;
    std::apply(
        [&](const auto&... e) {
          ((eval(e, row, counts, i, keep, failed, quarantined), ++i), ...);
        },
        es_);
    if (failed != nullptr) {
      throw error(errc::expectation_failed, std::string(flow), *failed, describe_key(row),
                  "the row violates this expectation (ON VIOLATION FAIL UPDATE); nothing of "
                  "the batch was committed");
    }
    return keep;
  }

  /// Appends one ExpectationMetrics per expectation to `out`.
  void report(const counts_type& counts, std::vector<ExpectationMetrics>& out) const {
    std::size_t i = 0;
    std::apply(
        [&](const auto&... e) {
          ((out.push_back({e.name, e.action, counts.passed[i], counts.failed[i]}), ++i), ...);
        },
        es_);
  }

  /// The standalone operator: rows of `batch` that survive (R-EXPECT-1),
  /// with metrics appended to `stats`. `flow` names the caller in errors.
  template <class Range, class DescribeKey>
  auto filter(const Range& batch, BatchStats& stats, std::string_view flow,
              DescribeKey&& describe_key) const {
    using Row = std::remove_cvref_t<decltype(*std::ranges::begin(batch))>;
    std::vector<Row> out;
    counts_type counts;
    for (const auto& r : batch) {
      ++stats.input_rows;
      if (check(r, counts, flow, describe_key)) {
        out.push_back(r);
      } else {
        ++stats.dropped_rows;
      }
    }
    report(counts, stats.expectations);
    return out;
  }

 private:
  template <class E, class Row>
  static void eval(const E& e, const Row& row, counts_type& counts, std::size_t i, bool& keep,
                   const std::string*& failed, const std::string*& quarantined) {
    static_assert(std::predicate<const decltype(e.pred)&, const Row&>,
                  "flowlib: an expectation's predicate must be callable as "
                  "bool(const Row&) for the flow's row type.");
    if (e.pred(row)) {
      ++counts.passed[i];
      return;
    }
    ++counts.failed[i];
    switch (e.action) {
      case on_violation::warn: break;
      case on_violation::drop: keep = false; break;
      case on_violation::fail:
        if (failed == nullptr) failed = &e.name;
        break;
      case on_violation::quarantine:
        keep = false;
        if (quarantined == nullptr) quarantined = &e.name;
        break;
    }
  }

  std::tuple<Expectation<Preds>...> es_;

 public:
  /// Calls f(expectation) for each expectation, in order.
  template <class F>
  void for_each(F&& f) const {
    std::apply([&](const auto&... e) { (f(e), ...); }, es_);
  }
};

/// @brief Builds an Expectations set: expectations(expect_or_drop(...), expect(...)).
template <class... Preds>
Expectations<Preds...> expectations(Expectation<Preds>... es) {
  return Expectations<Preds...>(std::move(es)...);
}

/// @brief The empty set, used when a flow is applied without expectations.
using NoExpectations = Expectations<>;

}  // namespace flowlib
