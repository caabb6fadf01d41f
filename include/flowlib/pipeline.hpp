// flowlib/pipeline.hpp
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
// appended to from other threads while it updates.
#pragma once

#include <flowlib/catalog.hpp>
#include <flowlib/checkpoint/store.hpp>
#include <flowlib/detail/checkpoint_log.hpp>
#include <flowlib/detail/flow_builder.hpp>
#include <flowlib/detail/pipeline_flow.hpp>
#include <flowlib/error.hpp>
#include <flowlib/event_log.hpp>
#include <flowlib/source/position.hpp>
#include <flowlib/where/expr.hpp>

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
  /// For fault-injection tests: called at every step of every micro-batch
  /// (fault_point); an exception it throws is a failure at that step.
  detail::fault_fn fault_hook{};
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
  std::optional<std::chrono::system_clock::time_point> now;
  /// Called after every committed micro-batch.
  std::function<void(const FlowProgress&)> on_progress;
  /// REPLACE WHERE (R-WHERE-4): flow name -> the predicate this update runs
  /// with instead of the flow's own (a one-time backfill or correction);
  /// later updates use the flow's predicate. A name that is not a REPLACE
  /// WHERE flow of the pipeline is refused before anything runs.
  std::map<std::string, where::expr, std::less<>> replace_where_overrides;
};

/// @brief What one flow did in an update.
struct FlowUpdateSummary {
  std::string flow;
  std::uint64_t batches = 0;
  std::uint64_t input_rows = 0;
  std::uint64_t output_rows = 0;
  std::uint64_t upserted_rows = 0;
  std::uint64_t deleted_rows = 0;
  std::uint64_t dropped_rows = 0;
  std::uint64_t quarantined_rows = 0;
  std::uint64_t deduplicated_rows = 0;
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

/// @brief A pipeline: flows by name, micro-batches, checkpoints. See the
/// header comment.
class Pipeline final : private detail::flow_registry {
 public:
  /// A pipeline called `name` whose checkpoint is `checkpoint` (a
  /// MemoryCheckpoint or FileCheckpoint that outlives the pipeline).
  Pipeline(std::string name, checkpoint_store& checkpoint, PipelineOptions options = {})
      : name_(std::move(name)), store_(&checkpoint), log_(checkpoint), options_(std::move(options)) {
    if (options_.snapshot_interval == 0) {
      throw error(errc::invalid_argument, name_, "", "",
                  "PipelineOptions::snapshot_interval must be at least 1");
    }
  }
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  const std::string& name() const noexcept { return name_; }
  /// The tables and flows declared, by name (R-TABLE-1).
  const Catalog& catalog() const noexcept { return catalog_; }

  /// Starts declaring flow `name`: `.from(source)...into(table, policy)`.
  /// Names are checked when into() is called; flows are declared before
  /// the first update.
  detail::flow_start flow(std::string name) {
    if (opened_) {
      throw error(errc::invalid_argument, name, "", "",
                  "flows are declared before the pipeline's first update");
    }
    return detail::flow_start(*this, std::move(name));
  }

  /// Writes the update's events to `log` (kept by reference).
  void event_log(EventLog& log) noexcept { events_ = &log; }

  /// The running (or last) update's logical clock.
  std::chrono::system_clock::time_point now() const noexcept { return now_; }

