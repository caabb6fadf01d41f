// flowlib/ops/watermark.hpp
//
// Event time and watermarks for stream operators
// (docs/semantics.md#deduplication-within-a-watermark, R-DEDUP-2 and R-DEDUP-5).
//
//   flowlib::EventTime<&Click::click_ts>   the event-time column of a row
//   flowlib::watermark_policy::min / max   how several inputs combine
//
// An event-time column is an integer (ticks in a unit of the user's choice)
// or a std::chrono::time_point with an integer representation. Anything else
// (floating point, optional, strings) is rejected at compile time: a
// watermark must be exact and totally ordered, and a null event time has no
// place in it.
//
// The watermark of an input after a batch is
//   max(its watermark before, max event time seen in the batch - delay)
// (R-DEDUP-2): it never decreases, and there is none before the input's
// first row. With several inputs the global watermark is the min (default)
// or the max of the watermarks of the inputs that have one (R-DEDUP-5), and
// it never decreases either. Arithmetic saturates at the limits of the
// column's representation instead of overflowing.
#pragma once

#include <flowlib/detail/type_traits.hpp>
#include <flowlib/schema.hpp>

#include <chrono>
#include <concepts>
#include <cstddef>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace flowlib {

/// @brief How the global watermark of several inputs is chosen (R-DEDUP-5).
enum class watermark_policy : unsigned char {
  min,  ///< the slowest input decides (default): nothing an input may still send is late
  max,  ///< the fastest input decides: rows of slower inputs become late sooner
};

namespace detail {

template <class T>
struct is_time_point : std::false_type {};
template <class C, class D>
struct is_time_point<std::chrono::time_point<C, D>> : std::true_type {};
template <class T>
inline constexpr bool is_time_point_v = is_time_point<std::remove_cvref_t<T>>::value;

template <class T>
inline constexpr bool is_event_time_integer_v =
    std::is_integral_v<T> && !std::is_same_v<T, bool> && !std::is_same_v<T, char> &&
    !std::is_same_v<T, wchar_t> && !std::is_same_v<T, char8_t> && !std::is_same_v<T, char16_t> &&
    !std::is_same_v<T, char32_t>;

/// True for the event-time column types flowlib accepts.
template <class T>
constexpr bool valid_event_time() {
  if constexpr (is_event_time_integer_v<T>) {
    return true;
  } else if constexpr (is_time_point_v<T>) {
    return is_event_time_integer_v<typename T::rep>;
  } else {
    return false;
  }
}

/// Static checks on an event-time column type, one rule per static_assert so
/// the compiler reports exactly the one that failed.
template <class T>
struct event_time_type_check {
  static_assert(!is_optional_v<T>,
                "flowlib: the event-time column is a std::optional. A watermark needs an "
                "event time on every row: make the column non-optional (filter or default "
                "null event times before the operator) (R-DEDUP-5).");
  static_assert(!std::is_floating_point_v<T>,
                "flowlib: the event-time column is floating point. Event times must be exact: "
                "use an integer count of ticks (for example milliseconds since the epoch) or a "
                "std::chrono::time_point with an integer representation (R-DEDUP-5).");
  static_assert(!is_time_point_v<T> || is_optional_v<T> || std::is_floating_point_v<T> ||
                    valid_event_time<T>(),
                "flowlib: the event-time column is a std::chrono::time_point whose duration has a "
                "floating-point representation. Use an integer duration such as "
                "std::chrono::milliseconds (R-DEDUP-5).");
  static_assert(is_time_point_v<T> || is_optional_v<T> || std::is_floating_point_v<T> ||
                    valid_event_time<T>(),
                "flowlib: the event-time column must be an integer (not bool or a character type) "
                "or a std::chrono::time_point; store the event time in one of those (R-DEDUP-5).");
  // Always true: instantiating this struct is the check (the asserts above
  // report the failure; a second, bare assertion would add only noise).
  static constexpr bool ok = true;
};

/// How an event-time type maps to its integer representation: `rep` is the
/// integer the watermark arithmetic runs on; `duration_type` is the type of
/// a delay (the integer itself, or the time point's duration).
template <class T, bool = is_time_point_v<T>>
struct event_time_traits {
  using value_type = T;
  using rep = T;
  using duration_type = T;
  static constexpr rep to_rep(const T& v) noexcept { return v; }
  static constexpr T from_rep(rep r) noexcept { return r; }
  static constexpr rep delay_rep(const duration_type& d) noexcept { return d; }
  static constexpr bool is_time_point = false;
};
template <class T>
struct event_time_traits<T, true> {
  using value_type = T;
  using duration_type = typename T::duration;
  using rep = typename duration_type::rep;
  static constexpr rep to_rep(const T& v) noexcept { return v.time_since_epoch().count(); }
  static constexpr T from_rep(rep r) noexcept { return T(duration_type(r)); }
  static constexpr rep delay_rep(const duration_type& d) noexcept { return d.count(); }
  static constexpr bool is_time_point = true;
};

/// a - b, clamped to the representable range (b >= 0).
template <class Rep>
constexpr Rep saturating_sub(Rep a, Rep b) noexcept {
  if (a < std::numeric_limits<Rep>::min() + b) return std::numeric_limits<Rep>::min();
  return static_cast<Rep>(a - b);
}
/// a + b, clamped to the representable range (b >= 0).
template <class Rep>
constexpr Rep saturating_add(Rep a, Rep b) noexcept {
  if (a > std::numeric_limits<Rep>::max() - b) return std::numeric_limits<Rep>::max();
  return static_cast<Rep>(a + b);
}

/// Per-input and global watermarks in the event time's representation.
/// Updating is split in two so that an operator can compute the watermark a
/// batch leads to (fallible phase) and commit it later (infallible).
template <class Rep>
struct watermark_state {
  std::vector<std::optional<Rep>> inputs;  // one per input; empty before its first row
  std::optional<Rep> global;               // none before any input has one
  watermark_policy policy = watermark_policy::min;

