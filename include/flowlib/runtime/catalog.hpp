// flowlib/runtime/catalog.hpp
//
// Catalog: the names of a pipeline's tables and the flows that target them,
// checked when they are declared (R-TABLE-1), for programs that build their
// pipeline at run time and cannot rely on the compile-time checks of typed
// flows.
//
//   flowlib::Catalog catalog;
//   catalog.add(events);                        // a StreamingTable named "events"
//   catalog.add(output);                        // a ManagedTable named "output"
//   catalog.declare_flow("output", "AUTO CDC", "cdc_flow", /*exclusive=*/true);
//       // throws: MANAGED_TABLE_DOES_NOT_SUPPORT_CDC
//   catalog.declare_table("events", flowlib::table_kind::managed);
//       // throws: CANNOT_SWITCH_STREAMING_TABLE_TO_MANAGED_TABLE
//   catalog.drop("events");                     // now "events" may be a managed table
//
// A catalog stores names and kinds only; it neither owns nor points to the
// tables. Every failed declaration leaves the catalog as it was.
#pragma once

#include <flowlib/detail/config.hpp>
#include <flowlib/error.hpp>
#include <flowlib/table.hpp>

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace flowlib {

/// @brief The two kinds of pipeline tables (R-TABLE-1).
enum class table_kind {
  streaming,  ///< StreamingTable: any flow type
  managed,    ///< ManagedTable: append flows only
};

/// @brief A registry of table names, their kinds and their flows.
class Catalog {
 public:
  /// Declares a table named `name` of kind `kind`. Throws flowlib::error
  /// (errc::invalid_target) when the name is taken: with
  /// CANNOT_SWITCH_STREAMING_TABLE_TO_MANAGED_TABLE when a managed table
  /// would take a streaming table's name (drop the streaming table first),
  /// with TABLE_ALREADY_EXISTS otherwise.
  FLOWLIB_DECL void declare_table(std::string name, table_kind kind);

  /// Declares `table`, under its name and with its kind (see declare_table).
  template <class Table>
    requires requires(const Table& t) { t.name(); }
  void add(const Table& table) {
    declare_table(table.name(), is_managed_table_v<Table> ? table_kind::managed
                                                          : table_kind::streaming);
  }

  /// Declares a flow of kind `flow_kind` ("APPEND", "AUTO CDC", "REPLACE
  /// WHERE", ...: named in errors and listings) writing table `table`;
  /// `exclusive` when the flow takes its table alone, as every flow but an
  /// append flow does. Throws flowlib::error (errc::invalid_target): with
  /// MANAGED_TABLE_DOES_NOT_SUPPORT_CDC for an exclusive flow into a managed
  /// table (R-TABLE-1); when the table is not declared; when a flow of that
  /// name already writes it.
  FLOWLIB_DECL void declare_flow(std::string_view table, std::string_view flow_kind,
                                 std::string flow_name, bool exclusive);

  /// Removes a table (and its flows' declarations). Returns false when no
  /// such table is declared.
  FLOWLIB_DECL bool drop(std::string_view name);

  bool contains(std::string_view name) const { return tables_.find(name) != tables_.end(); }
  /// The kind of table `name`, if declared.
  FLOWLIB_DECL std::optional<table_kind> kind_of(std::string_view name) const;
  /// The flows declared on table `name`, as (kind, flow name) pairs.
  FLOWLIB_DECL std::vector<std::pair<std::string, std::string>> flows_of(
      std::string_view name) const;
  std::size_t size() const noexcept { return tables_.size(); }

 private:
  struct entry {
    table_kind kind;
    std::vector<std::pair<std::string, std::string>> flows;  // (kind, name)
  };
  std::map<std::string, entry, std::less<>> tables_;
};

}  // namespace flowlib

#if !defined(FLOWLIB_SEPARATE_COMPILATION)
#include <flowlib/runtime/impl/catalog.ipp>
#endif
