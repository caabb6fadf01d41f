// source/detail/text_value.hpp: every column type from text, at and beyond its
// boundaries, ISO 8601 dates and timestamps (zones, fractions, impossible
// calendar dates), and a cross-check of timestamps against a civil-date
// model over random instants.
#include <flowlib/source/detail/text_value.hpp>

#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

namespace source_json_text_value {

namespace fl = flowlib;
namespace fd = flowlib::detail;
using namespace std::chrono;

namespace {

enum class Color : std::uint8_t { red = 1, green = 2 };

template <class T>
T ok(std::string_view text) {
  T out{};
  const std::string why = fd::parse_text(text, out);
  INFO("text: '" << std::string(text) << "' reason: " << why);
  CHECK(why.empty());
  return out;
}

template <class T>
std::string why(std::string_view text) {
  T out{};
  return fd::parse_text(text, out);
}

using us_time = time_point<system_clock, microseconds>;
using ms_time = time_point<system_clock, milliseconds>;
using ns_time = time_point<system_clock, nanoseconds>;
using s_time = time_point<system_clock, seconds>;

static_assert(fd::text_parsable<int>);
static_assert(fd::text_parsable<std::optional<std::string>>);
static_assert(fd::text_parsable<sys_days>);
static_assert(fd::text_parsable<us_time>);
static_assert(fd::text_parsable<Color>);
static_assert(!fd::text_parsable<std::vector<int>>);
static_assert(!fd::text_parsable<time_point<system_clock, duration<double>>>);
static_assert(!fd::text_parsable<long double>);

}  // namespace

TEST_CASE("R-SOURCE-2, text values: booleans") {
  CHECK(ok<bool>("true") == true);
  CHECK(ok<bool>("1") == true);
  CHECK(ok<bool>("false") == false);
  CHECK(ok<bool>("0") == false);
  for (auto bad : {"TRUE", "yes", "2", "", " true", "true "}) {
    CAPTURE(bad);
    CHECK(why<bool>(bad) == "not a boolean");
  }
}

TEST_CASE("R-SOURCE-2, text values: integers at and beyond every width's bounds") {
  CHECK(ok<std::int8_t>("-128") == -128);
  CHECK(ok<std::int8_t>("127") == 127);
  CHECK(why<std::int8_t>("128") == "out of range for an 8-bit integer");
  CHECK(why<std::int8_t>("-129") == "out of range for an 8-bit integer");
  CHECK(ok<std::uint8_t>("255") == 255);
  CHECK(why<std::uint8_t>("256") == "out of range for an unsigned 8-bit integer");
  CHECK(ok<std::int16_t>("-32768") == -32768);
  CHECK(why<std::int16_t>("32768") == "out of range for a 16-bit integer");
  CHECK(ok<std::uint16_t>("65535") == 65535);
  CHECK(why<std::uint16_t>("65536") == "out of range for an unsigned 16-bit integer");
  CHECK(ok<std::int32_t>("2147483647") == 2147483647);
  CHECK(ok<std::int32_t>("-2147483648") == std::numeric_limits<std::int32_t>::min());
  CHECK(why<std::int32_t>("2147483648") == "out of range for a 32-bit integer");
  CHECK(ok<std::uint32_t>("4294967295") == 4294967295u);
  CHECK(why<std::uint32_t>("4294967296") == "out of range for an unsigned 32-bit integer");
  CHECK(ok<std::int64_t>("9223372036854775807") == std::numeric_limits<std::int64_t>::max());
  CHECK(ok<std::int64_t>("-9223372036854775808") == std::numeric_limits<std::int64_t>::min());
  CHECK(why<std::int64_t>("9223372036854775808") == "out of range for a 64-bit integer");
  CHECK(why<std::int64_t>("-99999999999999999999999") == "out of range for a 64-bit integer");
  CHECK(ok<std::uint64_t>("18446744073709551615") == std::numeric_limits<std::uint64_t>::max());
  CHECK(why<std::uint64_t>("18446744073709551616") ==
        "out of range for an unsigned 64-bit integer");
  // Negative numbers are integers an unsigned column cannot hold; -0 is 0.
  CHECK(why<std::uint32_t>("-1") == "out of range for an unsigned 32-bit integer");
  CHECK(why<std::uint64_t>("-99999999999999999999999") ==
        "out of range for an unsigned 64-bit integer");
  CHECK(ok<std::uint32_t>("-0") == 0u);
  CHECK(ok<std::int32_t>("007") == 7);
  for (auto bad : {"", "-", "+1", " 1", "1 ", "1.0", "1e3", "0x10", "abc", "12a", "--1"}) {
    CAPTURE(bad);
    CHECK(why<std::int32_t>(bad) == "not an integer");
    CHECK(why<std::uint64_t>(bad) == "not an integer");
  }
  CHECK(why<std::uint8_t>("-x") == "not an integer");
}

TEST_CASE("R-SOURCE-2, text values: enums read their underlying integer") {
  CHECK(ok<Color>("2") == Color::green);
  CHECK(why<Color>("256") == "out of range for an unsigned 8-bit integer");
  CHECK(why<Color>("green") == "not an integer");
}

TEST_CASE("R-SOURCE-2, text values: float and double") {
  CHECK(ok<double>("1.5") == 1.5);
  CHECK(ok<double>("-2e-3") == -2e-3);
  CHECK(ok<double>("42") == 42.0);
  CHECK(ok<float>("0.25") == 0.25f);
  CHECK(ok<double>("inf") == std::numeric_limits<double>::infinity());
  CHECK(ok<double>("-Infinity") == -std::numeric_limits<double>::infinity());
  const double n = ok<double>("nan");
  CHECK(n != n);
  CHECK(ok<double>("1.7976931348623157e308") == std::numeric_limits<double>::max());
  CHECK(why<double>("1e309") == "out of range for a double");
  CHECK(why<float>("1e39") == "out of range for a float");
  CHECK(ok<float>("3.4e38") == 3.4e38f);
  for (auto bad : {"", "abc", "1.5x", " 1", "1,5", "+1"}) {
    CAPTURE(bad);
    CHECK(why<double>(bad) == "not a number");
    CHECK(why<float>(bad) == "not a float");
  }
}

TEST_CASE("R-SOURCE-2, text values: strings as they are, optionals empty as null") {
  CHECK(ok<std::string>("") == "");
  CHECK(ok<std::string>(" a,\"b\" ") == " a,\"b\" ");
  CHECK(ok<std::optional<int>>("") == std::nullopt);
  CHECK(ok<std::optional<int>>("5") == std::optional<int>(5));
  CHECK(why<std::optional<int>>("x") == "not an integer");
  CHECK(ok<std::optional<std::string>>("") == std::nullopt);
  CHECK(ok<std::optional<std::string>>("a") == std::optional<std::string>("a"));
  // A reused optional with a value is reset by empty text.
  std::optional<int> reused = 9;
  CHECK(fd::parse_text("", reused).empty());
  CHECK(reused == std::nullopt);
}

TEST_CASE("R-SOURCE-2, text values: ISO 8601 dates, real calendar days only") {
  CHECK(ok<sys_days>("1970-01-01") == sys_days{});
  CHECK(ok<sys_days>("2024-02-29") == sys_days{2024y / February / 29});
  CHECK(ok<sys_days>("1969-12-31") == sys_days{days{-1}});
  CHECK(ok<sys_days>("0000-01-01") == sys_days{year{0} / January / 1});
  CHECK(ok<sys_days>("9999-12-31") == sys_days{year{9999} / December / 31});
  for (auto bad : {"2023-02-29", "2023-02-30", "2023-13-01", "2023-00-10", "2023-04-31",
                   "2023-01-00", "1900-02-29", "2023-1-01", "2023/01/01", "23-01-01",
                   "2023-01-01T00:00:00", "2023-01-01 ", "", "20230101", "2023-01-0a"}) {
    CAPTURE(bad);
    CHECK(why<sys_days>(bad) == "not an ISO 8601 date");
  }
  CHECK(ok<sys_days>("2000-02-29") == sys_days{2000y / February / 29});
}

TEST_CASE("R-SOURCE-2, text values: ISO 8601 timestamps with zones and fractions") {
  const auto base = sys_days{2024y / March / 5} + 13h + 7min + 9s;
  CHECK(ok<s_time>("2024-03-05T13:07:09") == base);
  CHECK(ok<s_time>("2024-03-05 13:07:09") == base);
  CHECK(ok<s_time>("2024-03-05t13:07:09z") == base);
  CHECK(ok<s_time>("2024-03-05T13:07:09Z") == base);
  CHECK(ok<s_time>("2024-03-05T15:07:09+02:00") == base);
  CHECK(ok<s_time>("2024-03-05T15:07:09+0200") == base);
  CHECK(ok<s_time>("2024-03-05T15:07:09+02") == base);
  CHECK(ok<s_time>("2024-03-05T07:37:09-05:30") == base);
  CHECK(ok<s_time>("2024-03-06T00:07:09+11:00") == base);  // the day before in UTC
  // Fractions: 1 to 9 digits, rounded down to the column's unit.
  CHECK(ok<ms_time>("2024-03-05T13:07:09.5Z") == base + 500ms);
  CHECK(ok<us_time>("2024-03-05T13:07:09.123456Z") == base + 123456us);
  CHECK(ok<ms_time>("2024-03-05T13:07:09.123999Z") == base + 123ms);
  CHECK(ok<ns_time>("2024-03-05T13:07:09.000000001Z") == base + 1ns);
  CHECK(ok<ns_time>("2024-03-05T13:07:09.987654321+01:00") == base - 1h + 987654321ns);
  CHECK(ok<s_time>("2024-03-05T13:07:09.999") == base);
  // Before 1970 the instant still rounds down (towards the past).
  CHECK(ok<s_time>("1969-12-31T23:59:59.5Z") == s_time{seconds{-1}});
  CHECK(ok<ms_time>("1969-12-31T23:59:59.9995Z") == ms_time{milliseconds{-1}});
  CHECK(ok<time_point<system_clock, minutes>>("1970-01-01T00:00:59Z") ==
        time_point<system_clock, minutes>{});
  CHECK(ok<time_point<system_clock, minutes>>("1969-12-31T23:59:01Z") ==
        time_point<system_clock, minutes>{minutes{-1}});
  CHECK(ok<us_time>("9999-12-31T23:59:59.999999Z") ==
        us_time{sys_days{year{9999} / December / 31} + 86399s + 999999us});
  // Nanoseconds in 64 bits end in 2262.
  CHECK(ok<ns_time>("2262-04-11T23:47:16.854775807Z") ==
        ns_time{nanoseconds{std::numeric_limits<std::int64_t>::max()}});
  CHECK(why<ns_time>("2262-04-11T23:47:16.854775808Z") ==
        "out of range for the time point's count type");
  CHECK(why<time_point<system_clock, duration<std::int32_t>>>("2038-01-19T03:14:08Z") ==
        "out of range for the time point's count type");
  CHECK(ok<time_point<system_clock, duration<std::int32_t>>>("2038-01-19T03:14:07Z")
            .time_since_epoch()
            .count() == std::numeric_limits<std::int32_t>::max());
  for (auto bad : {"2024-03-05", "2024-03-05T13:07", "2024-03-05T24:00:00", "2024-03-05T13:60:00",
                   "2024-03-05T13:07:60", "2024-02-30T00:00:00", "2024-03-05T13:07:09.",
                   "2024-03-05T13:07:09.1234567890", "2024-03-05T13:07:09+2", "2024-03-05T13:07:09+24:00",
                   "2024-03-05T13:07:09+02:60", "2024-03-05T13:07:09 Z", "2024-03-05T13:07:09ZZ",
                   "2024-03-05X13:07:09", "2024-03-05T1:07:09", "", "2024-03-05T13:07:09+02:0",
                   "2024-03-05T13:07:09UTC"}) {
    CAPTURE(bad);
    CHECK(why<ms_time>(bad) == "not an ISO 8601 timestamp");
  }
}

TEST_CASE("R-SOURCE-2, text values: timestamps match a civil-calendar model over random instants") {
  // Model: format a random instant with std::chrono's own calendar types,
  // with a random zone offset, then parse it back.
  for (std::uint32_t seed : {1u, 2u, 3u}) {
    CAPTURE(seed);
    std::mt19937_64 rng(seed);
    for (int i = 0; i < 2000; ++i) {
      const std::int64_t lo = -62'135'596'800LL;  // 0001-01-01
      const std::int64_t hi = 253'402'300'799LL;  // 9999-12-31T23:59:59
      const std::int64_t secs = lo + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(hi - lo));
      const std::int64_t nanos = static_cast<std::int64_t>(rng() % 1'000'000'000);
      const int offset_min = static_cast<int>(rng() % (2 * 14 * 60 + 1)) - 14 * 60;
      const auto utc = sys_seconds{seconds{secs}};
      const auto local = utc + minutes{offset_min};
      const auto day = floor<days>(local);
      const year_month_day ymd{day};
      const hh_mm_ss<seconds> tod{local - day};
      char buf[64];
      const int off = offset_min < 0 ? -offset_min : offset_min;
      std::snprintf(buf, sizeof buf, "%04d-%02u-%02uT%02d:%02d:%02d.%09lld%c%02d:%02d",
                    static_cast<int>(ymd.year()), static_cast<unsigned>(ymd.month()),
                    static_cast<unsigned>(ymd.day()), static_cast<int>(tod.hours().count()),
                    static_cast<int>(tod.minutes().count()),
                    static_cast<int>(tod.seconds().count()), static_cast<long long>(nanos),
                    offset_min < 0 ? '-' : '+', off / 60, off % 60);
      if (static_cast<int>(ymd.year()) < 0 || static_cast<int>(ymd.year()) > 9999) continue;
      CAPTURE(buf);
      us_time got{};
      REQUIRE(fd::parse_text(buf, got).empty());
      CHECK(got == us_time{duration_cast<microseconds>(seconds{secs}) + microseconds{nanos / 1000}});
      sys_days d{};
      REQUIRE(fd::parse_text(std::string_view(buf, 10), d).empty());
      CHECK(d == day);
    }
  }
}

}  // namespace source_json_text_value
