// flowlib/runtime/stages.hpp
//
// The stages a flow runs between its source and its flow policy, in the
// order declared: operators (DedupWithinWatermark and anything with its
// shape) and quarantine stages. A stage's run(rows, ctx) changes the batch
// in place; a stateful stage is a checkpoint component of its flow.
// Internal.
#pragma once

#include <flowlib/expect.hpp>
#include <flowlib/quarantine.hpp>
#include <flowlib/runtime/flow_runner.hpp>
#include <flowlib/stats.hpp>
#include <flowlib/table.hpp>

#include <cstdint>
#include <iterator>
#include <ranges>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace flowlib::detail {

/// An operator stage (DedupWithinWatermark and anything with its shape):
/// process_into(batch, out), name(), last_stats(), write_checkpoint(),
/// read_checkpoint().
template <class Op>
struct operator_stage {
  Op op;
  std::vector<typename Op::row_type> out;
  static constexpr bool stateful = true;

  std::string describe() const { return "DEDUP " + op.name(); }
  static constexpr std::string_view component_kind() { return "DEDUP"; }
  template <class Row, class Ctx>
  void run(std::vector<Row>& rows, Ctx& ctx) {
    out.clear();
    op.process_into(std::ranges::subrange(std::make_move_iterator(rows.begin()),
                                          std::make_move_iterator(rows.end())),
                    out);
    rows.swap(out);
    ctx.outcome.deduplicated_rows += op.last_stats().duplicate_rows;
    ctx.outcome.late_rows += op.last_stats().late_rows;
  }
};

/// A quarantine stage: rows violating one of its expectations go to the
/// quarantine table (written after the target, in the same batch).
template <class Row, class QTable, class... P>
struct quarantine_stage {
  QTable* table;
  Expectations<P...> checks;
  std::vector<Quarantined<Row>> pending;
  static constexpr bool stateful = false;

  std::string describe() const {
    std::string s = "QUARANTINE " + table->name() + "(";
    checks.for_each([&](const auto& e) { s += e.name + ","; });
    return s + ")";
  }
  template <class Ctx>
  void run(std::vector<Row>& rows, Ctx& ctx) {
    typename Expectations<P...>::counts_type counts;
    std::size_t kept = 0;
    const auto describe = [](const Row& r) { return describe_row(r); };
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const std::string* q = nullptr;
      if (checks.check(rows[i], counts, ctx.flow, describe, q) || q == nullptr) {
        if (kept != i) rows[kept] = std::move(rows[i]);
        ++kept;
      } else {
        pending.push_back(Quarantined<Row>{std::string(ctx.flow), *q, ctx.batch_id, std::move(rows[i])});
      }
    }
    rows.resize(kept);
    checks.report(counts, ctx.quarantine_metrics);
  }
};

template <class T>
struct is_quarantine_stage : std::false_type {};
template <class Row, class QTable, class... P>
struct is_quarantine_stage<quarantine_stage<Row, QTable, P...>> : std::true_type {};

/// What a stage sees of the batch.
struct stage_context {
  std::string_view flow;
  std::uint64_t batch_id;
  batch_outcome& outcome;
  std::vector<ExpectationMetrics>& quarantine_metrics;
};

}  // namespace flowlib::detail