  /// Runs every flow over the data available, in micro-batches. Throws what
  /// a batch threw (after undoing that batch); batches committed before it
  /// stay committed.
  UpdateSummary update(UpdateOptions options = {}) {
    now_ = options.now.value_or(std::chrono::system_clock::now());
    open();
    for (const auto& [flow, p] : options.replace_where_overrides) {
      const auto it = std::find_if(runners_.begin(), runners_.end(),
                                   [&](const auto& r) { return r->name() == flow; });
      if (it == runners_.end() || (*it)->kind() != std::string_view("REPLACE WHERE")) {
        throw error(errc::invalid_argument, flow, "", "",
                    "UpdateOptions::replace_where_overrides names no REPLACE WHERE flow of "
                    "pipeline '" + name_ + "'; nothing was run");
      }
    }
    UpdateSummary summary;
    summary.update_id = ++update_id_;
    emit_update(update_state::started, nullptr, nullptr);
    try {
      for (auto* r : order_) summary.flows.push_back(run_flow(*r, summary.update_id, options));
    } catch (...) {
      emit_update(update_state::failed, &summary, std::current_exception());
      throw;
    }
    emit_update(update_state::completed, &summary, nullptr);
    return summary;
  }

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
    // One transaction for a store that has them (SqliteCheckpoint): the
    // durable tables are emptied together with the records removed.
    store_->begin_batch();
    bool changed = false;
    try {
      writers.front()->refresh_target();  // throws, changing nothing, when refused
      changed = true;
      for (auto* r : writers) {
        log_.reset_flow(r->name());
        r->forget_quarantined();
      }
      for (auto* r : writers) r->persist();
      store_->commit_batch();
    } catch (...) {
      store_->abort_batch();
      // Memory and database may differ now: the next update opens the
      // pipeline again, reloading the durable tables and the flows' state.
      if (changed) opened_ = false;
      throw;
    }
    for (auto* r : writers) {
      r->commit();  // durable tables: what persist() wrote is committed
      restore(*r);  // empty records: fresh state, bound to the emptied table
    }
  }

 private:
  // --- Declaration (detail::flow_registry) -------------------------------------------

  void add_flow(std::unique_ptr<detail::flow_runner> runner, const void* target,
                std::string_view target_name, bool managed, std::string_view kind,
                bool exclusive) override {
    const std::string& flow = runner->name();
    for (const auto& r : runners_) {
      if (r->name() == flow) {
        throw error(errc::invalid_target, flow, "", "",
                    "FLOW_ALREADY_EXISTS: pipeline '" + name_ + "' already has a flow of this name");
      }
    }
    if (target != nullptr) {
      if (!catalog_.contains(target_name)) {
        catalog_.declare_table(std::string(target_name),
                               managed ? table_kind::managed : table_kind::streaming);
        tables_.emplace_back(target, std::string(target_name));
      } else if (table_ptr(target_name) != target) {
        // Another table of that name: the catalog says which code applies
        // (CANNOT_SWITCH_STREAMING_TABLE_TO_MANAGED_TABLE, TABLE_ALREADY_EXISTS).
        catalog_.declare_table(std::string(target_name),
                               managed ? table_kind::managed : table_kind::streaming);
      }
      // R-USING-9: a REPLACE USING or AUTO CDC target takes one flow and no other.
      for (const auto& [k, n] : catalog_.flows_of(target_name)) {
        if (exclusive || k != std::string(append_flow_kind)) {
          throw error(errc::invalid_target, flow, "", "",
                      "table '" + std::string(target_name) + "' is already written by " + k +
                          " flow '" + n + "'; a " + std::string(exclusive ? kind : k) +
                          " target takes exactly one flow and no other flow type (R-USING-9)");
        }
      }
      catalog_.declare_flow(target_name, kind, flow);
    }
    runners_.push_back(std::move(runner));
  }
  void keep_alive(std::shared_ptr<void> object) override { owned_.push_back(std::move(object)); }

  const void* table_ptr(std::string_view name) const {
    for (const auto& [p, n] : tables_)
      if (n == name) return p;
    return nullptr;
  }

  // --- Opening -------------------------------------------------------------------------

