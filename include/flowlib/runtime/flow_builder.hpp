// flowlib/runtime/flow_builder.hpp
//
// The typed declaration of one pipeline flow:
//
//   pipeline.flow("name")                 // -> flow_start
//       .from(source)                     // a flowlib::source: MemorySource, TableSource, ...
//       .from(other)                      // more sources of the same row type (R-STAGE-4)
//       .map(fn) / .map(fn, quarantine)   // stages, any number, in order (docs/stages.md):
//       .filter(pred)                     //   R-STAGE-1..7; each may change the row type
//       .flat_map(fn) / .view(adaptor)
//       .lookup(dim, key, combine)        //   a stream-static join (R-STAGE-6)
//       .through(operator)                //   operators (DedupWithinWatermark)
//       .quarantine(table, expectations)  //   quarantine stages
//       .expect(expectations)             // at most once: given to the flow policy's apply()
//       .max_rows_per_batch(n)            // optional per-flow limit
//       .import_checkpoint(ckpt, "stream")// append flows only (R-TABLE-4)
//       .into(table, policy);             // or .into(ForeachBatch<Row>{...})
//
// REPLACE WHERE reads whole tables instead (flows/where/detail/pipeline_flow.hpp):
//   pipeline.flow("name").from(source).with(other).query(fn, "v1").into(table, ReplaceWhere{p});
//
// Every step returns a new builder type whose row_type is the rows at that
// point (the last stage's output); each stage checks at compile time that
// it takes those rows, and into() checks the combination (R-TABLE-1,
// R-USING-9, R-TABLE-4, R-WHERE-9, a durable table's schema) and hands the
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
#include <flowlib/runtime/lookup.hpp>
#include <flowlib/runtime/runner.hpp>
#include <flowlib/runtime/stages.hpp>
#include <flowlib/schema.hpp>
#include <flowlib/sink/foreach_batch.hpp>
#include <flowlib/source/position.hpp>
#include <flowlib/source/table.hpp>
#include <flowlib/source/union.hpp>
#include <flowlib/stage.hpp>
#include <flowlib/table.hpp>

#include <cstddef>
#include <memory>
#include <optional>
#include <ranges>
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
                                      NoExpectations{}, std::tuple<>{});
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


/// Whether a table's storage writes through to a database (SqliteStorage).
template <class Table>
constexpr bool durable_table() {
  if constexpr (requires { Table::store_type::durable; }) return Table::store_type::durable; else return false;
}

/// Whether R is an input range (std or range-v3): what flat_map's function
/// returns.
template <class R>
concept any_input_range = std::ranges::input_range<R> || ranges::input_range<R>;

template <class Source, bool Import, class Checks, class... Stages>
class flow_builder {
 public:
  /// The rows at this point of the declaration: the last stage's output,
  /// or the source's rows.
  using row_type = stages_output_t<typename Source::row_type, Stages...>;

  flow_builder(flow_registry& p, std::string name, Source* source, Checks checks,
               std::tuple<Stages...> stages, std::size_t limit, const checkpoint_store* import_from,
               std::string import_flow)
      : p_(&p),
        name_(std::move(name)),
        source_(source),
        checks_(std::move(checks)),
        stages_(std::move(stages)),
        limit_(limit),
        import_from_(import_from),
        import_flow_(std::move(import_flow)) {}

  /// One more source of the same row type (R-STAGE-4): the flow reads the
  /// union of its sources, each one's positions recorded in the checkpoint.
  /// Sources come before the stages.
  template <class S>
  auto from(S&& source) && {
    using More = std::remove_cvref_t<S>;
    static_assert(flowlib::source<More>,
                  "flowlib pipeline: from() takes a source with positions (MemorySource, "
                  "TableSource, ...).");
    static_assert(sizeof...(Stages) == 0 && Checks::size == 0 && !Import,
                  "flowlib pipeline: give every source (.from(a).from(b)) before the stages, "
                  "expectations and import_checkpoint().");
    static_assert(std::is_same_v<typename More::row_type, typename Source::row_type>,
                  "flowlib pipeline: the sources of one flow must have the same row type; map each "
                  "source's rows in a flow of its own into one table, then read that table.");
    const More* more = keep<More>(std::forward<S>(source));
    auto sources = [&] {
      if constexpr (requires { source_->sources(); }) {
        return std::tuple_cat(source_->sources(), std::tuple<const More*>(more));
      } else {
        return std::tuple<const Source*, const More*>(source_, more);
      }
    }();
    using U = decltype(std::apply([](const auto*... s) { return UnionSource(*s...); }, sources));
    U* u = keep<U>(U(sources));
    return flow_builder<U, false, Checks>(*p_, std::move(name_), u, std::move(checks_), std::tuple<>{},
                                          limit_, nullptr, {});
  }

