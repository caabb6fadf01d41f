// What the FileSource tests share: a row type with a column of every kind,
// its JSON lines and CSV renderings, and files put into a directory the
// way the source's users must (written under a hidden name, then renamed
// in), with modification times set to the nanosecond.
#pragma once

#include <flowlib/schema.hpp>
#include <flowlib/source/file.hpp>

#include <doctest/doctest.h>

#include <support/errors.hpp>
#include <support/temp_files.hpp>

#include <fcntl.h>
#include <sys/stat.h>

#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace file_source_test {

namespace fl = flowlib;

enum class Tier : std::int16_t { bronze = 1, silver = 2, gold = 3 };

using ms_time = std::chrono::sys_time<std::chrono::milliseconds>;

/// A record with a column of every kind a file source reads.
struct Rec {
  std::int64_t id = 0;
  std::string name;
  std::optional<double> score;
  bool flag = false;
  std::uint32_t qty = 0;
  Tier tier = Tier::bronze;
  std::chrono::sys_days day{};
  ms_time at{};
  std::optional<std::int32_t> small;
  float ratio = 0;
  friend bool operator==(const Rec&, const Rec&) = default;
};
FLOWLIB_SCHEMA(Rec, id, name, score, flag, qty, tier, day, at, small, ratio);

/// The same with a rescued column.
struct RecR {
  std::int64_t id = 0;
  std::string name;
  std::optional<double> score;
  std::optional<std::string> rescued;
  friend bool operator==(const RecR&, const RecR&) = default;
};
FLOWLIB_SCHEMA(RecR, id, name, score, (rescued, "_rescued_data"));

inline std::string json_escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

inline std::string iso_day(std::chrono::sys_days d) {
  const std::chrono::year_month_day ymd{d};
  char buf[16];
  std::snprintf(buf, sizeof buf, "%04d-%02u-%02u", static_cast<int>(ymd.year()),
                static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()));
  return buf;
}

inline std::string iso_time(ms_time t) {
  const auto day = std::chrono::floor<std::chrono::days>(t);
  const auto ms = (t - day).count();
  char buf[64];
  std::snprintf(buf, sizeof buf, "%sT%02lld:%02lld:%02lld.%03lldZ", iso_day(day).c_str(),
                static_cast<long long>(ms / 3'600'000), static_cast<long long>(ms / 60'000 % 60),
                static_cast<long long>(ms / 1000 % 60), static_cast<long long>(ms % 1000));
  return buf;
}

/// A number that reads back exactly (shortest round trip).
template <class F>
std::string exact(F v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

/// One JSON lines record of `r` (keys in an order other than the schema's).
inline std::string json_line(const Rec& r) {
  std::string s = "{\"name\":\"" + json_escape(r.name) + "\",\"id\":" + std::to_string(r.id);
  s += ",\"score\":" + (r.score ? exact(*r.score) : std::string("null"));
  s += std::string(",\"flag\":") + (r.flag ? "true" : "false");
  s += ",\"qty\":" + std::to_string(r.qty);
  s += ",\"tier\":" + std::to_string(static_cast<int>(r.tier));
  s += ",\"day\":\"" + iso_day(r.day) + "\"";
  s += ",\"at\":\"" + iso_time(r.at) + "\"";
  if (r.small) s += ",\"small\":" + std::to_string(*r.small);
  s += ",\"ratio\":" + exact(r.ratio);
  s += "}";
  return s;
}

/// A CSV field, quoted when it must be.
inline std::string csv_field(std::string_view v, char delim = ',') {
  const bool quote = v.empty() || v.find_first_of(std::string("\"\r\n \t") + delim) != std::string_view::npos;
  if (!quote) return std::string(v);
  std::string s = "\"";
  for (char c : v) {
    if (c == '"') s += '"';
    s += c;
  }
  s += '"';
  return s;
}

inline const char* csv_header_line() { return "id,name,score,flag,qty,tier,day,at,small,ratio"; }

/// One CSV record of `r` in csv_header_line()'s order.
inline std::string csv_line(const Rec& r, char delim = ',') {
  std::string s;
  const auto add = [&](const std::string& f) {
    if (!s.empty()) s += delim;
    s += f;
  };
  add(std::to_string(r.id));
  add(csv_field(r.name, delim));
  add(r.score ? exact(*r.score) : std::string());
  add(r.flag ? "true" : "0");
  add(std::to_string(r.qty));
  add(std::to_string(static_cast<int>(r.tier)));
  add(iso_day(r.day));
  add(iso_time(r.at));
  add(r.small ? std::to_string(*r.small) : std::string());
  add(exact(r.ratio));
  return s;
}

/// A random record; `id` given. Names hold commas, quotes and line breaks.
inline Rec random_rec(std::mt19937_64& rng, std::int64_t id) {
  static const char* const words[] = {"plain", "with,comma", "say \"hi\"", "two\nlines", "", "sp ace",
                                      "ünïcödé", "tab\there"};
  Rec r;
  r.id = id;
  r.name = words[rng() % 8];
  if (rng() % 3 != 0) r.score = static_cast<double>(static_cast<std::int64_t>(rng() % 200001) - 100000) / 64.0;
  r.flag = rng() % 2 == 0;
  r.qty = static_cast<std::uint32_t>(rng());
  r.tier = static_cast<Tier>(1 + rng() % 3);
  r.day = std::chrono::sys_days{std::chrono::days{static_cast<int>(rng() % 40000) - 5000}};
  r.at = ms_time{std::chrono::milliseconds{static_cast<std::int64_t>(rng() % 4'000'000'000'000ull)}};
  if (rng() % 2 == 0) r.small = static_cast<std::int32_t>(rng());
  r.ratio = static_cast<float>(rng() % 1000) / 8.0f;
  return r;
}

/// Puts `bytes` into `dir` as `name` the way users must: written under a
/// hidden name first, then renamed in. `mtime_s`: the modification time
/// (seconds since 1970) to give it, when not 0.
inline void put_file(const std::filesystem::path& dir, const std::string& name, std::string_view bytes,
                     std::int64_t mtime_s = 0) {
  const auto tmp = dir / ("." + name + ".tmp");
  flowtest::write_file(tmp, bytes);
  if (mtime_s != 0) {
    struct timespec times[2];
    times[0].tv_sec = times[1].tv_sec = mtime_s;
    times[0].tv_nsec = times[1].tv_nsec = 0;
    REQUIRE(::utimensat(AT_FDCWD, tmp.c_str(), times, 0) == 0);
  }
  std::filesystem::rename(tmp, dir / name);
}

/// Sets a file's modification time (seconds since 1970).
inline void set_mtime(const std::filesystem::path& p, std::int64_t mtime_s) {
  struct timespec times[2];
  times[0].tv_sec = times[1].tv_sec = mtime_s;
  times[0].tv_nsec = times[1].tv_nsec = 0;
  REQUIRE(::utimensat(AT_FDCWD, p.c_str(), times, 0) == 0);
}

/// Every record the source lists now, read in one call.
template <class Row>
std::vector<Row> read_all(const fl::FileSource<Row>& s) {
  std::vector<Row> out;
  s.read(s.start(), s.latest(), out);
  return out;
}

/// The records between two offsets.
template <class Row>
std::vector<Row> read_range(const fl::FileSource<Row>& s, std::uint64_t from, std::uint64_t to) {
  std::vector<Row> out;
  s.read(fl::source_position::at(from), fl::source_position::at(to), out);
  return out;
}

using flowtest::contains;
using flowtest::error_of;

}  // namespace file_source_test
