// flowlib/detail/row_codec.hpp
//
// The byte encoding of a whole row, column by column through its
// FLOWLIB_SCHEMA, for durable tables kept as checkpoint records
// (storage/file.hpp). Internal.
//
// Encoding (fixed, little-endian, platform-independent), column values in
// schema order:
//   - bool: one byte, 0 or 1; integers and enums: their own width;
//   - float and double: their IEEE-754 bit pattern, as a u32 / u64;
//   - std::string: u32 length, then the bytes;
//   - std::optional<T>: u8 0 (null) or 1 followed by T;
//   - std::chrono::sys_days and system-clock time points with an integral
//     count: the count, as an i64.
// Quarantined<Row>: flow, expectation (strings), batch id (u64), then Row.
// Reading is bounds-checked: a truncated record or a bad flag throws
// flowlib::error with the reader's code (checkpoint readers say
// errc::checkpoint_corrupt) naming the column.
#pragma once

#include <flowlib/detail/type_traits.hpp>
#include <flowlib/error.hpp>
#include <flowlib/quarantine.hpp>
#include <flowlib/schema.hpp>
#include <flowlib/state.hpp>

#include <bit>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

namespace flowlib::detail {

/// `v` with its bytes in the opposite order.
template <class U>
constexpr U row_byteswap(U v) noexcept {
  U out = 0;
  for (std::size_t i = 0; i < sizeof(U); ++i) {
    out = static_cast<U>((out << 8) | (v & 0xffu));
    if constexpr (sizeof(U) > 1) v = static_cast<U>(v >> 8);
  }
  return out;
}

/// Appends `v` little-endian to `out` (one append, not one per byte).
template <class U>
inline void row_put(std::string& out, U v) {
  static_assert(std::is_unsigned_v<U>);
  if constexpr (std::endian::native == std::endian::big) v = row_byteswap(v);
  char buf[sizeof(U)];
  std::memcpy(buf, &v, sizeof(U));
  out.append(buf, sizeof(U));
}

/// Reads an unsigned little-endian value of type U at r.pos.
template <class U>
inline U row_get(byte_reader& r) {
  r.need(sizeof(U));
  U v;
  std::memcpy(&v, r.in.data() + r.pos, sizeof(U));
  if constexpr (std::endian::native == std::endian::big) v = row_byteswap(v);
  r.pos += sizeof(U);
  return v;
}

/// One column value's encoding (see the header comment).
template <class T>
struct row_value {
  static constexpr bool supported = std::is_same_v<T, bool> || std::is_integral_v<T> ||
                                    std::is_enum_v<T> || std::is_floating_point_v<T> ||
                                    std::is_same_v<T, std::string> || is_integral_sys_time_v<T>;
  static_assert(supported,
                "flowlib::FileStorage: a column of this type cannot be stored; give the column "
                "one of the supported types (bool, integers, enums, float, double, std::string, "
                "std::chrono::sys_days, a system_clock time point with an integral count, or "
                "std::optional of one of them), or leave it out of FLOWLIB_SCHEMA.");

