// flowlib/runtime/impl/catalog.ipp
//
// The definitions runtime/catalog.hpp declares: inline in header-only mode,
// compiled once by src/flowlib.cpp under FLOWLIB_SEPARATE_COMPILATION
// (detail/config.hpp).
#pragma once

#include <flowlib/runtime/catalog.hpp>

namespace flowlib {

FLOWLIB_DECL void Catalog::declare_table(std::string name, table_kind kind) {
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

FLOWLIB_DECL void Catalog::declare_flow(std::string_view table, std::string_view flow_kind,
                                        std::string flow_name, bool exclusive) {
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

FLOWLIB_DECL bool Catalog::drop(std::string_view name) {
  auto it = tables_.find(name);
  if (it == tables_.end()) return false;
  tables_.erase(it);
  return true;
}

FLOWLIB_DECL std::optional<table_kind> Catalog::kind_of(std::string_view name) const {
  auto it = tables_.find(name);
  if (it == tables_.end()) return std::nullopt;
  return it->second.kind;
}

FLOWLIB_DECL std::vector<std::pair<std::string, std::string>> Catalog::flows_of(
    std::string_view name) const {
  auto it = tables_.find(name);
  if (it == tables_.end()) return {};
  return it->second.flows;
}

}  // namespace flowlib
