// flowlib/runtime/pipeline.hpp
//
// Pipeline: sources, tables and flows by name, updated in micro-batches with
// exactly-once checkpoints (docs/pipelines.md; R-EXACT-1..5, R-TABLE-2,
// R-TABLE-4).
//
//   flowlib::MemoryCheckpoint checkpoint;            // or FileCheckpoint{dir}
//   flowlib::Pipeline pipeline{"bookings", checkpoint};
//   pipeline.flow("bookings_current")
//       .from(feed)                                  // a MemorySource<Booking>
//       .through(flowlib::DedupWithinWatermark<Id, When>{std::chrono::hours(1), "dedup"})
//       .expect(flowlib::expectations(flowlib::expect_or_drop("valid", is_valid)))
//       .into(current, Flow{"bookings_current"});
//   flowlib::UpdateSummary s = pipeline.update();     // all data available now
//
// An update runs every flow, in dependency order (a flow reading a table
// through a TableSource runs after the flows writing it), over the data its
// source holds when the flow starts, in micro-batches of at most
// max_rows_per_batch rows. Each micro-batch of flow F is, in order:
//   1. its positions (from, to) are recorded in the checkpoint (offset log);
//   2. the rows between them are read and go through the flow's stages and
//      policy; the tables it writes keep a journal of their changes, and
//      durable tables write those changes to their database;
//   3. each stateful component (the policy, then each operator) writes its
//      delta, or now and then its whole state (a snapshot; see
//      PipelineOptions::snapshot_interval for when);
//   4. the commit record is written: only now does the batch count.
// A failure at any step (the fault_hook tests every one) undoes the batch's
// table changes through the journals and restores the flow's state from
// the last commit, so the same Pipeline, or a new one over the same
// checkpoint and tables, replays the batch from the same positions: every
// source row affects the tables exactly once (R-EXACT-1). An update with no
// new data writes nothing (R-EXACT-2).
//
// Opening (at the first update): the checkpoint must belong to this pipeline
// and each flow's record to the same flow definition, and a durable
// checkpoint takes durable tables only (and a volatile one volatile tables);
// otherwise errc::checkpoint_mismatch, with nothing written. Durable tables
// (SqliteStorage) are then attached to the checkpoint's database and loaded
// from it (storage/sqlite.hpp); each batch writes their changes in its own
// transaction, after the flow ran and before the state records (R-DURABLE-1).
// Then every flow restores its state (last snapshot + deltas) and binds to
// its table.
//
// Threads: a Pipeline is used from one thread at a time; sources may be
// appended to from other threads while it updates. Within an update it uses
// up to PipelineOptions::threads threads (default: the machine's cores):
//   - flows run in waves: a flow joins the earliest wave after every
//     earlier flow (in dependency order) it shares anything with: a table
//     one writes and the other reads or writes (target, quarantine, lookup,
//     TableSource) or a source object. The flows of a wave run at the same
//     time, each batch committing on its own as with one thread
//     (runtime/batch_protocol.hpp); the next wave starts when all are done.
//     Sinks (their callbacks are the program's code) and REPLACE WHERE
//     flows (they read their sources themselves) run alone. A wave that
//     fails reports the error of its first failing flow in dependency
//     order, after the others finished; later waves do not start;
//   - a flow may spread one large batch over the threads (batch_info::pool;
//     REPLACE USING applies it key-sharded).
// Results do not depend on the number of threads. Stage callables and
// expectations of flows that may run at the same time must not share
// unsynchronized state.
#pragma once

#include <flowlib/checkpoint/store.hpp>
#include <flowlib/detail/config.hpp>
#include <flowlib/detail/task_pool.hpp>
#include <flowlib/error.hpp>
#include <flowlib/flows/append.hpp>
#include <flowlib/runtime/batch_protocol.hpp>
#include <flowlib/runtime/catalog.hpp>
#include <flowlib/runtime/checkpoint_log.hpp>
#include <flowlib/runtime/event_log.hpp>
#include <flowlib/runtime/flow_builder.hpp>
#include <flowlib/runtime/flow_runner.hpp>
#include <flowlib/runtime/options.hpp>
#include <flowlib/sink/foreach_batch.hpp>
#include <flowlib/source/position.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace flowlib {

/// @brief A pipeline: flows by name, micro-batches, checkpoints. See the
/// header comment.
class Pipeline final : private detail::flow_registry {
 public:
  /// A pipeline called `name` whose checkpoint is `checkpoint` (a
  /// MemoryCheckpoint or FileCheckpoint that outlives the pipeline).
  FLOWLIB_DECL Pipeline(std::string name, checkpoint_store& checkpoint,
                        PipelineOptions options = {});
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;
  /// A batch whose outcome a failing checkpoint left unknown is settled
  /// here, as well as the checkpoint still allows (batch_protocol::abandon).
  FLOWLIB_DECL ~Pipeline();

  const std::string& name() const noexcept { return name_; }
  /// The tables and flows declared, by name (R-TABLE-1).
  const Catalog& catalog() const noexcept { return catalog_; }

  /// Starts declaring flow `name`: `.from(source)...into(table, policy)`.
  /// Names are checked when into() is called; flows are declared before
  /// the first update.
  FLOWLIB_DECL detail::flow_start flow(std::string name);