  /// map(fn): each row becomes fn(row); the row type may change
  /// (R-STAGE-1). If fn throws, the batch fails and is retried from the
  /// same positions.
  template <class Fn>
  auto map(Fn fn) && {
    static_assert(std::is_invocable_v<Fn&, row_type&&>,
                  "flowlib pipeline: map(fn): fn must take the rows of the stage before it (the "
                  "source's rows, or the previous stage's output) as Row, const Row& or Row&&.");
    using Out = std::invoke_result_t<Fn&, row_type&&>;
    static_assert(!std::is_void_v<Out>, "flowlib pipeline: map(fn): fn must return the new row; to "
                                        "remove rows use filter(), to emit several use flat_map().");
    using S = map_stage<row_type, Fn, void>;
    return std::move(*this).template with_stage<S>(S{std::move(fn), {}, {}});
  }
  /// map(fn, quarantine): as map(fn), but a row fn rejects by throwing
  /// flowlib::row_rejected goes to `quarantine` (a table of Quarantined<Row>)
  /// with the exception's message as its reason; the batch goes on
  /// (R-STAGE-5). fn takes the row as const Row&.
  template <class Fn, class QTable>
  auto map(Fn fn, QTable& quarantine) && {
    static_assert(std::is_invocable_v<Fn&, const row_type&>,
                  "flowlib pipeline: map(fn, quarantine): fn must take the row as const Row& (or "
                  "by value), so that a rejected row can be kept whole in the quarantine table.");
    static_assert(!std::is_void_v<std::invoke_result_t<Fn&, const row_type&>>,
                  "flowlib pipeline: map(fn, quarantine): fn must return the new row.");
    check_quarantine_table<QTable>();
    using S = map_stage<row_type, Fn, QTable>;
    return std::move(*this).template with_stage<S>(S{std::move(fn), {&quarantine, {}}, {}});
  }

  /// filter(pred): keeps the rows for which pred(row) is true (R-STAGE-2);
  /// the others are counted as filtered, not dropped.
  template <class Pred>
  auto filter(Pred pred) && {
    static_assert(std::is_invocable_r_v<bool, Pred&, const row_type&>,
                  "flowlib pipeline: filter(pred): pred must take the rows of the stage before it "
                  "as const Row& and return bool.");
    using S = filter_stage<row_type, Pred>;
    return std::move(*this).template with_stage<S>(S{std::move(pred)});
  }

  /// flat_map(fn): each row becomes the rows of the range fn returns (a
  /// container, a std or range-v3 view), zero or more (R-STAGE-3).
  template <class Fn>
  auto flat_map(Fn fn) && {
    static_assert(std::is_invocable_v<Fn&, row_type&&>,
                  "flowlib pipeline: flat_map(fn): fn must take the rows of the stage before it as "
                  "Row, const Row& or Row&&.");
    static_assert(any_input_range<std::invoke_result_t<Fn&, row_type&&>>,
                  "flowlib pipeline: flat_map(fn): fn must return a range of rows (a std::vector, "
                  "a std or range-v3 view); for one row out use map().");
    using S = flat_map_stage<row_type, Fn, void>;
    return std::move(*this).template with_stage<S>(S{std::move(fn), {}, {}});
  }
  /// flat_map(fn, quarantine): as flat_map(fn), with rejected rows
  /// (flowlib::row_rejected) sent to `quarantine` (R-STAGE-5).
  template <class Fn, class QTable>
  auto flat_map(Fn fn, QTable& quarantine) && {
    static_assert(std::is_invocable_v<Fn&, const row_type&>,
                  "flowlib pipeline: flat_map(fn, quarantine): fn must take the row as const Row& "
                  "(or by value), so that a rejected row can be kept whole.");
    static_assert(any_input_range<std::invoke_result_t<Fn&, const row_type&>>,
                  "flowlib pipeline: flat_map(fn, quarantine): fn must return a range of rows.");
    check_quarantine_table<QTable>();
    using S = flat_map_stage<row_type, Fn, QTable>;
    return std::move(*this).template with_stage<S>(S{std::move(fn), {&quarantine, {}}, {}});
  }

  /// view(adaptor): the batch piped through a range adaptor, std::views or
  /// range-v3's views (`views::filter(p) | views::transform(f)`), and
  /// collected (R-STAGE-3).
  template <class Adaptor>
  auto view(Adaptor adaptor) && {
    static_assert(requires(std::vector<row_type>& v, Adaptor& a) { v | a; },
                  "flowlib pipeline: view(adaptor): the adaptor must apply to a std::vector of the "
                  "rows of the stage before it (a std::views or range-v3 views adaptor).");
    using S = view_stage<row_type, Adaptor>;
    return std::move(*this).template with_stage<S>(S{std::move(adaptor), {}});
  }

