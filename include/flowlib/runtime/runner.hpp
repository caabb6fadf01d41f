// flowlib/runtime/runner.hpp
//
// typed_flow_runner: the one runner. It drives any flow policy that meets
// the flow contract (flows/contract.hpp) through the batch protocol's steps
// (runtime/flow_runner.hpp): read the planned rows from the source, run the
// stages in order (runtime/stages.hpp, runtime/lookup.hpp: each takes the
// previous one's rows, and may change their type), apply_batch() with the flow's
// expectations, write quarantined rows, copy changed rows to the target's
// append log when a TableSource reads it. Types are erased once per batch:
// the protocol makes a handful of indirect calls per micro-batch and none
// per row. Internal.
#pragma once

#include <flowlib/checkpoint/store.hpp>
#include <flowlib/expect.hpp>
#include <flowlib/flows/contract.hpp>
#include <flowlib/runtime/flow_runner.hpp>
#include <flowlib/runtime/stages.hpp>
#include <flowlib/source/table.hpp>
#include <flowlib/source/union.hpp>
#include <flowlib/source/position.hpp>
#include <flowlib/stats.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace flowlib::detail {

/// No table: the Target of a sink (ForeachBatch).
struct no_table {
  using row_type = void;
};

/// Calls f(table) for each TableSource's table a source reads.
template <class S, class F>
void for_each_source_table(const S& s, F&& f) {
  if constexpr (requires { s.table().append_log(); }) {
    f(s.table());
  } else if constexpr (requires { s.sources(); }) {
    std::apply([&](const auto*... src) { (for_each_source_table(*src, f), ...); }, s.sources());
  }
}

/// Calls f(s) for each source of `s` (itself, or each source of a union)
/// that keeps records in the checkpoint: one with
/// `attach(checkpoint_store&) const` (source/position.hpp).
template <class S, class F>
void for_each_attachable_source(const S& s, F&& f) {
  if constexpr (requires(checkpoint_store& store) { s.attach(store); }) {
    f(s);
  } else if constexpr (requires { s.sources(); }) {
    std::apply([&](const auto*... src) { (for_each_attachable_source(*src, f), ...); }, s.sources());
  }
}

/// Calls f(s) for `s` and, for a union, each of its sources.
template <class S, class F>
void for_each_source_object(const S& s, F&& f) {
  f(s);
  if constexpr (requires { s.sources(); }) {
    std::apply([&](const auto*... src) { (for_each_source_object(*src, f), ...); }, s.sources());
  }
}

/// The one runner. Source: a flowlib::source; Target: a table type, or
/// no_table for a sink; Policy: anything that meets the flow contract
/// (flows/contract.hpp); Checks: Expectations.
template <class Source, class Target, class Policy, class Checks, class... Stages>
class typed_flow_runner final : public flow_runner {
 public:
  using row_type = typename Source::row_type;
  static constexpr bool sink = std::is_same_v<Target, no_table>;
  static constexpr bool reads_sources = requires { requires Policy::reads_sources; };

  typed_flow_runner(std::string name, Source& source, Target* target, Policy policy,
                    Checks checks, std::tuple<Stages...> stages)
      : flow_runner(std::move(name)),
        source_(&source),
        target_(target),
        policy_(std::move(policy)),
        checks_(std::move(checks)),
        stages_(std::move(stages)) {}

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
  std::vector<const void*> source_tables() const override {
    std::vector<const void*> out;
    for_each_source_table(*source_, [&](const auto& t) { out.push_back(&t); });
    return out;
  }
  std::vector<const void*> lookup_tables() const override {
    std::vector<const void*> out;
    for_each_lookup([&](const auto& t) { out.push_back(&t); });
    return out;
  }
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
  bool takes_predicate_override() const noexcept override {
    return requires { requires Policy::takes_predicate_override; };
  }
  bool shares_target() const noexcept override { return requires { requires Policy::shares_target; }; }
  void resources(std::vector<const void*>& out) const override {
    if constexpr (!sink) out.push_back(target_);
    for_each_quarantine([&](const auto& q) { out.push_back(q.table); });
    for_each_source_table(*source_, [&](const auto& t) { out.push_back(&t); });
    for_each_lookup([&](const auto& t) { out.push_back(&t); });
    for_each_source_object(*source_, [&](const auto& s) { out.push_back(&s); });
  }
  bool exclusive() const noexcept override { return reads_sources; }
  void begin_update(const update_context& u) override {
    if constexpr (requires { policy_.begin_update(u); }) policy_.begin_update(u);
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
    rows_read_ = 0;  // a batch that fails before it reads has read nothing
    if constexpr (!sink) {
      target_->store().begin_journal();
      log_end_ = target_->append_log().end_offset();
    }
    for_each_quarantine([](auto& q) { q.table->store().begin_journal(); });
    begun_ = true;
  }

