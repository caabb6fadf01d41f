// flowlib/where/value.hpp
//
// flowlib::where::value: the values a REPLACE WHERE predicate computes with
// (null, bool, int64, double, string, date, timestamp, interval), the
// literal helpers (w::date, w::days, w::hours, ...), the update's context
// (logical clock and random seed), and the value operations every part of
// the expression language shares:
//
//   - compare(a, b): SQL comparison. int64 and double compare as numbers; a
//     date compares with a timestamp as the timestamp of its midnight UTC;
//     string with string, bool with bool, interval with interval. Any other
//     pair is incomparable (nullopt), and a null on either side is unknown
//     (compare_result::unknown).
//   - add / subtract: date/timestamp +/- interval, number +/- number,
//     interval +/- interval; a null operand gives null.
//   - operator== / operator< / std::hash: STRUCTURAL (same kind, same
//     payload; int64 1 and double 1.0 differ), for containers and sorting.
//     Use compare() for SQL meaning.
//
// Encodings: a date is std::chrono::sys_days (days since 1970-01-01); a
// timestamp is sys_time<microseconds> (UTC); an interval is a number of
// days plus a number of microseconds (a day is 24 hours: the clock is UTC).
#pragma once

#include <flowlib/detail/type_traits.hpp>

#include <charconv>
#include <chrono>
#include <compare>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>  // std::bad_variant_access

namespace flowlib::where {

/// @brief A calendar date (days since 1970-01-01).
using date_type = std::chrono::sys_days;
/// @brief A UTC timestamp with microsecond resolution.
using timestamp_type = std::chrono::sys_time<std::chrono::microseconds>;

/// @brief A length of time: whole days plus microseconds.
struct interval {
  std::int64_t days = 0;    ///< calendar days (24 h each)
  std::int64_t micros = 0;  ///< microseconds
  friend bool operator==(const interval&, const interval&) = default;
  friend auto operator<=>(const interval&, const interval&) = default;
  /// The total length in microseconds.
  constexpr std::int64_t total_micros() const noexcept { return days * 86'400'000'000LL + micros; }
};

/// @brief The kind of a value (its SQL type).
enum class kind : std::uint8_t { null, boolean, int64, float64, string, date, timestamp, interval };

/// @brief The SQL-ish name of a kind ("int64", "date", ...), for messages.
constexpr std::string_view to_string(kind k) noexcept {
  switch (k) {
    case kind::null: return "null";
    case kind::boolean: return "bool";
    case kind::int64: return "int64";
    case kind::float64: return "double";
    case kind::string: return "string";
    case kind::date: return "date";
    case kind::timestamp: return "timestamp";
    case kind::interval: return "interval";
  }
  return "?";
}

/// @brief C++ types a value (and so a literal in a predicate) is made from.
template <class T>
concept value_source =
    std::same_as<std::remove_cvref_t<T>, std::nullopt_t> || std::same_as<std::remove_cvref_t<T>, bool> ||
    (std::integral<std::remove_cvref_t<T>> && !std::same_as<std::remove_cvref_t<T>, bool>) ||
    std::floating_point<std::remove_cvref_t<T>> || std::convertible_to<T, std::string_view> ||
    std::same_as<std::remove_cvref_t<T>, std::chrono::year_month_day> ||
    std::same_as<std::remove_cvref_t<T>, interval> ||
    requires(const std::remove_cvref_t<T>& t) {
      { std::chrono::time_point_cast<std::chrono::microseconds>(t) }
        -> std::same_as<timestamp_type>;
    };

/// @brief One value: null, bool, int64, double, string, date, timestamp or
/// interval. Equality and ordering are structural (see the header comment).
class value {
 public:
  /// @brief Null.
  value() noexcept = default;
  value(std::nullopt_t) noexcept {}
  value(bool b) noexcept : k_(kind::boolean), i_(b ? 1 : 0) {}
  template <std::integral T>
    requires(!std::same_as<T, bool>)
  value(T i) noexcept : k_(kind::int64), i_(static_cast<std::int64_t>(i)) {}
  template <std::floating_point T>
  value(T d) noexcept : k_(kind::float64), d_(static_cast<double>(d)) {}
  value(const char* s) : k_(kind::string), s_(s) {}
  value(std::string s) noexcept : k_(kind::string), s_(std::move(s)) {}
  value(std::string_view s) : k_(kind::string), s_(s) {}
  value(date_type d) noexcept : k_(kind::date), i_(d.time_since_epoch().count()) {}
  value(std::chrono::year_month_day d) : value(date_type(d)) {}
  /// A timestamp: any system_clock time point, truncated towards the past
  /// to microseconds.
  template <class D>
  value(std::chrono::sys_time<D> t) noexcept
      : k_(kind::timestamp),
        i_(std::chrono::floor<std::chrono::microseconds>(t).time_since_epoch().count()) {}
  value(interval i) noexcept : k_(kind::interval), i_(i.days), j_(i.micros) {}
  /// @brief Null when empty, else the contained value.
  template <class T>
    requires std::constructible_from<value, const T&>
  value(const std::optional<T>& o) {
    if (o) *this = value(*o);
  }

