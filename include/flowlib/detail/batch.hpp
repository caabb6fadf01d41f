// flowlib/detail/batch.hpp
//
// What flows accept as a batch: any input range (standard or range-v3,
// containers, views, single-pass ranges) whose elements are the flow's row
// type. Internal.
#pragma once

#include <range/v3/range/access.hpp>
#include <range/v3/range/concepts.hpp>
#include <range/v3/range/traits.hpp>

#include <concepts>
#include <cstddef>
#include <ranges>
#include <type_traits>

namespace flowlib {

namespace detail {

template <class R>
struct batch_reference {};
template <class R>
  requires std::ranges::input_range<R>
struct batch_reference<R> {
  using type = std::ranges::range_reference_t<R>;
};
// range-v3's traits only when the standard ones do not apply: range-v3 0.12
// rejects move-only iterators (std::ranges::istream_view, generators).
template <class R>
  requires(!std::ranges::input_range<R> && ranges::input_range<R>)
struct batch_reference<R> {
  using type = ranges::range_reference_t<R>;
};
/// The reference type of an input range, std or range-v3.
template <class R>
using batch_reference_t = typename batch_reference<R>::type;

}  // namespace detail

/// @brief R is an input range (std or range-v3) of Row.
template <class R, class Row>
concept batch_of =
    (std::ranges::input_range<R> || ranges::input_range<R>) &&
    std::same_as<std::remove_cvref_t<detail::batch_reference_t<R>>, Row>;

namespace detail {

/// Whether the elements of R may be moved from: only when the range yields
/// rvalues (a view of prvalues, views::move). Lvalue elements of a
/// container are copied even if the container itself is an rvalue, so a
/// failing batch never costs the caller its data.
template <class R>
inline constexpr bool movable_elements = !std::is_lvalue_reference_v<batch_reference_t<R>>;

/// The batch's size when it is cheap to know, else 0 (a reservation hint).
template <class R>
std::size_t size_hint(R& r) {
  if constexpr (std::ranges::sized_range<R>) {
    return static_cast<std::size_t>(std::ranges::size(r));
  } else if constexpr (ranges::sized_range<R>) {
    return static_cast<std::size_t>(ranges::size(r));
  } else {
    return 0;
  }
}

}  // namespace detail
}  // namespace flowlib
