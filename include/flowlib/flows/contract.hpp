// flowlib/flows/contract.hpp
//
// The flow contract: what a flow policy offers so that the pipeline's one
// runner (runtime/runner.hpp) drives it. ReplaceUsing, ReplaceWhere (through
// its pipeline adapter, flows/where/detail/pipeline_flow.hpp), AutoCdc,
// AutoCdcFromSnapshot, Append and ForeachBatch meet it; the runner knows no
// flow by name and never dispatches on a kind.
//
// Implementation rules (a flow written by hand follows them too):
//
//  1. Kind. `static constexpr std::string_view kind`: the flow's kind for
//     checkpoint definitions, the catalog and messages ("REPLACE USING").
//     It names the flow; nothing chooses behaviour by it.
//
//  2. Apply a batch. `BatchStats apply_batch(Table& target,
//     std::vector<Row>& rows, const Expectations<P...>& checks,
//     const batch_info& batch)`: applies one micro-batch, all or nothing (on
//     a throw the target and the flow's state are as before the call; the
//     runner also rolls the table back through its journal). `rows` belongs
//     to the runner: the flow may reorder it or move rows out of it. Only the
//     row types the flow takes make the call well-formed (a pipeline checks
//     it at compile time). The statistics fill the counters that apply:
//     input_rows (rows handed over), dropped_rows (by `drop` expectations),
//     upserted_rows (rows written to the target: inserted or updated) and
//     deleted_rows (target rows removed), which are the event log's
//     num_upserted_rows and num_deleted_rows as they are, and
//     `expectations`, one entry per expectation in declaration order.
//
//  3. State. `void write_checkpoint(byte_writer&, checkpoint_scope) const`
//     writes what the last batches changed (a delta: O(the batch)) or the
//     whole state (a snapshot); `void read_checkpoint(Table&, const
//     checkpoint_blobs&)` replaces the whole state by the blobs' (empty
//     blobs: a fresh flow), binds the flow to the table, and throws
//     errc::checkpoint_corrupt changing nothing when a blob is bad.
//
//  4. Full refresh. The flow binds its target through
//     detail/target_binding.hpp: a new generation of the table (a full
//     refresh) resets the flow's state at its next apply_batch() or
//     read_checkpoint().
//
//  5. Optional members, each found by the runner with a requires-expression:
//     - `static constexpr bool once` and `bool done() const`: a ONCE flow
//       (one batch, then skipped until a full refresh; R-TABLE-2);
//     - `static constexpr bool shares_target = true`: other flows may write
//       the same table (append flows, fan-in); without it the flow claims
//       its target alone (R-USING-9);
//     - `static constexpr bool imports_streams = true`: IMPORT CHECKPOINT may
//       give it a stream's state (R-TABLE-4);
//     - `static constexpr bool maps_by_name = true`: it takes any row type
//       and maps columns by name (Append), so a managed table accepts it;
//     - `void begin_update(const update_context&)`: called once per update,
//       before the flow's batches are planned (a flow whose work depends on
//       the update's clock);
//     - `std::optional<planning_info> planning() const`: how the last batch
//       was planned, written as a planning_information event (R-WHERE-8);
//     - `static constexpr bool takes_predicate_override = true`: it accepts
//       UpdateOptions::replace_where_overrides (R-WHERE-4);
//     - `static constexpr bool reads_sources = true`: it reads its sources
//       itself (REPLACE WHERE reads them whole); its source yields one
//       token per batch, and its input_rows are the rows it read.
#pragma once

#include <flowlib/state.hpp>
#include <flowlib/stats.hpp>

#include <chrono>
#include <concepts>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace flowlib {

namespace where {
class expr;
}  // namespace where

namespace detail {
class task_pool;
}  // namespace detail

/// @brief Which batch a flow applies (rule 2): the flow's name in the
/// pipeline and the batch's id, stable across retries (R-EXACT-4), and the
/// threads it may use.
struct batch_info {
  std::string_view flow;
  std::uint64_t batch_id = 0;
  /// Worker threads the flow may spread this batch over
  /// (PipelineOptions::threads; detail/task_pool.hpp), or null: the calling
  /// thread only. A flow that uses them must give the result it gives
  /// without them.
  detail::task_pool* pool = nullptr;
};

/// @brief What a flow learns at the start of an update (rule 5).
struct update_context {
  std::chrono::system_clock::time_point now{};  ///< the update's logical clock
  std::uint64_t update_id = 0;
  /// This update's override predicate for the flow (R-WHERE-4), or null.
  const where::expr* predicate_override = nullptr;
};

/// @brief How a batch was planned (rule 5), for a planning_information
/// event: the technique ("INCREMENTAL", "COMPLETE_RECOMPUTE") and the reason,
/// if any.
struct planning_info {
  std::string technique;
  std::optional<std::string> reason;
};

/// @brief The part of the flow contract a type can be checked for without
/// its table and rows: rules 1 and 3 (rule 2 depends on the row type; a
/// pipeline checks it where it knows the source).
template <class P, class Table>
concept flow_policy = requires(P& p, const P& cp, Table& t, byte_writer& w,
                               const checkpoint_blobs& b) {
  { P::kind } -> std::convertible_to<std::string_view>;
  cp.write_checkpoint(w, checkpoint_scope::delta);
  p.read_checkpoint(t, b);
};

}  // namespace flowlib
