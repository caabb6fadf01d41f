// flowlib/flows/replace_where.hpp
//
// ReplaceWhere: REPLACE WHERE (docs/replace-where.md, docs/semantics.md
// R-WHERE-1..10). Each update deletes every target row that satisfies the
// predicate P, runs the query over the sources with P pushed down to the
// sources that have P's columns, and inserts the result rows that satisfy P
// (R-WHERE-1, R-WHERE-2); rows outside P are untouched.
//
//   namespace w = flowlib::where;
//   flowlib::ReplaceWhere flow{"events_agg", w::col("date") >= w::current_date() - w::days(3)};
//   flowlib::BatchStats s = flow.apply(target, w::context{now}, query, events_raw);
//   flow.apply_override(target, w::col("date").between(w::date(2026, 1, 1), w::date(2026, 3, 31)),
//                       w::context{now}, query, events_raw);            // R-WHERE-4
//
// `query` is called as query(std::span<const S1>, std::span<const S2>, ...)
// with the rows of each source (already filtered by P where the source has
// P's columns) and returns a std::vector of the target's rows. Sources meet
// flowlib::where_source (flows/where/sources.hpp; MemorySource does).
//
// Incremental updates (R-WHERE-7, flows/where/detail/planner.hpp decides): when P
// selects one range of one column (the "slice column", where::expr::window)
// and the conditions hold, only the slices whose source rows changed since
// the previous update (the sources' changed_values()) are deleted,
// recomputed and inserted. A source that indexes the slice column
// (slice_indexed_source: MemorySource, by locate()) gives those slices'
// rows without a scan, so such an update costs what the changed slices
// hold; a recompute reads its window through an index that exists when the
// window holds at most half of the source's rows. last_plan() says what an
// update did and why (R-WHERE-8); a pipeline writes it as a
// planning_information event.
// The target keeps a side index from the slice column's value to row ids
// (flows/where/detail/slice_index.hpp), rebuilt from the table on restore.
//
// Direct inserts (R-WHERE-5): flowlib::dml_insert(table, rows) writes rows
// into the target behind the flow; the flow finds them at its next update
// by the table's size (its watermark) and indexes them. One in the update's
// window makes that update a recompute (EXTERNAL_CHANGE_IN_REPLACE_WINDOW).
//
// All-or-nothing: sources are read, the query run, the results checked and
// the rows to delete found first; the store is reserved; then the commit
// (erase + insert) cannot fail. On an error the target is as before.
//
// R-WHERE-9: the flow claims its table exclusively (no other flow writes a
// REPLACE WHERE target); a ManagedTable target does not compile; a target
// with expectations is refused (errc::invalid_target).
#pragma once

#include <flowlib/checkpoint/store.hpp>
#include <flowlib/detail/byte_codec.hpp>
#include <flowlib/detail/flow_checkpoint.hpp>
#include <flowlib/detail/target_binding.hpp>
#include <flowlib/error.hpp>
#include <flowlib/flows/where/detail/checkpoint.hpp>
#include <flowlib/flows/where/detail/planner.hpp>
#include <flowlib/flows/where/detail/read.hpp>
#include <flowlib/flows/where/detail/slice_index.hpp>
#include <flowlib/flows/where/plan.hpp>
#include <flowlib/flows/where/sources.hpp>
#include <flowlib/stats.hpp>
#include <flowlib/table.hpp>
#include <flowlib/where.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <ranges>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace flowlib {

