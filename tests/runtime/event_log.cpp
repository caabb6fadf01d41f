// The event log (event_log.hpp, detail/json.hpp): every line written is read
// back with nlohmann::json, an independent strict JSON parser that also
// rejects ill-formed UTF-8, and its fields are compared with what was
// written. Names and messages carry quotes, backslashes, every control
// character, DEL, non-ASCII text and ill-formed UTF-8.
#include <flowlib/event_log.hpp>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <support/temp_files.hpp>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace runtime_event_log {

namespace fl = flowlib;
namespace fd = flowlib::detail;
using json = nlohmann::json;
using namespace std::chrono_literals;

namespace {

// A log whose lines are kept; every line is checked to be one line and is
// parsed strictly.
struct captured {
  std::vector<std::string> lines;
  fl::EventLog log{[this](std::string_view line) { lines.emplace_back(line); }};

  json last() const {
    REQUIRE(!lines.empty());
    return parse(lines.back());
  }
  static json parse(const std::string& line) {
    CHECK(line.find('\n') == std::string::npos);
    json j;
    REQUIRE_NOTHROW(j = json::parse(line));
    REQUIRE(j.is_object());
    return j;
  }
};

std::chrono::system_clock::time_point at(std::chrono::sys_days day, std::chrono::nanoseconds ns) {
  return std::chrono::system_clock::time_point(
      std::chrono::duration_cast<std::chrono::system_clock::duration>(day.time_since_epoch() + ns));
}

const auto t0 = at(std::chrono::sys_days{std::chrono::year{2026} / 12 / 5},
                   7h + 15min + 3s + 123ms + 456us);

// Every byte 0x00..0x1F, then DEL.
std::string all_controls() {
  std::string s;
  for (int c = 0; c < 0x20; ++c) s += static_cast<char>(c);
  s += '\x7f';
  return s;
}

// Strings that must come back exactly as written.
const std::vector<std::string> exact_strings = {
    "",
    "plain",
    "quote \" and backslash \\ and slash /",
    "\\\"\\\\\"",
    all_controls(),
    "line\nbreak\ttab\rreturn",
    std::string("nul\0inside", 10),
    "注文テーブル（日次）",                          // Japanese
    "Pesanan dikirim ke Sémarang, Bali — ürün",   // Indonesian and other diacritics
    "🚀📦 emoji 👩‍💻",                             // 4-byte sequences and a ZWJ sequence
    "\xF4\x8F\xBF\xBF",                            // U+10FFFF, the last code point
    "\xEF\xBF\xBD already a replacement",
};

const std::string fffd = "\xEF\xBF\xBD";

std::string write_string_doc(const std::string& s) {
  fd::json_writer w;
  w.begin_object().key("s").value(s).end_object();
  return w.take();
}

std::string parsed_string(const std::string& s) {
  const json j = captured::parse(write_string_doc(s));
  return j.at("s").get<std::string>();
}

// An independent UTF-8 validator (decode, then check the code point's
// range: overlong, surrogate, beyond U+10FFFF).
bool valid_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t len;
    std::uint32_t cp;
    if (c < 0x80) { ++i; continue; }
    if ((c & 0xE0) == 0xC0) { len = 2; cp = c & 0x1F; }
    else if ((c & 0xF0) == 0xE0) { len = 3; cp = c & 0x0F; }
    else if ((c & 0xF8) == 0xF0) { len = 4; cp = c & 0x07; }
    else return false;
    if (i + len > s.size()) return false;
    for (std::size_t k = 1; k < len; ++k) {
      const auto d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    const std::uint32_t min[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

std::string encode_utf8(std::uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xF0 | (cp >> 18));
    s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

std::filesystem::path temp_file(const char* name) {
  auto p = std::filesystem::temp_directory_path() /
           (std::string("flowlib_event_log_test_") + name + "_" +
            std::to_string(std::random_device{}()) + ".jsonl");
  std::filesystem::remove(p);
  return p;
}

constexpr auto read_all = flowtest::read_file;

}  // namespace

TEST_CASE("json: strings with quotes, backslashes, controls, DEL and non-ASCII text read back exactly") {
  for (const auto& s : exact_strings) {
    CAPTURE(s);
    CHECK(parsed_string(s) == s);
  }
  // The escapes themselves: named ones where JSON has them, \u00XX otherwise,
  // DEL as is.
  const std::string text = write_string_doc(all_controls());
  CHECK(text.find("\\u0000") != std::string::npos);
  CHECK(text.find("\\u001f") != std::string::npos);
  CHECK(text.find("\\b\\t\\n\\u000b\\f\\r") != std::string::npos);
  CHECK(text.find('\x7f') != std::string::npos);
  for (char c : text) CHECK(static_cast<unsigned char>(c) >= 0x20);
}

TEST_CASE("json: ill-formed UTF-8 is replaced by U+FFFD, one per maximal subpart") {
  struct tc {
    std::string in, out;
  };
  const std::vector<tc> cases = {
      {"a\x80z", "a" + fffd + "z"},                           // lone continuation byte
      {"\xBF\x80", fffd + fffd},                              // two of them
      {"x\xE3\x81y", "x" + fffd + "y"},                       // truncated 3-byte sequence
      {"x\xE3\x81", "x" + fffd},                              // ... at the end
      {"\xF0\x9F\x9A", fffd},                                 // truncated 4-byte sequence
      {"\xC0\xAF", fffd + fffd},                              // overlong '/' (2 bytes)
      {"\xE0\x80\xAF", fffd + fffd + fffd},                   // overlong '/' (3 bytes)
      {"\xF0\x80\x80\xAF", fffd + fffd + fffd + fffd},        // overlong '/' (4 bytes)
      {"\xED\xA0\x80", fffd + fffd + fffd},                   // a surrogate (U+D800)
      {"\xF4\x90\x80\x80", fffd + fffd + fffd + fffd},        // above U+10FFFF
      {"\xFE\xFF", fffd + fffd},                              // never valid bytes
      {"\xC3", fffd},                                         // truncated 2-byte at the end
      {"\xC3\xA9\xC3", "\xC3\xA9" + fffd},                    // é then a truncated one
      {"\xE6\x97\xA5\x80\xE6\x97\xA5", "日" + fffd + "日"},  // between valid characters
      {"\xE3\x81\"", fffd + "\""},                            // truncated before a quote
  };
  for (const auto& c : cases) {
    CAPTURE(c.in);
    CHECK(parsed_string(c.in) == c.out);
  }
}

TEST_CASE("json: random byte strings always give valid JSON; valid UTF-8 passes unchanged") {
  for (std::uint32_t seed : {1u, 2u, 3u, 4u, 5u}) {
    std::mt19937 rng(seed);
    for (int round = 0; round < 400; ++round) {
      // Random bytes: any byte, biased towards the interesting ones.
      std::string bytes;
      const int n = static_cast<int>(rng() % 24);
      for (int i = 0; i < n; ++i) {
        switch (rng() % 4) {
          case 0: bytes += static_cast<char>(rng() % 0x20); break;
          case 1: bytes += static_cast<char>(0x80 + rng() % 0x80); break;
          default: bytes += static_cast<char>(rng() % 256); break;
        }
      }
      const std::string back = parsed_string(bytes);
      CHECK(valid_utf8(back));
      if (valid_utf8(bytes)) CHECK(back == bytes);
      if (!valid_utf8(bytes)) CHECK(back.find(fffd) != std::string::npos);

      // Random valid text: random code points (no surrogates).
      std::string text;
      for (int i = 0; i < n; ++i) {
        std::uint32_t cp;
        switch (rng() % 4) {
          case 0: cp = rng() % 0x80; break;
          case 1: cp = 0x80 + rng() % (0x800 - 0x80); break;
          case 2: cp = 0x800 + rng() % (0x10000 - 0x800); break;
          default: cp = 0x10000 + rng() % (0x110000 - 0x10000); break;
        }
        if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xE000;
        text += encode_utf8(cp);
      }
      REQUIRE(valid_utf8(text));
      CHECK(parsed_string(text) == text);
    }
  }
}

TEST_CASE("json: numbers, booleans, null and nesting") {
  fd::json_writer w;
  w.begin_object();
  w.key("u").value(std::numeric_limits<std::uint64_t>::max());
  w.key("i").value(std::numeric_limits<std::int64_t>::min());
  w.key("zero").value(0);
  w.key("half").value(1.5);
  w.key("tenth").value(0.1);
  w.key("big").value(1e300);
  w.key("tiny").value(5e-324);
  w.key("neg").value(-2.25);
  w.key("nan").value(std::numeric_limits<double>::quiet_NaN());
  w.key("inf").value(std::numeric_limits<double>::infinity());
  w.key("ninf").value(-std::numeric_limits<double>::infinity());
  w.key("t").value(true);
  w.key("f").value(false);
  w.key("lit").value("text");
  w.key("n").null();
  w.key("arr").begin_array();
  w.value(1).begin_object().end_object().begin_array().end_array().null();
  w.begin_array().value("x").value(2).end_array();
  w.end_array();
  w.key("empty").begin_object().end_object();
  w.end_object();
  const json j = captured::parse(w.str());
  CHECK(j.at("u").get<std::uint64_t>() == std::numeric_limits<std::uint64_t>::max());
  CHECK(j.at("i").get<std::int64_t>() == std::numeric_limits<std::int64_t>::min());
  CHECK(j.at("zero").get<int>() == 0);
  CHECK(j.at("half").get<double>() == 1.5);
  CHECK(j.at("tenth").get<double>() == 0.1);
  CHECK(j.at("big").get<double>() == 1e300);
  CHECK(j.at("tiny").get<double>() == 5e-324);
  CHECK(j.at("neg").get<double>() == -2.25);
  CHECK(j.at("nan").is_null());
  CHECK(j.at("inf").is_null());
  CHECK(j.at("ninf").is_null());
  CHECK(j.at("t") == true);
  CHECK(j.at("f") == false);
  CHECK(j.at("lit") == "text");
  CHECK(j.at("n").is_null());
  CHECK(j.at("arr") == json::parse(R"([1,{},[],null,["x",2]])"));
  CHECK(j.at("empty") == json::object());
  CHECK(j.size() == 17);

  // Random doubles read back to the same value.
  std::mt19937_64 rng(7);
  for (int i = 0; i < 2000; ++i) {
    const std::uint64_t bits = rng();
    double d;
    std::memcpy(&d, &bits, sizeof d);
    fd::json_writer v;
    v.begin_array().value(d).end_array();
    const json back = json::parse(v.str());
    if (std::isfinite(d)) {
      CHECK(back.at(0).get<double>() == d);
    } else {
      CHECK(back.at(0).is_null());
    }
  }
}

TEST_CASE("event log: timestamps are RFC 3339 UTC with milliseconds, truncated") {
  using namespace std::chrono;
  CHECK(fd::rfc3339_utc_ms(t0) == "2026-12-05T07:15:03.123Z");
  CHECK(fd::rfc3339_utc_ms(system_clock::time_point{}) == "1970-01-01T00:00:00.000Z");
  CHECK(fd::rfc3339_utc_ms(system_clock::time_point{} - 1ms) == "1969-12-31T23:59:59.999Z");
  CHECK(fd::rfc3339_utc_ms(at(sys_days{year{2024} / 2 / 29}, 23h + 59min + 59s + 999ms + 999us)) ==
        "2024-02-29T23:59:59.999Z");
  CHECK(fd::rfc3339_utc_ms(at(sys_days{year{2000} / 1 / 1}, 5ms)) == "2000-01-01T00:00:00.005Z");
}

TEST_CASE("event log: update_progress STARTED, COMPLETED with details, FAILED with error") {
  captured c;
  c.log.update_progress({.timestamp = t0, .pipeline = "sales", .update_id = 7,
                         .state = fl::update_state::started});
  json j = c.last();
  CHECK(j == json{{"timestamp", "2026-12-05T07:15:03.123Z"},
                  {"pipeline", "sales"},
                  {"update_id", 7},
                  {"event_type", "update_progress"},
                  {"state", "STARTED"}});

  c.log.update_progress({.timestamp = t0 + 2s, .pipeline = "sales", .update_id = 7,
                         .state = fl::update_state::completed,
                         .details = {.flows = 3, .batches = 5, .rows = 123456789012ull}});
  j = c.last();
  CHECK(j.at("timestamp") == "2026-12-05T07:15:05.123Z");
  CHECK(j.at("state") == "COMPLETED");
  CHECK(j.at("details") == json{{"flows", 3}, {"batches", 5}, {"rows", 123456789012ull}});
  CHECK(!j.contains("error"));

  const std::string message = "flowlib: cannot write '/var/ckpt/\"x\"\\y': Disk\nfull \x80";
  c.log.update_progress({.timestamp = t0, .pipeline = "sales", .update_id = 8,
                         .state = fl::update_state::failed,
                         .error = {.code = "CHECKPOINT_IO_ERROR", .message = message}});
  j = c.last();
  CHECK(j.at("state") == "FAILED");
  CHECK(j.at("update_id") == 8);
  CHECK(!j.contains("details"));
  CHECK(j.at("error").at("code") == "CHECKPOINT_IO_ERROR");
  CHECK(j.at("error").at("message") ==
        "flowlib: cannot write '/var/ckpt/\"x\"\\y': Disk\nfull " + fffd);
  CHECK(j.size() == 6);
  CHECK(c.log.events_written() == 3);
}

TEST_CASE("event log: flow_progress writes every field, metrics and expectations") {
  captured c;
  fl::flow_progress_event e{
      .timestamp = t0,
      .pipeline = "sales",
      .update_id = 3,
      .flow = "orders_cdc",
      .target = "orders",
      .batch_id = 41,
      .status = fl::flow_status::completed,
      .start_position = "0:12,1:40",
      .end_position = "0:20,1:44",
      .duration_ms = 12.625,
      .metrics = {.input_rows = 1, .output_rows = 2, .upserted_rows = 3,
                  .deleted_rows = 4, .dropped_rows = 5, .quarantined_rows = 6,
                  .deduplicated_rows = 7, .late_rows = 8, .filtered_rows = 9,
                  .unmatched_rows = 10},
      .expectations = {{"valid_id", fl::on_violation::warn, 10, 1},
                       {"positive", fl::on_violation::drop, 9, 2},
                       {"has_key", fl::on_violation::fail, 11, 0}},
      .stages = {{"MAP", 30, 30}, {"FILTER", 30, 21}},
      .error = {}};
  c.log.flow_progress(e);
  json j = c.last();
  CHECK(j.at("timestamp") == "2026-12-05T07:15:03.123Z");
  CHECK(j.at("pipeline") == "sales");
  CHECK(j.at("update_id") == 3);
  CHECK(j.at("event_type") == "flow_progress");
  CHECK(j.at("flow") == "orders_cdc");
  CHECK(j.at("target") == "orders");
  CHECK(j.at("batch_id") == 41);
  CHECK(j.at("status") == "COMPLETED");
  CHECK(j.at("start_position") == "0:12,1:40");
  CHECK(j.at("end_position") == "0:20,1:44");
  CHECK(j.at("duration_ms").get<double>() == 12.625);
  CHECK(j.at("metrics") == json{{"num_input_rows", 1},       {"num_output_rows", 2},
                                {"num_upserted_rows", 3},    {"num_deleted_rows", 4},
                                {"num_dropped_rows", 5},     {"num_quarantined_rows", 6},
                                {"num_deduplicated_rows", 7}, {"num_late_rows", 8},
                                {"num_filtered_rows", 9},    {"num_unmatched_rows", 10}});
  CHECK(j.at("stages") == json::parse(R"([
          {"stage":"MAP","num_input_rows":30,"num_output_rows":30},
          {"stage":"FILTER","num_input_rows":30,"num_output_rows":21}])"));
  CHECK(j.at("data_quality") ==
        json::parse(R"({"expectations":[
          {"name":"valid_id","action":"warn","passed_records":10,"failed_records":1},
          {"name":"positive","action":"drop","passed_records":9,"failed_records":2},
          {"name":"has_key","action":"fail","passed_records":11,"failed_records":0}]})"));
  CHECK(!j.contains("error"));
  CHECK(j.size() == 14);

  // A foreach-batch sink has no target: null. Skipped, no expectations.
  e.target.clear();
  e.status = fl::flow_status::skipped;
  e.expectations.clear();
  e.duration_ms = std::numeric_limits<double>::quiet_NaN();
  c.log.flow_progress(e);
  j = c.last();
  CHECK(j.at("target").is_null());
  CHECK(j.at("status") == "SKIPPED");
  CHECK(j.at("duration_ms").is_null());
  CHECK(j.at("data_quality") == json{{"expectations", json::array()}});

  // Failed: the error object; names with every awkward character.
  for (const auto& name : exact_strings) {
    e.flow = name;
    e.target = name.empty() ? "" : name + "_target";
    e.status = fl::flow_status::failed;
    e.expectations = {{name, fl::on_violation::drop, 0, 5}};
    e.error = {"EXPECTATION_VIOLATION", "flow '" + name + "' failed"};
    c.log.flow_progress(e);
    j = c.last();
    CAPTURE(name);
    CHECK(j.at("flow") == name);
    if (name.empty()) {
      CHECK(j.at("target").is_null());
    } else {
      CHECK(j.at("target") == name + "_target");
    }
    CHECK(j.at("status") == "FAILED");
    CHECK(j.at("data_quality").at("expectations").at(0).at("name") == name);
    CHECK(j.at("error") == json{{"code", "EXPECTATION_VIOLATION"},
                                {"message", "flow '" + name + "' failed"}});
  }
  // Ill-formed UTF-8 in a flow name.
  e.flow = "bad\xC0\xAFname\xE3\x81";
  c.log.flow_progress(e);
  CHECK(c.last().at("flow") == "bad" + fffd + fffd + "name" + fffd);
  CHECK(c.log.events_written() == 3 + exact_strings.size());
}

TEST_CASE("event log: an action beyond warn/drop/fail is written as quarantine") {
  // The enum's fourth value (quarantine) is written by the default branch.
  CHECK(fd::expectation_action_name(fl::on_violation::warn) == "warn");
  CHECK(fd::expectation_action_name(fl::on_violation::drop) == "drop");
  CHECK(fd::expectation_action_name(fl::on_violation::fail) == "fail");
  CHECK(fd::expectation_action_name(static_cast<fl::on_violation>(3)) == "quarantine");
}

TEST_CASE("event log: planning_information, with and without a reason") {
  captured c;
  c.log.planning_information({.timestamp = t0, .pipeline = "p", .update_id = 1, .flow = "daily",
                              .technique = "INCREMENTAL", .reason = std::nullopt});
  json j = c.last();
  CHECK(j == json{{"timestamp", "2026-12-05T07:15:03.123Z"},
                  {"pipeline", "p"},
                  {"update_id", 1},
                  {"event_type", "planning_information"},
                  {"flow", "daily"},
                  {"technique", "INCREMENTAL"},
                  {"reason", nullptr}});
  c.log.planning_information({.timestamp = t0, .pipeline = "p", .update_id = 2, .flow = "daily",
                              .technique = "COMPLETE_RECOMPUTE",
                              .reason = "the predicate \"day = today\" changed"});
  j = c.last();
  CHECK(j.at("technique") == "COMPLETE_RECOMPUTE");
  CHECK(j.at("reason") == "the predicate \"day = today\" changed");
}

TEST_CASE("event log: a file log appends across two EventLog objects, one line per event") {
  const auto path = temp_file("append");
  {
    fl::EventLog log(path);
    log.update_progress({.timestamp = t0, .pipeline = "p", .update_id = 1,
                         .state = fl::update_state::started});
    // Each event is flushed: it is in the file when the call returns.
    CHECK(read_all(path).size() > 0);
    log.update_progress({.timestamp = t0, .pipeline = "p", .update_id = 1,
                         .state = fl::update_state::completed, .details = {1, 1, 1}});
    CHECK(log.events_written() == 2);
  }
  {
    fl::EventLog log(path);
    CHECK(log.events_written() == 0);
    log.flow_progress({.timestamp = t0, .pipeline = "p", .update_id = 2, .flow = "f\n\"x\""});
    fl::EventLog moved = std::move(log);  // movable: the same file
    moved.update_progress({.timestamp = t0, .pipeline = "p", .update_id = 2,
                           .state = fl::update_state::failed,
                           .error = {"CHECKPOINT_IO_ERROR", "no space"}});
    CHECK(moved.events_written() == 2);
  }
  const std::string text = read_all(path);
  REQUIRE(!text.empty());
  CHECK(text.back() == '\n');
  std::vector<json> events;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) events.push_back(captured::parse(line));
  REQUIRE(events.size() == 4);
  CHECK(events[0].at("state") == "STARTED");
  CHECK(events[1].at("state") == "COMPLETED");
  CHECK(events[2].at("flow") == "f\n\"x\"");
  CHECK(events[3].at("error").at("message") == "no space");
  std::filesystem::remove(path);
}

