// flowlib/flows/where/plan.hpp
//
// What a REPLACE WHERE update reports about how it ran (R-WHERE-8): its
// technique and, for a complete recompute that could have been
// incremental, one reason. How the technique is chosen is
// flows/where/detail/planner.hpp's.
#pragma once

#include <string_view>

namespace flowlib {

/// @brief How a REPLACE WHERE update was carried out (R-WHERE-8).
enum class replace_where_technique {
  incremental,         ///< only the changed slices of the window ("INCREMENTAL")
  complete_recompute,  ///< every row of the window ("COMPLETE_RECOMPUTE")
};

/// @brief "INCREMENTAL" or "COMPLETE_RECOMPUTE" (the event log's `technique`).
constexpr std::string_view to_string(replace_where_technique t) noexcept {
  return t == replace_where_technique::incremental ? "INCREMENTAL" : "COMPLETE_RECOMPUTE";
}

/// @brief Why a REPLACE WHERE update recomputed its whole window (R-WHERE-8).
enum class replace_where_reason {
  not_deterministic,        ///< REPLACE_WHERE_NOT_DETERMINISTIC
  prior_not_deterministic,  ///< PRIOR_REPLACE_WHERE_NOT_DETERMINISTIC
  unsupported_predicate,    ///< UNSUPPORTED_REPLACE_WHERE_PREDICATE
  external_change,          ///< EXTERNAL_CHANGE_IN_REPLACE_WINDOW
  /// REPLACE_WHERE_DEFINITION_CHANGED (flowlib's own, R-WHERE-10): the
  /// query version or the incremental option changed (a changed predicate
  /// is judged by its window: unsupported_predicate when it takes in rows
  /// the previous update did not process).
  definition_changed,
  /// REPLACE_WHERE_QUERY_NOT_VERSIONED (flowlib's own, R-WHERE-10): an
  /// unversioned query taking over state it did not write.
  query_not_versioned,
};

/// @brief The reason's name in the event log ("EXTERNAL_CHANGE_IN_REPLACE_WINDOW", ...).
constexpr std::string_view to_string(replace_where_reason r) noexcept {
  switch (r) {
    case replace_where_reason::not_deterministic: return "REPLACE_WHERE_NOT_DETERMINISTIC";
    case replace_where_reason::prior_not_deterministic:
      return "PRIOR_REPLACE_WHERE_NOT_DETERMINISTIC";
    case replace_where_reason::unsupported_predicate: return "UNSUPPORTED_REPLACE_WHERE_PREDICATE";
    case replace_where_reason::external_change: return "EXTERNAL_CHANGE_IN_REPLACE_WINDOW";
    case replace_where_reason::definition_changed: return "REPLACE_WHERE_DEFINITION_CHANGED";
    case replace_where_reason::query_not_versioned: return "REPLACE_WHERE_QUERY_NOT_VERSIONED";
  }
  return "UNKNOWN";
}

}  // namespace flowlib
