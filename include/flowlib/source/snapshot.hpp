// flowlib/source/snapshot.hpp
//
// Snapshot<Row, Version>: one full snapshot with its version, the record
// type of a source that feeds AUTO CDC FROM SNAPSHOT in a pipeline (R-CDC-8).
// Each record of such a source is a whole snapshot; a micro-batch applies its
// snapshots in order, all of them or none.
//
//   flowlib::MemorySource<flowlib::Snapshot<Row, std::int64_t>> snapshots{"daily"};
//   snapshots.append({rows_of_day_1, 1});
#pragma once

#include <vector>

namespace flowlib {

/// @brief A full snapshot of a source table and its version (R-CDC-8).
template <class Row, class Version>
struct Snapshot {
  using row_type = Row;
  using version_type = Version;
  std::vector<Row> rows;
  Version version{};
};

}  // namespace flowlib
