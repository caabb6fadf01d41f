// flowlib/detail/pipeline_flow.hpp
//
// flow_runner: one declared flow of a pipeline (source -> stages -> flow
// policy -> table or sink), typed inside and erased at batch granularity:
// the pipeline makes a handful of indirect calls per micro-batch and none
// per row. Internal; the protocol that drives it is in pipeline.hpp.
//
// A batch, as the runner sees it:
//   begin()        start the journals of every table the batch writes;
//   run()          read the rows between the planned positions, run the
//                  stages (operators, quarantine) in declaration order, apply
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
//                  pipeline then restores the components' state from the
//                  checkpoint, which discards what the batch did to them.
#pragma once

#include <flowlib/checkpoint/store.hpp>
#include <flowlib/detail/byte_codec.hpp>
#include <flowlib/detail/checkpoint_log.hpp>
#include <flowlib/expect.hpp>
#include <flowlib/quarantine.hpp>
#include <flowlib/sink/foreach_batch.hpp>
#include <flowlib/source/position.hpp>
#include <flowlib/source/snapshot.hpp>
#include <flowlib/stats.hpp>
#include <flowlib/where/expr.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <iterator>
#include <memory>
#include <ranges>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace flowlib {

/// @brief The steps of a micro-batch at which PipelineOptions::fault_hook is
/// called (for fault-injection tests: an exception thrown by the hook is a
/// failure at that step).
enum class fault_point {
  positions_recorded,    ///< the batch's positions are in the offset log
  before_table_write,    ///< the rows are read and staged; no table changed yet
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

namespace detail {

using fault_fn = std::function<void(fault_point, std::string_view flow, std::uint64_t batch)>;

/// What one batch did, for the summary, the progress callback and the
/// event log.
struct batch_outcome {
  BatchStats stats;                 ///< the flow policy's (input_rows: rows read)
  std::uint64_t output_rows = 0;    ///< rows handed to the table or sink
  std::uint64_t quarantined_rows = 0;
  std::uint64_t deduplicated_rows = 0;  ///< duplicates the operators removed
  std::uint64_t late_rows = 0;          ///< late rows the operators removed
  /// Rows written and removed: AUTO CDC's num_upserted_rows and
  /// num_deleted_rows; REPLACE USING and append: rows applied, and rows a
  /// higher sequence replaced.
  std::uint64_t upserted_rows = 0;
  std::uint64_t deleted_rows = 0;
  bool skipped = false;                 ///< a ONCE flow that had run
  /// How the batch was planned, for a planning_information event (REPLACE
  /// WHERE: "INCREMENTAL" or "COMPLETE_RECOMPUTE" and the reason, if any).
  struct planning_note {
    std::string technique;
    std::optional<std::string> reason;
  };
  std::optional<planning_note> planning;
};

/// What every flow learns at the start of an update, before its batches
/// are planned.
struct flow_update_context {
  std::chrono::system_clock::time_point now{};  ///< the update's logical clock
  std::uint64_t update_id = 0;
  /// REPLACE WHERE: this update's override predicate (R-WHERE-4), or null.
  const where::expr* replace_where_override = nullptr;
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
  /// The pipeline table the flow reads through a TableSource, or nullptr.
  virtual const void* source_table() const noexcept = 0;
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
  virtual void begin_update(const flow_update_context&) {}

  virtual source_position start() const = 0;
  virtual source_position latest() const = 0;
  virtual source_position plan(const source_position& from, std::size_t limit) const = 0;

  virtual void begin() = 0;
  /// Rows the last run() read from the source (also when it failed later).
  std::uint64_t rows_read() const noexcept { return rows_read_; }
  virtual batch_outcome run(const planned_batch& p, std::uint64_t batch_id,
                            const fault_fn& fault) = 0;
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
  /// TableSource, whose store has an attach hook (SqliteStorage) to the
  /// pipeline's checkpoint `store`, loading its rows and append log; a
  /// table already in `attached` is skipped, an attached one is added.
  /// Throws what the store's attach() throws.
  virtual void attach_tables(checkpoint_store& store, std::vector<const void*>& attached) {
    (void)store;
    (void)attached;
  }
  /// Writes the changes of the running batch (or of a full refresh) to the
  /// durable tables the flow writes (storage/sqlite.hpp's write_changes());
  /// nothing for other tables.
  virtual void persist() {}