  batch_outcome run(const planned_batch& p, std::uint64_t batch_id, const fault_hook_fn& fault) override {
    batch_outcome outcome;
    std::vector<ExpectationMetrics> qmetrics;
    rows_.clear();
    rows_read_ = 0;
    source_->read(p.from, p.to, rows_);
    const std::uint64_t read = rows_.size();
    if constexpr (!reads_sources) rows_read_ = read;
    stage_context ctx{name_, batch_id, outcome, qmetrics};
    auto& rows = run_stages<0>(rows_, ctx);
    for_each_quarantine([&](auto& q) { outcome.quarantined_rows += q.pending.size(); });
    if (fault) fault(fault_point::before_table_write, name_, batch_id);

    static no_table none;
    auto& target = [&]() -> auto& {
      if constexpr (sink) return none; else return *target_;
    }();
    outcome.stats = policy_.apply_batch(target, rows, checks_, batch_info{name_, batch_id, pool});
    outcome.output_rows = outcome.stats.input_rows - outcome.stats.dropped_rows;
    if constexpr (reads_sources) {
      rows_read_ = outcome.stats.input_rows;  // the rows the policy read itself
    } else {
      outcome.stats.input_rows = read;  // before the stages removed any
    }
    if constexpr (requires { policy_.planning(); }) outcome.planning = policy_.planning();
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
    begun_ = false;
    if constexpr (!sink) target_->store().commit_journal();
    for_each_quarantine([](auto& q) { q.table->store().commit_journal(); });
  }
  void rollback() noexcept override {
    // A batch that failed before begin() (its store's transaction could not
    // start) changed nothing: the append log's mark is the last batch's.
    const bool begun = std::exchange(begun_, false);
    if constexpr (!sink) {
      if (target_->store().journaling()) target_->store().rollback_journal();
      if (begun) target_->append_log().truncate_to(log_end_);
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

  void attach_tables(checkpoint_store& store, const durable_context& context,
                     std::vector<const void*>& attached) override {
    const auto attach_table = [&](auto& t) { attach_durable(t, store, context, attached); };
    if constexpr (!sink) attach_table(*target_);
    // A durable table read through a TableSource: its append log is loaded
    // (normally its writer, a flow of the same pipeline, attached it
    // already); a lookup's dimension: its rows.
    for_each_source_table(*source_, attach_table);
    for_each_lookup(attach_table);
    for_each_quarantine([&](auto& q) { attach_table(*q.table); });
    // A source that keeps records of its own in the checkpoint (FileSource:
    // the list of files it has found) is attached once per pipeline.
    for_each_attachable_source(*source_, [&](const auto& s) {
      for (const void* p : attached)
        if (p == static_cast<const void*>(&s)) return;
      s.attach(store);
      attached.push_back(&s);
    });
  }
  void persist(const durable_writer& by) override {
    if constexpr (!sink) persist_table(*target_, by);
    for_each_quarantine([&](auto& q) { persist_table(*q.table, by); });
  }

  Policy& policy() noexcept { return policy_; }

 private:
  // A durable store's hooks (storage/durable.hpp): FileStorage takes the
  // context and the writer, SqliteStorage neither.
  template <class T>
  static void attach_durable(T& t, checkpoint_store& store, const durable_context& context,
                             std::vector<const void*>& attached) {
    constexpr bool with_context = requires { t.store().attach(store, t.name(), t.append_log(), context); };
    if constexpr (with_context || requires { t.store().attach(store, t.name(), t.append_log()); }) {
      for (const void* p : attached)
        if (p == static_cast<const void*>(&t)) return;
      if constexpr (with_context) {
        t.store().attach(store, t.name(), t.append_log(), context);
      } else {
        t.store().attach(store, t.name(), t.append_log());
      }
      attached.push_back(&t);
    }
  }
  template <class T>
  static void persist_table(T& t, const durable_writer& by) {
    if constexpr (requires { t.store().write_changes(by); }) {
      t.store().write_changes(by);
    } else if constexpr (requires { t.store().write_changes(); }) {
      t.store().write_changes();
    }
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
    if constexpr (has_quarantine_v<std::remove_const_t<S>>) f(s.q);
  }
  // Calls f(table) for each lookup stage's dimension table.
  template <class F>
  void for_each_lookup(F&& f) const {
    std::apply([&](const auto&... s) {
      ([&] {
        if constexpr (requires { s.table->rows(); s.keys; }) f(*s.table);
      }(), ...);
    }, stages_);
  }
  // Runs stage I and the ones after it; records each one's rows in and out.
  // A map followed by a filter runs as one pass (stages.hpp, fused_pair_v),
  // counted as the two stages it is.
  template <std::size_t I, class V>
  auto& run_stages(V& rows, stage_context& ctx) {
    constexpr std::size_t n = sizeof...(Stages);
    if constexpr (I == n) {
      return rows;
    } else {
      auto& s = std::get<I>(stages_);
      if constexpr (I + 1 < n) {
        using Next = std::tuple_element_t<I + 1, std::tuple<Stages...>>;
        if constexpr (fused_pair_v<std::remove_cvref_t<decltype(s)>, Next>) {
          const std::uint64_t in = rows.size();
          auto& f = std::get<I + 1>(stages_);
          std::uint64_t mapped = 0;
          auto& out = s.run_filtered(rows, f, ctx, mapped);
          ctx.outcome.stages.push_back(StageMetrics{std::string(s.stage_kind()), in, mapped});
          ctx.outcome.stages.push_back(StageMetrics{std::string(f.stage_kind()), mapped, out.size()});
          return run_stages<I + 2>(out, ctx);
        } else {
          return run_one<I>(s, rows, ctx);
        }
      } else {
        return run_one<I>(s, rows, ctx);
      }
    }
  }
  template <std::size_t I, class S, class V>
  auto& run_one(S& s, V& rows, stage_context& ctx) {
    const std::uint64_t in = rows.size();
    auto& out = s.run(rows, ctx);
    ctx.outcome.stages.push_back(StageMetrics{std::string(s.stage_kind()), in, out.size()});
    return run_stages<I + 1>(out, ctx);
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

  Source* source_;
  Target* target_;
  Policy policy_;
  Checks checks_;
  std::tuple<Stages...> stages_;
  std::vector<row_type> rows_;
  std::vector<row_id> changed_;
  std::uint64_t log_end_ = 0;
  bool begun_ = false;  // begin() ran, and no commit() or rollback() since
};

}  // namespace flowlib::detail
