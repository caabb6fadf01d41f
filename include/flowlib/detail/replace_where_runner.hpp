// flowlib/detail/replace_where_runner.hpp
//
// REPLACE WHERE in a pipeline: the declaration steps after from() and the
// flow_runner that drives a ReplaceWhere flow (flows/replace_where.hpp).
//
//   pipeline.flow("events_agg")
//       .from(events_raw)       // a where_source (MemorySource): read as a table
//       .with(dim_users)        // more sources, in the query's argument order
//       .query(fn, "v1")        // fn(std::span<const Event>, std::span<const User>) -> std::vector<Agg>,
//                               // and its version (R-WHERE-10)
//       .into(events_agg, flowlib::ReplaceWhere{w::col("date") >= w::current_date() - w::days(3)});
//
// A REPLACE WHERE flow does not read its sources as streams: each update is
// one batch that reads them whole (with the predicate pushed down). Its
// positions in the checkpoint count its updates: the batch of update n
// goes from n to n + 1, so the exactly-once protocol (record the positions,
// apply, write the state, commit) covers it as it covers a stream, and a
// failed update is undone through the target's journal and replayed by the
// next update. The flow's state is its one component.
//
// Each update's clock is the pipeline's (UpdateOptions::now), the seed of
// rand() is derived from the update id, and UpdateOptions::
// replace_where_overrides may give the update another predicate
// (R-WHERE-4). The batch reports its plan for the planning_information
// event (R-WHERE-8).
//
// Declaration checks (R-WHERE-9): expectations on the flow do not compile
// (expect() before or after query()), a ManagedTable target does not
// compile, and a target table that declares expectations is refused at
// into() (errc::invalid_target). The pipeline's catalog then keeps any
// other flow off the target (an exclusive flow). Internal.
#pragma once

#include <flowlib/detail/flow_builder.hpp>  // flow_registry (it includes this header last)
#include <flowlib/detail/pipeline_flow.hpp>
#include <flowlib/error.hpp>
#include <flowlib/flows/replace_where.hpp>
#include <flowlib/source/position.hpp>
#include <flowlib/table.hpp>
#include <flowlib/where.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace flowlib::detail {

/// Drives one ReplaceWhere flow in a pipeline. See the header comment.
template <class Table, class Query, class... Sources>
class replace_where_runner final : public flow_runner {
 public:
  replace_where_runner(std::string name, Table& target, ReplaceWhere<> flow, Query query,
                       std::tuple<const Sources*...> sources)
      : flow_runner(std::move(name)),
        target_(&target),
        flow_(std::move(flow)),
        query_(std::move(query)),
        sources_(sources) {}

  std::string_view kind() const noexcept override { return ReplaceWhere<>::kind; }
  // The predicate and the query's version are not part of this definition
  // (the pipeline refuses a checkpoint of another definition): changing
  // them between runs is allowed. They are recorded in the flow's state,
  // and an update under other ones recomputes the window (R-WHERE-10).
  std::string definition() const override {
    return std::string(kind()) + " from '" + source_name() + "' into '" + target_->name() + "'";
  }
  std::string component_layout() const override { return std::string(kind()); }
  std::string source_name() const override {
    std::string s;
    std::apply([&](const auto*... src) { ((s += (s.empty() ? "" : "', '") + std::string(src->name())), ...); },
               sources_);
    return s;
  }
  const void* source_table() const noexcept override { return nullptr; }
  const void* target_table() const noexcept override { return target_; }
  std::string target_name() const override { return target_->name(); }
  bool tables_durable(bool durable) const noexcept override {
    using Store = typename Table::store_type;
    if constexpr (requires { Store::durable; }) return Store::durable == durable; else return !durable;
  }
  bool writes_tables() const noexcept override { return true; }
  bool once() const noexcept override { return false; }
  bool once_done() const noexcept override { return false; }
  std::size_t components() const noexcept override { return 1; }

  void begin_update(const flow_update_context& u) override {
    ctx_ = where::context{std::chrono::floor<std::chrono::microseconds>(u.now),
                          u.update_id * 0x9E3779B97F4A7C15ULL + 1};
    override_ = u.replace_where_override;
    pending_ = true;
  }