  /// Copy the rows each batch inserts into the target to its append log
  /// (a TableSource reads the target).
  void log_appends(bool on) noexcept { log_appends_ = on; }
  std::size_t max_rows_per_batch = 0;  ///< 0: the pipeline's default
  /// Where the flow's snapshot schedule stands (PipelineOptions::snapshot_interval).
  struct snapshot_schedule {
    bool any = false;                     ///< a snapshot was written since the last reset
    std::uint64_t snapshot_bytes = 0;     ///< the last snapshot's size
    std::uint64_t delta_bytes_since = 0;  ///< delta bytes written after it
    std::uint64_t batches_since = 0;      ///< batches committed after it
  };
  snapshot_schedule snapshots;
  /// IMPORT CHECKPOINT (R-TABLE-4): the store and flow name to import from.
  const checkpoint_store* import_from = nullptr;
  std::string import_flow;

 protected:
  explicit flow_runner(std::string name) : name_(std::move(name)) {}
  std::string name_;
  bool log_appends_ = false;
  std::uint64_t rows_read_ = 0;
};

// --- Stages --------------------------------------------------------------------------

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

template <class T>
struct is_snapshot_record : std::false_type {};
template <class Row, class V>
struct is_snapshot_record<Snapshot<Row, V>> : std::true_type {};

template <class T>
struct is_foreach_batch : std::false_type {};
template <class Row>
struct is_foreach_batch<ForeachBatch<Row>> : std::true_type {};

/// What a stage sees of the batch.
struct stage_context {
  std::string_view flow;
  std::uint64_t batch_id;
  batch_outcome& outcome;
  std::vector<ExpectationMetrics>& quarantine_metrics;
};

/// No table (a ForeachBatch sink).
struct no_table {
  using row_type = void;
};

template <class Row>
auto move_range(std::vector<Row>& v) {
  return std::ranges::subrange(std::make_move_iterator(v.begin()), std::make_move_iterator(v.end()));
}

/// The typed runner. Source: a flowlib::source; Target: a table type or
/// no_table; Policy: a flow policy or ForeachBatch; Checks: Expectations.
template <class Source, class Target, class Policy, class Checks, class... Stages>
class typed_flow_runner final : public flow_runner {
 public:
  using row_type = typename Source::row_type;
  static constexpr bool sink = is_foreach_batch<Policy>::value;
  static constexpr bool snapshot_flow = is_snapshot_record<row_type>::value;

  typed_flow_runner(std::string name, Source& source, Target* target, Policy policy,
                    Checks checks, std::tuple<Stages...> stages, const void* source_table)
      : flow_runner(std::move(name)),
        source_(&source),
        target_(target),
        policy_(std::move(policy)),
        checks_(std::move(checks)),
        stages_(std::move(stages)),
        source_table_(source_table) {}

  std::string_view kind() const noexcept override { return Policy::kind; }
  std::string definition() const override {
    std::string d = std::string(Policy::kind) + " from '" + source_name() + "'";
    std::apply([&](const auto&... s) { ((d += " | " + s.describe()), ...); }, stages_);
    if constexpr (Checks::size > 0) {
      d += " | EXPECT(";
      checks_.for_each([&](const auto& e) { d += e.name + std::string(",") + to_string(e.action) + ";"; });
      d += ")";
    }
    d += sink ? std::string(" into a foreach-batch sink") : " into '" + target_name() + "'";
    return d;
  }
  std::string component_layout() const override {
    std::string d(Policy::kind);
    std::apply([&](const auto&... s) { ((stateful_kind(s, d)), ...); }, stages_);
    return d;
  }
  std::string source_name() const override { return std::string(source_->name()); }
  const void* source_table() const noexcept override { return source_table_; }
  const void* target_table() const noexcept override {
    if constexpr (sink) return nullptr; else return target_;
  }
  std::string target_name() const override {
    if constexpr (sink) return {}; else return target_->name();
  }
  bool tables_durable(bool durable) const noexcept override {
    bool ok = true;
    if constexpr (!sink) ok = ok && store_durable<typename Target::store_type>() == durable;
    for_each_quarantine([&](auto& q) {
      ok = ok && store_durable<typename std::remove_pointer_t<decltype(q.table)>::store_type>() == durable;
    });
    return ok;
  }
  bool writes_tables() const noexcept override {
    bool any = !sink;
    for_each_quarantine([&](auto&) { any = true; });
    return any;
  }
  bool once() const noexcept override {
    if constexpr (requires { Policy::once; }) return Policy::once; else return false;
  }
  bool once_done() const noexcept override {
    if constexpr (requires { policy_.done(); }) return policy_.done(); else return false;
  }
  std::size_t components() const noexcept override {
    std::size_t n = sink ? 0 : 1;
    std::apply([&](const auto&... s) { ((n += s.stateful ? 1 : 0), ...); }, stages_);
    return n;
  }

