// flowlib/runtime/impl/export.ipp
//
// The definitions runtime/export.hpp declares: inline in header-only mode,
// compiled once by src/flowlib.cpp under FLOWLIB_SEPARATE_COMPILATION
// (detail/config.hpp).
#pragma once

#include <flowlib/runtime/export.hpp>

namespace flowlib::detail {

FLOWLIB_DECL bool export_committed(const checkpoint_store& store, std::string_view flow,
                                   std::uint64_t batch) {
  checkpoint_log log(const_cast<checkpoint_store&>(store));  // read only: last_commit() reads
  const auto last = log.last_commit(flow);
  return last && last->batch >= batch;
}

}  // namespace flowlib::detail
