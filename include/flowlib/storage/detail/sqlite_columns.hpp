// flowlib/storage/detail/sqlite_columns.hpp
//
// How SqliteStorage maps a row's FLOWLIB_SCHEMA columns onto SQL columns.
// Internal. One SQL column per schema column, under the schema name (an
// SCD2 target's "__START_AT" and "__END_AT" are ordinary columns):
//
//   C++ column type                      SQL type   value
//   bool                                 INTEGER    0 or 1
//   signed integers, enums               INTEGER    the value (an enum: its
//                                                   underlying value)
//   unsigned integers                    INTEGER    the value; a uint64
//                                                   above INT64_MAX is
//                                                   stored as its two's
//                                                   complement (negative in
//                                                   SQL) and read back
//                                                   exactly
//   float, double                        REAL       the value
//   std::string                          TEXT       the bytes, as they are
//   std::chrono::sys_days                TEXT       'YYYY-MM-DD'
//   std::chrono::sys_time<D>             INTEGER    the count of D since
//     (any integral duration D)                     1970-01-01 00:00:00 UTC
//   std::optional<T>                     T's type   NULL when empty
//
// Time points are stored as integer counts (not ISO text) so that they
// compare and round-trip exactly at any precision; SQL can show them with
// datetime(col / 1000, 'unixepoch') for milliseconds, for example.
// A column of any other type is a compile error saying to give the column
// one of the types above.
//
// A quarantine table's rows (flowlib::Quarantined<Row>) are mapped as the
// columns "__flowlib_flow" (TEXT), "__flowlib_expectation" (TEXT),
// "__flowlib_batch_id" (INTEGER), then Row's own columns.
#pragma once

#include <flowlib/detail/type_traits.hpp>
#include <flowlib/error.hpp>
#include <flowlib/quarantine.hpp>
#include <flowlib/schema.hpp>
#include <flowlib/storage/detail/sqlite_db.hpp>

#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace flowlib::detail {

/// SQL type, bind and read of one column value of type T (see the header
/// comment). `null_ok` is whether the SQL column may hold NULL.
template <class T>
struct sqlite_value {
  static constexpr bool is_days = std::is_same_v<T, std::chrono::sys_days>;
  static constexpr bool supported =
      std::is_same_v<T, bool> || std::is_integral_v<T> || std::is_enum_v<T> ||
      std::is_floating_point_v<T> || std::is_same_v<T, std::string> || is_days ||
      is_integral_sys_time_v<T>;
  static_assert(supported,
                "flowlib::SqliteStorage: a column of this type cannot be stored in SQLite; give "
                "the column one of the supported types (bool, integers, enums, float, double, "
                "std::string, std::chrono::sys_days, std::chrono::sys_time<D> with an integral "
                "duration, or std::optional of one of these): see storage/detail/sqlite_columns.hpp.");
  static constexpr bool null_ok = false;

  static constexpr std::string_view sql_type() {
    if constexpr (std::is_floating_point_v<T>) return "REAL";
    else if constexpr (std::is_same_v<T, std::string> || is_days) return "TEXT";
    else return "INTEGER";
  }

  static void bind(sqlite_stmt& s, int i, const T& v) {
    if constexpr (std::is_same_v<T, bool>) {
      s.bind_int(i, v ? 1 : 0);
    } else if constexpr (std::is_enum_v<T>) {
      s.bind_int(i, static_cast<std::int64_t>(static_cast<std::underlying_type_t<T>>(v)));
    } else if constexpr (std::is_integral_v<T>) {
      s.bind_int(i, static_cast<std::int64_t>(v));  // uint64: two's complement
    } else if constexpr (std::is_floating_point_v<T>) {
      s.bind_real(i, static_cast<double>(v));
    } else if constexpr (std::is_same_v<T, std::string>) {
      s.bind_text(i, v);
    } else if constexpr (is_days) {
      const std::chrono::year_month_day d{v};
      char buf[32];
      const int n = std::snprintf(buf, sizeof buf, "%04d-%02u-%02u", static_cast<int>(d.year()),
                                  static_cast<unsigned>(d.month()), static_cast<unsigned>(d.day()));
      s.bind_text(i, std::string_view(buf, static_cast<std::size_t>(n)));
    } else {
      s.bind_int(i, static_cast<std::int64_t>(v.time_since_epoch().count()));
    }
  }