  source_position start() const override { return source_->start(); }
  source_position latest() const override { return source_->latest(); }
  source_position plan(const source_position& from, std::size_t limit) const override {
    return source_->plan(from, limit);
  }

  void begin() override {
    if constexpr (!sink) {
      target_->store().begin_journal();
      log_end_ = target_->append_log().end_offset();
    }
    for_each_quarantine([](auto& q) { q.table->store().begin_journal(); });
  }

  batch_outcome run(const planned_batch& p, std::uint64_t batch_id, const fault_fn& fault) override {
    batch_outcome outcome;
    std::vector<ExpectationMetrics> qmetrics;
    rows_.clear();
    rows_read_ = 0;
    source_->read(p.from, p.to, rows_);
    const std::uint64_t read = rows_.size();
    rows_read_ = read;
    stage_context ctx{name_, batch_id, outcome, qmetrics};
    std::apply([&](auto&... s) { (s.run(rows_, ctx), ...); }, stages_);
    for_each_quarantine([&](auto& q) { outcome.quarantined_rows += q.pending.size(); });
    if (fault) fault(fault_point::before_table_write, name_, batch_id);

    if constexpr (sink) {
      // A sink has no admit step of its own: the expectations run here
      // (R-EXPECT-1), as a flow policy runs them.
      outcome.stats.input_rows = rows_.size();
      if constexpr (Checks::size > 0) {
        typename Checks::counts_type counts;
        const auto describe = [](const row_type& r) { return describe_row(r); };
        std::size_t kept = 0;
        for (std::size_t i = 0; i < rows_.size(); ++i) {
          if (checks_.check(rows_[i], counts, name_, describe)) {
            if (kept != i) rows_[kept] = std::move(rows_[i]);
            ++kept;
          }
        }
        outcome.stats.dropped_rows = rows_.size() - kept;
        rows_.resize(kept);
        checks_.report(counts, outcome.stats.expectations);
      }
      policy_.deliver(batch_id, std::span<const row_type>(rows_));
    } else if constexpr (snapshot_flow) {
      for (auto& snap : rows_) {
        const BatchStats s = policy_.apply_snapshot(*target_, move_range(snap.rows), snap.version);
        add(outcome.stats, s);
      }
    } else if constexpr (Policy::kind == append_flow_kind) {
      // An append moves each row into its slot; the others group the
      // batch by pointer into rows_ (which stays put) and copy only the
      // rows that survive.
      outcome.stats = policy_.apply(*target_, move_range(rows_), checks_);
    } else {
      outcome.stats = policy_.apply(*target_, rows_, checks_);
    }
    outcome.output_rows = outcome.stats.input_rows - outcome.stats.dropped_rows;
    if constexpr (requires { typename Policy::change_type; } || snapshot_flow) {
      outcome.upserted_rows = outcome.stats.upserted_rows;  // AUTO CDC's own counts (R-CDC-7)
      outcome.deleted_rows = outcome.stats.deleted_rows;
    } else if constexpr (!sink) {
      outcome.upserted_rows = outcome.stats.applied_rows;  // rows written
      outcome.deleted_rows = outcome.stats.replaced_rows;  // rows a higher sequence replaced
    }
    outcome.skipped = outcome.stats.skipped;
    outcome.stats.input_rows = read;
    outcome.stats.expectations.insert(outcome.stats.expectations.begin(), qmetrics.begin(),
                                      qmetrics.end());

    if (fault) fault(fault_point::between_table_writes, name_, batch_id);
    for_each_quarantine([&](auto& q) {
      auto& store = q.table->store();
      store.reserve(q.pending.size());
      for (auto& r : q.pending) store.insert(std::move(r));
      q.pending.clear();
    });
    if constexpr (!sink) {
      if (log_appends_) {
        const auto& store = target_->store();
        changed_.clear();
        store.journal_changed(changed_);
        auto& log = target_->append_log();
        log.reserve(changed_.size());
        for (row_id id : changed_) log.append(store.get(id));
      }
    }
    if (fault) fault(fault_point::after_table_write, name_, batch_id);
    return outcome;
  }

  void write_state(std::size_t component, checkpoint_scope scope, std::string& out) const override {
    byte_writer w{out};
    std::size_t c = 0;
    if constexpr (!sink) {
      if (component == c) {
        policy_.write_checkpoint(w, scope);
        return;
      }
      ++c;
    }
    std::apply([&](const auto&... s) { (write_stage(s, component, c, w, scope), ...); }, stages_);
  }

