// source/detail/json_row.hpp: JSON objects into rows by FLOWLIB_SCHEMA: every
// column type (valid, boundary, overflow, wrong type, null, missing),
// unknown and duplicate keys, escaped keys, rescue (the rescued object's
// exact text), whole-text errors, error messages (source, column, where,
// value), and a cross-check against a simple model over random records.
#include <flowlib/source/detail/json_row.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace source_json_json_row {

namespace fl = flowlib;
namespace fd = flowlib::detail;
using namespace std::chrono;

namespace {

enum class Level : std::int16_t { low = -1, high = 7 };

using us_time = time_point<system_clock, microseconds>;
using ms_time = time_point<system_clock, milliseconds>;

struct All {
  bool b = false;
  std::int8_t i8 = 0;
  std::uint8_t u8 = 0;
  std::int16_t i16 = 0;
  std::uint16_t u16 = 0;
  std::int32_t i32 = 0;
  std::uint32_t u32 = 0;
  std::int64_t i64 = 0;
  std::uint64_t u64 = 0;
  float f = 0;
  double d = 0;
  std::string s;
  Level level = Level::low;
  sys_days day{};
  us_time at{};
  std::optional<std::int32_t> oi;
  std::optional<std::string> os;
  std::optional<ms_time> ot;
};
FLOWLIB_SCHEMA(All, b, i8, u8, i16, u16, i32, u32, i64, u64, f, d, s, level, day, at, oi, os, ot);

// Every column with a valid value; tests replace one value at a time.
const std::vector<std::pair<std::string, std::string>> base_fields = {
    {"b", "true"},      {"i8", "-128"},    {"u8", "255"},        {"i16", "32767"},
    {"u16", "65535"},   {"i32", "-2147483648"}, {"u32", "4294967295"},
    {"i64", "-9223372036854775808"},        {"u64", "18446744073709551615"},
    {"f", "0.5"},       {"d", "-2.25e10"},  {"s", "\"h\\u00e9\\n\\\"x\\\"\""},
    {"level", "7"},     {"day", "\"2024-02-29\""}, {"at", "\"2024-02-29T23:59:59.123456+01:00\""},
    {"oi", "null"},     {"os", "\"o\""},   {"ot", "1700000000123"}};

std::string object_with(const std::string& key, const std::optional<std::string>& value) {
  std::string j = "{";
  bool first = true;
  for (const auto& [k, v] : base_fields) {
    std::string val = v;
    if (k == key) {
      if (!value) continue;  // the column is left out
      val = *value;
    }
    if (!first) j += ",";
    first = false;
    j += "\"" + k + "\":" + val;
  }
  return j + "}";
}

const fd::record_origin origin{"orders", "file 'a.jsonl' line 12"};

template <class Row>
Row decode(const std::string& json, const fd::json_row_options& options = {}) {
  simdjson::ondemand::parser parser;
  Row row{};
  fd::json_text_to_row(parser, json, row, origin, options);
  return row;
}

struct caught {
  fl::errc code{};
  std::string column;
  std::string what;
};

template <class Row>
caught decode_error(const std::string& json, const fd::json_row_options& options = {}) {
  try {
    (void)decode<Row>(json, options);
  } catch (const fl::error& e) {
    return {e.code(), e.column(), e.what()};
  }
  FAIL("expected a flowlib::error for " << json);
  return {};
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// The reason for one bad value of one column, checking the message's parts.
std::string reason_for(const std::string& key, const std::string& value) {
  const caught c = decode_error<All>(object_with(key, value));
  CHECK(c.code == fl::errc::malformed_record);
  CHECK(c.column == key);
  CHECK(contains(c.what, "flow 'orders'"));
  CHECK(contains(c.what, "MALFORMED_RECORD"));
  CHECK(contains(c.what, "column '" + key + "'"));
  CHECK(contains(c.what, "file 'a.jsonl' line 12: "));
  CHECK(contains(c.what, ", value " + value.substr(0, 80)));
  const auto at = c.what.find("line 12: ");
  const auto comma = c.what.rfind(", value ");
  REQUIRE(at != std::string::npos);
  REQUIRE(comma != std::string::npos);
  return c.what.substr(at + 9, comma - at - 9);
}

}  // namespace

TEST_CASE("R-SOURCE-2, json rows: every column type at its bounds") {
  const All r = decode<All>(object_with("", std::nullopt));
  CHECK(r.b == true);
  CHECK(r.i8 == -128);
  CHECK(r.u8 == 255);
  CHECK(r.i16 == 32767);
  CHECK(r.u16 == 65535);
  CHECK(r.i32 == std::numeric_limits<std::int32_t>::min());
  CHECK(r.u32 == std::numeric_limits<std::uint32_t>::max());
  CHECK(r.i64 == std::numeric_limits<std::int64_t>::min());
  CHECK(r.u64 == std::numeric_limits<std::uint64_t>::max());
  CHECK(r.f == 0.5f);
  CHECK(r.d == -2.25e10);
  CHECK(r.s == "h\xc3\xa9\n\"x\"");
  CHECK(r.level == Level::high);
  CHECK(r.day == sys_days{2024y / February / 29});
  CHECK(r.at == us_time{sys_days{2024y / February / 29} + 22h + 59min + 59s + 123456us});
  CHECK(r.oi == std::nullopt);
  CHECK(r.os == std::optional<std::string>("o"));
  CHECK(r.ot == std::optional<ms_time>(ms_time{milliseconds{1700000000123}}));

  // Integers for dates and times: days, and counts of the column's unit.
  const All n = decode<All>(object_with("day", "-1").replace(1, 0, "\"at\":-1500000,"));
  CHECK(n.day == sys_days{days{-1}});
  // "at" appears twice: the later (the base's string) wins.
  CHECK(n.at == us_time{sys_days{2024y / February / 29} + 22h + 59min + 59s + 123456us});
  const All m = decode<All>(object_with("at", "-1500000"));
  CHECK(m.at == us_time{microseconds{-1500000}});
  CHECK(decode<All>(object_with("oi", "2147483647")).oi == 2147483647);
  CHECK(decode<All>(object_with("f", "3")).f == 3.0f);
  CHECK(decode<All>(object_with("d", "1.7976931348623157e308")).d ==
        std::numeric_limits<double>::max());
  CHECK(decode<All>(object_with("b", "false")).b == false);
  CHECK(decode<All>(object_with("i64", "9223372036854775807")).i64 ==
        std::numeric_limits<std::int64_t>::max());
  CHECK(decode<All>(object_with("u64", "0")).u64 == 0);
  CHECK(decode<All>(object_with("i8", "127")).i8 == 127);
  CHECK(decode<All>(object_with("level", "-1")).level == Level::low);
}

TEST_CASE("R-SOURCE-2, json rows: overflow and wrong types are refused, naming the reason") {
  struct refusal {
    const char* column;
    const char* value;
    const char* reason;
  };
  const refusal cases[] = {
      {"i8", "128", "out of range for an 8-bit integer"},
      {"i8", "-129", "out of range for an 8-bit integer"},
      {"u8", "256", "out of range for an unsigned 8-bit integer"},
      {"u8", "-1", "out of range for an unsigned 8-bit integer"},
      {"i16", "32768", "out of range for a 16-bit integer"},
      {"u16", "65536", "out of range for an unsigned 16-bit integer"},
      {"i32", "2147483648", "out of range for a 32-bit integer"},
      {"u32", "4294967296", "out of range for an unsigned 32-bit integer"},
      {"i64", "9223372036854775808", "out of range for a 64-bit integer"},
      {"u64", "18446744073709551616", "out of range for an unsigned 64-bit integer"},
      {"u64", "-1", "out of range for an unsigned 64-bit integer"},
      {"level", "40000", "out of range for a 16-bit integer"},
      {"oi", "2147483648", "out of range for a 32-bit integer"},
      // Fractions and exponents are not integers, whatever their value.
      {"i32", "1.5", "not an integer"},
      {"i32", "1.0", "not an integer"},
      {"i64", "1e3", "not an integer"},
      // Strings are not numbers, numbers are not strings.
      {"i32", "\"12\"", "not an integer"},
      {"i32", "true", "not an integer"},
      {"i32", "[1]", "not an integer"},
      {"i32", "{\"v\":1}", "not an integer"},
      {"d", "\"1.5\"", "not a number"},
      {"f", "1e39", "out of range for a float"},
      // Beyond a double's range is beyond what JSON parsers read: not JSON.
      {"d", "1e400", "not valid JSON (a number beyond the range of a double)"},
      {"s", "12", "not a string"},
      {"s", "{}", "not a string"},
      {"os", "false", "not a string"},
      {"b", "1", "not a boolean"},
      {"b", "\"true\"", "not a boolean"},
      {"level", "\"high\"", "not an integer"},
      {"day", "\"2023-02-30\"", "not an ISO 8601 date"},
      {"day", "\"2023-02-28T00:00:00\"", "not an ISO 8601 date"},
      {"day", "1.5", "not an integer"},
      {"day", "true", "not an ISO 8601 date (a string) or a count of days (an integer)"},
      {"at", "\"2024-02-29\"", "not an ISO 8601 timestamp"},
      {"at", "\"2023-02-29T10:00:00Z\"", "not an ISO 8601 timestamp"},
      {"at", "[]", "not an ISO 8601 timestamp (a string) or a count of the column's time unit (an integer)"},
      {"ot", "\"2024-01-01T00:00:00+25:00\"", "not an ISO 8601 timestamp"},
      {"ot", "18446744073709551615", "out of range for a 64-bit integer"},
      // Null only for std::optional columns.
      {"i32", "null", "null in a column that is not std::optional"},
      {"s", "null", "null in a column that is not std::optional"},
      {"day", "null", "null in a column that is not std::optional"},
  };
  for (const auto& [column, value, reason] : cases) {
    CAPTURE(column);
    CAPTURE(value);
    CHECK(reason_for(column, value) == reason);
  }
}

TEST_CASE("R-SOURCE-2, json rows: the value in a message is the raw JSON, cut to 80 bytes") {
  const std::string long_array = "[" + std::string(200, '1') + "]";
  const caught c = decode_error<All>(object_with("i32", long_array));
  CHECK(contains(c.what, ", value [" + std::string(79, '1') + "..."));
  CHECK(!contains(c.what, std::string(80, '1')));
  const caught s = decode_error<All>(object_with("b", "\"a\\\"b\""));
  CHECK(contains(s.what, "not a boolean, value \"a\\\"b\""));
}

TEST_CASE("R-SOURCE-2, json rows: missing columns: optional ones are null, others an error") {
  // A reused row: optional columns missing from the record are reset.
  simdjson::ondemand::parser parser;
  All row = decode<All>(object_with("", std::nullopt));
  row.oi = 5;
  row.os = "left over";
  fd::json_text_to_row(parser, object_with("os", std::nullopt), row, origin);
  CHECK(row.oi == std::nullopt);  // null in the record
  CHECK(row.os == std::nullopt);  // missing from the record
  for (const auto& [k, v] : base_fields) {
    CAPTURE(k);
    if (k == "oi" || k == "os" || k == "ot") {
      CHECK_NOTHROW(decode<All>(object_with(k, std::nullopt)));
      continue;
    }
    const caught c = decode_error<All>(object_with(k, std::nullopt));
    CHECK(c.code == fl::errc::malformed_record);
    CHECK(c.column == k);
    CHECK(contains(c.what, "file 'a.jsonl' line 12: the column is missing from the record"));
  }
}

namespace {
struct Small {
  std::int64_t id = 0;
  std::string name;
  std::optional<double> score;
};
FLOWLIB_SCHEMA(Small, id, name, score);

struct Renamed {
  std::int64_t id = 0;
  std::string start;
};
FLOWLIB_SCHEMA(Renamed, id, (start, "__START_AT"));
}  // namespace

TEST_CASE("R-SOURCE-2, json rows: unknown keys are ignored, duplicate keys keep the last, keys unescape") {
  const Small a = decode<Small>(
      R"({"zz":{"deep":[1,2,{"x":null}]},"id":1,"name":"a","extra":"x","id":2,"i":3,"names":4})");
  CHECK(a.id == 2);
  CHECK(a.name == "a");
  CHECK(a.score == std::nullopt);
  // An escaped key is matched after unescaping; keys are case-sensitive.
  const Small b = decode<Small>(R"({"\u0069d":7,"na\u006de":"n","Score":1.0,"score":2})");
  CHECK(b.id == 7);
  CHECK(b.name == "n");
  CHECK(b.score == 2.0);
  // Columns named other than their members are matched by their names.
  const Renamed r = decode<Renamed>(R"({"id":3,"__START_AT":"s","start":"no"})");
  CHECK(r.id == 3);
  CHECK(r.start == "s");
  // Keys in any order, with spaces.
  const Small c = decode<Small>("{ \"score\" : 1.5 ,\n \"name\" : \"\" , \"id\" : -4 }");
  CHECK(c.id == -4);
  CHECK(c.name.empty());
  CHECK(c.score == 1.5);
  // A key that is a prefix or extension of a column name is unknown.
  const caught e = decode_error<Small>(R"({"i":1,"idd":2,"name":"x"})");
  CHECK(e.column == "id");
}

namespace {
struct Rescued {
  std::int32_t id = 0;
  std::optional<std::int32_t> qty;
  std::string name;
  std::string _rescued_data;
};
FLOWLIB_SCHEMA(Rescued, id, qty, name, _rescued_data);

struct RescuedOpt {
  std::int32_t id = 0;
  std::optional<std::string> bad;
};
FLOWLIB_SCHEMA(RescuedOpt, id, (bad, "rescued"));

struct NoRescueColumn {
  std::int32_t id = 0;
  std::int32_t _rescued_data = 0;
};
FLOWLIB_SCHEMA(NoRescueColumn, id, _rescued_data);

struct ModelRow {
  std::int32_t id = 0;
  std::optional<std::int32_t> qty;
  std::string name;
  std::optional<std::string> _rescued_data;
};
FLOWLIB_SCHEMA(ModelRow, id, qty, name, _rescued_data);
}  // namespace

TEST_CASE("R-SOURCE-2, json rows: rescue keeps bad values, exactly as written, and names them by key") {
  const fd::json_row_options rescue{.rescue = true};
  const fd::json_row_options rescue_all{.rescue = true, .rescue_unknown = true};

  Rescued r = decode<Rescued>(R"({"id":1,"qty":"seven","name":"a","other":[1, 2]})", rescue);
  CHECK(r.id == 1);
  CHECK(r.qty == std::nullopt);
  CHECK(r.name == "a");
  CHECK(r._rescued_data == R"({"qty":"seven"})");

  r = decode<Rescued>(R"({"id":1,"qty":"seven","name":{"a": [1, {"b":null}]},"other":[1, 2]})",
                      rescue_all);
  CHECK(r.name.empty());  // value-initialised
  CHECK(r._rescued_data == R"({"qty":"seven","name":{"a": [1, {"b":null}]},"other":[1, 2]})");

  // Nothing to rescue: the column is empty, also on a reused row.
  r._rescued_data = "old";
  simdjson::ondemand::parser parser;
  fd::json_text_to_row(parser, R"({"id":2,"qty":3,"name":"b"})", r, origin, rescue_all);
  CHECK(r._rescued_data.empty());
  CHECK(r.qty == 3);

  // Null in a non-optional column, overflow, a key with an escape and one
  // named like the rescued column (unknown when rescuing).
  r = decode<Rescued>(
      R"({"id":4294967296,"qty":null,"name":null,"_rescued_data":"x","k\"ey":1e5,"n":-0.0})",
      rescue_all);
  CHECK(r.id == 0);
  CHECK(r.qty == std::nullopt);
  CHECK(r._rescued_data ==
        R"({"id":4294967296,"name":null,"_rescued_data":"x","k\"ey":1e5,"n":-0.0})");
  // Without rescue_unknown the unknown keys are dropped.
  r = decode<Rescued>(R"({"id":4294967296,"qty":1,"name":"n","_rescued_data":"x","zz":1})",
                      rescue);
  CHECK(r._rescued_data == R"({"id":4294967296})");
  // A missing non-optional column is still an error.
  const caught missing = decode_error<Rescued>(R"({"id":"x","qty":1})", rescue);
  CHECK(missing.code == fl::errc::malformed_record);
  CHECK(missing.column == "name");
  // Without rescue the rescued column is an ordinary column.
  r = decode<Rescued>(R"({"id":1,"name":"n","_rescued_data":"given"})");
  CHECK(r._rescued_data == "given");

  // An optional rescued column under another name.
  const fd::json_row_options named{.rescue = true, .rescue_unknown = true,
                                   .rescued_column = "rescued"};
  RescuedOpt o = decode<RescuedOpt>(R"({"id":5})", named);
  CHECK(o.bad == std::nullopt);
  o = decode<RescuedOpt>(R"({"id":5,"x":"\u00e9"})", named);
  CHECK(o.bad == std::optional<std::string>(R"({"x":"\u00e9"})"));

  // The rescued column must exist and hold strings.
  const caught none = decode_error<Small>(R"({"id":1,"name":"a"})", rescue);
  CHECK(none.code == fl::errc::invalid_argument);
  CHECK(contains(none.what, "'_rescued_data'"));
  const caught wrong = decode_error<NoRescueColumn>(R"({"id":1})", rescue);
  CHECK(wrong.code == fl::errc::invalid_argument);
  CHECK(contains(wrong.what, "std::string or std::optional<std::string>"));
}