  // Positions count updates: one batch per update (see the header comment).
  source_position start() const override { return source_position::at(0); }
  source_position latest() const override {
    return source_position::at(flow_.updates() + (pending_ ? 1 : 0));
  }
  source_position plan(const source_position& from, std::size_t) const override {
    return pending_ ? source_position::at(from.offset() + 1) : from;
  }

  void begin() override {
    target_->store().begin_journal();
    log_end_ = target_->append_log().end_offset();
  }

  batch_outcome run(const planned_batch&, std::uint64_t batch_id, const fault_fn& fault) override {
    batch_outcome outcome;
    rows_read_ = 0;
    if (fault) fault(fault_point::before_table_write, name_, batch_id);
    outcome.stats = std::apply(
        [&](const auto*... src) { return flow_.update(*target_, ctx_, override_, query_, *src...); },
        sources_);
    rows_read_ = outcome.stats.input_rows;
    outcome.output_rows = outcome.stats.applied_rows;
    outcome.upserted_rows = outcome.stats.applied_rows;
    outcome.deleted_rows = outcome.stats.deleted_rows;
    const ReplaceWherePlan& plan = flow_.last_plan();
    outcome.planning.emplace();
    outcome.planning->technique = std::string(to_string(plan.technique));
    if (plan.reason) outcome.planning->reason = std::string(to_string(*plan.reason));
    pending_ = false;
    if (fault) fault(fault_point::between_table_writes, name_, batch_id);
    if (log_appends_) {
      const auto& store = target_->store();
      changed_.clear();
      store.journal_changed(changed_);
      auto& log = target_->append_log();
      log.reserve(changed_.size());
      for (row_id id : changed_) log.append(store.get(id));
    }
    if (fault) fault(fault_point::after_table_write, name_, batch_id);
    return outcome;
  }

  void write_state(std::size_t, checkpoint_scope scope, std::string& out) const override {
    byte_writer w{out};
    flow_.write_checkpoint(w, scope);
  }
  void commit() noexcept override { target_->store().commit_journal(); }
  void rollback() noexcept override {
    if (target_->store().journaling()) target_->store().rollback_journal();
    target_->append_log().truncate_to(log_end_);
  }
  void restore(const std::vector<component_records>& records) override {
    flow_.read_checkpoint(*target_, records.at(0).view());
  }
  void refresh_target() override { target_->full_refresh(); }
  void forget_quarantined() override {}
  // Durable targets (SqliteStorage): loaded at open, and each update's
  // changes written in its transaction, as for every other flow.
  void attach_tables(checkpoint_store& store, std::vector<const void*>& attached) override {
    if constexpr (requires { target_->store().attach(store, target_->name(), target_->append_log()); }) {
      for (const void* p : attached)
        if (p == static_cast<const void*>(target_)) return;
      target_->store().attach(store, target_->name(), target_->append_log());
      attached.push_back(target_);
    }
  }
  void persist() override {
    if constexpr (requires { target_->store().write_changes(); }) target_->store().write_changes();
  }

  /// The flow (its last_plan(), for tests and programs).
  const ReplaceWhere<>& flow() const noexcept { return flow_; }

 private:
  Table* target_;
  ReplaceWhere<> flow_;
  Query query_;
  std::tuple<const Sources*...> sources_;
  where::context ctx_{};
  const where::expr* override_ = nullptr;
  bool pending_ = false;
  std::vector<row_id> changed_;
  std::uint64_t log_end_ = 0;
};

/// After query(fn): into(table, flow) ends the declaration.
template <class Query, class... Sources>
class replace_where_query_builder {
 public:
  replace_where_query_builder(flow_registry& p, std::string name, std::tuple<const Sources*...> s,
                              Query q, std::string version)
      : p_(&p), name_(std::move(name)), sources_(s), query_(std::move(q)), version_(std::move(version)) {}

  /// Not allowed: a REPLACE WHERE flow takes no expectations (R-WHERE-9).
  template <class... P>
  void expect(Expectations<P...>) && {
    static_assert(sizeof...(P) < 0,
                  "flowlib pipeline: a REPLACE WHERE flow takes no expectations (R-WHERE-9); "
                  "check the rows in the query, or write them through another flow that has "
                  "expectations.");
  }

