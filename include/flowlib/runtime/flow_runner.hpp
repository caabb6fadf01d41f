// flowlib/runtime/flow_runner.hpp
//
// flow_runner: one declared flow of a pipeline as the batch protocol
// (runtime/batch_protocol.hpp) sees it, erased at batch granularity: a
// handful of indirect calls per micro-batch and none per row. The one
// implementation is runtime/runner.hpp's typed_flow_runner.
//
// A batch, as the runner sees it:
//   begin()        start the journals of every table the batch writes;
//   run()          read the rows between the planned positions, run the
//                  stages (map, filter, flat_map, view, lookup, operators,
//                  quarantine) in declaration order, apply
//                  the flow policy with its expectations, write quarantined
//                  rows, copy the rows inserted into the target to its append
//                  log when a TableSource reads it;
//   persist()      write the batch's table changes through to durable
//                  storage (SqliteStorage), in the batch's transaction;
//                  nothing for memory tables;
//   write_state()  each component's delta or snapshot (component 0 is the
//                  flow policy, then the operators in order);
//   commit()       keep the changes (cannot fail);
//   rollback()     undo every table change of the batch (cannot fail); the
//                  protocol then restores the components' state from the
//                  checkpoint, which discards what the batch did to them.
// Internal.
#pragma once

#include <flowlib/checkpoint/store.hpp>
#include <flowlib/flows/contract.hpp>
#include <flowlib/runtime/checkpoint_log.hpp>
#include <flowlib/runtime/options.hpp>
#include <flowlib/source/position.hpp>
#include <flowlib/stats.hpp>
#include <flowlib/storage/durable.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace flowlib {

namespace detail {

/// What one batch did, for the summary, the progress callback and the
/// event log.
struct batch_outcome {
  /// The flow policy's (flows/contract.hpp: upserted_rows and deleted_rows
  /// are the event log's), with input_rows the rows read from the source.
  BatchStats stats;
  std::uint64_t output_rows = 0;    ///< rows handed to the table or sink
  std::uint64_t quarantined_rows = 0;
  std::uint64_t deduplicated_rows = 0;  ///< duplicates the operators removed
  std::uint64_t late_rows = 0;          ///< late rows the operators removed
  std::uint64_t filtered_rows = 0;      ///< rows the filter() stages removed
  std::uint64_t unmatched_rows = 0;     ///< rows inner lookup() stages removed
  /// Rows into and out of each stage, in declaration order.
  std::vector<StageMetrics> stages;
  /// How the batch was planned, for a planning_information event (a flow
  /// with planning(), flows/contract.hpp).
  std::optional<planning_info> planning;

  /// The batch's row counts, as the event log and the update's summary
  /// report them.
  FlowRowCounts counts() const noexcept {
    FlowRowCounts c;
    c.input_rows = stats.input_rows;
    c.output_rows = output_rows;
    c.upserted_rows = stats.upserted_rows;
    c.deleted_rows = stats.deleted_rows;
    c.dropped_rows = stats.dropped_rows;
    c.quarantined_rows = quarantined_rows;
    c.deduplicated_rows = deduplicated_rows;
    c.late_rows = late_rows;
    c.filtered_rows = filtered_rows;
    c.unmatched_rows = unmatched_rows;
    return c;
  }
};

/// The erased interface of a declared flow. See the header comment.
class flow_runner {
 public:
  virtual ~flow_runner() = default;

  const std::string& name() const noexcept { return name_; }
  virtual std::string_view kind() const noexcept = 0;
  /// Kind, source, target and stages: a checkpoint made by another
  /// definition is refused (errc::checkpoint_mismatch).
  virtual std::string definition() const = 0;
  /// The kinds of the stateful components, in order ("APPEND|DEDUP"): what
  /// an imported checkpoint must match (R-TABLE-4).
  virtual std::string component_layout() const = 0;
  virtual std::string source_name() const = 0;
  /// The pipeline tables the flow reads through TableSources (their
  /// writers fill their append logs), and the dimension tables its lookup
  /// stages read. The pipeline runs a table's writers before its readers.
  virtual std::vector<const void*> source_tables() const = 0;
  virtual std::vector<const void*> lookup_tables() const = 0;
  /// The table the flow writes (nullptr for a ForeachBatch sink), its name.
  virtual const void* target_table() const noexcept = 0;
  virtual std::string target_name() const = 0;
  /// Whether every table the flow writes is durable (true without tables)
  /// and whether it writes any.
  virtual bool tables_durable(bool durable) const noexcept = 0;
  virtual bool writes_tables() const noexcept = 0;
  virtual bool once() const noexcept = 0;
  virtual bool once_done() const noexcept = 0;
  virtual std::size_t components() const noexcept = 0;

