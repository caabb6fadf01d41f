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
  void declare_table(std::string name, table_kind kind) {
    if (auto it = tables_.find(name); it != tables_.end()) {
      if (it->second.kind == table_kind::streaming && kind == table_kind::managed) {
        throw error(errc::invalid_target, name, "", "",
                    "CANNOT_SWITCH_STREAMING_TABLE_TO_MANAGED_TABLE: '" + name +
                        "' is a streaming table; drop it before declaring a managed table "
                        "of that name (R-TABLE-1)");
      }
      throw error(errc::invalid_target, name, "", "",
                  "TABLE_ALREADY_EXISTS: a table named '" + name + "' is already declared");
    }
    tables_.emplace(std::move(name), entry{kind, {}});
  }

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
  void declare_flow(std::string_view table, std::string_view flow_kind, std::string flow_name,
                    bool exclusive) {
    auto it = tables_.find(table);
    if (it == tables_.end()) {
      throw error(errc::invalid_target, flow_name, "", "",
                  "TABLE_OR_VIEW_NOT_FOUND: no table named '" + std::string(table) +
                      "' is declared");
    }
    if (it->second.kind == table_kind::managed && exclusive) {
      throw error(errc::invalid_target, flow_name, "", "",
                  "MANAGED_TABLE_DOES_NOT_SUPPORT_CDC: managed table '" + std::string(table) +
                      "' accepts only append flows (INSERT BY NAME), not a " +
                      std::string(flow_kind) +
                      " flow; declare the table as a streaming table (R-TABLE-1)");
    }
    for (const auto& f : it->second.flows) {
      if (f.second == flow_name) {
        throw error(errc::invalid_target, flow_name, "", "",
                    "a flow of this name already writes table '" + std::string(table) + "'");
      }
    }
    it->second.flows.emplace_back(std::string(flow_kind), std::move(flow_name));
  }

  /// Removes a table (and its flows' declarations). Returns false when no
  /// such table is declared.
  bool drop(std::string_view name) {
    auto it = tables_.find(name);
    if (it == tables_.end()) return false;
    tables_.erase(it);
    return true;
  }

  bool contains(std::string_view name) const { return tables_.find(name) != tables_.end(); }
  /// The kind of table `name`, if declared.
  std::optional<table_kind> kind_of(std::string_view name) const {
    auto it = tables_.find(name);
    if (it == tables_.end()) return std::nullopt;
    return it->second.kind;
  }
  /// The flows declared on table `name`, as (kind, flow name) pairs.
  std::vector<std::pair<std::string, std::string>> flows_of(std::string_view name) const {
    auto it = tables_.find(name);
    if (it == tables_.end()) return {};
    return it->second.flows;
  }
  std::size_t size() const noexcept { return tables_.size(); }

 private:
  struct entry {
    table_kind kind;
    std::vector<std::pair<std::string, std::string>> flows;  // (kind, name)
  };
  std::map<std::string, entry, std::less<>> tables_;
};

}  // namespace flowlib
