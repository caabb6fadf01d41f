// flowlib/detail/fixed_string.hpp
//
// A string usable as a template argument, so that column names are part of
// types and can be matched at compile time.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string_view>

namespace flowlib::detail {

template <std::size_t N>
struct fixed_string {
  char data[N]{};
  constexpr fixed_string(const char (&s)[N]) noexcept { std::copy_n(s, N, data); }
  constexpr std::string_view view() const noexcept { return {data, N - 1}; }
  template <std::size_t M>
  constexpr bool operator==(const fixed_string<M>& o) const noexcept {
    return view() == o.view();
  }
};

}  // namespace flowlib::detail
