// flowlib/stats.hpp
//
// BatchStats: what one apply() did. Every flow fills the counters that apply
// to it and leaves the others at zero. The event log's flow_progress event is
// built from it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace flowlib {

/// @brief The action an expectation takes on a row that violates it (R-EXPECT-1).
enum class on_violation {
  warn,  ///< keep the row, count the violation
  drop,  ///< remove the row before the flow sees it, count it
  fail,  ///< stop: nothing of the batch is committed
  /// move the row to the flow's quarantine table, with the expectation's
  /// name and the batch id (a pipeline stage, Pipeline's quarantine());
  /// given to a flow's apply() directly, it drops the row as `drop` does
  quarantine,
};

/// @brief The action's name in the event log: "warn", "drop", "fail", "quarantine".
constexpr const char* to_string(on_violation a) noexcept {
  switch (a) {
    case on_violation::warn: return "warn";
    case on_violation::drop: return "drop";
    case on_violation::fail: return "fail";
    case on_violation::quarantine: return "quarantine";
  }
  return "warn";
}

/// @brief Per-batch metrics of one expectation (R-EXPECT-2).
struct ExpectationMetrics {
  std::string name;
  on_violation action = on_violation::warn;
  std::uint64_t passed = 0;  ///< rows that satisfied the predicate
  std::uint64_t failed = 0;  ///< rows that violated it (warned, dropped, or the failing row)
  friend bool operator==(const ExpectationMetrics&, const ExpectationMetrics&) = default;
};

/// @brief The row counts of a flow's micro-batch in a pipeline (the event
/// log's `metrics`, where each is named `num_` + its name) or, summed over
/// the batches, of its update (FlowUpdateSummary).
struct FlowRowCounts {
  std::uint64_t input_rows = 0;         ///< source records read
  std::uint64_t output_rows = 0;        ///< rows the flow policy or sink took
  std::uint64_t upserted_rows = 0;      ///< rows written to the target
  std::uint64_t deleted_rows = 0;       ///< target rows removed
  std::uint64_t dropped_rows = 0;       ///< removed by `drop` expectations
  std::uint64_t quarantined_rows = 0;   ///< moved to quarantine tables
  std::uint64_t deduplicated_rows = 0;  ///< duplicates removed by the flow's dedup operators
  std::uint64_t late_rows = 0;          ///< late rows removed by the flow's dedup operators
  std::uint64_t filtered_rows = 0;      ///< removed by the flow's filter() stages
  std::uint64_t unmatched_rows = 0;     ///< removed by inner lookup() stages: no dimension row

  FlowRowCounts& operator+=(const FlowRowCounts& o) noexcept {
    input_rows += o.input_rows;
    output_rows += o.output_rows;
    upserted_rows += o.upserted_rows;
    deleted_rows += o.deleted_rows;
    dropped_rows += o.dropped_rows;
    quarantined_rows += o.quarantined_rows;
    deduplicated_rows += o.deduplicated_rows;
    late_rows += o.late_rows;
    filtered_rows += o.filtered_rows;
    unmatched_rows += o.unmatched_rows;
    return *this;
  }
  friend bool operator==(const FlowRowCounts&, const FlowRowCounts&) = default;
};

/// @brief The rows into and out of one stage of a pipeline flow in one
/// micro-batch (the event log's `stages`), in declaration order.
struct StageMetrics {
  std::string stage;             ///< "MAP", "FILTER", "FLAT_MAP", "VIEW", "LOOKUP", "DEDUP", "QUARANTINE"
  std::uint64_t input_rows = 0;  ///< rows the stage received
  std::uint64_t output_rows = 0; ///< rows it passed on
  friend bool operator==(const StageMetrics&, const StageMetrics&) = default;
};

/// @brief What one apply() of a flow did to its target.
///
/// For REPLACE USING, every input row is accounted for exactly once:
/// input_rows == dropped_rows + superseded_rows + ignored_late_rows + applied_rows.
struct BatchStats {
  std::uint64_t input_rows = 0;         ///< rows read from the batch
  std::uint64_t dropped_rows = 0;       ///< removed by `drop` expectations
  std::uint64_t applied_rows = 0;       ///< rows written to the target
  std::uint64_t inserted_rows = 0;      ///< of applied_rows: rows of keys new to the target
  std::uint64_t appended_rows = 0;      ///< of applied_rows: added beside rows of equal sequence
  std::uint64_t replaced_rows = 0;      ///< target rows removed because a higher sequence replaced them
  std::uint64_t superseded_rows = 0;    ///< batch rows below their key's batch maximum (R-USING-1)
  std::uint64_t ignored_late_rows = 0;  ///< rows older than the target's sequence (ignored)
  // Change-feed flows (R-CDC-7).
  std::uint64_t upserted_rows = 0;      ///< num_upserted_rows
  std::uint64_t deleted_rows = 0;       ///< num_deleted_rows
  std::uint64_t tied_rows = 0;          ///< changes that tied another on key and sequence
  std::uint64_t truncated_rows = 0;     ///< target rows removed by truncates
  bool skipped = false;  ///< a ONCE flow that has already run: nothing was read or written
  std::vector<ExpectationMetrics> expectations;  ///< one entry per expectation, in declaration order

  /// The metrics of the expectation called `name`, or nullptr.
  const ExpectationMetrics* expectation(const std::string& name) const {
    for (const auto& e : expectations)
      if (e.name == name) return &e;
    return nullptr;
  }
  friend bool operator==(const BatchStats&, const BatchStats&) = default;
};

}  // namespace flowlib