  kind type() const noexcept { return k_; }
  bool is_null() const noexcept { return k_ == kind::null; }
  // The accessors throw std::bad_variant_access when the value is of
  // another kind.
  bool as_bool() const { return check(kind::boolean), i_ != 0; }
  std::int64_t as_int() const { return check(kind::int64), i_; }
  double as_double() const { return check(kind::float64), d_; }
  const std::string& as_string() const { return check(kind::string), s_; }
  date_type as_date() const { return check(kind::date), date_type(std::chrono::days(i_)); }
  timestamp_type as_timestamp() const {
    return check(kind::timestamp), timestamp_type(std::chrono::microseconds(i_));
  }
  interval as_interval() const { return check(kind::interval), interval{i_, j_}; }
  /// int64 or double as a double.
  double as_number() const { return k_ == kind::int64 ? static_cast<double>(i_) : as_double(); }

  /// Structural equality: same kind and same payload.
  friend bool operator==(const value& a, const value& b) noexcept {
    return a.k_ == b.k_ && a.i_ == b.i_ && a.j_ == b.j_ && a.d_ == b.d_ && a.s_ == b.s_;
  }
  /// Structural order: by kind, then payload (NaN sorts as equal to all).
  friend bool operator<(const value& a, const value& b) noexcept {
    if (a.k_ != b.k_) return a.k_ < b.k_;
    if (a.i_ != b.i_) return a.i_ < b.i_;
    if (a.j_ != b.j_) return a.j_ < b.j_;
    if (a.d_ != b.d_) return a.d_ < b.d_;
    return a.s_ < b.s_;
  }

  /// The value as a SQL literal: NULL, TRUE, 42, 0.5, 'it''s',
  /// DATE '2026-01-30', TIMESTAMP '2026-01-30 06:00:00', INTERVAL 7 DAYS.
  std::string to_string() const;

 private:
  void check(kind k) const {
    if (k_ != k) throw std::bad_variant_access();
  }