  /// The global watermark after input `i` saw a batch whose maximum event
  /// time is `max_event` (nullopt for a batch without rows), with `delay`.
  /// The result for `i` is returned in `input_after`.
  std::optional<Rep> next(std::size_t i, std::optional<Rep> max_event, Rep delay,
                          std::optional<Rep>& input_after) const noexcept {
    input_after = inputs[i];
    if (max_event) {
      const Rep candidate = saturating_sub(*max_event, delay);
      if (!input_after || *input_after < candidate) input_after = candidate;
    }
    std::optional<Rep> chosen;
    for (std::size_t j = 0; j < inputs.size(); ++j) {
      const std::optional<Rep>& w = j == i ? input_after : inputs[j];
      if (!w) continue;  // an input without data does not hold the others back
      if (!chosen || (policy == watermark_policy::min ? *w < *chosen : *chosen < *w)) chosen = w;
    }
    if (!chosen) return global;
    if (global && *chosen < *global) return global;  // never decreases (R-DEDUP-2)
    return chosen;
  }
};

/// The single column of EventTime<Ms...>; a placeholder when the pack is
/// not exactly one data member (the static_asserts then say what is wrong,
/// without a cascade of unrelated errors).
struct no_event_time_row {};
template <auto... Ms>
struct event_time_column {
  using row_type = no_event_time_row;
  using value_type = long long;
  static constexpr long long no_event_time_row::*member = nullptr;
};
template <auto M>
  requires data_member_pointer<M>
struct event_time_column<M> {
  using row_type = member_class_t<M>;
  using value_type = member_value_t<M>;
  static constexpr auto member = M;
};

template <auto M>
std::string event_time_label() {
  if constexpr (M == nullptr) {
    return "event_time";
  } else {
    std::string_view n = member_name<M>();
    if (!n.empty()) return std::string(n);
    return "event_time";
  }
}

}  // namespace detail

/// @brief A policy that reads a row's event time.
///
/// Required: `row_type`, `value_type` (an integer or an integer-based
/// std::chrono::time_point), `t(row) -> value_type`, and `t.name()`.
template <class T>
concept event_time_extractor =
    detail::row_value_policy<T> &&
    requires(const T& t, const typename T::row_type& r) {
      { t(r) } -> std::same_as<typename T::value_type>;
      { t.name() } -> std::convertible_to<std::string>;
    } &&
    detail::valid_event_time<typename T::value_type>();

/// @brief EventTime<&Row::ts>: the event-time column of a stream, an integer
/// or a std::chrono::time_point with an integer representation.
template <auto... Members>
struct EventTime {
  static_assert(sizeof...(Members) > 0,
                "flowlib::EventTime<> needs the event-time column, for example "
                "flowlib::EventTime<&Click::click_ts>: a watermark operator cannot run "
                "without an event time (R-DEDUP-5).");
  static_assert(sizeof...(Members) <= 1,
                "flowlib::EventTime<...> takes exactly one column; combine several fields into "
                "one event-time column first.");
  static_assert((detail::data_member_pointer<Members> && ...),
                "flowlib::EventTime<...> takes a pointer to a data member, such as &Row::ts.");

  using row_type = typename detail::event_time_column<Members...>::row_type;
  using value_type = typename detail::event_time_column<Members...>::value_type;
  static_assert(detail::event_time_type_check<value_type>::ok);
  static constexpr auto member = detail::event_time_column<Members...>::member;

  value_type operator()(const row_type& r) const noexcept { return r.*member; }
  /// The column's schema name ("event_time" without FLOWLIB_SCHEMA).
  std::string name() const { return detail::event_time_label<member>(); }
  friend bool operator==(const EventTime&, const EventTime&) = default;
};

}  // namespace flowlib
