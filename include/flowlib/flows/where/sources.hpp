// flowlib/flows/where/sources.hpp
//
// What a REPLACE WHERE flow reads and how (R-WHERE-1, R-WHERE-7):
//
//   - `where_source<S>`: a source read as a whole table, not as a stream:
//     row_type, version() (grows with every change), changed_values(column,
//     since) (the distinct values of `column` among the rows changed after
//     version `since`; nullopt when the source cannot tell) and scan(f)
//     (f(const Row&) for every row held). flowlib::MemorySource has them.
// How the flow reads them is flows/where/detail/read.hpp's.
#pragma once

#include <flowlib/where/value.hpp>

#include <concepts>
#include <cstdint>
#include <optional>
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

}  // namespace flowlib