  // A tagged record rather than a std::variant: cheaper to compare and
  // hash, and free of g++ 12's false maybe-uninitialized warnings on
  // variants holding a std::string. Unused fields stay zero/empty, so
  // structural equality may compare every field.
  kind k_ = kind::null;
  std::int64_t i_ = 0;  // bool, int64, date (days), timestamp (micros), interval days
  std::int64_t j_ = 0;  // interval micros
  double d_ = 0;        // double
  std::string s_;       // string
};

/// @brief The date y-m-d (w::date(2026, 1, 30)).
inline value date(int y, unsigned m, unsigned d) {
  return value(date_type(std::chrono::year{y} / std::chrono::month{m} / std::chrono::day{d}));
}
/// @brief The timestamp y-m-d h:mi:s UTC.
inline value timestamp(int y, unsigned m, unsigned d, int h = 0, int mi = 0, int s = 0) {
  return value(timestamp_type(date_type(std::chrono::year{y} / std::chrono::month{m} /
                                        std::chrono::day{d})) +
               std::chrono::hours(h) + std::chrono::minutes(mi) + std::chrono::seconds(s));
}
/// @brief An interval of n days.
inline value days(std::int64_t n) { return value(interval{n, 0}); }
/// @brief An interval of n hours.
inline value hours(std::int64_t n) { return value(interval{0, n * 3'600'000'000LL}); }
/// @brief An interval of n minutes.
inline value minutes(std::int64_t n) { return value(interval{0, n * 60'000'000LL}); }
/// @brief An interval of n seconds.
inline value seconds(std::int64_t n) { return value(interval{0, n * 1'000'000LL}); }
/// @brief An interval of n microseconds.
inline value microseconds(std::int64_t n) { return value(interval{0, n}); }

/// @brief The context of one update: its logical clock and the seed of
/// rand(). current_date() is the UTC day of `now`.
struct context {
  timestamp_type now{};    ///< the update's logical clock (UTC)
  std::uint64_t seed = 0;  ///< seeds rand(): equal seeds, equal draws

  context() = default;
  constexpr context(timestamp_type now_at, std::uint64_t rand_seed = 0) noexcept
      : now(now_at), seed(rand_seed) {}
  /// `now` may be any system-clock time point (a
  /// std::chrono::system_clock::time_point such as UpdateOptions::now, or a
  /// sys_time of seconds, days, ...): it is floored to microseconds, the
  /// predicates' resolution.
  template <class Duration>
    requires(!std::is_same_v<Duration, std::chrono::microseconds>)
  constexpr context(std::chrono::sys_time<Duration> now_at, std::uint64_t rand_seed = 0) noexcept
      : now(std::chrono::floor<std::chrono::microseconds>(now_at)), seed(rand_seed) {}
  /// The UTC day of now.
  date_type current_date() const noexcept { return std::chrono::floor<std::chrono::days>(now); }
};

/// @brief Result of a SQL comparison.
enum class compare_result : std::uint8_t { less, equal, greater, unknown };

namespace detail {

inline constexpr std::int64_t micros_per_day = 86'400'000'000LL;

/// Numeric/temporal class used to decide comparability.
enum class type_class : std::uint8_t { null, boolean, number, string, temporal, interval };

constexpr type_class class_of(kind k) noexcept {
  switch (k) {
    case kind::null: return type_class::null;
    case kind::boolean: return type_class::boolean;
    case kind::int64:
    case kind::float64: return type_class::number;
    case kind::string: return type_class::string;
    case kind::date:
    case kind::timestamp: return type_class::temporal;
    case kind::interval: return type_class::interval;
  }
  return type_class::null;
}

/// Whether values of kinds a and b can be compared (null compares with all).
constexpr bool comparable(kind a, kind b) noexcept {
  const auto ca = class_of(a), cb = class_of(b);
  return ca == type_class::null || cb == type_class::null || ca == cb;
}

template <class T>
constexpr compare_result three_way(const T& a, const T& b) noexcept {
  if (a < b) return compare_result::less;
  if (b < a) return compare_result::greater;
  if (a == b) return compare_result::equal;
  return compare_result::unknown;  // NaN
}

inline void append_2(std::string& s, unsigned v) {
  s += static_cast<char>('0' + (v / 10) % 10);
  s += static_cast<char>('0' + v % 10);
}

inline std::string format_date(date_type d) {
  const std::chrono::year_month_day ymd(d);
  std::string s = std::to_string(static_cast<int>(ymd.year()));
  while (s.size() < 4) s.insert(s.begin(), '0');
  s += '-';
  append_2(s, static_cast<unsigned>(ymd.month()));
  s += '-';
  append_2(s, static_cast<unsigned>(ymd.day()));
  return s;
}

inline std::string format_timestamp(timestamp_type t) {
  const date_type d = std::chrono::floor<std::chrono::days>(t);
  std::int64_t us = (t - timestamp_type(d)).count();
  std::string s = format_date(d);
  s += ' ';
  const auto secs = us / 1'000'000;
  us %= 1'000'000;
  append_2(s, static_cast<unsigned>(secs / 3600));
  s += ':';
  append_2(s, static_cast<unsigned>(secs / 60 % 60));
  s += ':';
  append_2(s, static_cast<unsigned>(secs % 60));
  if (us != 0) {
    std::string f = std::to_string(us);
    s += '.' + std::string(6 - f.size(), '0') + f;
  }
  return s;
}

inline std::string format_double(double d) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, d);
  std::string s(buf, r.ptr);
  if (s.find_first_of(".eni") == std::string::npos) s += ".0";
  return s;
}

inline std::string format_interval(interval i) {
  std::string s;
  auto part = [&](std::int64_t n, const char* one, const char* many) {
    if (!s.empty()) s += ' ';
    s += std::to_string(n) + ' ' + (n == 1 || n == -1 ? one : many);
  };
  if (i.days != 0 || i.micros == 0) part(i.days, "DAY", "DAYS");
  if (i.micros != 0) {
    const std::int64_t us = i.micros;
    if (us % 3'600'000'000LL == 0) part(us / 3'600'000'000LL, "HOUR", "HOURS");
    else if (us % 60'000'000LL == 0) part(us / 60'000'000LL, "MINUTE", "MINUTES");
    else if (us % 1'000'000LL == 0) part(us / 1'000'000LL, "SECOND", "SECONDS");
    else part(us, "MICROSECOND", "MICROSECONDS");
  }
  return "INTERVAL " + s;
}

inline std::string quote(std::string_view s) {
  std::string q = "'";
  for (char c : s) {
    if (c == '\'') q += '\'';
    q += c;
  }
  return q + "'";
}

}  // namespace detail

inline std::string value::to_string() const {
  switch (type()) {
    case kind::null: return "NULL";
    case kind::boolean: return as_bool() ? "TRUE" : "FALSE";
    case kind::int64: return std::to_string(as_int());
    case kind::float64: return detail::format_double(as_double());
    case kind::string: return detail::quote(as_string());
    case kind::date: return "DATE '" + detail::format_date(as_date()) + "'";
    case kind::timestamp: return "TIMESTAMP '" + detail::format_timestamp(as_timestamp()) + "'";
    case kind::interval: return detail::format_interval(as_interval());
  }
  return "?";
}

/// @brief SQL comparison of a and b (see the header comment): unknown when
/// either is null (or a NaN is involved), nullopt when the kinds cannot be
/// compared (string with number, ...).
inline std::optional<compare_result> compare(const value& a, const value& b) {
  using detail::three_way;
  if (a.is_null() || b.is_null()) return compare_result::unknown;
  const kind ka = a.type(), kb = b.type();
  if (!detail::comparable(ka, kb)) return std::nullopt;
  switch (detail::class_of(ka)) {
    case detail::type_class::boolean: return three_way(a.as_bool(), b.as_bool());
    case detail::type_class::number:
      if (ka == kind::int64 && kb == kind::int64) return three_way(a.as_int(), b.as_int());
      return three_way(a.as_number(), b.as_number());
    case detail::type_class::string: return three_way(a.as_string(), b.as_string());
    case detail::type_class::temporal: {
      if (ka == kind::date && kb == kind::date) return three_way(a.as_date(), b.as_date());
      auto micros = [](const value& v) {
        return v.type() == kind::date ? timestamp_type(v.as_date()) : v.as_timestamp();
      };
      return three_way(micros(a), micros(b));
    }
    case detail::type_class::interval:
      return three_way(a.as_interval().total_micros(), b.as_interval().total_micros());
    case detail::type_class::null: break;
  }
  return compare_result::unknown;
}

/// @brief a + b, or a - b when `negate`: date/timestamp +/- interval (a
/// date plus whole days stays a date, otherwise it becomes a timestamp),
/// number +/- number (int64 when both are int64), interval +/- interval,
/// interval + date/timestamp. Null when either is null; nullopt when the
/// kinds do not combine.
inline std::optional<value> add(const value& a, const value& b, bool negate = false) {
  if (a.is_null() || b.is_null()) return value{};
  const kind ka = a.type(), kb = b.type();
  const std::int64_t sign = negate ? -1 : 1;
  if ((ka == kind::int64 || ka == kind::float64) && (kb == kind::int64 || kb == kind::float64)) {
    if (ka == kind::int64 && kb == kind::int64) return value(a.as_int() + sign * b.as_int());
    return value(a.as_number() + static_cast<double>(sign) * b.as_number());
  }
  if (ka == kind::interval && kb == kind::interval)
    return value(interval{a.as_interval().days + sign * b.as_interval().days,
                          a.as_interval().micros + sign * b.as_interval().micros});
  if (kb == kind::interval && (ka == kind::date || ka == kind::timestamp)) {
    const interval i = b.as_interval();
    if (ka == kind::date && i.micros == 0)
      return value(a.as_date() + std::chrono::days(sign * i.days));
    const timestamp_type t = ka == kind::date ? timestamp_type(a.as_date()) : a.as_timestamp();
    return value(t + std::chrono::microseconds(sign * i.total_micros()));
  }
  if (!negate && ka == kind::interval && (kb == kind::date || kb == kind::timestamp))
    return add(b, a, false);
  return std::nullopt;
}

}  // namespace flowlib::where

/// @brief Hash consistent with the structural operator== of where::value.
template <>
struct std::hash<flowlib::where::value> {
  std::size_t operator()(const flowlib::where::value& v) const noexcept {
    using flowlib::where::kind;
    std::size_t h = static_cast<std::size_t>(v.type()) * 0x9E3779B97F4A7C15ULL;
    auto mix = [&](std::size_t x) { h ^= x + 0x9E3779B97F4A7C15ULL + (h << 6) + (h >> 2); };
    switch (v.type()) {
      case kind::null: break;
      case kind::boolean: mix(v.as_bool() ? 1 : 0); break;
      case kind::int64: mix(std::hash<std::int64_t>{}(v.as_int())); break;
      case kind::float64: mix(std::hash<double>{}(v.as_double())); break;
      case kind::string: mix(std::hash<std::string>{}(v.as_string())); break;
      case kind::date: mix(std::hash<std::int64_t>{}(v.as_date().time_since_epoch().count())); break;
      case kind::timestamp:
        mix(std::hash<std::int64_t>{}(v.as_timestamp().time_since_epoch().count()));
        break;
      case kind::interval:
        mix(std::hash<std::int64_t>{}(v.as_interval().days));
        mix(std::hash<std::int64_t>{}(v.as_interval().micros));
        break;
    }
    return h;
  }
};
