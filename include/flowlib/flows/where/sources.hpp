// flowlib/flows/where/sources.hpp
//
// What a REPLACE WHERE flow reads and how (R-WHERE-1, R-WHERE-7):
//
//   - `where_source<S>`: a source read as a whole table, not as a stream:
//     row_type, version() (grows with every change), changed_values(column,
//     since) (the distinct values of `column` among the rows changed after
//     version `since`; nullopt when the source cannot tell) and scan(f)
//     (f(const Row&) for every row held). flowlib::MemorySource has them.
//   - `slice_indexed_source<S>`: a where_source that also reads rows by the
//     values of a column without a scan: locate(column, values) and
//     locate(window) (the held rows' locations, in scan order; nullopt when
//     it cannot), read_located(locations, f), has_value_index(column) and
//     size(). The flow reads the slices of an incremental update through
//     it, and a recompute's window when an index exists and the window holds
//     at most half of the rows; other sources are scanned. MemorySource is
//     one.
// How the flow reads them is flows/where/detail/read.hpp's.
#pragma once

#include <flowlib/where/value.hpp>
#include <flowlib/where/window.hpp>

#include <concepts>
#include <cstdint>
#include <optional>
#include <ranges>
#include <span>
#include <string_view>
#include <vector>

namespace flowlib {

/// @brief A source a REPLACE WHERE flow reads as a table (see the header
/// comment): version(), changed_values(column, since), scan(f).
template <class S>
concept where_source = requires(const S& s, std::string_view c, std::uint64_t v) {
  typename S::row_type;
  { s.version() } -> std::convertible_to<std::uint64_t>;
  { s.changed_values(c, v) } -> std::same_as<std::optional<std::vector<where::value>>>;
  s.scan([](const typename S::row_type&) {});
};

/// @brief A where_source that reads rows by a column's values through an
/// index (see the header comment); found by the flow with this concept, so
/// any other where_source is simply scanned.
template <class S>
concept slice_indexed_source =
    where_source<S> && requires(const S& s, std::string_view c, std::span<const where::value> values,
                                const where::window& range) {
      { s.locate(c, values) } -> std::same_as<decltype(s.locate(range))>;
      { *s.locate(c, values) } -> std::ranges::sized_range;
      s.read_located(*s.locate(c, values), [](const typename S::row_type&) {});
      { s.has_value_index(c) } -> std::convertible_to<bool>;
      { s.size() } -> std::convertible_to<std::uint64_t>;
    };

}  // namespace flowlib
