// flowlib/flows/where/detail/read.hpp
//
// How a REPLACE WHERE flow reads (R-WHERE-1, R-WHERE-7):
//   - column_reader: a column's value as a where::value, the column
//     resolved by name once (one indirect call per row afterwards), for the
//     slice column of target rows;
//   - read_pushed_down(): a source's rows that satisfy a predicate, when the
//     source has every column the predicate names (push-down), else all of
//     them (a dimension). Given what the predicate selects of the slice
//     column (slice_selection), a slice_indexed_source is read through its
//     index instead of a scan:
//       * `column IN (values)` (an incremental update's slices): always;
//         the values of the source column's kind are looked up (null and
//         NaN select no row under SQL equality, so they are left out); a
//         value of another kind (a timestamp among dates: SQL equality
//         differs from the index's structural one) means a scan;
//       * a window (a recompute): only when the source already has the
//         index (a recompute alone never builds one) and the window holds
//         at most half of the source's rows (else a scan costs no more).
//     The rows found are tested against the predicate unless it is exactly
//     `column IN (values)`, and come in scan order: the same rows, in the
//     same order, as the scan would give, so the query's input does not
//     depend on the index.
// Internal.
#pragma once

#include <flowlib/error.hpp>
#include <flowlib/flows/where/sources.hpp>
#include <flowlib/schema.hpp>
#include <flowlib/where.hpp>

#include <cmath>
#include <concepts>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace flowlib {
namespace detail {

/// Reads one column of a row type, chosen by name at run time, as a
/// where::value: one indirect call per row. Type-erased (a flow is not a
/// template of its target's row type); of<Row>() makes it, and it must be
/// called with rows of that type.
class column_reader {
 public:
  column_reader() = default;
  /// Throws flowlib::error (errc::invalid_argument) naming `flow` and the
  /// column when Row has no such column (or one a value cannot hold).
  template <class Row>
  static column_reader of(std::string_view column, std::string_view flow) {
    static_assert(has_schema<Row>,
                  "flowlib::ReplaceWhere: the target row type needs FLOWLIB_SCHEMA(Row, ...): "
                  "the predicate names its columns.");
    column_reader out;
    schema_of<Row>::for_each([&](auto col) {
      using C = decltype(col);
      if constexpr (std::constructible_from<where::value, const typename C::value_type&>) {
        if (C::name == column) {
          out.read_ = [](const void* r) { return where::value(C::get(*static_cast<const Row*>(r))); };
        }
      }
    });
    if (out.read_ == nullptr) {
      throw error(errc::invalid_argument, std::string(flow), std::string(column), "",
                  "the target has no column of this name that a predicate can compare; the "
                  "REPLACE WHERE predicate must name a column of the target's FLOWLIB_SCHEMA");
    }
    return out;
  }
  explicit operator bool() const noexcept { return read_ != nullptr; }
  template <class Row>
  where::value operator()(const Row& r) const {
    return read_(&r);
  }

 private:
  where::value (*read_)(const void*) = nullptr;
};

/// What a read predicate selects of the slice column (see the header
/// comment); `column` empty: nothing known.
struct slice_selection {
  std::string_view column;
  /// The predicate is `column IN (*values)`, or that AND more (exact false).
  const std::vector<where::value>* values = nullptr;
  bool exact = false;
  /// The predicate is this window of `column`.
  const where::window* range = nullptr;
};

/// Reads into `out` the rows of `source` selected by `sel` that satisfy `b`
/// through the source's index; false (nothing read) when the index does not
/// apply and the caller must scan.
template <slice_indexed_source S, class Bound>
bool read_by_index(const S& source, const slice_selection& sel, Bound& b,
                   std::vector<typename S::row_type>& out) {
  using Row = typename S::row_type;
  if constexpr (!has_schema<Row>) {
    return false;
  } else {
    if (sel.column.empty()) return false;
    const auto* entry = where::detail::find_column<Row>(sel.column);
    if (entry == nullptr || entry->k == where::kind::null) return false;
    if (sel.values != nullptr) {
      std::vector<where::value> keys;
      keys.reserve(sel.values->size());
      for (const where::value& v : *sel.values) {
        if (v.is_null() || (v.type() == where::kind::float64 && std::isnan(v.as_double()))) continue;
        if (v.type() != entry->k) return false;
        keys.push_back(v);
      }
      if (keys.empty()) return true;  // `column IN (NULL, NaN)` selects no row
      auto at = source.locate(sel.column, std::span<const where::value>(keys));
      if (!at) return false;
      out.reserve(out.size() + std::ranges::size(*at));
      source.read_located(*at, [&](const Row& r) {
        if (sel.exact || b(r)) out.push_back(r);
      });
      return true;
    }
    if (sel.range != nullptr && source.has_value_index(sel.column)) {
      auto at = source.locate(*sel.range);
      if (!at || std::ranges::size(*at) * 2 > static_cast<std::uint64_t>(source.size())) return false;
      out.reserve(out.size() + std::ranges::size(*at));
      source.read_located(*at, [&](const Row& r) {
        if (b(r)) out.push_back(r);
      });
      return true;
    }
    return false;
  }
}

/// Appends to `out` the rows of `source` that satisfy `p` under `ctx` when
/// the source's rows have every column of `p` (returns true: pushed down),
/// else every row (returns false); through the source's index where `sel`
/// allows it (see the header comment). Binding errors name `flow`.
template <where_source S>
bool read_pushed_down(const S& source, const where::expr& p, const where::context& ctx,
                      std::vector<typename S::row_type>& out, const slice_selection& sel = {}) {
  using Row = typename S::row_type;
  if (!where::binds_to<Row>(p)) {
    source.scan([&](const Row& r) { out.push_back(r); });
    return false;
  }
  auto b = where::bind<Row>(p);
  b.prepare(ctx);
  if constexpr (slice_indexed_source<S>) {
    if (read_by_index(source, sel, b, out)) return true;
  }
  source.scan([&](const Row& r) {
    if (b(r)) out.push_back(r);
  });
  return true;
}

}  // namespace detail
}  // namespace flowlib
