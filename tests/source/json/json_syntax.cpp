// source/detail/json_row.hpp and FileSource (source/file.hpp): a record must be
// JSON whichever key holds the bad token. Checked against nlohmann::json,
// an independent strict parser: bad tokens under keys that name no column
// (at any depth) and under columns, strict mode accepting a line exactly
// when nlohmann::json does, rescue never writing a rescued column that is
// not JSON (a record that is not JSON is kept whole, as _raw), and a
// randomized differential over mutated lines, decoded alone and through a
// FileSource.
#include <flowlib/source/detail/json_row.hpp>
#include <flowlib/source/file.hpp>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <support/temp_files.hpp>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace source_json_json_syntax {

namespace fl = flowlib;
namespace fd = flowlib::detail;
using json = nlohmann::json;

namespace {

struct Line {
  std::int64_t id = 0;
  std::string name;
  bool active = false;
  std::optional<double> amount;
};
FLOWLIB_SCHEMA(Line, id, name, active, amount);

struct LineR {
  std::int64_t id = 0;
  std::string name;
  bool active = false;
  std::optional<double> amount;
  std::optional<std::string> rescued;
};
FLOWLIB_SCHEMA(LineR, id, name, active, amount, (rescued, "_rescued_data"));

const fd::record_origin origin{"orders", "file 'a.jsonl' line 3"};
const fd::json_row_options strict{};
const fd::json_row_options rescue{.rescue = true};
const fd::json_row_options rescue_all{.rescue = true, .rescue_unknown = true};

/// The decoder's verdict on one text: "" when it decodes, else the error's
/// message (every error must be MALFORMED_RECORD).
template <class Row>
std::string verdict(const std::string& text, const fd::json_row_options& options, Row* out = nullptr) {
  thread_local simdjson::ondemand::parser parser;
  Row row{};
  try {
    fd::json_text_to_row(parser, text, row, origin, options);
  } catch (const fl::error& e) {
    CHECK(e.code() == fl::errc::malformed_record);
    const std::string what = e.what();
    return what.empty() ? "?" : what;
  }
  if (out) *out = row;
  return {};
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

/// A refusal for the text's syntax, not for a value's type or a missing column.
bool syntax_refusal(const std::string& what) {
  return contains(what, "not valid JSON") || contains(what, "more than one JSON value") ||
         contains(what, "not a JSON object");
}

/// nlohmann::json's verdict: whether `text` is JSON. A NUL byte is never
/// JSON (not a blank, and escaped in strings), but nlohmann::json takes one
/// between tokens for the end of its input, so that it accepts `{...}`
/// followed by a NUL and anything: such texts are not JSON here.
bool nlohmann_accepts(const std::string& text) {
  return text.find('\0') == std::string::npos && json::accept(text);
}

/// Whether nlohmann::json reads `text` as an object whose keys and values
/// Line takes without refusal: id an integer of 64 bits, name a string,
/// active a boolean, amount missing, null or a finite number, no column
/// named twice (other keys anything).
bool fits_line(const std::string& text) {
  std::vector<std::string> keys;
  json j;
  try {
    j = json::parse(text, [&](int depth, json::parse_event_t event, json& parsed) {
      if (event == json::parse_event_t::key && depth == 1) keys.push_back(parsed.get<std::string>());
      return true;
    });
  } catch (const json::exception&) {
    return false;
  }
  if (!j.is_object()) return false;
  for (const char* column : {"id", "name", "active", "amount"})
    if (std::count(keys.begin(), keys.end(), column) > 1) return false;
  if (!j.contains("id") || !j.contains("name") || !j.contains("active")) return false;
  const json& id = j["id"];
  if (!id.is_number_integer()) return false;
  if (id.is_number_unsigned() &&
      id.get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
    return false;
  if (!j["name"].is_string() || !j["active"].is_boolean()) return false;
  if (j.contains("amount") && !j["amount"].is_null() && !j["amount"].is_number()) return false;
  return true;
}

/// Tokens that are not JSON, each to be put where a value goes.
const std::vector<std::string> bad_tokens = {
    "tru", "nul", "fals", "truex", "nulll", "True", "01", "-01", "00", "1.", "1.e5", ".5", "+1",
    "NaN", "Infinity", "-", "1e", "1e+", "0x1", "1..2", "1-2", "'a'",
    "\"\\x\"", "\"bad \\x escape\"", "\"\\u12\"", "\"\\u12g4\"", "\"\\ud800\"", "\"\\udc00\"",
    "\"\\ud800\\u0041\"", "\"a\tb\"", "\"a\x01\"", "\"\xff\"", "\"\xc3\"", "\"\xed\xa0\x80\"",
    "\"abc", "[1,,2]", "[1,2,]", "[1 2]", "[,1]", "[1]]", "{\"a\":1,}", "{\"a\" 1}",
    "{\"a\":1 \"b\":2}", "{1:2}", "{\"a\\x\":1}", "{\"a\"}", "{\"a\":[1,{\"b\":tru}]}",
    "[[[{\"x\":[1,2,{\"y\":01}]}]]]", "\"a\"\"b\"", "1 2", "",
    // A string, then a colon: a key where a value belongs.
    "\"a\":1", "\"a\":\"b\"", "[\"a\":1]", "{\"k\":\"a\":1}", "1:2", "[1:2]", "true:1"};

/// Tokens that are JSON (and not beyond a double's range).
const std::vector<std::string> good_tokens = {
    "true", "false", "null", "0", "-0", "-0.0e-0", "1E+5", "123456789012345678901234567890",
    "1e-400", "\"\"", "\"\\/\\b\\f\\n\\r\\t\\\"\\\\\"", "\"\\u00e9\\ud83d\\ude00\"",
    "\"\xc3\xa9\xf0\x9f\x98\x80\"", "[]", "{}", "[ 1 , [ ] , { } ]", "{\"a\":[1,{\"b\":null}],\"\":\"\"}",
    "[[[{\"x\":[1,2,{\"y\":-1.5e3}]}]]]"};

/// Lines with `token` under a key that names no column (at the start, at
/// the end, nested), and under each column.
std::vector<std::string> placements(const std::string& t, bool columns) {
  std::vector<std::string> out = {
      "{\"id\":1,\"name\":\"a\",\"active\":true,\"zzz\":" + t + "}",
      "{\"zzz\":" + t + ",\"id\":1,\"name\":\"a\",\"active\":true}",
      "{\"id\":1,\"name\":\"a\",\"zzz\":{\"deep\":[1,{\"x\":" + t + "}]},\"active\":true}",
      "{\"id\":1,\"name\":\"a\",\"active\":true,\"_rescued_data\":" + t + "}",
  };
  if (columns) {
    out.push_back("{\"id\":" + t + ",\"name\":\"a\",\"active\":true}");
    out.push_back("{\"id\":1,\"name\":" + t + ",\"active\":true}");
    out.push_back("{\"id\":1,\"name\":\"a\",\"active\":" + t + "}");
    out.push_back("{\"id\":1,\"name\":\"a\",\"active\":true,\"amount\":" + t + "}");
  }
  return out;
}

}  // namespace

TEST_CASE("R-SOURCE-2, json rows: a line that is not JSON is a malformed record whichever key holds the bad token") {
  for (const auto& token : bad_tokens) {
    const auto lines = placements(token, true);
    for (std::size_t k = 0; k < lines.size(); ++k) {
      const std::string& line = lines[k];
      CAPTURE(line);
      REQUIRE(!nlohmann_accepts(line));  // the oracle agrees it is not JSON
      const std::string what = verdict<Line>(line, strict);
      CHECK(!what.empty());
      CHECK(contains(what, "file 'a.jsonl' line 3: "));
      // Under a column, a value of the wrong type before the bad token
      // ("id":[1]]) may be what strict mode names; under other keys, the
      // token.
      if (k < 4) CHECK(syntax_refusal(what));
      // Rescue does not make it JSON: the record fails whole (FileSource
      // keeps it as _raw), with or without rescuing unknown keys.
      CHECK(syntax_refusal(verdict<LineR>(line, rescue)));
      CHECK(syntax_refusal(verdict<LineR>(line, rescue_all)));
    }
  }
  // Anything after the object.
  for (const std::string tail : {"x", ",", "}", "]", "{}", "1", "\"\"", "null"}) {
    const std::string line = "{\"id\":1,\"name\":\"a\",\"active\":true}" + tail;
    CAPTURE(line);
    CHECK(!json::accept(line));
    CHECK(syntax_refusal(verdict<Line>(line, strict)));
  }
  // The messages name the column, or the key that names none.
  CHECK(contains(verdict<Line>(placements("tru", false)[0], strict),
                 "not valid JSON (Problem while parsing an atom starting with the letter 't') in the value of "
                 "key \"zzz\""));
  const std::string in_column = verdict<Line>(placements("01", true)[4], strict);
  CHECK(contains(in_column, "column 'id'"));
  CHECK(contains(in_column, "not valid JSON (Problem while parsing a number), value 01"));
  CHECK(contains(verdict<Line>(placements("[1,,2]", true)[7], strict), "column 'amount'"));
}

TEST_CASE("R-SOURCE-2, json rows: strict mode accepts a line exactly when nlohmann::json does") {
  std::vector<std::string> lines;
  for (const auto& token : bad_tokens)
    for (const auto& line : placements(token, false)) lines.push_back(line);
  for (const auto& token : good_tokens)
    for (const auto& line : placements(token, false)) lines.push_back(line);
  for (const std::string ws : {" ", "\t", "\r\n", "\n \t"}) {
    lines.push_back(ws + "{" + ws + "\"id\"" + ws + ":" + ws + "1" + ws + "," + ws + "\"name\":\"a\"" + ws + "," +
                    "\"active\":false" + ws + "}" + ws);
  }
  lines.push_back("{\"id\":-9223372036854775808,\"name\":\"\\u0000\",\"active\":false,\"amount\":null}");
  lines.push_back("{\"i\\u0064\":1,\"name\":\"a\",\"active\":true,\"amount\":1.5}");
  lines.push_back("{\"id\":1,\"name\":\"a\",\"active\":true,\"z\\u0000\":0}");
  lines.push_back("{\"id\":1,\"name\":\"a\",\"active\":true,\"z\\q\":0}");
  lines.push_back("{\"id\":1,\"name\":\"a\",\"active\":true,\"z\tz\":0}");
  lines.push_back("{\"id\":1,\"name\":\"a\",\"active\":true,\"zzz\":[1,2]");
  lines.push_back("{\"id\":1,\"name\":\"a\",\"active\":true,}");
  lines.push_back("{\"id\":1,\"name\":\"a\",\"active\":true,,\"zzz\":1}");
  lines.push_back("{\"id\":1,\"name\":\"a\",\"active\":true \"zzz\":1}");
  for (const auto& line : lines) {
    CAPTURE(line);
    const bool is_json = nlohmann_accepts(line);
    if (is_json) REQUIRE(fits_line(line));
    const std::string what = verdict<Line>(line, strict);
    CHECK(what.empty() == is_json);
    if (!is_json) CHECK(syntax_refusal(what));
  }
}

TEST_CASE("R-SOURCE-2, json rows: numbers: beyond 64-bit integers they are JSON, beyond a double's range they are not") {
  // Integers beyond 64 bits and numbers that round to 0 are read by JSON
  // parsers as doubles: JSON, ignored or rescued as written.
  for (const std::string& n : std::vector<std::string>{"123456789012345678901234567890", "-1e-400", "0e999999",
                                                       "0.000e400", "1797693134862315e293", std::string(308, '9')}) {
    CAPTURE(n);
    REQUIRE(json::accept(n));
    CHECK(verdict<Line>(placements(n, false)[0], strict).empty());
    CHECK(verdict<Line>(placements(n, false)[2], strict).empty());
  }
  LineR row;
  REQUIRE(verdict<LineR>("{\"id\":123456789012345678901234567890,\"name\":\"a\",\"active\":true,\"amount\":1e-400}",
                         rescue, &row)
              .empty());
  CHECK(row.rescued == std::optional<std::string>("{\"id\":123456789012345678901234567890}"));
  CHECK(json::accept(*row.rescued));
  // Beyond a double's range: not JSON for the parsers that read it, so not
  // JSON here, under any key and in rescue mode too.
  for (const std::string& n :
       std::vector<std::string>{"1e400", "-1e400", "1797693134862316e293", "0.1e310", std::string(309, '9')}) {
    CAPTURE(n);
    REQUIRE(!json::accept(n));
    for (const auto& line : placements(n, true)) {
      CAPTURE(line);
      const std::string what = verdict<Line>(line, strict);
      CHECK(contains(what, "not valid JSON (a number beyond the range of a double)"));
      CHECK(contains(verdict<LineR>(line, rescue_all), "not valid JSON (a number beyond the range of a double)"));
    }
  }
}

TEST_CASE("R-SOURCE-2, json rows: values nested 1024 levels deep (the record's object included) are refused, however deep") {
  const auto nested = [](std::size_t depth) { return std::string(depth, '[') + std::string(depth, ']'); };
  // Under a key: the record's object and 1022 arrays, 1023 levels.
  CHECK(verdict<Line>(placements(nested(1022), false)[0], strict).empty());
  CHECK(!verdict<Line>(placements(nested(1023), false)[0], strict).empty());
  for (const std::size_t depth : {std::size_t{1025}, std::size_t{200000}}) {
    CAPTURE(depth);
    for (const auto& line : placements(nested(depth), true)) {
      CHECK(!verdict<Line>(line, strict).empty());
      CHECK(contains(verdict<LineR>(line, rescue_all), "not valid JSON"));
    }
  }
}

TEST_CASE("R-SOURCE-2, json rows: rescue writes only JSON: a value refused as written is rescued, a token that is not JSON fails the record") {
  // The tokens a rescued column once copied as written: each now fails the
  // record (strict mode fails it the same way).
  for (const std::string line : {
           "{\"id\":01,\"name\":\"a\",\"active\":true}",
           "{\"id\":1,\"name\":\"a\",\"active\":tru}",
           "{\"id\":1,\"name\":\"a\",\"active\":true,\"amount\":NaN}",
           "{\"id\":1,\"name\":\"a\",\"active\":true,\"amount\":1.}",
           "{\"id\":1,\"name\":\"a\",\"active\":true,\"amount\":.5}",
           "{\"id\":1,\"name\":\"a\",\"active\":true,\"amount\":+1}",
           "{\"id\":1,\"name\":\"bad \\x escape\",\"active\":true}",
           "{\"id\":[1,,2],\"name\":\"a\",\"active\":true}",
           "{\"id\":1,\"name\":{\"a\":nul},\"active\":true}",
       }) {
    CAPTURE(line);
    CHECK(!json::accept(line));
    for (const auto& options : {rescue, rescue_all}) {
      const std::string what = verdict<LineR>(line, options);
      CHECK(contains(what, "not valid JSON"));
    }
    CHECK(contains(verdict<Line>(line, strict), "not valid JSON"));
  }
  // Values that are JSON but that the columns refuse, and unknown keys:
  // rescued exactly as written (the blanks after a value dropped), and the
  // rescued text parses.
  LineR row;
  const std::string line =
      "{\"id\":\"7\" , \"name\":5,\"active\":\"yes\",\"amount\":[1, {\"a\":\"\\u00e9\\\"\"}] ,"
      "\"z\\u007a\":{\"deep\":[true,null,-0.5e-3]},\"_rescued_data\":\"x\"}";
  REQUIRE(json::accept(line));
  REQUIRE(verdict<LineR>(line, rescue_all, &row).empty());
  REQUIRE(row.rescued.has_value());
  CHECK(*row.rescued ==
        "{\"id\":\"7\",\"name\":5,\"active\":\"yes\",\"amount\":[1, {\"a\":\"\\u00e9\\\"\"}],"
        "\"zz\":{\"deep\":[true,null,-0.5e-3]},\"_rescued_data\":\"x\"}");
  const json rescued = json::parse(*row.rescued);
  CHECK(rescued["id"] == "7");
  CHECK(rescued["amount"][1]["a"] == "\xc3\xa9\"");
  CHECK(rescued["zz"]["deep"][2] == -0.5e-3);
  CHECK(row.id == 0);
  CHECK(row.name.empty());
  CHECK(row.amount == std::nullopt);
}

namespace {

/// A random value that is JSON, nested up to `depth` more levels.
std::string random_value(std::mt19937& rng, int depth) {
  switch (rng() % (depth > 0 ? 9 : 7)) {
    case 0: return std::to_string(static_cast<int>(rng() % 20000) - 10000);
    case 1: return std::to_string(static_cast<int>(rng() % 1000) - 500) + "." + std::to_string(rng() % 100);
    case 2: return std::to_string(rng() % 100) + (rng() % 2 ? "e-" : "E+") + std::to_string(rng() % 30);
    case 3: return "\"s\\u00e9\\ud83d\\ude00\\\"q\\\\\\/" + std::to_string(rng() % 100) + "\"";
    case 4: return "\"plain text\"";
    case 5: return rng() % 2 ? "true" : "false";
    case 6: return "null";
    case 7: {
      std::string s = "[";
      const int n = static_cast<int>(rng() % 4);
      for (int i = 0; i < n; ++i) s += (i ? "," : "") + random_value(rng, depth - 1);
      return s + "]";
    }
    default: {
      std::string s = "{";
      const int n = static_cast<int>(rng() % 4);
      for (int i = 0; i < n; ++i) s += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":" + random_value(rng, depth - 1);
      return s + "}";
    }
  }
}

/// A random line that is JSON and fits Line, with 0-2 unknown keys.
std::string random_line(std::mt19937& rng) {
  std::vector<std::string> fields = {
      "\"id\":" + std::to_string(static_cast<std::int64_t>(rng() % 2000000) - 1000000),
      "\"name\":\"n\\u00e9 " + std::to_string(rng() % 1000) + "\\n\"",
      std::string("\"active\":") + (rng() % 2 ? "true" : "false"),
  };
  if (rng() % 3 != 0) {
    fields.push_back("\"amount\":" + (rng() % 4 == 0 ? std::string("null")
                                                     : std::to_string(rng() % 100000) + "." +
                                                           std::to_string(rng() % 100)));
  }
  const int unknown = static_cast<int>(rng() % 3);
  for (int i = 0; i < unknown; ++i) fields.push_back("\"extra" + std::to_string(i) + "\":" + random_value(rng, 3));
  std::shuffle(fields.begin(), fields.end(), rng);
  std::string s = "{";
  for (std::size_t i = 0; i < fields.size(); ++i) s += (i ? "," : "") + fields[i];
  return s + "}";
}

/// `line` with 1-3 bytes inserted, deleted or replaced. `newlines`: '\n'
/// may be among the bytes inserted.
std::string mutate(std::mt19937& rng, std::string line, bool newlines) {
  static const std::string alphabet = std::string("{}[]:,\"\\ 0123456789-+.eEtrufalsnxu/bcdD\t\r\x01\x7f") +
                                      "\xc3\xa9\xff\xed\xa0\x80" + std::string(1, '\0');
  const auto byte = [&]() -> char {
    if (rng() % 8 == 0) {
      const char c = static_cast<char>(rng() % 256);
      return c == '\n' && !newlines ? ' ' : c;
    }
    if (newlines && rng() % 40 == 0) return '\n';
    return alphabet[rng() % alphabet.size()];
  };
  const int edits = 1 + static_cast<int>(rng() % 3);
  for (int e = 0; e < edits; ++e) {
    const std::size_t at = rng() % (line.size() + 1);
    switch (rng() % 3) {
      case 0: line.insert(line.begin() + static_cast<std::ptrdiff_t>(at), byte()); break;
      case 1:
        if (at < line.size()) line.erase(at, 1);
        break;
      default:
        if (at < line.size()) line[at] = byte();
    }
  }
  return line;
}

}  // namespace

TEST_CASE("R-SOURCE-2, json rows: randomized differential against nlohmann::json: mutated lines, strict and rescue") {
  int not_json = 0, fitting = 0;
  for (const std::uint32_t seed : {101u, 202u, 303u, 404u}) {
    CAPTURE(seed);
    std::mt19937 rng(seed);
    for (int i = 0; i < 1000; ++i) {
      const std::string base = random_line(rng);
      const std::string line = i % 10 == 0 ? base : mutate(rng, base, true);
      CAPTURE(line);
      const bool is_json = nlohmann_accepts(line);
      const std::string what = verdict<Line>(line, strict);
      LineR row;
      const std::string rescued_what = verdict<LineR>(line, rescue_all, &row);
      if (!is_json) {
        ++not_json;
        CHECK(!what.empty());
        CHECK(!rescued_what.empty());  // the record fails whole: no rescued text
      } else {
        // JSON: only a value's type or a missing column may refuse it, and
        // a line that fits the row is accepted.
        CHECK(!syntax_refusal(what));
        CHECK(!syntax_refusal(rescued_what));
        if (fits_line(line)) {
          ++fitting;
          CHECK(what.empty());
        }
      }
      if (rescued_what.empty() && row.rescued) CHECK(json::accept(*row.rescued));
    }
  }
  // The mutations give both kinds in numbers.
  CHECK(not_json > 1000);
  CHECK(fitting > 500);
}

TEST_CASE("R-SOURCE-2, FileSource rescue: a line holding a token that is not JSON becomes a _raw row; every rescued column is JSON") {
  flowtest::temp_dir dir("flowlib_json_syntax");
  const std::vector<std::string> lines = {
      "{\"id\":01,\"name\":\"a\",\"active\":true}",
      "{\"id\":2,\"name\":\"a\",\"active\":tru}",
      "{\"id\":3,\"name\":\"a\",\"active\":true,\"amount\":NaN}",
      "{\"id\":4,\"name\":\"a\",\"active\":true,\"amount\":1.}",
      "{\"id\":5,\"name\":\"a\",\"active\":true,\"amount\":.5}",
      "{\"id\":6,\"name\":\"a\",\"active\":true,\"amount\":+1}",
      "{\"id\":7,\"name\":\"bad \\x escape\",\"active\":true}",
      "{\"id\":8,\"name\":\"a\",\"active\":true,\"zzz\":tru}",
      "{\"id\":9,\"name\":\"a\",\"active\":true,\"zzz\":\"\\x\"}",
      "{\"id\":10,\"name\":\"a\",\"active\":true,\"zzz\":[1,,2]}",
      "{\"id\":11,\"name\":\"a\",\"active\":true,\"amount\":\"12,50\",\"zzz\":[1, 2]}",
      "{\"id\":12,\"name\":\"ok\",\"active\":false}",
  };
  std::string text;
  for (const auto& l : lines) text += l + "\n";
  flowtest::write_file(dir.path / "a.jsonl", text);
  for (const bool unknown : {false, true}) {
    CAPTURE(unknown);
    fl::FileSource<LineR> s{"r", {.directory = dir.path, .rescue = true, .rescue_unknown = unknown}};
    std::vector<LineR> got;
    s.read(s.start(), s.latest(), got);
    REQUIRE(got.size() == lines.size());
    for (std::size_t k = 0; k < 10; ++k) {
      CAPTURE(lines[k]);
      REQUIRE(got[k].rescued.has_value());
      const json r = json::parse(*got[k].rescued);
      CHECK(r == json{{"_raw", lines[k]}, {"_file", "a.jsonl"}, {"_line", k + 1}});
      CHECK(got[k].id == 0);
    }
    CHECK(got[10].id == 11);
    CHECK(got[10].rescued == std::optional<std::string>(unknown ? "{\"amount\":\"12,50\",\"zzz\":[1, 2]}"
                                                                : "{\"amount\":\"12,50\"}"));
    CHECK(got[11].rescued == std::nullopt);
    CHECK(got[11].name == "ok");
  }
  // Without rescue the first line fails the batch, naming its column.
  fl::FileSource<Line> s{"r", {.directory = dir.path}};
  std::vector<Line> got;
  try {
    s.read(s.start(), s.latest(), got);
    FAIL("expected MALFORMED_RECORD");
  } catch (const fl::error& e) {
    CHECK(e.code() == fl::errc::malformed_record);
    CHECK(e.column() == "id");
    CHECK(contains(e.what(), "file 'a.jsonl' line 1: not valid JSON"));
  }
}

TEST_CASE("R-SOURCE-2, FileSource rescue: randomized mutated lines, read in one batch: every rescued column is JSON, _raw exactly for lines that are not") {
  for (const std::uint32_t seed : {7u, 8u}) {
    CAPTURE(seed);
    std::mt19937 rng(seed);
    std::vector<std::string> lines;
    std::string text;
    while (lines.size() < 1000) {
      const std::string base = random_line(rng);
      std::string line = lines.size() % 10 == 0 ? base : mutate(rng, base, false);
      // A line of blanks is no record; a CR ending a line is not the record's.
      const auto last = line.find_last_not_of(" \t\r");
      if (last == std::string::npos) continue;
      lines.push_back(line);
      text += line + "\n";
    }
    flowtest::temp_dir dir("flowlib_json_syntax_random");
    flowtest::write_file(dir.path / "m.jsonl", text);
    fl::FileSource<LineR> s{"r", {.directory = dir.path, .rescue = true, .rescue_unknown = true}};
    std::vector<LineR> got;
    s.read(s.start(), s.latest(), got);
    REQUIRE(got.size() == lines.size());
    int raw_rows = 0;
    for (std::size_t k = 0; k < lines.size(); ++k) {
      CAPTURE(lines[k]);
      const bool is_json = nlohmann_accepts(lines[k]);
      if (!got[k].rescued) {
        CHECK(is_json);
        continue;
      }
      json r;
      REQUIRE_NOTHROW(r = json::parse(*got[k].rescued));
      const bool raw = r.is_object() && r.contains("_raw");
      if (!is_json) {
        CHECK(raw);
        std::string want = lines[k];
        if (!want.empty() && want.back() == '\r') want.pop_back();
        // The line as a JSON string (bytes that are not UTF-8 as U+FFFD).
        std::string quoted;
        fd::json_append_string(quoted, want);
        CHECK(r["_raw"] == json::parse(quoted));
        CHECK(r["_file"] == "m.jsonl");
        CHECK(r["_line"] == k + 1);
        ++raw_rows;
      } else if (raw) {
        // A line that is JSON is kept whole only when it cannot be decoded
        // at all: here, a required column missing, or the text not an object.
        const json j = json::parse(lines[k]);
        const bool decodable = j.is_object() && j.contains("id") && j.contains("name") && j.contains("active");
        CHECK(!decodable);
      }
    }
    CHECK(raw_rows > 300);
  }
}

}  // namespace source_json_json_syntax
