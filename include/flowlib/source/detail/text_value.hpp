// flowlib/source/detail/text_value.hpp
//
// One column value from text: the parsing rules shared by the sources that
// read text (CSV fields, JSON strings holding dates and times, Kafka keys).
// Internal.
//
//   std::int32_t n;
//   std::string why = detail::parse_text("42", n);   // "" and n == 42
//   why = detail::parse_text("4e9", n);              // "not an integer"
//
// Contract: parse_text(text, out) returns "" on success, else a short
// reason ("not an integer", "out of range for a 32-bit integer", "not an
// ISO 8601 date"); `out` is unspecified on failure. Accepted forms, and
// nothing else (no surrounding spaces, no '+' sign):
//   - bool: "true", "false", "1", "0";
//   - integers: decimal, range-checked against the column's type; enums:
//     their underlying integer;
//   - float, double: std::from_chars (general format; "nan", "inf",
//     "infinity" in any case); a value beyond the type's range is refused;
//   - std::string: the text as is;
//   - std::chrono::sys_days: "YYYY-MM-DD", a real calendar date
//     (2023-02-30 is refused);
//   - a system_clock time point with an integral count:
//     "YYYY-MM-DD(T|t| )HH:MM:SS[.fraction][Z|z|+hh:mm|-hh:mm|+hhmm|+hh]":
//     no zone means UTC; the fraction has 1 to 9 digits; hours 00-23,
//     minutes and seconds 00-59 (no leap second); the instant is rounded
//     down to the time point's duration (floor, also before 1970);
//   - std::optional<T>: empty text is std::nullopt, anything else is a T.
// text_parsable<T> says whether T is one of these.
//
// Why by hand rather than std::chrono::parse or strptime: g++ 12's
// libstdc++ has no std::chrono::parse, strptime depends on the locale and
// accepts dates such as February 30; and this sits on the sources' hot
// path, where a scan over a few fixed positions is the cheapest check.
// Instants are computed in 128-bit nanoseconds, so every year 0000-9999 is
// exact for any duration, and the result is range-checked against the
// time point's count type.
#pragma once

#include <flowlib/detail/type_traits.hpp>

#include <charconv>
#include <chrono>
#include <climits>
#include <cstdint>
#include <limits>
#include <optional>
#include <ratio>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>