namespace {
struct LongNames {
  std::int32_t a = 0;
  std::optional<std::int32_t> b;
  std::int32_t c = 0;
};
FLOWLIB_SCHEMA(LongNames, (a, "a_column_name_of_seventy_bytes_which_is_longer_than_simdjson_padding_x"),
               (b, "bb"), (c, "c"));
}  // namespace

TEST_CASE("R-SOURCE-2, json rows: names longer than the padding, keys that are prefixes, in any order") {
  const std::string long_name = "a_column_name_of_seventy_bytes_which_is_longer_than_simdjson_padding_x";
  REQUIRE(long_name.size() > simdjson::SIMDJSON_PADDING);
  LongNames r = decode<LongNames>("{\"" + long_name + "\":1,\"bb\":2,\"c\":3}");
  CHECK(r.a == 1);
  CHECK(r.b == 2);
  CHECK(r.c == 3);
  // Short keys where a long name is expected next, at the text's very end.
  r = decode<LongNames>("{\"c\":5,\"a\":0,\"a_column\":0,\"" + long_name + "\":7,\"b\":1}");
  CHECK(r.a == 7);
  CHECK(r.b == std::nullopt);
  CHECK(r.c == 5);
  r = decode<LongNames>("{\"bb\":4,\"c\":6,\"" + long_name + "\":8}");
  CHECK(r.a == 8);
  CHECK(r.b == 4);
  // The key "b" and then "bbb": neither is the column "bb".
  r = decode<LongNames>("{\"" + long_name + "\":1,\"b\":9,\"bbb\":9,\"c\":1}");
  CHECK(r.b == std::nullopt);
  const caught c = decode_error<LongNames>("{\"" + long_name.substr(0, 69) + "\":1,\"c\":1}");
  CHECK(c.column == long_name);
}