  void open() {
    if (opened_) return;
    // Reads and checks first: a refused open writes nothing.
    log_.clear_pending();
    log_.open_pipeline(name_);
    for (auto& r : runners_) log_.open_flow(r->name(), r->definition(), r->component_layout());
    for (auto& r : runners_) {
      if (r->writes_tables() && !r->tables_durable(store_->durable())) {
        throw error(errc::checkpoint_mismatch, r->name(), "", "",
                    store_->durable()
                        ? "the " + store_->describe() + " is durable but the flow's tables are "
                              "not: after a restart the checkpoint would skip rows the tables "
                              "lost; use durable tables, or a MemoryCheckpoint"
                        : "the " + store_->describe() + " is volatile but the flow's tables are "
                              "durable: after a restart every row would be applied again; use a "
                              "durable checkpoint (FileCheckpoint)");
      }
    }
    // Durable tables (SqliteStorage) are loaded from the checkpoint's
    // database before anything is written and before the flows restore
    // their state from them; a table that does not suit is refused here.
    std::vector<const void*> attached;
    for (auto& r : runners_) r->attach_tables(*store_, attached);
    std::vector<std::pair<detail::flow_runner*, import_plan>> imports;
    for (auto& r : runners_) {
      if (r->import_from == nullptr || log_.imported(r->name())) continue;
      if (log_.last_commit(r->name())) continue;  // has its own history already
      imports.emplace_back(r.get(), plan_import(*r));
    }
    order_ = dependency_order();
    for (auto& r : runners_) {
      if (r->source_table() == nullptr) continue;
      for (auto& w : runners_)
        if (w->target_table() == r->source_table()) w->log_appends(true);
    }
    // Writes.
    log_.write_pending();
    for (auto& [r, plan] : imports) {
      log_.copy_flow(*r->import_from, r->import_flow, r->name(), plan.mapping);
      if (plan.last && !plan.fresh.empty()) {
        // Components the stream did not have start fresh at its last batch.
        std::string bytes;
        for (std::size_t c : plan.fresh) {
          bytes.clear();
          r->write_state(c, checkpoint_scope::snapshot, bytes);
          log_.write_state(r->name(), *plan.last, c, checkpoint_scope::snapshot, bytes);
        }
      }
      log_.mark_imported(r->name(), r->import_from->describe() + " / " + r->import_flow);
    }
    for (auto& r : runners_) restore(*r);
    opened_ = true;
  }

  // IMPORT CHECKPOINT (R-TABLE-4): which of the stream's components become
  // which of the flow's. The stream's operators must be the flow's, in
  // order; its sink's state (an append flow's ONCE marker) carries over
  // when it is an append, and the flow's own starts fresh otherwise.
  struct import_plan {
    std::vector<std::pair<std::size_t, std::size_t>> mapping;
    std::vector<std::size_t> fresh;
    std::optional<std::uint64_t> last;
  };
  import_plan plan_import(detail::flow_runner& r) const {
    const auto refuse = [&](const std::string& why) {
      return error(errc::checkpoint_mismatch, r.name(), "", "",
                   "IMPORT CHECKPOINT: " + why + "; nothing was imported");
    };
    const auto layout = detail::checkpoint_log::layout_of(*r.import_from, r.import_flow);
    if (!layout) {
      throw refuse("the " + r.import_from->describe() + " has no stream named '" + r.import_flow + "'");
    }
    const auto split = [](const std::string& s) {
      std::vector<std::string> parts;
      std::size_t at = 0;
      for (;;) {
        const auto bar = s.find('|', at);
        parts.push_back(s.substr(at, bar - at));
        if (bar == std::string::npos) return parts;
        at = bar + 1;
      }
    };
    const auto src = split(*layout);
    const auto dst = split(r.component_layout());
    const bool src_policy = src.front() != "FOREACH BATCH";
    if (src.front() != std::string(append_flow_kind) && src_policy) {
      throw refuse("stream '" + r.import_flow + "' is a " + src.front() +
                   " flow; only a stream that appends or calls a foreach-batch sink can be imported");
    }
    if (std::vector<std::string>(src.begin() + 1, src.end()) !=
        std::vector<std::string>(dst.begin() + 1, dst.end())) {
      throw refuse("stream '" + r.import_flow + "' has the operators (" + *layout +
                   ") and this flow (" + r.component_layout() + "): they must be the same, in order");
    }
    detail::checkpoint_log other(const_cast<checkpoint_store&>(*r.import_from));
    import_plan plan;
    if (auto last = other.last_commit(r.import_flow)) plan.last = last->batch;
    if (src_policy) {
      plan.mapping.emplace_back(0, 0);
    } else {
      plan.fresh.push_back(0);
    }
    for (std::size_t i = 1; i < dst.size(); ++i) {
      plan.mapping.emplace_back(src_policy ? i : i - 1, i);
    }
    return plan;
  }