/// @brief Options of a ReplaceWhere flow.
struct ReplaceWhereOptions {
  /// Incremental updates when the conditions hold (R-WHERE-7); false makes
  /// every update a complete recompute of the window (reported with no
  /// reason), e.g. to compare results.
  bool incremental = true;
  /// Identifies the query (any text: "v3", a commit id, a hash of the SQL
  /// it mirrors). A C++ callable cannot be compared, so this is how a
  /// restarted flow knows its query is the one that computed the rows in
  /// its window: change it whenever the query's results change. Recorded
  /// with `incremental` as the flow's definition; an update under another
  /// definition than the previous update's is a complete recompute
  /// (REPLACE_WHERE_DEFINITION_CHANGED, R-WHERE-10). The predicate is not
  /// part of it: a changed predicate is judged by its window, like a
  /// window the clock moved (R-WHERE-7, R-WHERE-8).
  /// Empty: the query is unversioned, and the first update after the flow
  /// takes over state it did not write (a restart, a retry after a failed
  /// commit) recomputes the window (REPLACE_WHERE_QUERY_NOT_VERSIONED). A
  /// pipeline also takes it as `.query(fn, version)`.
  std::string query_version{};
};

/// @brief What one REPLACE WHERE update did (R-WHERE-8).
struct ReplaceWherePlan {
  replace_where_technique technique = replace_where_technique::complete_recompute;
  /// Why the window was recomputed instead of updated incrementally; empty
  /// for an incremental update, for the first update of the flow (or the
  /// first after a full refresh) and when incremental updates are disabled.
  std::optional<replace_where_reason> reason;
  std::string predicate;          ///< the predicate the update ran with (to_string())
  bool override_predicate = false;  ///< it was an override (R-WHERE-4)
  /// Its window on the slice column under the update's clock, if it has one.
  std::optional<where::window> window;
  /// Incremental: the slices (slice-column values) reprocessed; every slice
  /// of the window when `all_slices`.
  std::size_t slices = 0;
  /// Incremental, but every slice of the window was reprocessed: a source
  /// without the slice column (a dimension) changed, or a source could not
  /// say which values changed.
  bool all_slices = false;
  /// Result rows not written because they do not satisfy the predicate
  /// (R-WHERE-2); also BatchStats::dropped_rows.
  std::uint64_t rows_outside_predicate = 0;
};

/// @brief Inserts `rows` into `table` directly (DML, R-WHERE-5), outside any
/// flow: a REPLACE WHERE flow writing the table keeps them until an update's
/// predicate covers them, and an update whose window holds one of them is a
/// complete recompute (EXTERNAL_CHANGE_IN_REPLACE_WINDOW). All or nothing.
/// On SqliteStorage the rows are written to the database at once, in a
/// transaction of their own, so they survive a restart; the table must be
/// attached already (its pipeline has run an update), and the call is
/// refused during a batch of that pipeline (errc::invalid_argument).
template <class Table, std::ranges::input_range R>
void dml_insert(Table& table, R&& rows) {
  using Row = typename Table::row_type;
  std::vector<Row> copy;
  for (auto&& r : rows) copy.push_back(Row(std::forward<decltype(r)>(r)));
  auto& store = table.store();
  if constexpr (requires { store.insert_durably(copy, table.name()); }) {
    store.insert_durably(copy, table.name());  // a durable store writes them through at once
  } else {
    store.reserve(copy.size());
    for (auto& r : copy) store.insert(std::move(r));
  }
}

/// @brief REPLACE WHERE P. See the header comment. `Pred` is the predicate's
/// type: a run-time flowlib::where::expr (the default, and the only one).
template <class Pred = where::expr>
class ReplaceWhere {
  static_assert(std::is_same_v<Pred, where::expr>,
                "flowlib::ReplaceWhere<Pred>: the predicate is a flowlib::where::expr "
                "(w::col(\"date\") >= w::current_date() - w::days(3)); leave Pred at its default.");

 public:
  using predicate_type = Pred;
  static constexpr std::string_view kind = "REPLACE WHERE";

  /// A flow named "replace_where" with predicate `p`.
  explicit ReplaceWhere(where::expr p, ReplaceWhereOptions options = {})
      : ReplaceWhere(std::string("replace_where"), std::move(p), options) {}
  /// A flow named `name` with predicate `p`.
  ReplaceWhere(std::string name, where::expr p, ReplaceWhereOptions options = {})
      : name_(std::move(name)), pred_(std::move(p)), options_(std::move(options)) {
    if (auto w = pred_.window(where::context{})) slice_column_ = w->column();
    query_id_ = options_.query_version.empty() ? detail::unversioned_query_id()
                                               : "version " + options_.query_version;
  }
  ReplaceWhere(ReplaceWhere&&) noexcept = default;
  ReplaceWhere& operator=(ReplaceWhere&&) noexcept = default;