  /// Writes the update's events to `log` (kept by reference).
  void event_log(EventLog& log) noexcept {
    events_ = &log;
    protocol_.events(&log);
  }

  /// The running (or last) update's logical clock.
  std::chrono::system_clock::time_point now() const noexcept { return now_; }

  /// Runs every flow over the data available, in micro-batches. Throws what
  /// a batch threw (after undoing that batch); batches committed before it
  /// stay committed.
  FLOWLIB_DECL UpdateSummary update(UpdateOptions options = {});

  /// Full refresh (R-EXACT-5): empties `table`, clears the state and the
  /// checkpoint records of every flow writing it (and their quarantined
  /// rows), and makes them read their sources from the start at the next
  /// update. ONCE flows run again (R-TABLE-2); an imported checkpoint is not
  /// imported again (R-TABLE-4). Throws errc::invalid_argument, changing
  /// nothing, when the table's reset_allowed is false. Rows a source no
  /// longer holds (MemorySource::discard_before) are lost.
  template <class Table>
  void full_refresh(Table& table) {
    open();
    std::vector<detail::flow_runner*> writers;
    for (auto& r : runners_)
      if (r->target_table() == static_cast<const void*>(&table)) writers.push_back(r.get());
    if (writers.empty()) {
      throw error(errc::invalid_argument, table.name(), "", "",
                  "no flow of pipeline '" + name_ + "' writes this table");
    }
    refresh(writers, table.name());
    for (auto* r : writers) protocol_.restore(*r);  // empty records: fresh state, bound to the emptied table
  }

 private:
  // Empties the table `writers` write and resets their records (R-EXACT-5).
  // One transaction for a store that has them (SqliteCheckpoint); on a
  // store without (FileCheckpoint) the intent record "refreshes/<hex of the
  // table>" is written once the table accepted the refresh and removed
  // last: a refresh cut short by a crash or a failure is finished when the
  // pipeline next opens, so the table and its flows' records never
  // disagree. The caller restores the writers' state afterwards.
  FLOWLIB_DECL void refresh(const std::vector<detail::flow_runner*>& writers,
                            std::string_view table);

  // Finishes the refreshes an earlier process or update left unfinished
  // (see refresh()); after the durable tables are attached.
  FLOWLIB_DECL void finish_refreshes();

  // --- Running the flows ---------------------------------------------------------------

  // Runs order_'s flows wave by wave (see the header comment); the summary
  // lists them in dependency order either way.
  FLOWLIB_DECL void run_flows(UpdateSummary& summary, const UpdateOptions& options);

  // The waves of order_ (indices into it), and the pool, for threads > 1.
  FLOWLIB_DECL void plan_waves();

  // --- Declaration (detail::flow_registry) -------------------------------------------

  FLOWLIB_DECL void add_flow(std::unique_ptr<detail::flow_runner> runner, const void* target,
                             std::string_view target_name, bool managed, std::string_view kind,
                             bool exclusive) override;
  FLOWLIB_DECL void keep_alive(std::shared_ptr<void> object) override;

  FLOWLIB_DECL const void* table_ptr(std::string_view name) const;

  // --- Opening -------------------------------------------------------------------------

  FLOWLIB_DECL void open();

  // IMPORT CHECKPOINT (R-TABLE-4): which of the stream's components become
  // which of the flow's. The stream's operators must be the flow's, in
  // order; its sink's state (an append flow's ONCE marker) carries over
  // when it is an append, and the flow's own starts fresh otherwise.
  struct import_plan {
    std::vector<std::pair<std::size_t, std::size_t>> mapping;
    std::vector<std::size_t> fresh;
    std::optional<std::uint64_t> last;
  };
  FLOWLIB_DECL import_plan plan_import(detail::flow_runner& r) const;

  FLOWLIB_DECL std::vector<detail::flow_runner*> dependency_order() const;

  // --- Events ------------------------------------------------------------------------------

  FLOWLIB_DECL void emit_update(update_state state, const UpdateSummary* s, std::exception_ptr e);

  std::string name_;
  checkpoint_store* store_;
  PipelineOptions options_;
  detail::batch_protocol protocol_;
  detail::checkpoint_log& log_;  // protocol_'s
  Catalog catalog_;
  std::vector<std::pair<const void*, std::string>> tables_;
  std::vector<std::unique_ptr<detail::flow_runner>> runners_;
  std::vector<detail::flow_runner*> order_;
  std::vector<std::vector<std::size_t>> waves_;  // indices into order_ (threads > 1)
  std::unique_ptr<detail::task_pool> pool_;      // threads > 1
  std::vector<std::shared_ptr<void>> owned_;
  EventLog* events_ = nullptr;
  std::chrono::system_clock::time_point now_{};
  std::uint64_t update_id_ = 0;
  bool opened_ = false;          // the last open() finished (and no batch closed it since)
  bool opening_started_ = false;  // open() ran once: no more flows may be declared
};

}  // namespace flowlib

#if !defined(FLOWLIB_SEPARATE_COMPILATION)
#include <flowlib/runtime/impl/pipeline.ipp>
#endif
