// flowlib/runtime/stages.hpp
//
// The stages a flow runs between its source and its flow policy, in the
// order declared (docs/stages.md): map, filter, flat_map and view transform
// the rows; lookup (runtime/lookup.hpp) enriches them from a dimension
// table; operators (DedupWithinWatermark and anything with its shape) and
// quarantine stages keep the row type.
//
// A stage has an input_type and an output_type, a stage_kind() for the
// event log and a describe() for the flow's definition, and
//   std::vector<output_type>& run(std::vector<input_type>& rows, ctx):
// a stage that keeps the row type changes `rows` in place and returns it;
// one that changes it fills a buffer of its own (kept from batch to batch)
// and returns that. The input rows are scratch: a stage may move from them
// (a retry reads them again from the source). A stage with a quarantine
// table (a quarantine stage, or a map/flat_map given one) exposes it as
// member `q` (rejected_rows). A stateful stage (`stateful`) is a checkpoint
// component of its flow. Types are erased per batch, never per row: the
// runner calls each stage once per batch, and a stage calls its function
// directly. Internal.
#pragma once

#include <flowlib/detail/batch.hpp>
#include <flowlib/expect.hpp>
#include <flowlib/quarantine.hpp>
#include <flowlib/runtime/flow_runner.hpp>
#include <flowlib/stage.hpp>
#include <flowlib/stats.hpp>
#include <flowlib/table.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>
#include <ranges>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace flowlib::detail {

/// What a stage sees of the batch.
struct stage_context {
  std::string_view flow;
  std::uint64_t batch_id;
  batch_outcome& outcome;
  std::vector<ExpectationMetrics>& quarantine_metrics;
};

/// The rows a stage moved to its quarantine table this batch; the runner
/// writes them after the target, in the same batch.
template <class Row, class QTable>
struct rejected_rows {
  QTable* table = nullptr;
  std::vector<Quarantined<Row>> pending;

  void reject(const stage_context& ctx, std::string reason, Row&& row) {
    pending.push_back(Quarantined<Row>{std::string(ctx.flow), std::move(reason), ctx.batch_id, std::move(row)});
  }
  std::string describe() const { return " REJECT INTO '" + table->name() + "'"; }

  /// Calls step(const Row&) for each row; a row step rejects (row_rejected)
  /// is moved here whole, and what step added to `out` for it is removed.
  template <class Out, class Step>
  void each(std::vector<Row>& rows, std::vector<Out>& out, const stage_context& ctx, Step&& step) {
    for (auto& r : rows) {
      const std::size_t mark = out.size();
      try {
        step(std::as_const(r));
      } catch (const row_rejected& e) {
        out.erase(out.begin() + static_cast<std::ptrdiff_t>(mark), out.end());
        reject(ctx, e.what(), std::move(r));
      }
    }
  }
};
/// A stage without a quarantine table.
struct no_rejected_rows {
  std::string describe() const { return {}; }

  /// Calls step(Row&&) for each row: the rows are the stage's to consume.
  template <class Row, class Out, class Step>
  void each(std::vector<Row>& rows, std::vector<Out>&, const stage_context&, Step&& step) {
    for (auto& r : rows) step(std::move(r));
  }
};
template <class Row, class QTable>
using rejected_rows_for =
    std::conditional_t<std::is_void_v<QTable>, no_rejected_rows, rejected_rows<Row, QTable>>;

/// Whether stage S writes a quarantine table.
template <class S>
inline constexpr bool has_quarantine_v = requires(S& s) { s.q.table; };

/// An operator stage (DedupWithinWatermark and anything with its shape):
/// process_into(batch, out), name(), last_stats(), write_checkpoint(),
/// read_checkpoint().
template <class Op>
struct operator_stage {
  using input_type = typename Op::row_type;
  using output_type = typename Op::row_type;
  Op op;
  std::vector<output_type> out;
  static constexpr bool stateful = true;