  std::vector<detail::flow_runner*> dependency_order() const {
    std::vector<detail::flow_runner*> out;
    std::vector<bool> done(runners_.size(), false);
    while (out.size() < runners_.size()) {
      bool progress = false;
      for (std::size_t i = 0; i < runners_.size(); ++i) {
        if (done[i]) continue;
        const void* src = runners_[i]->source_table();
        bool ready = true;
        for (std::size_t j = 0; j < runners_.size() && src != nullptr; ++j)
          if (!done[j] && j != i && runners_[j]->target_table() == src) ready = false;
        if (ready) {
          done[i] = true;
          out.push_back(runners_[i].get());
          progress = true;
        }
      }
      if (!progress) {
        throw error(errc::invalid_target, name_, "", "",
                    "the flows read each other's tables in a cycle; a pipeline's flows must form "
                    "a directed acyclic graph");
      }
    }
    return out;
  }

  void restore(detail::flow_runner& r) {
    std::vector<detail::component_records> recs(r.components());
    r.snapshots = {};
    r.snapshots.any = recs.empty();  // a flow without state has nothing to snapshot
    if (auto last = log_.last_commit(r.name())) {
      for (std::size_t c = 0; c < recs.size(); ++c) recs[c] = log_.load_state(r.name(), last->batch, c);
      // Where the snapshot schedule stands (PipelineOptions::snapshot_interval).
      for (const auto& rc : recs) {
        if (rc.snapshot) {
          r.snapshots.any = true;
          r.snapshots.snapshot_bytes += rc.snapshot->size();
        }
        for (const auto& d : rc.deltas) r.snapshots.delta_bytes_since += d.size();
        r.snapshots.batches_since = std::max<std::uint64_t>(r.snapshots.batches_since, rc.deltas.size());
      }
      // Update ids continue across restarts (an update that committed
      // nothing leaves no trace, and its id may be given again).
      update_id_ = std::max(update_id_, last->update_id);
    }
    r.restore(recs);
  }

  // --- Updating --------------------------------------------------------------------------

  FlowUpdateSummary run_flow(detail::flow_runner& r, std::uint64_t update_id,
                             const UpdateOptions& options) {
    FlowUpdateSummary sum;
    sum.flow = r.name();
    {
      detail::flow_update_context u{now_, update_id, nullptr};
      if (auto it = options.replace_where_overrides.find(r.name());
          it != options.replace_where_overrides.end()) {
        u.replace_where_override = &it->second;
      }
      r.begin_update(u);
    }
    if (r.once() && r.once_done()) {
      sum.skipped = true;
      return sum;
    }
    std::uint64_t next = 0;
    source_position from = r.start();
    if (auto last = log_.last_commit(r.name())) {
      next = last->batch + 1;
      from = last->end;
    }
    const std::size_t limit =
        r.once() ? 0 : (r.max_rows_per_batch != 0 ? r.max_rows_per_batch : options_.max_rows_per_batch);
    const source_position latest = r.latest();
    require_held(r, from, latest, "committed");
    FlowProgress progress{r.name(), 0, 0, latest.rows_after(from)};
    for (;;) {
      detail::planned_batch p;
      if (auto planned = log_.planned(r.name(), next)) {
        p = std::move(*planned);  // an uncommitted batch: replay the same positions
        require_held(r, p.to, latest, "planned");
      } else {
        p.from = from;
        p.to = clamp(r.plan(from, limit), latest);
        if (p.to == p.from && !(r.once() && next == 0)) break;
        log_.write_planned(r.name(), next, p);
      }
      fault(fault_point::positions_recorded, r.name(), next);
      const detail::batch_outcome out = run_batch(r, p, next, update_id);
      sum.batches += 1;
      sum.input_rows += out.stats.input_rows;
      sum.output_rows += out.output_rows;
      sum.upserted_rows += out.upserted_rows;
      sum.deleted_rows += out.deleted_rows;
      sum.dropped_rows += out.stats.dropped_rows;
      sum.quarantined_rows += out.quarantined_rows;
      sum.deduplicated_rows += out.deduplicated_rows;
      progress.batches += 1;
      progress.rows += out.stats.input_rows;
      if (options.on_progress) options.on_progress(progress);
      from = p.to;
      ++next;
      if (r.once()) break;
    }
    return sum;
  }