  const std::string& name() const noexcept { return name_; }
  /// The defined predicate.
  const where::expr& predicate() const noexcept { return pred_; }
  const ReplaceWhereOptions& options() const noexcept { return options_; }
  /// The column the predicate selects a range of (incremental updates and
  /// the side index work on it), if it does.
  const std::optional<std::string>& slice_column() const noexcept { return slice_column_; }
  /// What the last successful update did.
  const ReplaceWherePlan& last_plan() const noexcept { return plan_; }
  /// Updates applied since the flow started on its table (or since the
  /// table's last full refresh).
  std::uint64_t updates() const noexcept { return state_.updates; }
  /// The flow's definition as recorded in its state (R-WHERE-10): its
  /// incremental option; the query's identity is query_id(). The predicate
  /// is not part of it: the state records the window each update
  /// processed, and the next update's window is compared with that one
  /// (R-WHERE-7), whether the clock moved it or the predicate changed.
  std::string definition() const { return detail::replace_where_definition(options_.incremental); }
  /// The query's identity as recorded in the flow's state: "version " and
  /// ReplaceWhereOptions::query_version, or, for an unversioned query,
  /// "unversioned " and a random token of this flow object, which no other
  /// object's matches (R-WHERE-10).
  const std::string& query_id() const noexcept { return query_id_; }

  /// One update with the defined predicate (R-WHERE-1..3, R-WHERE-7):
  /// incremental when possible, else a complete recompute of the window.
  template <class Table, class Query, where_source... Sources>
  BatchStats apply(Table& target, const where::context& ctx, Query&& query,
                   const Sources&... sources) {
    return update(target, ctx, nullptr, query, sources...);
  }

  /// One update with `override_predicate` instead of the defined one
  /// (R-WHERE-4): a complete recompute of what it selects; later updates
  /// use the defined predicate again.
  template <class Table, class Query, where_source... Sources>
  BatchStats apply_override(Table& target, const where::expr& override_predicate,
                            const where::context& ctx, Query&& query, const Sources&... sources) {
    return update(target, ctx, &override_predicate, query, sources...);
  }