  /// lookup(table, key, combine[, join]): enriches each row from the
  /// current row of `table` (a dimension of the pipeline) with the same key
  /// (R-STAGE-6). `key` is one callable applying to both rows (a generic
  /// lambda) or flowlib::join_on(row_key, dim_key). Inner (default): a row
  /// without a match is removed and counted; combine(row, const Dim&).
  /// Left (flowlib::left_join): combine(row, const Dim*) or
  /// combine(row, std::optional<Dim>).
  template <class DimTable, class Key, class Combine>
  auto lookup(DimTable& table, Key key, Combine combine, inner_join_t = inner_join) && {
    return std::move(*this).template lookup_as<join::inner>(table, std::move(key), std::move(combine));
  }
  template <class DimTable, class Key, class Combine>
  auto lookup(DimTable& table, Key key, Combine combine, left_join_t) && {
    return std::move(*this).template lookup_as<join::left>(table, std::move(key), std::move(combine));
  }

  /// Adds an operator stage (DedupWithinWatermark, ...), owned by the pipeline.
  template <class Op>
  auto through(Op op) && {
    static_assert(std::is_same_v<typename Op::row_type, row_type>,
                  "flowlib pipeline: an operator's row type must be the rows of the stage "
                  "before it (the source's rows, or the previous stage's output).");
    return std::move(*this).template with_stage<operator_stage<Op>>(operator_stage<Op>{std::move(op), {}});
  }

  /// Adds a quarantine stage: rows violating one of `checks` (each made with
  /// expect_or_quarantine) go to `table`, a table of Quarantined<Row>.
  template <class QTable, class... P>
  auto quarantine(QTable& table, Expectations<P...> checks) && {
    check_quarantine_table<QTable>();
    static_assert(sizeof...(P) > 0, "flowlib pipeline: quarantine() needs at least one expectation.");
    checks.for_each([&](const auto& e) {
      if (e.action != on_violation::quarantine) {
        throw error(errc::invalid_argument, name_, e.name, "",
                    "an expectation of a quarantine stage must be made with "
                    "expect_or_quarantine(); put warn/drop/fail expectations in expect()");
      }
    });
    using S = quarantine_stage<row_type, QTable, P...>;
    return std::move(*this).template with_stage<S>(S{{&table, {}}, std::move(checks)});
  }

  /// The flow's expectations, given to the flow policy (R-EXPECT-1).
  template <class... P>
  auto expect(Expectations<P...> checks) && {
    static_assert(Checks::size == 0, "flowlib pipeline: expect() is given once per flow; put "
                                     "every expectation in one flowlib::expectations(...).");
    return flow_builder<Source, Import, Expectations<P...>, Stages...>(
        *p_, std::move(name_), source_, std::move(checks), std::move(stages_), limit_,
        import_from_, std::move(import_flow_));
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
    return flow_builder<Source, true, Checks, Stages...>(*p_, std::move(name_), source_,
                                                         std::move(checks_), std::move(stages_),
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
    static_assert(!durable_table<Table>() || has_schema<typename Table::row_type>,
                  "flowlib pipeline: a durable table's row type needs FLOWLIB_SCHEMA(Row, columns...) "
                  "(its columns are stored by name); declare it after the struct, or map() into a "
                  "row type that has one.");
    static_assert(policy_takes<Policy, Table, row_type, Checks>(),
                  "flowlib pipeline: the flow policy does not take the rows of the flow's last stage "
                  "(or of its source, without stages): REPLACE USING takes its Key/Seq row type, "
                  "AUTO CDC its change type, AUTO CDC FROM SNAPSHOT flowlib::Snapshot<Row, Version> "
                  "records, Append rows it maps by name; add or fix a map() before into().");
    static_assert(journaled_target<Table>());
    static_assert(!std::is_same_v<typename Table::row_type, void>);
    using R = typed_flow_runner<Source, Table, Policy, Checks, Stages...>;
    auto runner = std::make_unique<R>(std::move(name_), *source_, &table, std::move(policy),
                                      std::move(checks_), std::move(stages_));
    runner->max_rows_per_batch = limit_;
    runner->import_from = import_from_;
    runner->import_flow = std::move(import_flow_);
    p_->add_flow(std::move(runner), &table, table.name(), is_managed_table_v<Table>, Policy::kind,
                 !shares_target_v<Policy>);
  }

  /// Ends the declaration: each batch goes to a sink (flowlib::sink:
  /// ForeachBatch, user code with a stable batch id, R-EXACT-4; KafkaSink,
  /// a topic, R-SINK-1).
  template <sink Sink>
  void into(Sink sink) && {
    static_assert(std::is_same_v<typename Sink::row_type, row_type>,
                  "flowlib pipeline: a sink's Row (ForeachBatch<Row>, KafkaSink<Row>) must be the "
                  "rows of the flow's last stage (or of its source, without stages).");
    static_assert(!Import, "flowlib pipeline: IMPORT CHECKPOINT is allowed only on append flows "
                           "(R-TABLE-4).");
    using R = typed_flow_runner<Source, no_table, Sink, Checks, Stages...>;
    auto runner = std::make_unique<R>(std::move(name_), *source_, nullptr, std::move(sink),
                                      std::move(checks_), std::move(stages_));
    runner->max_rows_per_batch = limit_;
    p_->add_flow(std::move(runner), nullptr, "", false, Sink::kind, false);
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
                  "stages, operators, quarantine stages or IMPORT CHECKPOINT; shape the rows in "
                  "the query.");
    return replace_where_builder<Source>(*p_, std::move(name_), std::tuple<const Source*>(source_));
  }