  detail::batch_outcome run_batch(detail::flow_runner& r, const detail::planned_batch& p,
                                  std::uint64_t n, std::uint64_t update_id) {
    const auto started = std::chrono::steady_clock::now();
    const auto& track = r.snapshots;
    const bool snapshot = !track.any || (track.batches_since >= options_.snapshot_interval &&
                                         track.delta_bytes_since >= track.snapshot_bytes);
    const auto scope = snapshot ? checkpoint_scope::snapshot : checkpoint_scope::delta;
    detail::batch_outcome out;
    bool commit_written = false;
    try {
      store_->begin_batch();
      r.begin();
      out = r.run(p, n, options_.fault_hook);
      r.persist();  // durable tables: the changes, in the batch's transaction
      std::string bytes;
      std::uint64_t written = 0;
      for (std::size_t c = 0; c < r.components(); ++c) {
        bytes.clear();
        r.write_state(c, scope, bytes);
        log_.write_state(r.name(), n, c, scope, bytes);
        written += bytes.size();
        if (c == 0) fault(fault_point::state_saving, r.name(), n);
      }
      pending_state_bytes_ = written;
      fault(fault_point::before_commit, r.name(), n);
      commit_written = true;
      log_.write_commit(r.name(), n, p.to, update_id);
      store_->commit_batch();
    } catch (...) {
      const std::exception_ptr e = std::current_exception();
      // A store with transactions rolls back first: the check below then
      // reads what was really committed (a failed COMMIT does not count).
      store_->abort_batch();
      const bool counts = commit_written && committed(r, n);
      if (counts) {
        // The commit record is in place (the failure came after it): the
        // batch counts, so its changes stay; the failure is still reported,
        // on a COMPLETED event (its counts are in the tables).
        r.commit();
        note_committed(r, snapshot);
      } else {
        fail_batch(r);
      }
      emit_flow(r, n, update_id, p, out, started, e, counts);
      throw;
    }
    r.commit();
    note_committed(r, snapshot);
    emit_flow(r, n, update_id, p, out, started, nullptr, true);
    // Old records go once a snapshot makes them unneeded (a flow without
    // state: every snapshot_interval batches).
    if ((snapshot && r.components() != 0) ||
        (r.components() == 0 && n % options_.snapshot_interval == 0)) {
      log_.purge_before(r.name(), n, options_.retain_batches);
    }
    fault(fault_point::after_commit, r.name(), n);
    return out;
  }

  // The snapshot schedule after a committed batch (PipelineOptions::snapshot_interval).
  void note_committed(detail::flow_runner& r, bool snapshot) noexcept {
    auto& track = r.snapshots;
    if (snapshot) {
      track = {true, pending_state_bytes_, 0, 0};
    } else {
      track.delta_bytes_since += pending_state_bytes_;
      track.batches_since += 1;
    }
  }

  bool committed(detail::flow_runner& r, std::uint64_t n) noexcept {
    try {
      auto last = log_.last_commit(r.name());
      return last && last->batch == n;
    } catch (...) {
      return false;
    }
  }

  // Undoes a failed batch: table changes through the journals, in-memory
  // state from the last commit. If the state cannot be read back (the
  // checkpoint became unreadable), the pipeline is closed: the next update
  // opens it again, and reports the cause.
  void fail_batch(detail::flow_runner& r) noexcept {
    r.rollback();
    store_->abort_batch();
    try {
      restore(r);
    } catch (...) {
      opened_ = false;
    }
  }

  // A source that holds fewer records than the checkpoint already planned
  // or committed (a restarted program re-appended less than before): going
  // on would skip the records appended in their place, so nothing runs.
  void require_held(const detail::flow_runner& r, const source_position& recorded,
                    const source_position& latest, std::string_view what) const {
    for (const auto& [part, off] : recorded.partitions()) {
      const auto held = latest.offset(part);
      if (held >= off) continue;
      throw error(errc::checkpoint_mismatch, r.name(), "", "",
                  "source '" + r.source_name() + "' holds " + std::to_string(held) +
                      " records in partition " + std::to_string(part) + " but the " +
                      store_->describe() + " has " + std::string(what) + " batches up to " +
                      std::to_string(off) + "; re-append at least the records appended before "
                      "the restart (the same ones, in the same order; R-EXACT-6); nothing was run");
    }
  }