TEST_CASE("R-SOURCE-2, json rows: texts that are not one JSON object are malformed records") {
  for (const std::string bad : {"", "   ", "{", "{\"id\":1", "[1,2]", "42", "\"text\"", "null",
                                "{\"id\":1,\"name\":\"a\"} {\"id\":2}", "{\"id\":1,}",
                                "{\"id\" 1}", "{\"id\":1,\"name\":\"a\"}x"}) {
    CAPTURE(bad);
    const caught c = decode_error<Small>(bad);
    CHECK(c.code == fl::errc::malformed_record);
    CHECK(contains(c.what, "flow 'orders'"));
    CHECK(contains(c.what, "file 'a.jsonl' line 12: "));
  }
  CHECK(contains(decode_error<Small>("[1,2]").what, "not a JSON object, value [1,2]"));
  CHECK(contains(decode_error<Small>("{\"id\":1,\"name\":\"a\"} {}").what,
                 "more than one JSON value"));
  // Trailing spaces and newlines are fine.
  CHECK(decode<Small>("{\"id\":1,\"name\":\"a\"} \r\n").id == 1);
  // An unterminated string inside a known column.
  const caught s = decode_error<Small>("{\"id\":1,\"name\":\"a}");
  CHECK(s.code == fl::errc::malformed_record);
}