  /// One update; `override_predicate` null for the defined predicate. For
  /// the pipeline runtime (and apply / apply_override).
  template <class Table, class Query, where_source... Sources>
  BatchStats update(Table& target, const where::context& ctx, const where::expr* override_predicate,
                    Query& query, const Sources&... sources) {
    static_assert(!is_managed_table_v<Table>,
                  "MANAGED_TABLE_DOES_NOT_SUPPORT_CDC: a flowlib::ManagedTable accepts only "
                  "append flows (INSERT BY NAME); write REPLACE WHERE into a "
                  "flowlib::StreamingTable instead (R-WHERE-9).");
    using Row = typename Table::row_type;
    static_assert(has_schema<Row>,
                  "flowlib::ReplaceWhere: the target row type needs FLOWLIB_SCHEMA(Row, ...): "
                  "the predicate names its columns.");
    static_assert(sizeof...(Sources) > 0, "flowlib::ReplaceWhere: give at least one source.");
    static_assert(std::is_invocable_v<Query&, std::span<const typename Sources::row_type>...>,
                  "flowlib::ReplaceWhere: the query must be callable as "
                  "query(std::span<const S1>, std::span<const S2>, ...), one span per source, "
                  "in the order the sources are given.");
    using Result = std::invoke_result_t<Query&, std::span<const typename Sources::row_type>...>;
    static_assert(std::ranges::input_range<Result> &&
                      std::constructible_from<Row, std::ranges::range_reference_t<Result>>,
                  "flowlib::ReplaceWhere: the query must return a range of the target's rows "
                  "(e.g. std::vector<TargetRow>).");
    static_assert(detail::row_store_with_ids<typename Table::store_type>,
                  "flowlib::ReplaceWhere: the target's storage must offer the for_each_row "
                  "hook (row ids), as MemoryStorage does.");
    if (target.expectation_count() != 0) {
      throw error(errc::invalid_target, name_, "", "",
                  "table '" + target.name() +
                      "' declares expectations; a REPLACE WHERE target takes none (R-WHERE-9): "
                      "check the query's rows before they reach it");
    }
    if (binding_.begin_apply(target, name_, "a flow keeps the state of exactly one target (R-WHERE-9)")) {
      // The table was emptied behind the flow: the next update is a first
      // update (R-WHERE-6).
      state_ = detail::replace_where_state{};
      indexed_ = false;
      external_values_.clear();
      external_unknown_ = false;
    }
    auto& store = target.store();
    if (!indexed_) rebuild_index(target);
    const where::expr& p = override_predicate != nullptr ? *override_predicate : pred_;

    // Rows inserted behind the flow (R-WHERE-5) join the index first, so a
    // recompute of their window deletes them too.
    adopt_external(target);
    const std::vector<where::value>& external = external_values_;

    ReplaceWherePlan plan;
    plan.predicate = p.to_string();
    plan.override_predicate = override_predicate != nullptr;
    std::optional<where::window> current;
    if (slice_column_) {
      if (auto w = p.window(ctx); w && w->column() == *slice_column_) current = std::move(w);
    }
    plan.window = current;

    detail::replace_where_facts facts;
    facts.incremental_enabled = options_.incremental;
    facts.has_previous = state_.has_previous;
    facts.definition_change = definition_change();
    facts.is_override = override_predicate != nullptr;
    facts.deterministic = p.deterministic();
    facts.previous_nondeterministic = state_.previous_nondeterministic;
    facts.pushable = (where::binds_to<typename Sources::row_type>(p) || ...);
    facts.current = current;
    facts.previous = state_.previous_window;
    facts.external_change_in_window =
        external_unknown_ || (current && std::any_of(external.begin(), external.end(),
                                                     [&](const where::value& v) { return current->contains(v); }));
    const detail::replace_where_decision d = detail::plan_replace_where(facts);
    plan.technique = d.technique;
    plan.reason = d.reason;

    // The sources' versions before they are read: a change made while they
    // are read is seen again by the next update (recomputing a slice twice
    // gives the same rows).
    detail::replace_where_state next = state_;
    next.source_versions = {static_cast<std::uint64_t>(sources.version())...};

    // Which slices: every slice of the window (recompute, or incremental
    // with all slices changed), or the changed ones.
    bool all = d.technique == replace_where_technique::complete_recompute;
    std::vector<where::value> slices;
    if (!all) {
      all = changed_slices(*current, slices, sources...);
      plan.all_slices = all;
    }
    const bool pick = !all;  // only the listed slices
    std::unordered_set<where::value> slice_set(slices.begin(), slices.end());
    plan.slices = slices.size();

    BatchStats stats;
    // Scratch kept across updates (no fresh memory to fault in per update).
    std::vector<Row>& keep = scratch<Row>(sizeof...(Sources));
    std::vector<where::value>& keep_values = keep_values_;
    keep_values.clear();
    if (!pick || !slices.empty()) {
      // The slices listed lie in P's window, and P is that window (one
      // column): `column IN (slices)` alone selects their rows.
      const where::expr read_p = !pick                        ? p
                                 : p.columns().size() == 1 ? where::col(*slice_column_).in(slices)
                                                           : (p && where::col(*slice_column_).in(slices));
      // What read_p selects of the slice column: sources with an index of
      // it read those rows without a scan (flows/where/detail/read.hpp).
      detail::slice_selection sel;
      if (slice_column_) {
        sel.column = *slice_column_;
        if (pick) {
          sel.values = &slices;
          sel.exact = p.columns().size() == 1;
        } else if (current) {
          sel.range = &*current;
        }
      }
      auto rows = scratch_tuple<typename Sources::row_type...>(std::index_sequence_for<Sources...>{});
      read_sources(rows, read_p, ctx, sel, std::index_sequence_for<Sources...>{}, sources...);
      Result result = call_query(query, rows, std::index_sequence_for<Sources...>{}, stats);
      auto bound = where::bind<Row>(p, name_);
      bound.prepare(ctx);
      for (auto&& out : result) {
        Row r(std::forward<decltype(out)>(out));
        if (!bound(r)) {
          ++plan.rows_outside_predicate;  // R-WHERE-2: never replaced later, so never written
          continue;
        }
        if (slice_column_) {
          where::value v = reader_(r);
          if (pick && !slice_set.contains(v)) {
            // A query that moves rows between slices (see docs): the row
            // belongs to a slice this update does not replace.
            ++plan.rows_outside_predicate;
            continue;
          }
          keep_values.push_back(std::move(v));
        }
        keep.push_back(std::move(r));
      }
    }

    // The rows to delete.
    std::vector<std::vector<row_id>*> doomed_slices;
    std::vector<row_id> doomed_rows;
    bool rebuild_after = false;
    if (slice_column_ && (pick || current)) {
      if (pick) {
        for (const auto& v : slices) {
          auto it = index_.slices().find(v);
          if (it != index_.slices().end()) doomed_slices.push_back(&it->second);
        }
      } else {
        for (auto& [v, ids] : index_.slices()) {
          if (current->contains(v)) doomed_slices.push_back(&ids);
        }
      }
    } else {
      // No range of the slice column: every row is tested.
      auto bound = where::bind<Row>(p);
      bound.prepare(ctx);
      store.for_each_row([&](row_id id, const Row& r) {
        if (bound(r)) doomed_rows.push_back(id);
      });
      rebuild_after = slice_column_.has_value();
    }

    // Reserve (the last fallible steps), then commit. The result rows'
    // slices are prepared per run of equal values (a query's rows usually
    // come grouped by the slice column).
    store.reserve(keep.size());
    const bool index_rows = slice_column_ && !rebuild_after;
    if (index_rows) {
      index_.reserve_ids(store.id_bound() + keep.size());
      for_each_run(keep_values, [&](std::size_t i, std::size_t n) { index_.prepare(keep_values[i], n); });
    }
    binding_.claim(target, kind, name_, /*exclusive=*/true);

    std::uint64_t deleted = 0;
    for (auto* ids : doomed_slices) {
      for (row_id id : *ids) store.erase(id);
      deleted += ids->size();
      index_.forget(*ids);
    }
    for (row_id id : doomed_rows) store.erase(id);
    deleted += doomed_rows.size();
    if (index_rows) {
      for_each_run(keep_values, [&](std::size_t i, std::size_t n) {
        std::vector<row_id>& slice = index_.slices().find(keep_values[i])->second;  // prepared
        for (std::size_t k = i; k < i + n; ++k) index_.add(slice, store.insert(std::move(keep[k])));
      });
    } else {
      for (Row& r : keep) store.insert(std::move(r));
    }
    index_.prune();
    if (rebuild_after) {
      try {
        rebuild_index(target);
      } catch (...) {
        indexed_ = false;  // rebuilt at the next update
      }
    }

    next.updates = state_.updates + 1;
    next.has_previous = true;
    next.previous_window = current;
    next.previous_nondeterministic = !p.deterministic();
    next.target_rows = store.size();
    next.target_id_bound = store.id_bound();
    next.definition = definition();
    next.query = query_id_;
    state_ = std::move(next);
    external_unknown_ = false;
    external_values_.clear();

    stats.applied_rows = keep.size();
    stats.inserted_rows = keep.size();
    stats.replaced_rows = deleted;
    stats.deleted_rows = deleted;
    stats.dropped_rows = plan.rows_outside_predicate;
    plan_ = std::move(plan);
    return stats;
  }