  static source_position clamp(source_position to, const source_position& latest) {
    for (const auto& [part, off] : to.partitions()) {
      const auto cap = latest.offset(part);
      if (off > cap) to.set(part, cap);
    }
    return to;
  }

  void fault(fault_point p, std::string_view flow, std::uint64_t n) const {
    if (options_.fault_hook) options_.fault_hook(p, flow, n);
  }

  // --- Events ------------------------------------------------------------------------------

  void emit_update(update_state state, const UpdateSummary* s, std::exception_ptr e) {
    if (events_ == nullptr) return;
    update_progress_event ev;
    ev.timestamp = now_;
    ev.pipeline = name_;
    ev.update_id = update_id_;
    ev.state = state;
    if (s != nullptr) {
      ev.details.flows = s->flows.size();
      ev.details.batches = s->batches();
      ev.details.rows = s->input_rows();
    }
    if (e != nullptr) set_error(ev, e);
    events_->update_progress(ev);
  }

  void emit_flow(detail::flow_runner& r, std::uint64_t n, std::uint64_t update_id,
                 const detail::planned_batch& p, const detail::batch_outcome& out,
                 std::chrono::steady_clock::time_point started, std::exception_ptr e,
                 bool committed) {
    if (events_ == nullptr) return;
    if (out.planning) {  // REPLACE WHERE: how the batch was planned (R-WHERE-8)
      planning_information_event pe;
      pe.timestamp = now_;
      pe.pipeline = name_;
      pe.update_id = update_id;
      pe.flow = r.name();
      pe.technique = out.planning->technique;
      pe.reason = out.planning->reason;
      events_->planning_information(pe);
    }
    flow_progress_event ev;
    ev.timestamp = now_;
    ev.pipeline = name_;
    ev.update_id = update_id;
    ev.flow = r.name();
    ev.target = r.target_name();
    ev.batch_id = n;
    ev.status = !committed ? flow_status::failed
                           : (out.skipped ? flow_status::skipped : flow_status::completed);
    ev.start_position = p.from.to_string();
    ev.end_position = p.to.to_string();
    ev.duration_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
    ev.metrics.num_input_rows = committed ? out.stats.input_rows : r.rows_read();
    ev.metrics.num_output_rows = out.output_rows;
    ev.metrics.num_upserted_rows = out.upserted_rows;
    ev.metrics.num_deleted_rows = out.deleted_rows;
    ev.metrics.num_dropped_rows = out.stats.dropped_rows;
    ev.metrics.num_quarantined_rows = out.quarantined_rows;
    ev.metrics.num_deduplicated_rows = out.deduplicated_rows;
    ev.metrics.num_late_rows = out.late_rows;
    ev.expectations = out.stats.expectations;
    if (e != nullptr) set_error(ev, e);
    events_->flow_progress(ev);
  }

  template <class Ev>
  static void set_error(Ev& ev, std::exception_ptr e) {
    try {
      std::rethrow_exception(e);
    } catch (const error& fe) {
      ev.error.code = std::string(to_string(fe.code()));
      ev.error.message = fe.what();
    } catch (const std::exception& x) {
      ev.error.code = "EXCEPTION";
      ev.error.message = x.what();
    } catch (...) {
      ev.error.code = "EXCEPTION";
      ev.error.message = "an exception that is not a std::exception";
    }
  }

  std::string name_;
  checkpoint_store* store_;
  detail::checkpoint_log log_;
  PipelineOptions options_;
  Catalog catalog_;
  std::vector<std::pair<const void*, std::string>> tables_;
  std::vector<std::unique_ptr<detail::flow_runner>> runners_;
  std::vector<detail::flow_runner*> order_;
  std::vector<std::shared_ptr<void>> owned_;
  EventLog* events_ = nullptr;
  std::uint64_t pending_state_bytes_ = 0;
  std::chrono::system_clock::time_point now_{};
  std::uint64_t update_id_ = 0;
  bool opened_ = false;
};

}  // namespace flowlib