namespace flowlib::detail {

template <class T>
struct text_parsable_t
    : std::bool_constant<std::is_same_v<T, bool> || std::is_integral_v<T> || std::is_enum_v<T> ||
                         std::is_same_v<T, float> || std::is_same_v<T, double> ||
                         std::is_same_v<T, std::string> ||
                         std::is_same_v<T, std::chrono::sys_days> || is_integral_sys_time_v<T>> {};
template <class T>
struct text_parsable_t<std::optional<T>> : text_parsable_t<T> {};

/// True for the column types parse_text reads (see the header comment).
template <class T>
inline constexpr bool text_parsable = text_parsable_t<T>::value;

/// "a 32-bit integer", "an unsigned 8-bit integer": for range messages.
template <class I>
constexpr std::string_view integer_type_name() noexcept {
  constexpr int bits = static_cast<int>(sizeof(I) * CHAR_BIT);
  if constexpr (std::is_signed_v<I>) {
    if constexpr (bits == 8) return "an 8-bit integer";
    else if constexpr (bits == 16) return "a 16-bit integer";
    else if constexpr (bits == 32) return "a 32-bit integer";
    else return "a 64-bit integer";
  } else {
    if constexpr (bits == 8) return "an unsigned 8-bit integer";
    else if constexpr (bits == 16) return "an unsigned 16-bit integer";
    else if constexpr (bits == 32) return "an unsigned 32-bit integer";
    else return "an unsigned 64-bit integer";
  }
}

inline std::string text_out_of_range(std::string_view type_name) {
  std::string s = "out of range for ";
  s += type_name;
  return s;
}

/// Decimal integer of type I (not bool).
template <class I>
std::string parse_text_integer(std::string_view text, I& out) {
  const char* first = text.data();
  const char* last = first + text.size();
  if (text.empty()) return "not an integer";
  if constexpr (std::is_unsigned_v<I>) {
    if (text[0] == '-') {
      // "-5" is an integer, just not one this column can hold.
      std::int64_t probe = 0;
      const auto [p, ec] = std::from_chars(first, last, probe);
      if (p != last || (ec != std::errc{} && ec != std::errc::result_out_of_range))
        return "not an integer";
      if (ec == std::errc{} && probe == 0) {
        out = 0;
        return {};
      }
      return text_out_of_range(integer_type_name<I>());
    }
  }
  const auto [p, ec] = std::from_chars(first, last, out);
  if (ec == std::errc::result_out_of_range) {
    // from_chars stops at the number's end even when out of range.
    if (p != last) return "not an integer";
    return text_out_of_range(integer_type_name<I>());
  }
  if (ec != std::errc{} || p != last) return "not an integer";
  return {};
}

/// float or double through std::from_chars.
template <class F>
std::string parse_text_float(std::string_view text, F& out) {
  const char* first = text.data();
  const char* last = first + text.size();
  const auto [p, ec] = std::from_chars(first, last, out);
  if (ec == std::errc::result_out_of_range && p == last) {
    return text_out_of_range(std::is_same_v<F, float> ? "a float" : "a double");
  }
  if (ec != std::errc{} || p != last || text.empty()) {
    return std::is_same_v<F, float> ? "not a float" : "not a number";
  }
  return {};
}

/// `n` ASCII digits at text[pos...]; false when one is not a digit.
constexpr bool text_digits(std::string_view text, std::size_t pos, std::size_t n,
                           int& out) noexcept {
  if (pos + n > text.size()) return false;
  int v = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const char c = text[pos + i];
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  out = v;
  return true;
}

/// "YYYY-MM-DD" at the start of `text` (exactly 10 characters read).
inline bool text_date_prefix(std::string_view text, std::chrono::sys_days& out) noexcept {
  int y = 0, m = 0, d = 0;
  if (text.size() < 10 || text[4] != '-' || text[7] != '-') return false;
  if (!text_digits(text, 0, 4, y) || !text_digits(text, 5, 2, m) || !text_digits(text, 8, 2, d))
    return false;
  const std::chrono::year_month_day ymd{std::chrono::year{y},
                                        std::chrono::month{static_cast<unsigned>(m)},
                                        std::chrono::day{static_cast<unsigned>(d)}};
  if (!ymd.ok()) return false;
  out = std::chrono::sys_days{ymd};
  return true;
}

inline std::string parse_text_date(std::string_view text, std::chrono::sys_days& out) {
  if (text.size() != 10 || !text_date_prefix(text, out)) return "not an ISO 8601 date";
  return {};
}

/// Seconds since 1970-01-01T00:00:00Z (rounded down) and the nanoseconds
/// after them (0..999999999) of an ISO 8601 date-time; false when `text` is
/// not one (see the header comment for the forms).
inline bool text_timestamp_parts(std::string_view text, std::int64_t& secs_out,
                                 std::int64_t& frac_out) noexcept {
  std::chrono::sys_days day;
  if (text.size() < 19 || !text_date_prefix(text, day)) return false;
  const char sep = text[10];
  if (sep != 'T' && sep != 't' && sep != ' ') return false;
  int hh = 0, mi = 0, ss = 0;
  if (!text_digits(text, 11, 2, hh) || text[13] != ':' || !text_digits(text, 14, 2, mi) ||
      text[16] != ':' || !text_digits(text, 17, 2, ss))
    return false;
  if (hh > 23 || mi > 59 || ss > 59) return false;
  std::size_t pos = 19;
  std::int64_t frac_ns = 0;
  if (pos < text.size() && text[pos] == '.') {
    ++pos;
    std::size_t digits = 0;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
      if (++digits > 9) return false;
      frac_ns = frac_ns * 10 + (text[pos] - '0');
      ++pos;
    }
    if (digits == 0) return false;
    for (std::size_t i = digits; i < 9; ++i) frac_ns *= 10;
  }
  std::int64_t offset_s = 0;
  if (pos < text.size()) {
    const char z = text[pos];
    if (z == 'Z' || z == 'z') {
      ++pos;
    } else if (z == '+' || z == '-') {
      int oh = 0, om = 0;
      if (!text_digits(text, pos + 1, 2, oh)) return false;
      pos += 3;
      if (pos < text.size()) {
        if (text[pos] == ':') ++pos;
        if (!text_digits(text, pos, 2, om)) return false;
        pos += 2;
      }
      if (oh > 23 || om > 59) return false;
      offset_s = (oh * 3600 + om * 60) * (z == '+' ? 1 : -1);
    } else {
      return false;
    }
  }
  if (pos != text.size()) return false;
  const std::int64_t secs = static_cast<std::int64_t>(day.time_since_epoch().count()) * 86400 +
                            hh * 3600 + mi * 60 + ss - offset_s;
  secs_out = secs;
  frac_out = frac_ns;
  return true;
}