  /// @brief Writes the flow's state for a checkpoint (the whole state, a
  /// few dozen bytes, in either scope: flows/where/detail/checkpoint.hpp).
  void write_checkpoint(byte_writer& out, checkpoint_scope scope) const {
    detail::encode_replace_where_state(out, state_, scope);
  }

  /// @brief Replaces the flow's state by the one `blobs` hold and binds the
  /// flow to `target`; the side index is rebuilt from the table. A table
  /// whose size differs from the state's watermark had rows inserted behind
  /// the flow: the next update treats them as inside its window
  /// (EXTERNAL_CHANGE_IN_REPLACE_WINDOW). Throws errc::checkpoint_corrupt
  /// (bad blobs) with nothing changed. Empty blobs give a fresh flow.
  template <class Table>
  void read_checkpoint(Table& target, const checkpoint_blobs& blobs) {
    static_assert(!is_managed_table_v<Table>,
                  "MANAGED_TABLE_DOES_NOT_SUPPORT_CDC: a REPLACE WHERE target is a "
                  "flowlib::StreamingTable (R-WHERE-9).");
    detail::replace_where_state s = detail::read_replace_where_state(blobs, name_);
    binding_.restore(target, kind, name_, /*exclusive=*/true, /*done=*/false,
                     "a flow keeps the state of exactly one target (R-WHERE-9)");
    rebuild_index(target);
    const auto& store = target.store();
    external_values_.clear();
    external_unknown_ = s.has_previous && (store.size() != s.target_rows ||
                                           store.id_bound() != s.target_id_bound);
    state_ = std::move(s);
  }

