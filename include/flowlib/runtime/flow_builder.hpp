// flowlib/runtime/flow_builder.hpp
//
// The typed declaration of one pipeline flow:
//
//   pipeline.flow("name")                 // -> flow_start
//       .from(source)                     // a flowlib::source: MemorySource, TableSource, ...
//       .through(operator)                // zero or more operators, in order (DedupWithinWatermark)
//       .quarantine(table, expectations)  // zero or more quarantine stages, in order
//       .expect(expectations)             // at most once: given to the flow policy's apply()
//       .max_rows_per_batch(n)            // optional per-flow limit
//       .import_checkpoint(ckpt, "stream")// append flows only (R-TABLE-4)
//       .into(table, policy);             // or .into(ForeachBatch<Row>{...})
//
// REPLACE WHERE reads whole tables instead (flows/where/detail/pipeline_flow.hpp):
//   pipeline.flow("name").from(source).with(other).query(fn, "v1").into(table, ReplaceWhere{p});
//
// Every step returns a new builder type; into() checks the combination at
// compile time (R-TABLE-1, R-USING-9, R-TABLE-4, R-WHERE-9) and hands the
// one runner (runtime/runner.hpp) to the pipeline, which checks names at
// run time (the Catalog's codes). What a policy allows (sharing its target,
// imports, any row type) comes from the flow contract (flows/contract.hpp).
// Stages run in the order declared; the expectations run inside the flow
// policy, after every stage.
#pragma once

#include <flowlib/checkpoint/store.hpp>
#include <flowlib/error.hpp>
#include <flowlib/expect.hpp>
#include <flowlib/flows/replace_where.hpp>
#include <flowlib/flows/where/detail/pipeline_flow.hpp>
#include <flowlib/quarantine.hpp>
#include <flowlib/runtime/runner.hpp>
#include <flowlib/runtime/stages.hpp>
#include <flowlib/sink/foreach_batch.hpp>
#include <flowlib/source/position.hpp>
#include <flowlib/source/table.hpp>
#include <flowlib/table.hpp>

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

namespace flowlib::detail {

/// Checks that a table a pipeline writes keeps a change journal.
template <class Table>
consteval bool journaled_target() {
  static_assert(requires(typename Table::store_type& s) {
                  s.begin_journal();
                  s.commit_journal();
                  s.rollback_journal();
                },
                "flowlib pipeline: the table's storage must keep a change journal (the "
                "pipeline undoes a failed micro-batch with it); MemoryStorage does.");
  return true;
}

/// What the builder needs of the pipeline (implemented by Pipeline).
class flow_registry {
 public:
  virtual void add_flow(std::unique_ptr<flow_runner> runner, const void* target,
                        std::string_view target_name, bool managed, std::string_view kind,
                        bool exclusive) = 0;
  virtual void keep_alive(std::shared_ptr<void> object) = 0;

 protected:
  ~flow_registry() = default;
};

template <class T>
struct is_table_source : std::false_type {};
template <class T>
struct is_table_source<TableSource<T>> : std::true_type {};

/// Whether a flow policy takes batches of Row into Table (the flow
/// contract's rule 2).
template <class Policy, class Table, class Row, class Checks>
constexpr bool policy_takes() {
  return requires(Policy& p, Table& t, std::vector<Row>& rows, const Checks& c) {
    { p.apply_batch(t, rows, c, batch_info{}) } -> std::same_as<BatchStats>;
  };
}

/// The contract's options (flows/contract.hpp, rule 5).
template <class Policy>
inline constexpr bool shares_target_v = requires { requires Policy::shares_target; };
template <class Policy>
inline constexpr bool imports_streams_v = requires { requires Policy::imports_streams; };
template <class Policy>
inline constexpr bool maps_by_name_v = requires { requires Policy::maps_by_name; };

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
    static_assert(journaled_target<Table>());
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
    // The flow's source counts its updates; its policy runs the query over
    // the real sources (flows/where/detail/pipeline_flow.hpp).
    std::string names;
    std::apply([&](const auto*... src) { ((names += (names.empty() ? "" : "', '") + std::string(src->name())), ...); },
               sources_);
    auto shared = std::make_shared<replace_where_shared>(std::move(flow));
    auto updates = std::make_shared<replace_where_updates>(shared, std::move(names));
    using Policy = replace_where_policy<Query, Sources...>;
    using R = typed_flow_runner<replace_where_updates, Table, Policy, NoExpectations>;
    auto runner = std::make_unique<R>(name_, *updates, &table, Policy(shared, std::move(query_), sources_),
                                      NoExpectations{}, std::tuple<>{}, nullptr);
    p_->keep_alive(std::move(updates));
    p_->add_flow(std::move(runner), &table, table.name(), is_managed_table_v<Table>, Policy::kind,
                 /*exclusive=*/true);
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


template <class Source, bool Import, class Checks, class... Stages>
class flow_builder {
 public:
  using row_type = typename Source::row_type;

