// flowlib/runtime/options.hpp
//
// What a program gives a Pipeline and gets back from it: PipelineOptions,
// UpdateOptions, the fault points a fault-injection hook is called at,
// FlowProgress (during an update), FlowUpdateSummary and UpdateSummary
// (after it). docs/reference.md lists every field with its default.
#pragma once

#include <flowlib/stats.hpp>
#include <flowlib/where/expr.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace flowlib {

/// @brief The steps of a micro-batch at which PipelineOptions::fault_hook is
/// called (for fault-injection tests: an exception thrown by the hook is a
/// failure at that step).
enum class fault_point {
  positions_recorded,    ///< the batch's positions are in the offset log
  /// the rows are read and staged; no table changed yet (a flow that reads
  /// its sources itself, REPLACE WHERE, reads them after this point)
  before_table_write,
  between_table_writes,  ///< the target is written; the quarantine table not yet
  after_table_write,     ///< every table of the batch is written
  state_saving,          ///< the first component's state record is written
  before_commit,         ///< every state record is written; the commit is not
  after_commit,          ///< the batch is committed
};

/// @brief The step's name: "positions_recorded", ...
constexpr const char* to_string(fault_point p) noexcept {
  switch (p) {
    case fault_point::positions_recorded: return "positions_recorded";
    case fault_point::before_table_write: return "before_table_write";
    case fault_point::between_table_writes: return "between_table_writes";
    case fault_point::after_table_write: return "after_table_write";
    case fault_point::state_saving: return "state_saving";
    case fault_point::before_commit: return "before_commit";
    case fault_point::after_commit: return "after_commit";
  }
  return "unknown";
}

/// @brief PipelineOptions::fault_hook: called with the step, the flow and the
/// batch id; an exception it throws is a failure at that step.
using fault_hook_fn = std::function<void(fault_point, std::string_view flow, std::uint64_t batch)>;

/// @brief Settings of a Pipeline.
struct PipelineOptions {
  /// When a flow writes its whole state (a snapshot) instead of a delta:
  /// at its first batch, then once at least this many batches *and* at
  /// least as many delta bytes as the last snapshot's size were written
  /// since that snapshot. The second condition keeps a commit's cost
  /// proportional to the batch even when the state is large (a snapshot's
  /// cost is spread over at least as much delta work); a restore reads the
  /// last snapshot and less than a snapshot's worth of deltas, or fewer
  /// than this many. At least 1.
  std::uint64_t snapshot_interval = 10;
  /// Offset and commit records kept behind the last snapshot (for people
  /// reading the checkpoint; a restore needs none of them).
  std::uint64_t retain_batches = 10;
  /// Rows per micro-batch for flows that set no limit of their own (0: all
  /// rows available, one batch).
  std::size_t max_rows_per_batch = 0;
  /// Threads an update may use (0: the machine's cores; 1: the calling
  /// thread only). Flows that touch nothing in common (tables written or
  /// read, source objects) run at the same time, each batch still
  /// committing atomically; a flow may spread one large batch over the
  /// threads (REPLACE USING). Results are those of threads = 1.
  std::size_t threads = 0;
  /// For fault-injection tests: called at every step of every micro-batch
  /// (fault_point); an exception it throws is a failure at that step. With
  /// threads, calls from different flows interleave but never overlap.
  fault_hook_fn fault_hook{};
};

/// @brief Rows and batches one flow has done in the running update.
struct FlowProgress {
  std::string flow;
  std::uint64_t batches = 0;       ///< micro-batches committed so far in this update
  std::uint64_t rows = 0;          ///< source rows they read
  std::uint64_t rows_planned = 0;  ///< source rows available when the flow started
};

/// @brief Settings of one update().
struct UpdateOptions {
  /// The update's logical clock (event log timestamps; clock functions of
  /// flows); the system clock at the start of the update when empty.
  std::optional<std::chrono::system_clock::time_point> now{};
  /// Called after every committed micro-batch.
  std::function<void(const FlowProgress&)> on_progress{};
  /// REPLACE WHERE (R-WHERE-4): flow name -> the predicate this update runs
  /// with instead of the flow's own (a one-time backfill or correction);
  /// later updates use the flow's predicate. A name that is not a REPLACE
  /// WHERE flow of the pipeline is refused before anything runs.
  std::map<std::string, where::expr, std::less<>> replace_where_overrides{};
};

/// @brief What one flow did in an update: its row counts summed over the
/// batches it committed.
struct FlowUpdateSummary : FlowRowCounts {
  std::string flow;
  std::uint64_t batches = 0;
  bool skipped = false;  ///< a ONCE flow that had run already
};

/// @brief What an update did: one entry per flow, in the order they ran.
struct UpdateSummary {
  std::uint64_t update_id = 0;
  std::vector<FlowUpdateSummary> flows;
  std::uint64_t batches() const noexcept {
    std::uint64_t n = 0;
    for (const auto& f : flows) n += f.batches;
    return n;
  }
  std::uint64_t input_rows() const noexcept {
    std::uint64_t n = 0;
    for (const auto& f : flows) n += f.input_rows;
    return n;
  }
  /// The flow called `name`, or nullptr.
  const FlowUpdateSummary* flow(std::string_view name) const noexcept {
    for (const auto& f : flows)
      if (f.flow == name) return &f;
    return nullptr;
  }
};

}  // namespace flowlib
