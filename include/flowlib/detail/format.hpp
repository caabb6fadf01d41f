// flowlib/detail/format.hpp
//
// Renders column values as text for error messages and examples: integers,
// strings, std::optional (null), enums, std::chrono time points and durations,
// tuples, and anything with an operator<<. Internal; never on a hot path.
#pragma once

#include <chrono>
#include <concepts>
#include <optional>
#include <ostream>
#include <sstream>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>

namespace flowlib::detail {

template <class T>
concept ostreamable = requires(std::ostream& os, const T& v) { os << v; };

template <class T>
struct is_tuple_like : std::false_type {};
template <class... Ts>
struct is_tuple_like<std::tuple<Ts...>> : std::true_type {};

template <class T>
void format_value(std::ostream& os, const T& v);

template <class T>
void format_value(std::ostream& os, const T& v) {
  if constexpr (std::is_same_v<T, bool>) {
    os << (v ? "true" : "false");
  } else if constexpr (std::is_same_v<T, std::nullopt_t>) {
    os << "null";
  } else if constexpr (requires { v.has_value(); *v; } && !std::is_pointer_v<T>) {
    if (v.has_value()) {
      format_value(os, *v);
    } else {
      os << "null";
    }
  } else if constexpr (std::is_convertible_v<const T&, std::string_view>) {
    os << '"' << std::string_view(v) << '"';
  } else if constexpr (std::is_enum_v<T>) {
    // Through format_value, so that a char-sized underlying type prints as
    // a number, not as a character.
    format_value(os, static_cast<std::underlying_type_t<T>>(v));
  } else if constexpr (requires { v.time_since_epoch().count(); }) {
    os << v.time_since_epoch().count();
  } else if constexpr (requires { v.count(); typename T::period; }) {
    os << v.count();
  } else if constexpr (is_tuple_like<T>::value) {
    os << '(';
    std::apply(
        [&](const auto&... xs) {
          std::size_t i = 0;
          ((os << (i++ ? ", " : ""), format_value(os, xs)), ...);
        },
        v);
    os << ')';
  } else if constexpr (std::is_same_v<T, char> || std::is_same_v<T, signed char> ||
                       std::is_same_v<T, unsigned char>) {
    os << static_cast<int>(v);
  } else if constexpr (ostreamable<T>) {
    os << v;
  } else {
    os << "<value>";
  }
}

/// Returns `v` as text ("null" for an empty optional, strings quoted).
template <class T>
std::string to_text(const T& v) {
  std::ostringstream os;
  format_value(os, v);
  return std::move(os).str();
}

}  // namespace flowlib::detail