  /// Reads column `c` of the current row into `out`; returns false when the
  /// stored value is NULL or cannot be read as T (the caller reports it).
  static bool read(const sqlite_stmt& s, int c, T& out) {
    if (s.is_null(c)) return false;
    if constexpr (std::is_same_v<T, bool>) {
      out = s.column_int(c) != 0;
    } else if constexpr (std::is_enum_v<T>) {
      out = static_cast<T>(static_cast<std::underlying_type_t<T>>(s.column_int(c)));
    } else if constexpr (std::is_integral_v<T>) {
      out = static_cast<T>(s.column_int(c));
    } else if constexpr (std::is_floating_point_v<T>) {
      out = static_cast<T>(s.column_real(c));
    } else if constexpr (std::is_same_v<T, std::string>) {
      out.assign(s.column_text(c));
    } else if constexpr (is_days) {
      const std::string_view t = s.column_text(c);
      int y = 0;
      unsigned m = 0, d = 0;
      if (t.size() < 10 || t[t.size() - 3] != '-' || t[t.size() - 6] != '-') return false;
      const char* b = t.data();
      const char* e = t.data() + t.size();
      const auto r1 = std::from_chars(b, e - 6, y);
      const auto r2 = std::from_chars(e - 5, e - 3, m);
      const auto r3 = std::from_chars(e - 2, e, d);
      if (r1.ec != std::errc{} || r1.ptr != e - 6 || r2.ec != std::errc{} || r3.ec != std::errc{}) {
        return false;
      }
      const std::chrono::year_month_day ymd{std::chrono::year{y}, std::chrono::month{m},
                                            std::chrono::day{d}};
      if (!ymd.ok()) return false;
      out = std::chrono::sys_days{ymd};
    } else {
      out = T{typename T::duration{static_cast<typename T::rep>(s.column_int(c))}};
    }
    return true;
  }
};

template <class T>
struct sqlite_value<std::optional<T>> {
  static constexpr bool null_ok = true;
  static constexpr std::string_view sql_type() { return sqlite_value<T>::sql_type(); }
  static void bind(sqlite_stmt& s, int i, const std::optional<T>& v) {
    if (v) {
      sqlite_value<T>::bind(s, i, *v);
    } else {
      s.bind_null(i);
    }
  }
  static bool read(const sqlite_stmt& s, int c, std::optional<T>& out) {
    if (s.is_null(c)) {
      out.reset();
      return true;
    }
    T v{};
    if (!sqlite_value<T>::read(s, c, v)) return false;
    out = std::move(v);
    return true;
  }
};

/// One SQL column of a row type.
struct sqlite_column_def {
  std::string name;
  std::string_view type;
  bool null_ok;
};

/// Columns, bind and read of a whole row (see the header comment).
template <class Row>
struct sqlite_row_codec {
  static_assert(has_schema<Row>,
                "flowlib::SqliteStorage: the table's rows are stored column by column: declare "
                "FLOWLIB_SCHEMA(Row, ...) for the row type.");
  static_assert(std::is_default_constructible_v<Row>,
                "flowlib::SqliteStorage: rows are read back from the database into a "
                "default-constructed row: give Row a default constructor.");
  static constexpr int width = static_cast<int>(schema_of<Row>::size);

  static void columns(std::vector<sqlite_column_def>& out) {
    schema_of<Row>::for_each([&](auto col) {
      using V = std::remove_cvref_t<decltype(decltype(col)::get(std::declval<const Row&>()))>;
      out.push_back({std::string(decltype(col)::name), sqlite_value<V>::sql_type(),
                     sqlite_value<V>::null_ok});
    });
  }
  /// Binds the row's columns to parameters first, first + 1, ...
  static void bind(sqlite_stmt& s, int first, const Row& r) {
    int i = first;
    schema_of<Row>::for_each([&](auto col) {
      using V = std::remove_cvref_t<decltype(decltype(col)::get(r))>;
      sqlite_value<V>::bind(s, i++, decltype(col)::get(r));
    });
  }
  /// Reads the row from result columns first, first + 1, ...; returns the
  /// name of the first column that could not be read (empty when none).
  static std::string_view read(const sqlite_stmt& s, int first, Row& r) {
    int c = first;
    std::string_view bad;
    schema_of<Row>::for_each([&](auto col) {
      using V = std::remove_cvref_t<decltype(decltype(col)::get(r))>;
      if (!sqlite_value<V>::read(s, c++, decltype(col)::get(r)) && bad.empty()) {
        bad = decltype(col)::name;
      }
    });
    return bad;
  }
};

template <class Row>
struct sqlite_row_codec<Quarantined<Row>> {
  using inner = sqlite_row_codec<Row>;
  static constexpr int width = 3 + inner::width;

  static void columns(std::vector<sqlite_column_def>& out) {
    out.push_back({"__flowlib_flow", "TEXT", false});
    out.push_back({"__flowlib_expectation", "TEXT", false});
    out.push_back({"__flowlib_batch_id", "INTEGER", false});
    inner::columns(out);
  }
  static void bind(sqlite_stmt& s, int first, const Quarantined<Row>& q) {
    s.bind_text(first, q.flow);
    s.bind_text(first + 1, q.expectation);
    s.bind_int(first + 2, static_cast<std::int64_t>(q.batch_id));
    inner::bind(s, first + 3, q.row);
  }
  static std::string_view read(const sqlite_stmt& s, int first, Quarantined<Row>& q) {
    if (!sqlite_value<std::string>::read(s, first, q.flow)) return "__flowlib_flow";
    if (!sqlite_value<std::string>::read(s, first + 1, q.expectation)) return "__flowlib_expectation";
    if (!sqlite_value<std::uint64_t>::read(s, first + 2, q.batch_id)) return "__flowlib_batch_id";
    return inner::read(s, first + 3, q.row);
  }
};

}  // namespace flowlib::detail
