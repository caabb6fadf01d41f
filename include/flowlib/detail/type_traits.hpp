// flowlib/detail/type_traits.hpp
//
// Traits shared by the column, schema and flow headers. Internal.
#pragma once

#include <absl/hash/hash.h>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <chrono>
#include <optional>
#include <string_view>
#include <type_traits>
#include <variant>

namespace flowlib::detail {

/// "No index": the one sentinel of every 32-bit row, slot, candidate and
/// group index in flowlib (a chain's end, an empty slot, "no row"). Row
/// ids are 32-bit (storage/row_store.hpp), so the largest value is never a
/// valid index.
inline constexpr std::uint32_t npos = std::numeric_limits<std::uint32_t>::max();

template <class... Ts>
struct type_list {
  static constexpr std::size_t size = sizeof...(Ts);
};

// --- std::optional --------------------------------------------------------
template <class T>
struct is_optional : std::false_type {};
template <class T>
struct is_optional<std::optional<T>> : std::true_type {};
template <class T>
inline constexpr bool is_optional_v = is_optional<std::remove_cvref_t<T>>::value;

template <class T>
struct unwrap_optional {
  using type = T;
};
template <class T>
struct unwrap_optional<std::optional<T>> {
  using type = T;
};
/// The column's value type with one level of std::optional removed.
template <class T>
using unwrap_optional_t = typename unwrap_optional<std::remove_cvref_t<T>>::type;

// --- time points ------------------------------------------------------------
/// A system-clock time point with an integral count: the time columns the
/// row codecs (durable tables, JSON, text) take, besides sys_days.
template <class T>
struct is_integral_sys_time : std::false_type {};
template <class D>
struct is_integral_sys_time<std::chrono::time_point<std::chrono::system_clock, D>>
    : std::bool_constant<std::is_integral_v<typename D::rep>> {};
template <class T>
inline constexpr bool is_integral_sys_time_v = is_integral_sys_time<std::remove_cvref_t<T>>::value;

// --- shapes that make poor keys -------------------------------------------
template <class T>
struct is_variant : std::false_type {};
template <class... Ts>
struct is_variant<std::variant<Ts...>> : std::true_type {};
template <class T>
inline constexpr bool is_variant_v = is_variant<std::remove_cvref_t<T>>::value;

/// Associative containers with a mapped type (std::map, absl::flat_hash_map, ...).
template <class T>
concept map_like = requires {
  typename T::key_type;
  typename T::mapped_type;
};

/// absl::Hash poisons itself (no default constructor) for types it cannot hash.
template <class T>
concept absl_hashable = std::is_default_constructible_v<absl::Hash<T>> &&
                        std::is_invocable_r_v<std::size_t, absl::Hash<T>, const T&>;

// --- member pointers --------------------------------------------------------
template <class M>
struct member_pointer_traits {
  static constexpr bool is_data_member = false;
};
template <class C, class T>
struct member_pointer_traits<T C::*> {
  static constexpr bool is_data_member = !std::is_function_v<T>;
  using class_type = C;
  using value_type = T;
};

template <auto M>
concept data_member_pointer = member_pointer_traits<decltype(M)>::is_data_member;

/// What every column policy (key, sequence, event time) is: a regular
/// object naming the row type it reads and the type of the value it gives.
template <class P>
concept row_value_policy = std::semiregular<P> && requires {
  typename P::row_type;
  typename P::value_type;
};

/// A value a flow orders and keeps: totally ordered, moved without throwing.
template <class T>
concept ordered_value = std::totally_ordered<T> && std::is_nothrow_move_constructible_v<T> &&
                        std::is_nothrow_move_assignable_v<T>;

template <auto M>
using member_class_t = typename member_pointer_traits<decltype(M)>::class_type;
template <auto M>
using member_value_t = typename member_pointer_traits<decltype(M)>::value_type;

/// True when A and B name the same data member (member pointers of different
/// types never compare, so compare the types first).
template <auto A, auto B>
constexpr bool same_member() {
  if constexpr (std::is_same_v<decltype(A), decltype(B)>) {
    return A == B;
  } else {
    return false;
  }
}

template <auto A, auto... Bs>
constexpr int count_same_member() {
  return (int{same_member<A, Bs>()} + ... + 0);
}

/// True when no data member appears twice in Ms.
template <auto... Ms>
constexpr bool all_distinct_members() {
  return ((count_same_member<Ms, Ms...>() == 1) && ...);
}

template <auto... Ms>
struct first_member_class {
  using type = void;
};
template <auto M, auto... Ms>
struct first_member_class<M, Ms...> {
  using type = member_class_t<M>;
};
/// The class of the first member pointer (void for none).
template <auto... Ms>
using first_member_class_t = typename first_member_class<Ms...>::type;

/// True when every member pointer belongs to the same class.
template <auto... Ms>
constexpr bool same_class_members() {
  return (std::is_same_v<first_member_class_t<Ms...>, member_class_t<Ms>> && ...);
}

}  // namespace flowlib::detail