  template <class QTable>
  static constexpr void check_quarantine_table() {
    static_assert(std::is_same_v<typename QTable::row_type, Quarantined<row_type>>,
                  "flowlib pipeline: a quarantine table holds flowlib::Quarantined<Row> rows, "
                  "Row being the flow's row type at this stage (the input of the stage that "
                  "quarantines).");
  }

  template <join Kind, class DimTable, class Key, class Combine>
  auto lookup_as(DimTable& table, Key key, Combine combine) && {
    using Dim = typename DimTable::row_type;
    static_assert(requires(const lookup_keys<Key>& k, const row_type& r) { k.row_key(r); },
                  "flowlib pipeline: lookup(table, key, combine): key must take the flow's rows "
                  "(const Row&); give flowlib::join_on(row_key, dim_key) when the two rows name "
                  "the key differently.");
    static_assert(requires(const lookup_keys<Key>& k, const Dim& d) { k.dim_key(d); },
                  "flowlib pipeline: lookup(table, key, combine): key must also take the "
                  "dimension's rows: use a generic lambda ([](const auto& r) { return r.id; }) or "
                  "flowlib::join_on(&Row::customer_id, &Dim::id).");
    if constexpr (requires(const lookup_keys<Key>& k, const row_type& r, const Dim& d) {
                    k.row_key(r);
                    k.dim_key(d);
                  }) {
      static_assert(std::is_same_v<lookup_row_key_t<row_type, Dim, Key>, lookup_dim_key_t<row_type, Dim, Key>>,
                    "flowlib pipeline: lookup(): the row's key and the dimension's key must have "
                    "the same type; convert one in the key function.");
      if constexpr (Kind == join::inner) {
        static_assert(std::is_invocable_v<Combine&, row_type&&, const Dim&>,
                      "flowlib pipeline: lookup(..., combine): an inner lookup calls "
                      "combine(Row&&, const Dim&) and takes what it returns as the new row.");
      } else {
        static_assert(std::is_invocable_v<Combine&, row_type&&, const Dim*> ||
                          std::is_invocable_v<Combine&, row_type&&, std::optional<Dim>>,
                      "flowlib pipeline: lookup(..., combine, flowlib::left_join): a left lookup "
                      "calls combine(Row&&, const Dim*) or combine(Row&&, std::optional<Dim>), "
                      "null or empty when the dimension has no row of the key.");
      }
    }
    using S = lookup_stage<row_type, DimTable, Key, Combine, Kind>;
    return std::move(*this).template with_stage<S>(S{&table, {std::move(key)}, std::move(combine), {}, {}, {}});
  }

  // Keeps a temporary alive for the pipeline's lifetime; an lvalue is the
  // program's to keep.
  template <class T, class S>
  auto* keep(S&& s) {
    if constexpr (std::is_lvalue_reference_v<S>) {
      return &s;
    } else {
      auto owned = std::make_shared<T>(std::forward<S>(s));
      T* ptr = owned.get();
      p_->keep_alive(std::move(owned));
      return ptr;
    }
  }

  template <class S>
  auto with_stage(S stage) && {
    return flow_builder<Source, Import, Checks, Stages..., S>(
        *p_, std::move(name_), source_, std::move(checks_),
        std::tuple_cat(std::move(stages_), std::tuple<S>(std::move(stage))), limit_,
        import_from_, std::move(import_flow_));
  }

  flow_registry* p_;
  std::string name_;
  Source* source_;
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
    return flow_builder<Source, false, NoExpectations>(*p_, std::move(name_), ptr, NoExpectations{},
                                                       std::tuple<>{}, 0, nullptr, {});
  }

 private:
  flow_registry* p_;
  std::string name_;
};

}  // namespace flowlib::detail
