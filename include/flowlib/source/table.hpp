// flowlib/source/table.hpp
//
// TableSource: the rows appended to another table of the pipeline, read as a
// stream (multi-hop pipelines: bronze -> silver -> gold).
//
//   flowlib::StreamingTable<Raw> bronze{"bronze"};
//   pipeline.flow("ingest").from(feed).into(bronze, flowlib::Append{"ingest"});
//   pipeline.flow("clean").from(flowlib::TableSource{bronze}).into(silver, Flow{"clean"});
//
// Every row a batch inserts into the table or writes in place is copied, in
// the same batch (all or nothing), to the table's append log
// (storage/row_log.hpp), whose offsets are this source's positions
// (partition 0). That is every row the batch changed, whatever the flow
// type: for a REPLACE USING or AUTO CDC table every new or replacing row
// version, an SCD1 update, an SCD2 version closed or re-derived, and a row
// rewritten with equal values; rows a flow erases are not reported. A
// quarantine table's log is not filled: a TableSource over one yields
// nothing. The pipeline
// runs the flows writing the table before the flows reading it (dependency
// order). A full refresh of the table clears its log; offsets never
// restart, so readers downstream see the reprocessed rows as new rows: fully
// refresh the downstream tables as well.
#pragma once

#include <flowlib/source/position.hpp>

#include <cstddef>
#include <string>
#include <vector>

namespace flowlib {

/// @brief The rows appended to a pipeline table, as a source. See the header.
template <class Table>
class TableSource {
 public:
  using table_type = Table;
  using row_type = typename Table::row_type;

  explicit TableSource(Table& table) : table_(&table) {}

  source_position start() const { return source_position::at(table_->append_log().begin_offset()); }
  source_position latest() const { return source_position::at(table_->append_log().end_offset()); }
  source_position plan(const source_position& from, std::size_t limit) const {
    const auto end = table_->append_log().end_offset();
    auto at = from.offset(0);
    if (at >= end) return source_position::at(at);
    const auto n = end - at;
    return source_position::at(limit == 0 || n <= limit ? end : at + limit);
  }
  void read(const source_position& from, const source_position& to, std::vector<row_type>& out) const {
    table_->append_log().read(from.offset(0), to.offset(0), out);
  }
  flowlib::delivery delivery() const noexcept { return flowlib::delivery::exactly_once; }
  const std::string& name() const noexcept { return table_->name(); }

  /// The table read.
  Table& table() const noexcept { return *table_; }

 private:
  Table* table_;
};

}  // namespace flowlib
