// flowlib/source/detail/json_value.hpp
//
// One JSON value into one column's type (json_decode), by the rules of
// json_row.hpp's header comment: the getter of the column's type is tried
// first, and the value's JSON type is looked at only to explain a refusal
// (json_refusal) or to tell a date's string from its integer. Dates and
// times in strings follow text_value.hpp. Internal; needs simdjson.
#pragma once

#include <flowlib/detail/type_traits.hpp>
#include <flowlib/source/detail/text_value.hpp>

#include <simdjson.h>

#include <cfloat>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

namespace flowlib::detail {

/// Why a column of type T refuses `v`, a value simdjson would not give as
/// T (the slow path: worked out only on failure).
template <class T>
std::string json_refusal(simdjson::ondemand::value& v) {
  using simdjson::ondemand::json_type;
  using simdjson::ondemand::number_type;
  json_type t{};
  if (v.type().get(t)) return "not valid JSON";
  if (t == json_type::null) return "null in a column that is not std::optional";
  if constexpr (std::is_same_v<T, bool>) {
    return "not a boolean";
  } else if constexpr (std::is_integral_v<T>) {
    if (t != json_type::number) return "not an integer";
    number_type nt{};
    if (!v.get_number_type().get(nt) && nt == number_type::floating_point_number)
      return "not an integer";
    return text_out_of_range(integer_type_name<T>());
  } else if constexpr (std::is_floating_point_v<T>) {
    if (t != json_type::number) return "not a number";
    return text_out_of_range(std::is_same_v<T, float> ? "a float" : "a double");
  } else {
    return "not a string";
  }
}

/// An integer column: the number read as a 64-bit integer, then
/// range-checked.
template <class I>
bool json_decode_integer(simdjson::ondemand::value& v, I& out, std::string& why) {
  if constexpr (std::is_unsigned_v<I>) {
    std::uint64_t u = 0;
    if (v.get_uint64().get(u)) {
      why = json_refusal<I>(v);
      return false;
    }
    if constexpr (sizeof(I) < sizeof(std::uint64_t)) {
      if (u > std::numeric_limits<I>::max()) {
        why = text_out_of_range(integer_type_name<I>());
        return false;
      }
    }
    out = static_cast<I>(u);
  } else {
    std::int64_t s = 0;
    if (v.get_int64().get(s)) {
      why = json_refusal<I>(v);
      return false;
    }
    if constexpr (sizeof(I) < sizeof(std::int64_t)) {
      if (s < static_cast<std::int64_t>(std::numeric_limits<I>::min()) ||
          s > static_cast<std::int64_t>(std::numeric_limits<I>::max())) {
        why = text_out_of_range(integer_type_name<I>());
        return false;
      }
    }
    out = static_cast<I>(s);
  }
  return true;
}

/// Reads `v` into `out` by json_row.hpp's rules; on failure false,
/// with the reason in `why`. The getter is tried first; the value's type
/// is looked at only when it refuses (or to tell a date's string from its
/// integer).
template <class T>
bool json_decode(simdjson::ondemand::value& v, T& out, std::string& why) {
  using simdjson::ondemand::json_type;
  if constexpr (is_optional<T>::value) {
    bool null = false;
    if (v.is_null().get(null)) {
      why = "not valid JSON";
      return false;
    }
    if (null) {
      out.reset();
      return true;
    }
    if (!out) out.emplace();
    return json_decode(v, *out, why);
  } else if constexpr (std::is_same_v<T, bool>) {
    if (v.get_bool().get(out)) {
      why = json_refusal<T>(v);
      return false;
    }
    return true;
  } else if constexpr (std::is_enum_v<T>) {
    std::underlying_type_t<T> u{};
    if (!json_decode_integer(v, u, why)) return false;
    out = static_cast<T>(u);
    return true;
  } else if constexpr (std::is_integral_v<T>) {
    return json_decode_integer(v, out, why);
  } else if constexpr (std::is_floating_point_v<T>) {
    double d = 0;
    if (v.get_double().get(d)) {
      why = json_refusal<T>(v);
      return false;
    }
    if constexpr (std::is_same_v<T, float>) {
      if (std::isfinite(d) && std::fabs(d) > static_cast<double>(FLT_MAX)) {
        why = text_out_of_range("a float");
        return false;
      }
    }
    out = static_cast<T>(d);
    return true;
  } else if constexpr (std::is_same_v<T, std::string>) {
    std::string_view s;
    if (v.get_string().get(s)) {
      why = json_refusal<T>(v);
      return false;
    }
    out.assign(s.data(), s.size());
    return true;
  } else if constexpr (std::is_same_v<T, std::chrono::sys_days> || is_integral_sys_time_v<T>) {
    json_type t{};
    if (v.type().get(t)) {
      why = "not valid JSON";
      return false;
    }
    if (t == json_type::string) {
      std::string_view s;
      if (v.get_string().get(s)) {
        why = "not valid JSON";
        return false;
      }
      why = parse_text(s, out);
      return why.empty();
    }
    if (t == json_type::number) {
      using rep = typename T::duration::rep;
      rep n{};
      if (!json_decode_integer(v, n, why)) return false;
      out = T{typename T::duration{n}};
      return true;
    }
    if (t == json_type::null) {
      why = "null in a column that is not std::optional";
    } else if constexpr (std::is_same_v<T, std::chrono::sys_days>) {
      why = "not an ISO 8601 date (a string) or a count of days (an integer)";
    } else {
      why = "not an ISO 8601 timestamp (a string) or a count of the column's time unit "
            "(an integer)";
    }
    return false;
  } else {
    static_assert(text_parsable<T>,
                  "flowlib: this column type cannot be read from JSON; use bool, an integer, "
                  "an enum, float, double, std::string, std::chrono::sys_days, a system_clock "
                  "time point with an integral count, or std::optional of one of them, or "
                  "leave the column out of FLOWLIB_SCHEMA");
    return true;
  }
}

/// json_decode with the reason returned: "" on success.
template <class T>
std::string json_read_value(simdjson::ondemand::value& v, T& out) {
  std::string why;
  if (!json_decode(v, out, why) && why.empty()) why = "not valid JSON";
  return why;
}

}  // namespace flowlib::detail