 private:
  // R-WHERE-10: whether the previous update ran under another definition
  // (incremental option) or query than this flow's (an unknown one counts
  // as another). A changed predicate is not a changed definition: the
  // planner compares its window with the previous one.
  std::optional<replace_where_reason> definition_change() const {
    if (!state_.has_previous) return std::nullopt;
    if (state_.definition == definition() && state_.query == query_id_) return std::nullopt;
    if (state_.definition == definition() && options_.query_version.empty() &&
        state_.query.starts_with("unversioned ")) {
      return replace_where_reason::query_not_versioned;
    }
    return replace_where_reason::definition_changed;
  }

  // Calls f(first, count) for each run of equal values.
  template <class F>
  static void for_each_run(const std::vector<where::value>& v, F&& f) {
    for (std::size_t i = 0; i < v.size();) {
      std::size_t j = i + 1;
      while (j < v.size() && v[j] == v[i]) ++j;
      f(i, j - i);
      i = j;
    }
  }

  // A scratch vector of T kept across updates in slot `slot` (emptied).
  // The slot remembers its type: a flow applied with other source types
  // gets fresh vectors.
  template <class T>
  std::vector<T>& scratch(std::size_t slot) {
    static const char tag = 0;
    if (scratch_.size() <= slot) scratch_.resize(slot + 1);
    auto& [type, ptr] = scratch_[slot];
    if (type != &tag || !ptr) {
      ptr = std::make_shared<std::vector<T>>();
      type = &tag;
    }
    auto& v = *static_cast<std::vector<T>*>(ptr.get());
    v.clear();
    return v;
  }
  template <class... T, std::size_t... I>
  std::tuple<std::vector<T>&...> scratch_tuple(std::index_sequence<I...>) {
    return std::tuple<std::vector<T>&...>(scratch<T>(I)...);
  }

  // Reads each source into its vector, P pushed down where it binds.
  template <class Tuple, std::size_t... I, class... Sources>
  static void read_sources(Tuple& rows, const where::expr& p, const where::context& ctx,
                           const detail::slice_selection& sel, std::index_sequence<I...>,
                           const Sources&... sources) {
    (detail::read_pushed_down(sources, p, ctx, std::get<I>(rows), sel), ...);
  }

