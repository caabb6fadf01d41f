// flowlib/flows/where/detail/read.hpp
//
// How a REPLACE WHERE flow reads (R-WHERE-1, R-WHERE-7):
//   - column_reader: a column's value as a where::value, the column
//     resolved by name once (one indirect call per row afterwards), for the
//     slice column of target rows;
//   - read_pushed_down(): a source's rows that satisfy a predicate, when the
//     source has every column the predicate names (push-down), else all of
//     them (a dimension).
// Internal.
#pragma once

#include <flowlib/error.hpp>
#include <flowlib/flows/where/sources.hpp>
#include <flowlib/schema.hpp>
#include <flowlib/where.hpp>

#include <concepts>
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

/// Appends to `out` the rows of `source` that satisfy `p` under `ctx` when
/// the source's rows have every column of `p` (returns true: pushed down),
/// else every row (returns false). Binding errors name `flow`.
template <where_source S>
bool read_pushed_down(const S& source, const where::expr& p, const where::context& ctx,
                      std::vector<typename S::row_type>& out) {
  using Row = typename S::row_type;
  if (!where::binds_to<Row>(p)) {
    source.scan([&](const Row& r) { out.push_back(r); });
    return false;
  }
  auto b = where::bind<Row>(p);
  b.prepare(ctx);
  source.scan([&](const Row& r) {
    if (b(r)) out.push_back(r);
  });
  return true;
}

}  // namespace detail
}  // namespace flowlib
