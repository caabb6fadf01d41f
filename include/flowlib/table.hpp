// flowlib/table.hpp
//
// StreamingTable<Row, Storage>: a target that flows write. Readers see its
// rows through rows() (a forward range, in no particular order) and
// sorted_rows() (a copy in a canonical order, for printing and comparing).
//
// A table records which flow writes it, so that the contract's limits on
// flows per target are enforced at run time (R-USING-9): a REPLACE USING
// target accepts that one flow and no other.
#pragma once

#include <flowlib/error.hpp>
#include <flowlib/schema.hpp>
#include <flowlib/storage/memory.hpp>

#include <algorithm>
#include <compare>
#include <cstddef>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

namespace flowlib {

namespace detail {

/// Orders rows canonically: by operator< when Row has one, otherwise by its
/// FLOWLIB_SCHEMA columns, compared left to right.
template <class Row>
bool canonical_less(const Row& a, const Row& b) {
  if constexpr (std::totally_ordered<Row>) {
    return a < b;
  } else {
    static_assert(has_schema<Row>,
                  "flowlib: sorted_rows() orders rows by their columns: declare "
                  "FLOWLIB_SCHEMA(Row, ...) or give Row an operator<=>.");
    int result = 0;  // <0, 0, >0
    schema_of<Row>::for_each([&](auto col) {
      if (result != 0) return;
      const auto& x = decltype(col)::get(a);
      const auto& y = decltype(col)::get(b);
      if (x < y) result = -1;
      else if (y < x) result = 1;
    });
    return result < 0;
  }
}

}  // namespace detail

/// @brief True for managed tables (which accept only append flows,
/// R-TABLE-1). Specialised by the ManagedTable header.
template <class Table>
inline constexpr bool is_managed_table_v = false;

/// @brief The identity of the flow that writes a table (kind and instance).
struct writer_claim {
  const void* flow = nullptr;  ///< the flow object
  std::string kind;            ///< "REPLACE USING", "AUTO CDC", "APPEND", ...
  std::string name;            ///< the flow's name
};

/// @brief A table written by flows. Storage is a storage policy
/// (MemoryStorage by default).
template <class Row, class Storage = MemoryStorage>
class StreamingTable {
  static_assert(table_storage<Storage, Row>,
                "flowlib::StreamingTable<Row, Storage>: Storage must be a storage policy "
                "whose `store<Row>` meets flowlib::row_store (see storage/memory.hpp).");
  static_assert(std::is_nothrow_move_constructible_v<Row> && std::is_nothrow_move_assignable_v<Row>,
                "flowlib: table rows must be nothrow-movable (a batch is committed without a "
                "failure point); mark Row's move constructor and assignment noexcept, or "
                "use members whose moves are noexcept.");

 public:
  using row_type = Row;
  using storage_policy = Storage;
  using store_type = typename Storage::template store<Row>;

  StreamingTable() = default;
  explicit StreamingTable(std::string name) : name_(std::move(name)) {}
  StreamingTable(const StreamingTable&) = delete;  // flows hold state about this table
  StreamingTable& operator=(const StreamingTable&) = delete;

  const std::string& name() const noexcept { return name_; }
  std::size_t size() const noexcept { return store_.size(); }
  bool empty() const noexcept { return size() == 0; }

  /// The rows, as a forward range of const Row&, in storage order.
  auto rows() const { return store_.rows(); }

  /// A copy of the rows in canonical order (operator<, or schema columns).
  std::vector<Row> sorted_rows() const {
    std::vector<Row> out;
    out.reserve(size());
    for (const Row& r : rows()) out.push_back(r);
    std::sort(out.begin(), out.end(), [](const Row& a, const Row& b) {
      return detail::canonical_less(a, b);
    });
    return out;
  }

  // --- For flow implementations -------------------------------------------

  /// The row store. Only the flow that claimed the table writes to it.
  store_type& store() noexcept { return store_; }
  const store_type& store() const noexcept { return store_; }

  /// Records `flow` as this table's writer. Throws flowlib::error
  /// (errc::invalid_target) if another flow already writes it and either
  /// flow requires to be the only one (`exclusive`, R-USING-9).
  void claim(const void* flow, std::string_view kind, std::string_view flow_name, bool exclusive) {
    for (const auto& w : writers_) {
      if (w.flow == flow) return;
    }
    if (!writers_.empty() && (exclusive || exclusive_)) {
      const auto& w = writers_.front();
      throw error(errc::invalid_target, std::string(flow_name), "", "",
                  "table '" + name_ + "' is already written by " + w.kind + " flow '" + w.name +
                      "'; a " + std::string(exclusive ? kind : w.kind) +
                      " target takes exactly one flow and no other flow type");
    }
    writers_.push_back({flow, std::string(kind), std::string(flow_name)});
    exclusive_ = exclusive_ || exclusive;
  }
  /// The flows that write this table.
  const std::vector<writer_claim>& writers() const noexcept { return writers_; }

 private:
  std::string name_;
  store_type store_;
  std::vector<writer_claim> writers_;
  bool exclusive_ = false;
};

}  // namespace flowlib