  std::string describe() const { return "DEDUP " + op.name(); }
  static constexpr std::string_view component_kind() { return "DEDUP"; }
  static constexpr std::string_view stage_kind() { return "DEDUP"; }
  template <class Ctx>
  std::vector<output_type>& run(std::vector<input_type>& rows, Ctx& ctx) {
    out.clear();
    op.process_into(std::ranges::subrange(std::make_move_iterator(rows.begin()),
                                          std::make_move_iterator(rows.end())),
                    out);
    rows.swap(out);
    ctx.outcome.deduplicated_rows += op.last_stats().duplicate_rows;
    ctx.outcome.late_rows += op.last_stats().late_rows;
    return rows;
  }
};

/// A quarantine stage: rows violating one of its expectations go to the
/// quarantine table (written after the target, in the same batch).
template <class Row, class QTable, class... P>
struct quarantine_stage {
  using input_type = Row;
  using output_type = Row;
  rejected_rows<Row, QTable> q;
  Expectations<P...> checks;
  static constexpr bool stateful = false;

  std::string describe() const {
    std::string s = "QUARANTINE " + q.table->name() + "(";
    checks.for_each([&](const auto& e) { s += e.name + ","; });
    return s + ")";
  }
  static constexpr std::string_view stage_kind() { return "QUARANTINE"; }
  template <class Ctx>
  std::vector<Row>& run(std::vector<Row>& rows, Ctx& ctx) {
    typename Expectations<P...>::counts_type counts;
    std::size_t kept = 0;
    const auto describe = [](const Row& r) { return describe_row(r); };
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const std::string* reason = nullptr;
      if (checks.check(rows[i], counts, ctx.flow, describe, reason) || reason == nullptr) {
        if (kept != i) rows[kept] = std::move(rows[i]);
        ++kept;
      } else {
        q.reject(ctx, *reason, std::move(rows[i]));
      }
    }
    rows.resize(kept);
    checks.report(counts, ctx.quarantine_metrics);
    return rows;
  }
};

/// map(fn): one row in, one row out. With a quarantine table, fn sees the
/// row as `const In&`, so that a row it rejects (row_rejected) can be kept
/// whole; without one it gets the row as an rvalue (moved, no copy).
template <class In, class Fn, class QTable>
struct map_stage {
  static constexpr bool quarantines = !std::is_void_v<QTable>;
  using arg_type = std::conditional_t<quarantines, const In&, In&&>;
  using input_type = In;
  using output_type = std::remove_cvref_t<std::invoke_result_t<Fn&, arg_type>>;
  Fn fn;
  [[no_unique_address]] rejected_rows_for<In, QTable> q;
  std::vector<output_type> out;
  static constexpr bool stateful = false;

  std::string describe() const { return "MAP" + q.describe(); }
  static constexpr std::string_view stage_kind() { return "MAP"; }
  template <class Ctx>
  std::vector<output_type>& run(std::vector<In>& rows, Ctx& ctx) {
    out.clear();
    out.reserve(rows.size());
    q.each(rows, out, ctx, [&](arg_type r) { out.push_back(std::invoke(fn, static_cast<arg_type>(r))); });
    return out;
  }
  /// This map and the filter right after it, in one pass: a row the filter
  /// removes is never stored, one it keeps is moved once (a map into a
  /// buffer and a filter compacting it would move most rows twice). Returns
  /// the filter's output; `mapped` gets the map's.
  template <class Filter, class Ctx>
  std::vector<output_type>& run_filtered(std::vector<In>& rows, Filter& filter, Ctx& ctx, std::uint64_t& mapped) {
    out.clear();
    out.reserve(rows.size());
    std::uint64_t n = 0;
    q.each(rows, out, ctx, [&](arg_type r) {
      output_type o = std::invoke(fn, static_cast<arg_type>(r));
      ++n;
      if (std::invoke(filter.pred, std::as_const(o))) out.push_back(std::move(o));
    });
    mapped = n;
    ctx.outcome.filtered_rows += n - out.size();
    return out;
  }
};

/// filter(pred): keeps the rows for which pred holds; the others are
/// counted as filtered_rows (not as dropped: no expectation removed them).
template <class Row, class Pred>
struct filter_stage {
  using input_type = Row;
  using output_type = Row;
  Pred pred;
  static constexpr bool stateful = false;