  /// Called once per update before the flow's batches are planned (flows
  /// whose batches depend on the update's clock; others ignore it).
  virtual void begin_update(const update_context&) = 0;
  /// Whether the flow takes UpdateOptions::replace_where_overrides.
  virtual bool takes_predicate_override() const noexcept = 0;
  /// Whether other flows may write the flow's target (append fan-in).
  virtual bool shares_target() const noexcept = 0;
  /// What the flow's batches touch besides the checkpoint (PipelineOptions::
  /// threads): the tables it writes (target, quarantine tables), the tables
  /// it reads (TableSources, lookups) and its source objects (each source
  /// of a union). Two flows whose lists share an entry never run at the
  /// same time. `exclusive()`: the flow runs alone (a flow that reads its
  /// sources itself, REPLACE WHERE, whose sources the runner cannot list).
  virtual void resources(std::vector<const void*>& out) const = 0;
  virtual bool exclusive() const noexcept = 0;

  virtual source_position start() const = 0;
  virtual source_position latest() const = 0;
  virtual source_position plan(const source_position& from, std::size_t limit) const = 0;

  virtual void begin() = 0;
  /// Rows the last run() read from the source (also when it failed later).
  std::uint64_t rows_read() const noexcept { return rows_read_; }
  virtual batch_outcome run(const planned_batch& p, std::uint64_t batch_id,
                            const fault_hook_fn& fault) = 0;
  virtual void write_state(std::size_t component, checkpoint_scope scope,
                           std::string& out) const = 0;
  virtual void commit() noexcept = 0;
  virtual void rollback() noexcept = 0;
  /// Replaces every component's state with the records (one per component).
  virtual void restore(const std::vector<component_records>& records) = 0;
  /// The target's part of a full refresh: throws, changing nothing, when
  /// the table refuses it (reset_allowed = false).
  virtual void refresh_target() = 0;
  /// Removes the flow's rows from its quarantine tables (a full refresh).
  virtual void forget_quarantined() = 0;
  /// Attaches each table the flow writes, and the table it reads through a
  /// TableSource, whose store has an attach hook (SqliteStorage,
  /// FileStorage) to the pipeline's checkpoint `store`, loading its rows and
  /// append log; a table already in `attached` is skipped, an attached one
  /// is added. Throws what the store's attach() throws.
  virtual void attach_tables(checkpoint_store& store, const durable_context& context,
                             std::vector<const void*>& attached) {
    (void)store;
    (void)context;
    (void)attached;
  }
  /// Writes the changes of the running batch (or of a full refresh: `by`
  /// names no flow) to the durable tables the flow writes (the stores'
  /// write_changes()); nothing for other tables.
  virtual void persist(const durable_writer& by) { (void)by; }

  /// Copy the rows each batch inserts into the target to its append log
  /// (a TableSource reads the target).
  void log_appends(bool on) noexcept { log_appends_ = on; }
  std::size_t max_rows_per_batch = 0;  ///< 0: the pipeline's default
  /// Threads the flow's policy may spread a batch over (batch_info::pool),
  /// or null.
  task_pool* pool = nullptr;
  /// Where the flow's snapshot schedule stands (PipelineOptions::snapshot_interval).
  struct snapshot_schedule {
    bool any = false;                     ///< a snapshot was written since the last reset
    std::uint64_t snapshot_bytes = 0;     ///< the last snapshot's size
    std::uint64_t delta_bytes_since = 0;  ///< delta bytes written after it
    std::uint64_t batches_since = 0;      ///< batches committed after it
  };
  snapshot_schedule snapshots;
  /// A failed batch whose commit could be neither confirmed nor undone
  /// (runtime/batch_protocol.hpp): its tables' journals are still open
  /// until the pipeline's next open settles it.
  std::optional<std::uint64_t> unsettled;
  /// IMPORT CHECKPOINT (R-TABLE-4): the store and flow name to import from.
  const checkpoint_store* import_from = nullptr;
  std::string import_flow;

 protected:
  explicit flow_runner(std::string name) : name_(std::move(name)) {}
  std::string name_;
  bool log_appends_ = false;
  std::uint64_t rows_read_ = 0;
};

}  // namespace detail
}  // namespace flowlib
