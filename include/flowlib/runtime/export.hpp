// flowlib/runtime/export.hpp
//
// Reading a FileStorage table (storage/file.hpp) from a checkpoint without
// running its pipeline: a backup, a report, a look at a stopped service's
// tables, a move to another store.
//
//   flowlib::FileCheckpoint checkpoint{"/var/lib/app/ckpt"};
//   std::vector<Booking> rows = flowlib::read_table<Booking>(checkpoint, "bookings_current");
//   flowlib::export_table_csv<Booking>(checkpoint, "bookings_current", std::cout);
//
// Both read what the pipeline committed: the last committed snapshot and
// the committed deltas after it, exactly what the pipeline's next open
// loads; records of a batch that never committed are skipped (and left
// alone: only reads, so it is safe while the pipeline runs in another
// process; a batch committing meanwhile may or may not be included). The
// row type must be the table's (FLOWLIB_SCHEMA); a table with no records
// reads as empty. Throws errc::checkpoint_corrupt for a record that cannot
// be read, errc::checkpoint_io for an I/O failure.
//
// CSV: a header line of the FLOWLIB_SCHEMA column names, then one line per
// row in row id order; RFC 4180 quoting (a field holding a comma, a quote,
// CR or LF is quoted, quotes doubled); an empty std::optional is an empty
// field; bool as true/false; floating point in the shortest form that reads
// back exactly; sys_days as YYYY-MM-DD; other time points as their count
// since the epoch in their own unit.
#pragma once

#include <flowlib/checkpoint/store.hpp>
#include <flowlib/detail/config.hpp>
#include <flowlib/detail/row_codec.hpp>
#include <flowlib/runtime/checkpoint_log.hpp>
#include <flowlib/storage/file.hpp>
#include <flowlib/storage/row_log.hpp>

#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace flowlib {
namespace detail {

/// Whether batch `batch` of flow `flow` is committed in `store`.
FLOWLIB_DECL bool export_committed(const checkpoint_store& store, std::string_view flow,
                                   std::uint64_t batch);

/// Appends one CSV field for value `v`.
template <class T>
void csv_field(std::string& out, const T& v) {
  if constexpr (is_optional_v<T>) {
    if (v) csv_field(out, *v);
  } else if constexpr (std::is_same_v<T, bool>) {
    out += v ? "true" : "false";
  } else if constexpr (std::is_enum_v<T>) {
    out += std::to_string(static_cast<std::underlying_type_t<T>>(v));
  } else if constexpr (std::is_integral_v<T>) {
    out += std::to_string(v);
  } else if constexpr (std::is_floating_point_v<T>) {
    char buf[64];
    const auto r = std::to_chars(buf, buf + sizeof buf, v);
    out.append(buf, r.ptr);
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (v.find_first_of(",\"\r\n") == std::string::npos) {
      out += v;
    } else {
      out += '"';
      for (char c : v) {
        if (c == '"') out += '"';
        out += c;
      }
      out += '"';
    }
  } else if constexpr (std::is_same_v<T, std::chrono::sys_days>) {
    const std::chrono::year_month_day d{v};
    char buf[32];
    const int n = std::snprintf(buf, sizeof buf, "%04d-%02u-%02u", static_cast<int>(d.year()),
                                static_cast<unsigned>(d.month()), static_cast<unsigned>(d.day()));
    out.append(buf, static_cast<std::size_t>(n));
  } else {
    out += std::to_string(v.time_since_epoch().count());
  }
}

}  // namespace detail

/// @brief The committed rows of FileStorage table `table` in `checkpoint`,
/// in row id order. See the header comment.
template <class Row>
std::vector<Row> read_table(const checkpoint_store& checkpoint, std::string_view table) {
  const auto listing = detail::file_table_layout::read(
      checkpoint, table,
      [&](std::string_view flow, std::uint64_t batch) { return detail::export_committed(checkpoint, flow, batch); });
  detail::file_table_image<Row> image{{}, 0, row_log<Row>(std::string(table)), 0, 0, 0};
  image.load(listing, table, checkpoint);
  std::vector<Row> rows;
  rows.reserve(image.rows.size());
  for (auto& [id, r] : image.rows) rows.push_back(std::move(r));
  return rows;
}

/// @brief Writes the committed rows of FileStorage table `table` in
/// `checkpoint` to `out` as CSV. See the header comment.
template <class Row>
void export_table_csv(const checkpoint_store& checkpoint, std::string_view table, std::ostream& out) {
  using codec = detail::row_codec<Row>;
  std::string line;
  bool first = true;
  codec::names([&](std::string_view name) {
    if (!first) line += ',';
    first = false;
    detail::csv_field(line, std::string(name));
  });
  line += '\n';
  out << line;
  for (const Row& r : read_table<Row>(checkpoint, table)) {
    line.clear();
    first = true;
    codec::values(r, [&](std::string_view, const auto& v) {
      if (!first) line += ',';
      first = false;
      detail::csv_field(line, v);
    });
    line += '\n';
    out << line;
  }
}

}  // namespace flowlib

#if !defined(FLOWLIB_SEPARATE_COMPILATION)
#include <flowlib/runtime/impl/export.ipp>
#endif
