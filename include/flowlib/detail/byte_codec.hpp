// flowlib/detail/byte_codec.hpp
//
// The byte encoding of flow and operator state, for checkpoints: the
// dedup operator's state (R-DEDUP-6) today, any flow's key index and
// sequences later. Internal.
//
// Encoding (fixed, platform-independent):
//   - integers and enums: their own width, little-endian (two's complement);
//   - bool: one byte, 0 or 1;
//   - std::string: u64 length, then the bytes (length-prefixed);
//   - std::optional<T>: u8 0 (null) or 1 followed by T;
//   - std::chrono durations and time points with an integer rep: the count;
//   - std::tuple<Ts...>: each element in order (no prefix).
// Other types are rejected at compile time (byte_encodable<T>).
//
// Decoding is bounds-checked: reading past the end (a truncated input, a
// string length running past the end), a bool or null flag other than 0 or
// 1, and trailing bytes in decode() throw flowlib::error
// (errc::invalid_argument) saying what was wrong and at which byte.
//
//   std::string bytes;
//   detail::byte_writer w{bytes};
//   detail::byte_codec<Key>::write(w, key);             // or detail::encode(key)
//   detail::byte_reader r{bytes, 0, "flow name", ""};
//   Key back = detail::byte_codec<Key>::read(r);        // or detail::decode<Key>(bytes, "flow name")
#pragma once

#include <flowlib/detail/type_traits.hpp>
#include <flowlib/error.hpp>
#include <flowlib/state.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

namespace flowlib::detail {

template <class T>
struct is_time_point_codec : std::false_type {};
template <class C, class D>
struct is_time_point_codec<std::chrono::time_point<C, D>> : std::true_type {};

// byte_writer and byte_reader are public (flowlib/state.hpp): they appear in
// every flow's write_checkpoint() signature.
using flowlib::byte_reader;
using flowlib::byte_writer;

template <class T>
struct is_std_tuple : std::false_type {};
template <class... Ts>
struct is_std_tuple<std::tuple<Ts...>> : std::true_type {};

template <class T>
struct is_duration : std::false_type {};
template <class R, class P>
struct is_duration<std::chrono::duration<R, P>> : std::true_type {};

/// Whether byte_codec<T> can encode T.
template <class T>
constexpr bool serialisable_key() {
  if constexpr (std::is_same_v<T, bool> || std::is_integral_v<T> || std::is_enum_v<T>) {
    return true;
  } else if constexpr (std::is_same_v<T, std::string>) {
    return true;
  } else if constexpr (is_optional_v<T>) {
    return serialisable_key<typename T::value_type>();
  } else if constexpr (is_duration<T>::value) {
    return std::is_integral_v<typename T::rep>;
  } else if constexpr (is_time_point_codec<T>::value) {
    return std::is_integral_v<typename T::rep>;
  } else if constexpr (is_std_tuple<T>::value) {
    return []<class... Ts>(std::type_identity<std::tuple<Ts...>>) {
      return (serialisable_key<Ts>() && ...);
    }(std::type_identity<T>{});
  } else {
    return false;
  }
}

/// The encoding of a value (see the header comment).
template <class T>
struct byte_codec {
  static void write(byte_writer& w, const T& v) {
    if constexpr (std::is_same_v<T, bool>) {
      w.integer<std::uint8_t>(v ? 1 : 0);
    } else if constexpr (std::is_integral_v<T>) {
      w.integer<T>(v);
    } else if constexpr (std::is_enum_v<T>) {
      w.integer<std::underlying_type_t<T>>(static_cast<std::underlying_type_t<T>>(v));
    } else if constexpr (std::is_same_v<T, std::string>) {
      w.bytes(v);
    } else if constexpr (is_optional_v<T>) {
      w.integer<std::uint8_t>(v.has_value() ? 1 : 0);
      if (v) byte_codec<typename T::value_type>::write(w, *v);
    } else if constexpr (is_duration<T>::value) {
      w.integer<typename T::rep>(v.count());
    } else if constexpr (is_time_point_codec<T>::value) {
      w.integer<typename T::rep>(v.time_since_epoch().count());
    } else {  // tuple
      std::apply([&](const auto&... xs) {
        (byte_codec<std::remove_cvref_t<decltype(xs)>>::write(w, xs), ...);
      }, v);
    }
  }
  static T read(byte_reader& r) {
    if constexpr (std::is_same_v<T, bool>) {
      const auto b = r.integer<std::uint8_t>();
      if (b > 1) r.fail("a boolean is neither 0 nor 1");
      return b == 1;
    } else if constexpr (std::is_integral_v<T>) {
      return r.integer<T>();
    } else if constexpr (std::is_enum_v<T>) {
      return static_cast<T>(r.integer<std::underlying_type_t<T>>());
    } else if constexpr (std::is_same_v<T, std::string>) {
      return std::string(r.bytes());
    } else if constexpr (is_optional_v<T>) {
      const auto present = r.integer<std::uint8_t>();
      if (present > 1) r.fail("an optional's null flag is neither 0 nor 1");
      if (present == 0) return T{};
      return T{byte_codec<typename T::value_type>::read(r)};
    } else if constexpr (is_duration<T>::value) {
      return T(r.integer<typename T::rep>());
    } else if constexpr (is_time_point_codec<T>::value) {
      return T(typename T::duration(r.integer<typename T::rep>()));
    } else {  // tuple: braced init evaluates left to right
      return []<class... Ts>(byte_reader& rd, std::type_identity<std::tuple<Ts...>>) {
        return std::tuple<Ts...>{byte_codec<Ts>::read(rd)...};
      }(r, std::type_identity<T>{});
    }
  }
};

/// Whether T has a byte encoding (see the header comment).
template <class T>
concept byte_encodable = serialisable_key<T>();

/// T's encoding as a new string.
template <class T>
std::string encode(const T& v) {
  static_assert(byte_encodable<T>,
                "flowlib byte codec: this type has no byte encoding; use integers, bool, enums, "
                "std::string, integer std::chrono durations or time points, std::optional or "
                "std::tuple of those.");
  std::string out;
  byte_writer w{out};
  byte_codec<T>::write(w, v);
  return out;
}

/// Decodes a T that must take all of `in`; throws flowlib::error naming
/// `owner` on truncated, malformed or trailing input.
template <class T>
T decode(std::string_view in, std::string_view owner) {
  static_assert(byte_encodable<T>,
                "flowlib byte codec: this type has no byte encoding; use integers, bool, enums, "
                "std::string, integer std::chrono durations or time points, std::optional or "
                "std::tuple of those.");
  byte_reader r{in, 0, owner, ""};
  T v = byte_codec<T>::read(r);
  if (r.pos != in.size()) r.fail("unexpected bytes after the value");
  return v;
}

/// The dedup operator's name for byte_codec (its keys are encoded with it).
template <class T>
using key_codec = byte_codec<T>;

}  // namespace flowlib::detail
