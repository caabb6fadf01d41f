// flowlib/sink/foreach_batch.hpp
//
// ForeachBatch<Row>: a sink that hands each micro-batch to user code, with a
// batch id that is stable across retries (R-EXACT-4).
//
//   flowlib::ForeachBatch<Event> sink{[&](std::uint64_t batch_id, std::span<const Event> rows) {
//     external.write_idempotently(batch_id, rows);   // e.g. keyed by batch_id
//   }};
//   pipeline.flow("export").from(feed).into(std::move(sink));
//
// Contract: batch N of a flow always holds the same rows, in the same order,
// however often it is delivered: the runtime records a batch's source
// positions before it runs, and a batch whose commit did not happen (the
// callback threw, the process stopped) is delivered again with the same id
// and rows. A batch the callback returned from may still be delivered again
// if the process stops before the commit: the callback must make its writes
// idempotent by batch id (that is what the id is for). The rows are those
// that passed the flow's operators and expectations.
#pragma once

#include <flowlib/expect.hpp>
#include <flowlib/flows/contract.hpp>
#include <flowlib/stats.hpp>
#include <flowlib/table.hpp>  // detail::describe_row

#include <concepts>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace flowlib {

/// @brief What a pipeline flow may end in instead of a table: a type with
/// `row_type`, a `kind` name (the event log's and the checkpoint's) and
/// `static constexpr bool is_sink = true`, whose apply_batch (the flow
/// contract, flows/contract.hpp) writes no table and keeps no state.
/// ForeachBatch and KafkaSink are sinks.
template <class S>
concept sink = requires {
  typename S::row_type;
  { S::kind } -> std::convertible_to<std::string_view>;
  requires S::is_sink;
};

namespace detail {
/// A sink's part of the flow contract before it delivers: the flow's
/// expectations run over `rows` as a flow policy runs them (R-EXPECT-1),
/// the rows that fail a `drop` expectation are removed (in order), and the
/// statistics say so. Throws what a `fail` expectation throws.
template <class Row, class... P>
BatchStats sink_expectations(std::vector<Row>& rows, const Expectations<P...>& checks,
                             const batch_info& batch) {
  BatchStats stats;
  stats.input_rows = rows.size();
  if constexpr (sizeof...(P) > 0) {
    typename Expectations<P...>::counts_type counts;
    const auto describe = [](const Row& r) { return describe_row(r); };
    std::size_t kept = 0;
    for (std::size_t i = 0; i < rows.size(); ++i) {
      if (checks.check(rows[i], counts, batch.flow, describe)) {
        if (kept != i) rows[kept] = std::move(rows[i]);
        ++kept;
      }
    }
    stats.dropped_rows = rows.size() - kept;
    rows.resize(kept);
    checks.report(counts, stats.expectations);
  } else {
    (void)checks;
    (void)batch;
  }
  return stats;
}
}  // namespace detail

/// @brief The kind foreach-batch sinks are named by (in the event log and a
/// stream's stored layout).
inline constexpr std::string_view foreach_batch_kind = "FOREACH BATCH";

/// @brief A sink calling user code with (batch id, rows). See the header.
template <class Row>
class ForeachBatch {
 public:
  using row_type = Row;
  using callback = std::function<void(std::uint64_t batch_id, std::span<const Row> rows)>;
  static constexpr std::string_view kind = foreach_batch_kind;
  static constexpr bool is_sink = true;

  explicit ForeachBatch(callback fn, std::string name = "foreach_batch")
      : fn_(std::move(fn)), name_(std::move(name)) {}

  const std::string& name() const noexcept { return name_; }

  /// Delivers one batch. Exceptions from the callback propagate: the batch
  /// is then not committed and is delivered again, with the same id.
  void deliver(std::uint64_t batch_id, std::span<const Row> rows) { fn_(batch_id, rows); }

  /// The flow contract's batch (flows/contract.hpp): a sink writes no table
  /// (`Table` is the runtime's stand-in) and keeps no state. The flow's
  /// expectations run here, as a flow policy runs them (R-EXPECT-1): the
  /// rows that pass are delivered.
  template <class Table, class... P>
  BatchStats apply_batch(Table&, std::vector<Row>& rows, const Expectations<P...>& checks,
                         const batch_info& batch) {
    BatchStats stats = detail::sink_expectations(rows, checks, batch);
    deliver(batch.batch_id, std::span<const Row>(rows));
    return stats;
  }

 private:
  callback fn_;
  std::string name_;
};

}  // namespace flowlib
