// flowlib/detail/key_hash.hpp
//
// How flowlib hashes key values: with absl::Hash, extended to the standard
// types absl does not hash and users cannot give a hook (one may not add
// AbslHashValue overloads to namespace std): std::chrono durations, time
// points and calendar dates (year_month_day, year, month, day), also inside
// std::optional, std::pair and std::tuple keys. A type absl hashes is hashed
// exactly as absl::Hash<T> does, so `key_hash<T>{}(v) == absl::Hash<T>{}(v)`
// there. Internal.
#pragma once

#include <flowlib/detail/type_traits.hpp>

#include <absl/hash/hash.h>

#include <chrono>
#include <cstddef>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>

namespace flowlib::detail {

template <class T>
struct chrono_hash_traits : std::false_type {};
template <class Rep, class Period>
struct chrono_hash_traits<std::chrono::duration<Rep, Period>> : std::true_type {
  static Rep parts(const std::chrono::duration<Rep, Period>& d) noexcept { return d.count(); }
};
template <class Clock, class Dur>
struct chrono_hash_traits<std::chrono::time_point<Clock, Dur>> : std::true_type {
  static auto parts(const std::chrono::time_point<Clock, Dur>& t) noexcept {
    return t.time_since_epoch().count();
  }
};
template <>
struct chrono_hash_traits<std::chrono::year_month_day> : std::true_type {
  static auto parts(const std::chrono::year_month_day& d) noexcept {
    return std::tuple<int, unsigned, unsigned>(static_cast<int>(d.year()),
                                               static_cast<unsigned>(d.month()),
                                               static_cast<unsigned>(d.day()));
  }
};
template <>
struct chrono_hash_traits<std::chrono::year> : std::true_type {
  static int parts(const std::chrono::year& y) noexcept { return static_cast<int>(y); }
};
template <>
struct chrono_hash_traits<std::chrono::month> : std::true_type {
  static unsigned parts(const std::chrono::month& m) noexcept { return static_cast<unsigned>(m); }
};
template <>
struct chrono_hash_traits<std::chrono::day> : std::true_type {
  static unsigned parts(const std::chrono::day& d) noexcept { return static_cast<unsigned>(d); }
};

template <class T>
struct is_tuple_like_key : std::false_type {};
template <class... Ts>
struct is_tuple_like_key<std::tuple<Ts...>> : std::true_type {};
template <class A, class B>
struct is_tuple_like_key<std::pair<A, B>> : std::true_type {};

/// Whether flowlib can hash T: absl can, or T is one of the extended types
/// above (or an optional, pair or tuple of hashable types).
template <class T>
constexpr bool key_hashable_v = [] {
  using U = std::remove_cvref_t<T>;
  if constexpr (absl_hashable<U>) {
    return true;
  } else if constexpr (chrono_hash_traits<U>::value) {
    return true;
  } else if constexpr (is_optional_v<U>) {
    return key_hashable_v<typename U::value_type>;
  } else if constexpr (is_tuple_like_key<U>::value) {
    return []<std::size_t... I>(std::index_sequence<I...>) {
      return (key_hashable_v<std::tuple_element_t<I, U>> && ...);
    }(std::make_index_sequence<std::tuple_size_v<U>>{});
  } else {
    return false;
  }
}();

template <class T>
concept key_hashable = key_hashable_v<T>;

/// Feeds `v` into an absl hash state, part by part where absl cannot.
template <class H, class T>
H combine_key(H h, const T& v) {
  if constexpr (absl_hashable<T>) {
    return H::combine(std::move(h), v);
  } else if constexpr (chrono_hash_traits<T>::value) {
    return H::combine(std::move(h), chrono_hash_traits<T>::parts(v));
  } else if constexpr (is_optional_v<T>) {
    // As absl hashes an optional: the value, then whether there is one.
    if (v.has_value()) return H::combine(combine_key(std::move(h), *v), true);
    return H::combine(std::move(h), false);
  } else {
    static_assert(is_tuple_like_key<T>::value, "flowlib: not a hashable key type");
    return std::apply(
        [&](const auto&... parts) {
          ((h = combine_key(std::move(h), parts)), ...);
          return std::move(h);
        },
        v);
  }
}

/// A reference absl can hash, through combine_key.
template <class T>
struct key_hash_ref {
  const T* value;
  template <class H>
  friend H AbslHashValue(H h, const key_hash_ref& r) {
    return combine_key(std::move(h), *r.value);
  }
};

/// The hash flowlib uses for key values (absl::Hash<T> where absl hashes T).
template <class T>
struct key_hash {
  std::size_t operator()(const T& v) const {
    if constexpr (absl_hashable<T>) {
      return absl::Hash<T>{}(v);
    } else {
      return absl::Hash<key_hash_ref<T>>{}(key_hash_ref<T>{&v});
    }
  }
};

/// key_hash of the tuple of `parts` (of the part itself, for one), without
/// building it.
template <class... Ts>
std::size_t hash_of(const Ts&... parts) {
  if constexpr ((absl_hashable<Ts> && ...)) {
    return absl::HashOf(parts...);
  } else {
    const std::tuple<const Ts&...> t(parts...);
    return absl::Hash<key_hash_ref<std::tuple<const Ts&...>>>{}(
        key_hash_ref<std::tuple<const Ts&...>>{&t});
  }
}

}  // namespace flowlib::detail
