// flowlib/detail/flow_builder.hpp
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
// REPLACE WHERE reads whole tables instead (detail/replace_where_runner.hpp):
//   pipeline.flow("name").from(source).with(other).query(fn).into(table, ReplaceWhere{p});
//
// Every step returns a new builder type; into() checks the combination at
// compile time (R-TABLE-1, R-USING-9, R-TABLE-4) and hands a typed runner to
// the pipeline, which checks names at run time (the Catalog's codes).
// Stages run in the order declared; the expectations run inside the flow
// policy, after every stage.
#pragma once

#include <flowlib/checkpoint/store.hpp>
#include <flowlib/detail/pipeline_flow.hpp>
#include <flowlib/expect.hpp>
#include <flowlib/quarantine.hpp>
#include <flowlib/sink/foreach_batch.hpp>
#include <flowlib/source/position.hpp>
#include <flowlib/source/table.hpp>
#include <flowlib/table.hpp>

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

namespace flowlib::detail {

template <class... Sources>
class replace_where_builder;  // detail/replace_where_runner.hpp, included at the end

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

/// Whether a flow policy takes rows of type Row from its source.
template <class Policy, class Row>
constexpr bool policy_takes() {
  if constexpr (requires { typename Policy::change_type; }) {
    return std::is_same_v<Row, typename Policy::change_type>;  // AUTO CDC: the change feed
  } else if constexpr (requires { typename Policy::version_type; }) {
    // AUTO CDC FROM SNAPSHOT: each record is a whole snapshot.
    return std::is_same_v<Row, Snapshot<typename Policy::row_type, typename Policy::version_type>>;
  } else if constexpr (Policy::kind == append_flow_kind) {
    return true;  // by column name, checked by Append itself
  } else {
    return std::is_same_v<Row, typename Policy::row_type>;
  }
}

template <class Policy>
constexpr bool exclusive_policy() {
  return Policy::kind != append_flow_kind;
}

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
    static_assert(Policy::kind != std::string_view("REPLACE WHERE"),
                  "flowlib pipeline: a REPLACE WHERE flow needs its query: "
                  ".from(source).with(...).query(fn).into(table, flow).");
    static_assert(!is_managed_table_v<Table> || Policy::kind == append_flow_kind,
                  "MANAGED_TABLE_DOES_NOT_SUPPORT_CDC: a flowlib::ManagedTable accepts only append "
                  "flows (INSERT BY NAME); write this flow into a flowlib::StreamingTable "
                  "(R-TABLE-1).");
    static_assert(!Import || Policy::kind == append_flow_kind,
                  "flowlib pipeline: IMPORT CHECKPOINT is allowed only on append flows "
                  "(R-TABLE-4); remove import_checkpoint() or use flowlib::Append.");
    static_assert(policy_takes<Policy, row_type>(),
                  "flowlib pipeline: the flow policy does not take the source's rows: REPLACE "
                  "USING takes its Key/Seq row type, AUTO CDC its change type, AUTO CDC FROM "
                  "SNAPSHOT flowlib::Snapshot<Row, Version> records.");
    static_assert(requires(typename Table::store_type& s) {
                    s.begin_journal();
                    s.commit_journal();
                    s.rollback_journal();
                  },
                  "flowlib pipeline: the table's storage must keep a change journal (the "
                  "pipeline undoes a failed micro-batch with it); MemoryStorage does.");
    static_assert(!std::is_same_v<typename Table::row_type, void>);
    using R = typed_flow_runner<Source, Table, Policy, Checks, Stages...>;
    auto runner = std::make_unique<R>(std::move(name_), *source_, &table, std::move(policy),
                                      std::move(checks_), std::move(stages_), source_table_);
    runner->max_rows_per_batch = limit_;
    runner->import_from = import_from_;
    runner->import_flow = std::move(import_flow_);
    p_->add_flow(std::move(runner), &table, table.name(), is_managed_table_v<Table>, Policy::kind,
                 exclusive_policy<Policy>());
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

// The REPLACE WHERE builder needs flow_registry (above) and is used by
// flow_builder's templates: included last.
#include <flowlib/detail/replace_where_runner.hpp>
