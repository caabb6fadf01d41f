// examples/print.hpp: what the examples print with (copy it along with
// one): an aligned table of rows with FLOWLIB_SCHEMA, and the flat fields of
// an event log line.
//
//   print::table("bookings_current", table.sorted_rows());
//   print::field(line, "status");   // COMPLETED
#pragma once

#include <flowlib/schema.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <iostream>
#include <optional>
#include <ranges>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace print {

template <class T>
struct optional_of : std::false_type { using type = T; };
template <class T>
struct optional_of<std::optional<T>> : std::true_type { using type = T; };
template <class T>
struct is_time : std::false_type {};
template <class C, class D>
struct is_time<std::chrono::time_point<C, D>> : std::true_type {};

/// One cell: numbers (two decimals for floating point), a time point as its
/// UTC time of day (hh:mm), strings unquoted, an empty optional as null.
template <class T>
std::string cell(const T& v) {
  char buf[64];
  if constexpr (optional_of<T>::value) {
    return v ? cell(*v) : std::string("null");
  } else if constexpr (std::is_floating_point_v<T>) {
    std::snprintf(buf, sizeof buf, "%.2f", static_cast<double>(v));
    return buf;
  } else if constexpr (std::is_arithmetic_v<T>) {
    return std::to_string(v);
  } else if constexpr (is_time<T>::value) {
    using namespace std::chrono;
    const auto m = static_cast<int>(floor<minutes>(v - floor<days>(v)).count());
    std::snprintf(buf, sizeof buf, "%02d:%02d", m / 60, m % 60);
    return buf;
  } else {
    return std::string(v);
  }
}

/// Prints `rows` as an aligned table, one column per schema column.
template <std::ranges::input_range Rows>
void table(std::string_view title, const Rows& rows) {
  using Schema = flowlib::schema_of<std::ranges::range_value_t<Rows>>;
  constexpr std::size_t n = Schema::size;
  std::array<std::size_t, n> width{};
  std::array<bool, n> right{};
  std::size_t i = 0;
  Schema::for_each([&](auto col) {
    using V = typename optional_of<typename decltype(col)::value_type>::type;
    right[i] = std::is_arithmetic_v<V>;
    width[i] = Schema::names[i].size();
    ++i;
  });
  std::vector<std::array<std::string, n>> lines;
  for (const auto& r : rows) {
    auto& line = lines.emplace_back();
    i = 0;
    Schema::for_each([&](auto col) {
      line[i] = cell(decltype(col)::get(r));
      width[i] = std::max(width[i], line[i].size());
      ++i;
    });
  }
  const auto rule = [&] {
    std::cout << "  +";
    for (std::size_t w : width) std::cout << std::string(w + 2, '-') << '+';
    std::cout << '\n';
  };
  const auto out = [&](const auto& texts) {
    std::cout << "  |";
    for (std::size_t c = 0; c < n; ++c) {
      const std::string_view t = texts[c];
      const std::string pad(width[c] - t.size(), ' ');
      std::cout << ' ' << (right[c] ? pad : "") << t << (right[c] ? "" : pad) << " |";
    }
    std::cout << '\n';
  };
  std::cout << "  " << title << '\n';
  rule();
  out(Schema::names);
  rule();
  for (const auto& line : lines) out(line);
  rule();
}

/// The value of "key" in one event line, unquoted: enough for the flat
/// fields the examples print (a real program gives the line to its logging
/// system as it is).
inline std::string field(std::string_view line, std::string_view key) {
  const std::string k = "\"" + std::string(key) + "\":";
  std::size_t at = line.find(k);
  if (at == std::string_view::npos) return "";
  at += k.size();
  std::string_view v = line.substr(at, line.find_first_of(",}", at) - at);
  if (v.size() >= 2 && v.front() == '"') v = v.substr(1, v.size() - 2);
  return std::string(v);
}

}  // namespace print