  flow_builder(flow_registry& p, std::string name, Source* source, const void* source_table,
               Checks checks, std::tuple<Stages...> stages, std::size_t limit,
               const checkpoint_store* import_from, std::string import_flow)
      : p_(&p),
        name_(std::move(name)),
        source_(source),
        source_table_(source_table),
        checks_(std::move(checks)),
        stages_(std::move(stages)),
        limit_(limit),
        import_from_(import_from),
        import_flow_(std::move(import_flow)) {}

  /// Adds an operator stage (DedupWithinWatermark, ...), owned by the pipeline.
  template <class Op>
  auto through(Op op) && {
    static_assert(std::is_same_v<typename Op::row_type, row_type>,
                  "flowlib pipeline: an operator's row type must be the rows of the stage "
                  "before it (the source's row type).");
    return std::move(*this).template with_stage<operator_stage<Op>>(operator_stage<Op>{std::move(op), {}});
  }

  /// Adds a quarantine stage: rows violating one of `checks` (each made with
  /// expect_or_quarantine) go to `table`, a table of Quarantined<Row>.
  template <class QTable, class... P>
  auto quarantine(QTable& table, Expectations<P...> checks) && {
    static_assert(std::is_same_v<typename QTable::row_type, Quarantined<row_type>>,
                  "flowlib pipeline: a quarantine table holds flowlib::Quarantined<Row> rows, "
                  "Row being the flow's row type at this stage.");
    static_assert(sizeof...(P) > 0, "flowlib pipeline: quarantine() needs at least one expectation.");
    checks.for_each([&](const auto& e) {
      if (e.action != on_violation::quarantine) {
        throw error(errc::invalid_argument, name_, e.name, "",
                    "an expectation of a quarantine stage must be made with "
                    "expect_or_quarantine(); put warn/drop/fail expectations in expect()");
      }
    });
    using S = quarantine_stage<row_type, QTable, P...>;
    return std::move(*this).template with_stage<S>(S{&table, std::move(checks), {}});
  }

  /// The flow's expectations, given to the flow policy (R-EXPECT-1).
  template <class... P>
  auto expect(Expectations<P...> checks) && {
    static_assert(Checks::size == 0, "flowlib pipeline: expect() is given once per flow; put "
                                     "every expectation in one flowlib::expectations(...).");
    return flow_builder<Source, Import, Expectations<P...>, Stages...>(
        *p_, std::move(name_), source_, source_table_, std::move(checks), std::move(stages_),
        limit_, import_from_, std::move(import_flow_));
  }

  /// At most `n` rows per micro-batch (0: the pipeline's default).
  flow_builder max_rows_per_batch(std::size_t n) && {
    limit_ = n;
    return std::move(*this);
  }

  /// IMPORT CHECKPOINT (R-TABLE-4): on its first update the flow copies the
  /// checkpoint of the standalone stream `stream` (a flowlib::Stream's
  /// checkpoint) and resumes from it. Append flows only.
  auto import_checkpoint(const checkpoint_store& checkpoint, std::string stream) && {
    return flow_builder<Source, true, Checks, Stages...>(
        *p_, std::move(name_), source_, source_table_, std::move(checks_), std::move(stages_),
        limit_, &checkpoint, std::move(stream));
  }

  /// REPLACE WHERE: one more source, read as a table (the query's next span).
  template <class S>
  auto with(const S& source) && {
    return std::move(*this).replace_where().with(source);
  }
  /// REPLACE WHERE: the query over the sources, and its version
  /// (docs/replace-where.md, R-WHERE-10).
  template <class Fn>
  auto query(Fn fn, std::string version = {}) && {
    return std::move(*this).replace_where().query(std::move(fn), std::move(version));
  }

