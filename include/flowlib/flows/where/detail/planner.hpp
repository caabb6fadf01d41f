// flowlib/flows/where/detail/planner.hpp
//
// How a REPLACE WHERE update is planned (R-WHERE-7, R-WHERE-8): incremental
// (reprocess only the slices of the window whose source data changed since
// the previous update) or a complete recompute of the window, and, for a
// recompute that was not the only possibility, exactly one reason.
//
// The conditions for an incremental update, checked in this order; the
// first that fails gives the reason (the precedence: properties of the
// predicates before properties of the data, since a recompute forced by the
// predicate makes the data question moot):
//
//   (none)  the first update of the flow (or the first after a full refresh
//           of its table), or incremental updates disabled by the flow's
//           options: COMPLETE_RECOMPUTE with no reason (there is nothing to be
//           incremental from, or it was not asked for);
//   0. REPLACE_WHERE_DEFINITION_CHANGED: the flow's definition (query
//      version, incremental option) differs from the one the previous
//      update ran under, as recorded in the checkpoint; or
//      REPLACE_WHERE_QUERY_NOT_VERSIONED: the flow's query has no version
//      and the previous update was not run by this flow object, so nothing
//      says the query is the same (R-WHERE-10). The rows of the window
//      may have been computed by another query: every one is recomputed.
//      The predicate is not part of the definition (see 3);
//   1. REPLACE_WHERE_NOT_DETERMINISTIC: the predicate of this update uses a
//      non-deterministic function (rand()); clock functions are allowed;
//   2. PRIOR_REPLACE_WHERE_NOT_DETERMINISTIC: the previous update's did;
//   3. UNSUPPORTED_REPLACE_WHERE_PREDICATE: this update runs with an
//      override predicate (R-WHERE-4); or no source has the predicate's
//      columns (it cannot be pushed down); or the predicate does not select
//      a single range of the slice column (where::expr::window); or the
//      previous update's window is unknown, or does not cover this one (the
//      window would take in rows the previous update did not process: a
//      moving upper bound, a widened window). The previous window is the
//      one the previous update processed, whatever predicate selected it
//      (the flow's, an override, or the flow's before its predicate was
//      changed), so a changed predicate is judged as a window the clock
//      moved is: narrowed (covered) goes on, widened falls back;
//   4. EXTERNAL_CHANGE_IN_REPLACE_WINDOW: rows were inserted into the target
//      behind the flow (R-WHERE-5) inside this update's window.
// Internal; the technique and reasons are public (flows/where/plan.hpp).
#pragma once

#include <flowlib/flows/where/plan.hpp>
#include <flowlib/where/window.hpp>

#include <optional>

namespace flowlib {

namespace detail {

/// What the planner looks at (gathered by the flow before it reads anything).
struct replace_where_facts {
  bool incremental_enabled = true;   ///< ReplaceWhereOptions::incremental
  bool has_previous = false;         ///< an update ran on this table before
  /// The previous update ran under another definition (or an unknown one):
  /// definition_changed or query_not_versioned (R-WHERE-10).
  std::optional<replace_where_reason> definition_change;
  bool is_override = false;          ///< this update runs with an override (R-WHERE-4)
  bool deterministic = true;         ///< this update's predicate
  bool previous_nondeterministic = false;
  bool pushable = false;             ///< some source has every column of the predicate
  /// This update's window on the slice column (nullopt: not a single range
  /// of that column).
  std::optional<where::window> current;
  std::optional<where::window> previous;  ///< the previous update's, if known
  /// Rows inserted behind the flow since the previous update lie in the
  /// current window (or where they lie is unknown).
  bool external_change_in_window = false;
};

/// The plan: the technique and, for a recompute chosen over an incremental
/// update, the reason.
struct replace_where_decision {
  replace_where_technique technique = replace_where_technique::complete_recompute;
  std::optional<replace_where_reason> reason;
};

/// Decides with the precedence of the header comment.
inline replace_where_decision plan_replace_where(const replace_where_facts& f) {
  using enum replace_where_reason;
  const auto recompute = [](std::optional<replace_where_reason> r) {
    return replace_where_decision{replace_where_technique::complete_recompute, r};
  };
  if (!f.has_previous || !f.incremental_enabled) return recompute(std::nullopt);
  if (f.definition_change) return recompute(f.definition_change);
  if (!f.deterministic) return recompute(not_deterministic);
  if (f.previous_nondeterministic) return recompute(prior_not_deterministic);
  if (f.is_override || !f.pushable || !f.current || !f.previous || !f.previous->covers(*f.current)) {
    return recompute(unsupported_predicate);
  }
  if (f.external_change_in_window) return recompute(external_change);
  return {replace_where_technique::incremental, std::nullopt};
}

}  // namespace detail
}  // namespace flowlib