  /// Ends the declaration: `flow` writes `table` (R-WHERE-9 checked here).
  template <class Table>
  void into(Table& table, ReplaceWhere<> flow) && {
    static_assert(!is_managed_table_v<Table>,
                  "MANAGED_TABLE_DOES_NOT_SUPPORT_CDC: a flowlib::ManagedTable accepts only append "
                  "flows (INSERT BY NAME); write REPLACE WHERE into a flowlib::StreamingTable "
                  "(R-WHERE-9).");
    static_assert(requires(typename Table::store_type& s) {
                    s.begin_journal();
                    s.commit_journal();
                    s.rollback_journal();
                  },
                  "flowlib pipeline: the table's storage must keep a change journal (the "
                  "pipeline undoes a failed micro-batch with it); MemoryStorage does.");
    static_assert(std::is_invocable_v<Query&, std::span<const typename Sources::row_type>...>,
                  "flowlib pipeline: REPLACE WHERE's query must be callable as "
                  "fn(std::span<const S1>, std::span<const S2>, ...), one span per source in "
                  "the order from(), with(), with(), ...");
    if (table.expectation_count() != 0) {
      throw error(errc::invalid_target, name_, "", "",
                  "table '" + table.name() +
                      "' declares expectations; a REPLACE WHERE target takes none (R-WHERE-9)");
    }
    if (!version_.empty() && version_ != flow.options().query_version) {
      if (!flow.options().query_version.empty()) {
        throw error(errc::invalid_argument, name_, "", "",
                    "query(fn, \"" + version_ + "\") and ReplaceWhereOptions::query_version \"" +
                        flow.options().query_version + "\" name two versions; give one");
      }
      ReplaceWhereOptions o = flow.options();
      o.query_version = version_;
      flow = ReplaceWhere<>(flow.name(), flow.predicate(), std::move(o));
    }
    using R = replace_where_runner<Table, Query, Sources...>;
    auto runner = std::make_unique<R>(name_, table, std::move(flow), std::move(query_), sources_);
    p_->add_flow(std::move(runner), &table, table.name(), is_managed_table_v<Table>,
                 ReplaceWhere<>::kind, /*exclusive=*/true);
  }

 private:
  flow_registry* p_;
  std::string name_;
  std::tuple<const Sources*...> sources_;
  Query query_;
  std::string version_;
};

/// After from(source): with(...) adds sources, query(fn) gives the query.
template <class... Sources>
class replace_where_builder {
 public:
  replace_where_builder(flow_registry& p, std::string name, std::tuple<const Sources*...> s)
      : p_(&p), name_(std::move(name)), sources_(s) {}

  /// One more source (a where_source the program keeps alive).
  template <class S>
  auto with(const S& source) && {
    static_assert(where_source<S>,
                  "flowlib pipeline: REPLACE WHERE reads its sources as tables: a source needs "
                  "version(), changed_values(column, since) and scan(f) (MemorySource has them).");
    return replace_where_builder<Sources..., S>(*p_, std::move(name_),
                                                std::tuple_cat(sources_, std::tuple<const S*>(&source)));
  }

  /// The query: fn(std::span<const S1>, ...) -> std::vector<TargetRow>.
  /// `version` identifies it across restarts (ReplaceWhereOptions::
  /// query_version, R-WHERE-10): change it whenever the query's results
  /// change; without it, each new Pipeline recomputes the window once.
  template <class Fn>
  auto query(Fn fn, std::string version = {}) && {
    static_assert(std::is_invocable_v<Fn&, std::span<const typename Sources::row_type>...>,
                  "flowlib pipeline: REPLACE WHERE's query must be callable as "
                  "fn(std::span<const S1>, std::span<const S2>, ...), one span per source in "
                  "the order from(), with(), with(), ...");
    return replace_where_query_builder<Fn, Sources...>(*p_, std::move(name_), sources_, std::move(fn),
                                                       std::move(version));
  }

  /// Not allowed: a REPLACE WHERE flow takes no expectations (R-WHERE-9).
  template <class... P>
  void expect(Expectations<P...>) && {
    static_assert(sizeof...(P) < 0,
                  "flowlib pipeline: a REPLACE WHERE flow takes no expectations (R-WHERE-9); "
                  "check the rows in the query instead.");
  }

 private:
  flow_registry* p_;
  std::string name_;
  std::tuple<const Sources*...> sources_;
};

}  // namespace flowlib::detail