  /// Ends the declaration: the flow policy writes `table`.
  template <class Table, class Policy>
  void into(Table& table, Policy policy) && {
    static_assert(!std::is_same_v<Policy, ReplaceWhere<>>,
                  "flowlib pipeline: a REPLACE WHERE flow needs its query: "
                  ".from(source).with(...).query(fn, \"v1\").into(table, flow).");
    static_assert(!is_managed_table_v<Table> || maps_by_name_v<Policy>,
                  "MANAGED_TABLE_DOES_NOT_SUPPORT_CDC: a flowlib::ManagedTable accepts only append "
                  "flows (INSERT BY NAME); write this flow into a flowlib::StreamingTable "
                  "(R-TABLE-1).");
    static_assert(!Import || imports_streams_v<Policy>,
                  "flowlib pipeline: IMPORT CHECKPOINT is allowed only on append flows "
                  "(R-TABLE-4); remove import_checkpoint() or use flowlib::Append.");
    static_assert(policy_takes<Policy, Table, row_type, Checks>(),
                  "flowlib pipeline: the flow policy does not take the source's rows: REPLACE "
                  "USING takes its Key/Seq row type, AUTO CDC its change type, AUTO CDC FROM "
                  "SNAPSHOT flowlib::Snapshot<Row, Version> records.");
    static_assert(journaled_target<Table>());
    static_assert(!std::is_same_v<typename Table::row_type, void>);
    using R = typed_flow_runner<Source, Table, Policy, Checks, Stages...>;
    auto runner = std::make_unique<R>(std::move(name_), *source_, &table, std::move(policy),
                                      std::move(checks_), std::move(stages_), source_table_);
    runner->max_rows_per_batch = limit_;
    runner->import_from = import_from_;
    runner->import_flow = std::move(import_flow_);
    p_->add_flow(std::move(runner), &table, table.name(), is_managed_table_v<Table>, Policy::kind,
                 !shares_target_v<Policy>);
  }

  /// Ends the declaration: each batch goes to user code (R-EXACT-4).
  template <class Row>
  void into(ForeachBatch<Row> sink) && {
    static_assert(std::is_same_v<Row, row_type>,
                  "flowlib pipeline: ForeachBatch<Row>: Row must be the flow's row type.");
    static_assert(!Import, "flowlib pipeline: IMPORT CHECKPOINT is allowed only on append flows "
                           "(R-TABLE-4).");
    using R = typed_flow_runner<Source, no_table, ForeachBatch<Row>, Checks, Stages...>;
    auto runner = std::make_unique<R>(std::move(name_), *source_, nullptr, std::move(sink),
                                      std::move(checks_), std::move(stages_), source_table_);
    runner->max_rows_per_batch = limit_;
    p_->add_flow(std::move(runner), nullptr, "", false, ForeachBatch<Row>::kind, false);
  }

 private:
  // The REPLACE WHERE declaration continues from here (R-WHERE-9: no
  // expectations, no stages).
  auto replace_where() && {
    static_assert(Checks::size == 0,
                  "flowlib pipeline: a REPLACE WHERE flow takes no expectations (R-WHERE-9); "
                  "check the rows in the query instead.");
    static_assert(sizeof...(Stages) == 0 && !Import,
                  "flowlib pipeline: a REPLACE WHERE flow reads its sources as tables: no "
                  "operators, quarantine stages or IMPORT CHECKPOINT.");
    return replace_where_builder<Source>(*p_, std::move(name_), std::tuple<const Source*>(source_));
  }

  template <class S>
  auto with_stage(S stage) && {
    return flow_builder<Source, Import, Checks, Stages..., S>(
        *p_, std::move(name_), source_, source_table_, std::move(checks_),
        std::tuple_cat(std::move(stages_), std::tuple<S>(std::move(stage))), limit_,
        import_from_, std::move(import_flow_));
  }

  flow_registry* p_;
  std::string name_;
  Source* source_;
  const void* source_table_;
  Checks checks_;
  std::tuple<Stages...> stages_;
  std::size_t limit_;
  const checkpoint_store* import_from_;
  std::string import_flow_;
};

/// pipeline.flow(name): choose the source.
class flow_start {
 public:
  flow_start(flow_registry& p, std::string name) : p_(&p), name_(std::move(name)) {}

  /// The flow reads `source` (a source the program owns and keeps alive, or
  /// a temporary such as TableSource{table}, which the pipeline keeps).
  template <class S>
  auto from(S&& source) && {
    using Source = std::remove_cvref_t<S>;
    static_assert(flowlib::source<Source>,
                  "flowlib pipeline: a flow reads a stream, a source with positions "
                  "(MemorySource, TableSource, ...; R-USING-9); to apply a flow to a container "
                  "of rows, call the flow's apply() directly.");
    Source* ptr;
    if constexpr (std::is_lvalue_reference_v<S>) {
      ptr = &source;
    } else {
      auto owned = std::make_shared<Source>(std::forward<S>(source));
      ptr = owned.get();
      p_->keep_alive(std::move(owned));
    }
    const void* table = nullptr;
    if constexpr (is_table_source<Source>::value) table = &ptr->table();
    return flow_builder<Source, false, NoExpectations>(*p_, std::move(name_), ptr, table,
                                                       NoExpectations{}, std::tuple<>{}, 0,
                                                       nullptr, {});
  }

 private:
  flow_registry* p_;
  std::string name_;
};

}  // namespace flowlib::detail