TEST_CASE("event log: errors opening or writing the file name the file") {
  const auto dir = temp_file("missing_dir");
  const auto path = dir / "log.jsonl";
  try {
    fl::EventLog log(path);
    FAIL("opening a file in a missing directory must throw");
  } catch (const fl::error& e) {
    CHECK(e.code() == fl::errc::invalid_argument);
    const std::string what = e.what();
    CHECK(what.find(path.string()) != std::string::npos);
    CHECK(what.find("No such file or directory") != std::string::npos);
  }
  CHECK_THROWS_AS(fl::EventLog(std::function<void(std::string_view)>{}), fl::error);

  // /dev/full accepts the open and fails every write (ENOSPC).
  if (std::filesystem::exists("/dev/full")) {
    fl::EventLog log(std::filesystem::path("/dev/full"));
    try {
      log.update_progress({.timestamp = t0, .pipeline = "p", .update_id = 1});
      FAIL("writing to /dev/full must throw");
    } catch (const fl::error& e) {
      CHECK(e.code() == fl::errc::invalid_argument);
      const std::string what = e.what();
      CHECK(what.find("/dev/full") != std::string::npos);
      CHECK(what.find("No space left on device") != std::string::npos);
    }
    CHECK(log.events_written() == 0);
  }
}

TEST_CASE("event log: the callback's exceptions propagate and the event is not counted") {
  struct sink_failure {};
  int calls = 0;
  fl::EventLog log([&](std::string_view) {
    if (++calls == 2) throw sink_failure{};
  });
  log.update_progress({.timestamp = t0, .pipeline = "p", .update_id = 1});
  CHECK_THROWS_AS(log.update_progress({.timestamp = t0, .pipeline = "p", .update_id = 1}),
                  sink_failure);
  log.update_progress({.timestamp = t0, .pipeline = "p", .update_id = 1});
  CHECK(calls == 3);
  CHECK(log.events_written() == 2);
}

TEST_CASE("event log: events written from two threads to one file are whole lines") {
  const auto path = temp_file("threads");
  {
    fl::EventLog log(path);
    auto write = [&](std::uint64_t id) {
      for (int i = 0; i < 300; ++i)
        log.flow_progress({.timestamp = t0, .pipeline = "p", .update_id = id,
                           .flow = std::string(static_cast<std::size_t>(i), 'f'),
                           .batch_id = static_cast<std::uint64_t>(i)});
    };
    std::thread a(write, 1), b(write, 2);
    a.join();
    b.join();
    CHECK(log.events_written() == 600);
  }
  std::istringstream in(read_all(path));
  std::uint64_t next[3] = {0, 0, 0};
  int lines = 0;
  for (std::string line; std::getline(in, line); ++lines) {
    const json j = captured::parse(line);
    const auto id = j.at("update_id").get<std::uint64_t>();
    REQUIRE((id == 1 || id == 2));
    // Each thread's events in the order it wrote them.
    CHECK(j.at("batch_id").get<std::uint64_t>() == next[id]);
    CHECK(j.at("flow").get<std::string>().size() == next[id]);
    ++next[id];
  }
  CHECK(lines == 600);
  std::filesystem::remove(path);
}

}  // namespace runtime_event_log