TEST_CASE("R-SOURCE-2, json rows: padded text is decoded in place, with the same result") {
  simdjson::padded_string text(std::string(R"({"id":9,"name":"p","score":0.25})"));
  simdjson::ondemand::parser parser;
  Small row;
  fd::json_text_to_row(parser, simdjson::padded_string_view(text), row, origin);
  CHECK(row.id == 9);
  CHECK(row.name == "p");
  CHECK(row.score == 0.25);
  // json_to_row on an object the caller parsed itself.
  auto doc = parser.iterate(text);
  Small again;
  fd::json_to_row(doc.get_object().value(), again, {"s", "w"});
  CHECK(again.name == "p");
}

TEST_CASE("R-SOURCE-2, json rows: random records match a simple model, with and without rescue") {
  for (std::uint32_t seed : {11u, 12u, 13u, 14u}) {
    CAPTURE(seed);
    std::mt19937 rng(seed);
    simdjson::ondemand::parser parser;
    ModelRow row;  // reused across records, as sources do
    for (int i = 0; i < 1500; ++i) {
      // Model: each column's final occurrence decides; each key is written
      // 0-2 times, in random order, with good or bad values.
      struct field {
        std::string key, raw;
        bool good;
      };
      std::vector<field> fields;
      const char* keys[] = {"id", "qty", "name", "junk"};
      for (const char* k : keys) {
        const int times = static_cast<int>(rng() % 3);
        for (int t = 0; t < times; ++t) {
          const std::string key = k;
          const int v = static_cast<int>(rng() % 1000) - 500;
          const bool good = rng() % 4 != 0;
          std::string raw;
          if (key == "name") raw = good ? "\"n" + std::to_string(v) + "\"" : std::to_string(v);
          else if (key == "junk") raw = "[" + std::to_string(v) + "]";
          else if (key == "qty" && rng() % 5 == 0) raw = "null";
          else raw = good ? std::to_string(v) : "\"" + std::to_string(v) + "\"";
          if (key == "junk" || raw == "null") {
            fields.push_back({key, raw, true});
          } else {
            fields.push_back({key, raw, good});
          }
        }
      }
      std::shuffle(fields.begin(), fields.end(), rng);
      std::string json = "{";
      for (std::size_t f = 0; f < fields.size(); ++f) {
        if (f) json += ",";
        json += "\"" + fields[f].key + "\":" + fields[f].raw;
      }
      json += "}";
      CAPTURE(json);

      // The model's expectation.
      std::optional<std::string> last[3];
      bool last_good[3] = {false, false, false};
      std::string rescued;
      for (const auto& f : fields) {
        int c = f.key == "id" ? 0 : f.key == "qty" ? 1 : f.key == "name" ? 2 : 3;
        if (c == 3) {
          rescued += (rescued.empty() ? "{" : ",") + ("\"junk\":" + f.raw);
          continue;
        }
        last[c] = f.raw;
        last_good[c] = f.good;
        if (!f.good) rescued += (rescued.empty() ? "{" : ",") + ("\"" + f.key + "\":" + f.raw);
      }
      if (!rescued.empty()) rescued += "}";

      const bool rescue = rng() % 2 == 0;
      const fd::json_row_options options{.rescue = rescue, .rescue_unknown = true};
      const bool missing = !last[0] || !last[2];
      bool any_bad = false;
      for (const auto& f : fields) any_bad = any_bad || !f.good;
      bool threw = false;
      std::string column;
      try {
        fd::json_text_to_row(parser, json, row, origin, options);
      } catch (const fl::error& e) {
        threw = true;
        column = e.column();
        CHECK(e.code() == fl::errc::malformed_record);
      }
      if (rescue) {
        CHECK(threw == missing);
        if (!threw) {
          CHECK(row._rescued_data == (rescued.empty() ? std::nullopt
                                                      : std::optional<std::string>(rescued)));
        }
      } else {
        CHECK(threw == (missing || any_bad));
        if (threw && any_bad) {
          // The first bad occurrence in the record's order is named.
          std::string first_bad;
          for (const auto& f : fields) {
            if (!f.good) {
              first_bad = f.key;
              break;
            }
          }
          CHECK(column == first_bad);
        }
      }
      if (!threw) {
        const auto as_int = [](const std::string& raw) { return std::stoi(raw); };
        CHECK(row.id == (last_good[0] ? as_int(*last[0]) : 0));
        if (!last[1] || *last[1] == "null" || !last_good[1]) {
          CHECK(row.qty == std::nullopt);
        } else {
          CHECK(row.qty == as_int(*last[1]));
        }
        CHECK(row.name == (last_good[2] ? last[2]->substr(1, last[2]->size() - 2) : ""));
      }
    }
  }
}

}  // namespace source_json_json_row