  std::string describe() const { return "FILTER"; }
  static constexpr std::string_view stage_kind() { return "FILTER"; }
  template <class Ctx>
  std::vector<Row>& run(std::vector<Row>& rows, Ctx& ctx) {
    const auto keep_end = std::remove_if(rows.begin(), rows.end(), [&](const Row& r) {
      return !static_cast<bool>(std::invoke(pred, r));
    });
    ctx.outcome.filtered_rows += static_cast<std::uint64_t>(rows.end() - keep_end);
    rows.erase(keep_end, rows.end());
    return rows;
  }
};

template <class T>
struct is_map_stage : std::false_type {};
template <class In, class Fn, class QTable>
struct is_map_stage<map_stage<In, Fn, QTable>> : std::true_type {};
template <class T>
struct is_filter_stage : std::false_type {};
template <class Row, class Pred>
struct is_filter_stage<filter_stage<Row, Pred>> : std::true_type {};
/// Whether stage A followed by stage B run as one pass (a map, then a filter).
template <class A, class B>
inline constexpr bool fused_pair_v = is_map_stage<A>::value && is_filter_stage<B>::value;

/// The rows a range yields, as its elements' value type.
template <class R>
using range_row_t = std::remove_cvref_t<batch_reference_t<R>>;

/// flat_map(fn): one row in, the rows of the range fn returns out (a
/// container, a std or range-v3 view). A row fn rejects adds nothing.
template <class In, class Fn, class QTable>
struct flat_map_stage {
  static constexpr bool quarantines = !std::is_void_v<QTable>;
  using arg_type = std::conditional_t<quarantines, const In&, In&&>;
  using result_type = std::invoke_result_t<Fn&, arg_type>;
  using input_type = In;
  using output_type = range_row_t<result_type>;
  Fn fn;
  [[no_unique_address]] rejected_rows_for<In, QTable> q;
  std::vector<output_type> out;
  static constexpr bool stateful = false;

  std::string describe() const { return "FLAT_MAP" + q.describe(); }
  static constexpr std::string_view stage_kind() { return "FLAT_MAP"; }
  template <class Ctx>
  std::vector<output_type>& run(std::vector<In>& rows, Ctx& ctx) {
    out.clear();
    out.reserve(rows.size());
    q.each(rows, out, ctx, [&](arg_type r) { emit(std::invoke(fn, static_cast<arg_type>(r))); });
    return out;
  }

 private:
  // A container fn returned by value is fn's to give away: its rows are
  // moved. A view's rows belong to whatever it views: they are copied
  // unless the view itself yields rvalues.
  template <class R>
  void emit(R&& produced) {
    using C = std::remove_cvref_t<R>;
    constexpr bool owned = !std::is_lvalue_reference_v<R> && !std::ranges::view<C> && !ranges::view_<C>;
    for (auto&& o : produced) {
      using O = decltype(o);
      if constexpr (owned && std::is_lvalue_reference_v<O> && !std::is_const_v<std::remove_reference_t<O>>) {
        out.push_back(std::move(o));
      } else {
        out.push_back(std::forward<O>(o));
      }
    }
  }
};

/// view(adaptor): the batch piped through a range adaptor (std::views or
/// range-v3's views: `views::filter(p) | views::transform(f)`), collected.
template <class In, class Adaptor>
struct view_stage {
  using view_type = decltype(std::declval<std::vector<In>&>() | std::declval<Adaptor&>());
  using input_type = In;
  using output_type = range_row_t<view_type>;
  Adaptor adaptor;
  std::vector<output_type> out;
  static constexpr bool stateful = false;

  std::string describe() const { return "VIEW"; }
  static constexpr std::string_view stage_kind() { return "VIEW"; }
  template <class Ctx>
  std::vector<output_type>& run(std::vector<In>& rows, Ctx&) {
    out.clear();
    for (auto&& o : rows | adaptor) out.push_back(std::forward<decltype(o)>(o));
    return out;
  }
};

/// The row type after the stages: Row when there are none.
template <class Row, class... Stages>
struct stages_output {
  using type = Row;
};
template <class Row, class First, class... Rest>
struct stages_output<Row, First, Rest...> {
  using type = typename stages_output<typename First::output_type, Rest...>::type;
};
template <class Row, class... Stages>
using stages_output_t = typename stages_output<Row, Stages...>::type;

}  // namespace flowlib::detail