  // Calls the query with one span per source; counts the rows read.
  template <class Query, class Tuple, std::size_t... I>
  static auto call_query(Query& query, Tuple& rows, std::index_sequence<I...>, BatchStats& stats) {
    stats.input_rows = (std::uint64_t{0} + ... + std::get<I>(rows).size());
    return std::invoke(
        query, std::span<const typename std::remove_reference_t<std::tuple_element_t<I, Tuple>>::value_type>(
                   std::get<I>(rows))...);
  }

  // The changed slices of `window` since the previous update, into `out`;
  // true when every slice of the window must be reprocessed (a source
  // without the slice column changed, or a source cannot tell).
  template <class... Sources>
  bool changed_slices(const where::window& window, std::vector<where::value>& out,
                      const Sources&... sources) const {
    if (state_.source_versions.size() != sizeof...(Sources)) return true;
    std::unordered_set<where::value> seen;
    bool all = false;
    std::size_t i = 0;
    const where::expr slice_col = where::col(*slice_column_);
    const auto one = [&](const auto& s) {
      using S = std::remove_cvref_t<decltype(s)>;
      const std::uint64_t since = state_.source_versions[i++];
      if (all) return;
      // A version below the recorded one: the source was filled again (a
      // restarted program) and cannot say what changed since.
      if (static_cast<std::uint64_t>(s.version()) < since) {
        all = true;
        return;
      }
      if (!where::binds_to<typename S::row_type>(slice_col)) {
        if (static_cast<std::uint64_t>(s.version()) != since) all = true;  // a dimension changed
        return;
      }
      auto changed = s.changed_values(*slice_column_, since);
      if (!changed) {
        all = true;
        return;
      }
      for (auto& v : *changed) {
        if (window.contains(v) && seen.insert(v).second) out.push_back(std::move(v));
      }
    };
    (one(sources), ...);
    if (all) out.clear();
    std::sort(out.begin(), out.end());
    return all;
  }

  // Rows the index does not know (inserted behind the flow) are indexed,
  // and their slice values kept in external_values_ until an update
  // succeeds (a failed update's retry still sees them).
  template <class Table>
  void adopt_external(Table& target) {
    std::vector<where::value>& found = external_values_;
    const auto& store = target.store();
    if (!slice_column_ || !state_.has_previous) return;
    if (store.size() == state_.target_rows && store.id_bound() == state_.target_id_bound) return;
    std::vector<std::pair<row_id, where::value>> fresh;
    store.for_each_row([&](row_id id, const typename Table::row_type& r) {
      if (!index_.knows(id)) fresh.emplace_back(id, reader_(r));
    });
    for (auto& [id, v] : fresh) {
      index_.add(v, id);
      found.push_back(std::move(v));
    }
  }

  template <class Table>
  void rebuild_index(Table& target) {
    using Row = typename Table::row_type;
    if (!slice_column_) {
      indexed_ = true;
      return;
    }
    if (!reader_) reader_ = detail::column_reader::of<Row>(*slice_column_, name_);
    const auto& store = target.store();
    std::vector<row_id> ids;
    std::vector<const Row*> rows;
    ids.reserve(store.size());
    rows.reserve(store.size());
    store.for_each_row([&](row_id id, const Row& r) {
      ids.push_back(id);
      rows.push_back(&r);
    });
    index_.rebuild(ids, store.id_bound(), [&](std::size_t i) { return reader_(*rows[i]); });
    indexed_ = true;
  }

  std::string name_;
  where::expr pred_;
  ReplaceWhereOptions options_;
  std::string query_id_;  // see query_id()
  std::optional<std::string> slice_column_;
  detail::target_binding binding_;
  detail::replace_where_state state_;
  detail::slice_index index_;
  detail::column_reader reader_;  // the slice column of a target row
  std::vector<std::pair<const void*, std::shared_ptr<void>>> scratch_;  // see scratch()
  std::vector<where::value> keep_values_;
  std::vector<where::value> external_values_;  // see adopt_external()
  bool indexed_ = false;
  bool external_unknown_ = false;
  ReplaceWherePlan plan_;
};

}  // namespace flowlib