  void commit() noexcept override {
    if constexpr (!sink) target_->store().commit_journal();
    for_each_quarantine([](auto& q) { q.table->store().commit_journal(); });
  }
  void rollback() noexcept override {
    if constexpr (!sink) {
      if (target_->store().journaling()) target_->store().rollback_journal();
      target_->append_log().truncate_to(log_end_);
    }
    for_each_quarantine([](auto& q) {
      q.pending.clear();
      if (q.table->store().journaling()) q.table->store().rollback_journal();
    });
  }

  void restore(const std::vector<component_records>& records) override {
    std::size_t c = 0;
    if constexpr (!sink) policy_.read_checkpoint(*target_, records.at(c++).view());
    std::apply([&](auto&... s) { (restore_stage(s, records, c), ...); }, stages_);
  }

  void refresh_target() override {
    if constexpr (!sink) target_->full_refresh();
  }
  void forget_quarantined() override {
    for_each_quarantine([&](auto& q) {
      auto& store = q.table->store();
      using QRow = typename std::remove_pointer_t<decltype(q.table)>::row_type;
      std::vector<QRow> keep;
      bool any = false;
      for (const auto& r : store.rows()) {
        if (r.flow == name_) any = true; else keep.push_back(r);
      }
      if (!any) return;
      store.clear();
      store.reserve(keep.size());
      for (auto& r : keep) store.insert(std::move(r));
    });
  }

  void attach_tables(checkpoint_store& store, std::vector<const void*>& attached) override {
    if constexpr (!sink) attach_table(*target_, store, attached);
    // A durable table read through a TableSource: its append log is loaded
    // (normally its writer, a flow of the same pipeline, attached it already).
    if constexpr (requires { source_->table().append_log(); }) attach_table(source_->table(), store, attached);
    for_each_quarantine([&](auto& q) { attach_table(*q.table, store, attached); });
  }
  void persist() override {
    if constexpr (!sink) persist_table(*target_);
    for_each_quarantine([&](auto& q) { persist_table(*q.table); });
  }

  Policy& policy() noexcept { return policy_; }

 private:
  template <class T>
  static void attach_table(T& t, checkpoint_store& store, std::vector<const void*>& attached) {
    if constexpr (requires { t.store().attach(store, t.name(), t.append_log()); }) {
      for (const void* p : attached)
        if (p == static_cast<const void*>(&t)) return;
      t.store().attach(store, t.name(), t.append_log());
      attached.push_back(&t);
    }
  }
  template <class T>
  static void persist_table(T& t) {
    if constexpr (requires { t.store().write_changes(); }) t.store().write_changes();
  }
  template <class Store>
  static constexpr bool store_durable() {
    if constexpr (requires { Store::durable; }) return Store::durable; else return false;
  }
  template <class F>
  void for_each_quarantine(F&& f) {
    std::apply([&](auto&... s) { (maybe_quarantine(s, f), ...); }, stages_);
  }
  template <class F>
  void for_each_quarantine(F&& f) const {
    std::apply([&](const auto&... s) { (maybe_quarantine(s, f), ...); }, stages_);
  }
  template <class S, class F>
  static void maybe_quarantine(S& s, F& f) {
    if constexpr (is_quarantine_stage<std::remove_const_t<S>>::value) f(s);
  }
  template <class S>
  static void stateful_kind(const S& s, std::string& d) {
    if constexpr (S::stateful) d += "|" + std::string(s.component_kind());
  }
  template <class S>
  static void write_stage(const S& s, std::size_t component, std::size_t& c, byte_writer& w,
                          checkpoint_scope scope) {
    if constexpr (S::stateful) {
      if (component == c) s.op.write_checkpoint(w, scope);
      ++c;
    }
  }
  template <class S>
  static void restore_stage(S& s, const std::vector<component_records>& records, std::size_t& c) {
    if constexpr (S::stateful) s.op.read_checkpoint(records.at(c++).view());
  }
  static void add(BatchStats& to, const BatchStats& s) {
    to.input_rows += s.input_rows;
    to.dropped_rows += s.dropped_rows;
    to.applied_rows += s.applied_rows;
    to.inserted_rows += s.inserted_rows;
    to.upserted_rows += s.upserted_rows;
    to.deleted_rows += s.deleted_rows;
  }

  Source* source_;
  Target* target_;
  Policy policy_;
  Checks checks_;
  std::tuple<Stages...> stages_;
  const void* source_table_;
  std::vector<row_type> rows_;
  std::vector<row_id> changed_;
  std::uint64_t log_end_ = 0;
};

}  // namespace detail
}  // namespace flowlib
