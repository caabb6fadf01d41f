// flowlib/detail/name_list.hpp
//
// name_list<"a", "b", ...>: a compile-time list of column names, the one
// name-list type of the shared by-name column walk (detail/column_pairs.hpp,
// its skipped columns), of Append's mapping (detail/by_name.hpp) and of the
// column options of the change-feed flows (flows/cdc/detail/option_traits.hpp).
// Internal.
#pragma once

#include <flowlib/detail/fixed_string.hpp>

#include <array>
#include <cstddef>
#include <string_view>

namespace flowlib::detail {

/// A compile-time list of column names.
template <fixed_string... Names>
struct name_list {
  static constexpr std::size_t size = sizeof...(Names);
  static constexpr std::array<std::string_view, size> names{Names.view()...};
  static constexpr bool contains(std::string_view n) noexcept {
    for (std::string_view x : names)
      if (x == n) return true;
    return false;
  }
};

/// name_list<A..., B...> from name_list<A...> and name_list<B...>.
template <class A, class B>
struct concat_name_lists;
template <fixed_string... A, fixed_string... B>
struct concat_name_lists<name_list<A...>, name_list<B...>> {
  using type = name_list<A..., B...>;
};

}  // namespace flowlib::detail