/// floor(a / b) for b > 0.
constexpr __int128 text_floor_div(__int128 a, __int128 b) noexcept {
  __int128 q = a / b;
  if ((a % b != 0) && (a < 0)) --q;
  return q;
}

template <class D>
std::string parse_text_time(std::string_view text,
                            std::chrono::time_point<std::chrono::system_clock, D>& out) {
  using rep = typename D::rep;
  using period = typename D::period;
  std::int64_t secs = 0, frac_ns = 0;
  if (!text_timestamp_parts(text, secs, frac_ns)) return "not an ISO 8601 timestamp";
  if constexpr (period::num == 1 && 1'000'000'000 % period::den == 0) {
    // Seconds or a decimal fraction of one (the usual units): 64-bit
    // arithmetic; ns >= 0 or not, floor(ns / step) is exact this way.
    constexpr std::int64_t step = 1'000'000'000 / period::den;
    std::int64_t count = 0;
    if (__builtin_mul_overflow(secs, static_cast<std::int64_t>(period::den), &count) ||
        __builtin_add_overflow(count, frac_ns / step, &count) || !std::in_range<rep>(count)) {
      return "out of range for the time point's count type";
    }
    out = std::chrono::time_point<std::chrono::system_clock, D>{D{static_cast<rep>(count)}};
    return {};
  }
  const __int128 ns = static_cast<__int128>(secs) * 1'000'000'000 + frac_ns;
  // count = floor(ns * den / (num * 1e9))
  static_assert(period::den <= 1'000'000'000'000'000'000 && period::num <= 1'000'000'000'000,
                "flowlib: a time point column's duration must have a period between "
                "1e-18 s and 1e12 s to be read from text");
  const __int128 count =
      text_floor_div(ns * static_cast<__int128>(period::den),
                     static_cast<__int128>(period::num) * 1'000'000'000);
  if (count < static_cast<__int128>(std::numeric_limits<rep>::min()) ||
      count > static_cast<__int128>(std::numeric_limits<rep>::max())) {
    return "out of range for the time point's count type";
  }
  out = std::chrono::time_point<std::chrono::system_clock, D>{D{static_cast<rep>(count)}};
  return {};
}

/// Parses `text` into `out`: see the header comment.
template <class T>
std::string parse_text(std::string_view text, T& out) {
  static_assert(text_parsable<T>,
                "flowlib: this column type cannot be read from text; use bool, an integer, an "
                "enum, float, double, std::string, std::chrono::sys_days, a system_clock time "
                "point with an integral count, or std::optional of one of them");
  if constexpr (std::is_same_v<T, bool>) {
    if (text == "true" || text == "1") {
      out = true;
    } else if (text == "false" || text == "0") {
      out = false;
    } else {
      return "not a boolean";
    }
    return {};
  } else if constexpr (std::is_enum_v<T>) {
    std::underlying_type_t<T> v{};
    auto why = parse_text_integer(text, v);
    if (why.empty()) out = static_cast<T>(v);
    return why;
  } else if constexpr (std::is_integral_v<T>) {
    return parse_text_integer(text, out);
  } else if constexpr (std::is_floating_point_v<T>) {
    return parse_text_float(text, out);
  } else if constexpr (std::is_same_v<T, std::string>) {
    out.assign(text.data(), text.size());
    return {};
  } else if constexpr (std::is_same_v<T, std::chrono::sys_days>) {
    return parse_text_date(text, out);
  } else if constexpr (is_integral_sys_time_v<T>) {
    return parse_text_time(text, out);
  } else {  // std::optional<U>
    if (text.empty()) {
      out.reset();
      return {};
    }
    if (!out) out.emplace();
    return parse_text(text, *out);
  }
}

}  // namespace flowlib::detail