  static void write(std::string& out, const T& v) {
    if constexpr (std::is_same_v<T, bool>) {
      out.push_back(v ? '\1' : '\0');
    } else if constexpr (std::is_enum_v<T>) {
      using I = std::underlying_type_t<T>;
      row_put(out, static_cast<std::make_unsigned_t<I>>(static_cast<I>(v)));
    } else if constexpr (std::is_integral_v<T>) {
      row_put(out, static_cast<std::make_unsigned_t<T>>(v));
    } else if constexpr (std::is_same_v<T, float>) {
      row_put(out, std::bit_cast<std::uint32_t>(v));
    } else if constexpr (std::is_floating_point_v<T>) {
      row_put(out, std::bit_cast<std::uint64_t>(static_cast<double>(v)));
    } else if constexpr (std::is_same_v<T, std::string>) {
      if (v.size() > std::uint32_t{0xffffffff}) {
        throw error(errc::invalid_argument, "FileStorage", "", "",
                    "a string column of " + std::to_string(v.size()) +
                        " bytes: a stored string holds at most 2^32-1 bytes");
      }
      row_put(out, static_cast<std::uint32_t>(v.size()));
      out.append(v);
    } else {  // time point
      row_put(out, static_cast<std::uint64_t>(static_cast<std::int64_t>(v.time_since_epoch().count())));
    }
  }
  /// Reads into `v`; false when the bytes are not a value of T.
  static bool read(byte_reader& r, T& v) {
    if constexpr (std::is_same_v<T, bool>) {
      const auto b = row_get<std::uint8_t>(r);
      if (b > 1) return false;
      v = b == 1;
    } else if constexpr (std::is_enum_v<T>) {
      using I = std::underlying_type_t<T>;
      v = static_cast<T>(static_cast<I>(row_get<std::make_unsigned_t<I>>(r)));
    } else if constexpr (std::is_integral_v<T>) {
      v = static_cast<T>(row_get<std::make_unsigned_t<T>>(r));
    } else if constexpr (std::is_same_v<T, float>) {
      v = std::bit_cast<float>(row_get<std::uint32_t>(r));
    } else if constexpr (std::is_floating_point_v<T>) {
      v = static_cast<T>(std::bit_cast<double>(row_get<std::uint64_t>(r)));
    } else if constexpr (std::is_same_v<T, std::string>) {
      const auto n = row_get<std::uint32_t>(r);
      r.need(n);
      v.assign(r.in.data() + r.pos, n);
      r.pos += n;
    } else {
      const auto n = static_cast<std::int64_t>(row_get<std::uint64_t>(r));
      v = T{typename T::duration{static_cast<typename T::rep>(n)}};
    }
    return true;
  }
};

template <class T>
struct row_value<std::optional<T>> {
  static void write(std::string& out, const std::optional<T>& v) {
    out.push_back(v ? '\1' : '\0');
    if (v) row_value<T>::write(out, *v);
  }
  static bool read(byte_reader& r, std::optional<T>& v) {
    const auto b = row_get<std::uint8_t>(r);
    if (b > 1) return false;
    if (b == 0) {
      v.reset();
      return true;
    }
    if (!v) v.emplace();
    return row_value<T>::read(r, *v);
  }
};

/// A whole row's encoding (see the header comment).
template <class Row>
struct row_codec {
  static_assert(has_schema<Row>,
                "flowlib::FileStorage: the table's rows are saved column by column: declare "
                "FLOWLIB_SCHEMA(Row, ...) for the row type.");
  static_assert(std::is_default_constructible_v<Row>,
                "flowlib::FileStorage: rows are read back into a default-constructed row: give "
                "Row a default constructor.");

  static void write(std::string& out, const Row& row) {
    schema_of<Row>::for_each([&](auto col) {
      using V = std::remove_cvref_t<decltype(decltype(col)::get(row))>;
      row_value<V>::write(out, decltype(col)::get(row));
    });
  }
  /// Reads a row; throws through `r` naming the first column that is not
  /// a value of its type.
  static void read(byte_reader& r, Row& row) {
    schema_of<Row>::for_each([&](auto col) {
      using V = std::remove_cvref_t<decltype(decltype(col)::get(row))>;
      if (!row_value<V>::read(r, decltype(col)::get(row))) {
        r.fail("column '" + std::string(decltype(col)::name) + "' holds no value of its type");
      }
    });
  }
  /// The column names, in order (an export's header).
  template <class F>
  static void names(F&& f) {
    schema_of<Row>::for_each([&](auto col) { f(decltype(col)::name); });
  }
  /// Calls f(name, value) for every column, in order.
  template <class F>
  static void values(const Row& row, F&& f) {
    schema_of<Row>::for_each([&](auto col) { f(decltype(col)::name, decltype(col)::get(row)); });
  }
};

template <class Row>
struct row_codec<Quarantined<Row>> {
  using inner = row_codec<Row>;
  static void write(std::string& out, const Quarantined<Row>& q) {
    row_value<std::string>::write(out, q.flow);
    row_value<std::string>::write(out, q.expectation);
    row_value<std::uint64_t>::write(out, q.batch_id);
    inner::write(out, q.row);
  }
  static void read(byte_reader& r, Quarantined<Row>& q) {
    row_value<std::string>::read(r, q.flow);
    row_value<std::string>::read(r, q.expectation);
    row_value<std::uint64_t>::read(r, q.batch_id);
    inner::read(r, q.row);
  }
  template <class F>
  static void names(F&& f) {
    f(std::string_view("__flowlib_flow"));
    f(std::string_view("__flowlib_expectation"));
    f(std::string_view("__flowlib_batch_id"));
    inner::names(f);
  }
  template <class F>
  static void values(const Quarantined<Row>& q, F&& f) {
    f(std::string_view("__flowlib_flow"), q.flow);
    f(std::string_view("__flowlib_expectation"), q.expectation);
    f(std::string_view("__flowlib_batch_id"), q.batch_id);
    inner::values(q.row, f);
  }
};

}  // namespace flowlib::detail
