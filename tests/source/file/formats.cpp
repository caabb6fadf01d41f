// FileSource's two formats (source/file.hpp): every column type through
// JSON lines and CSV, CSV quoting (delimiters, quotes and line breaks in
// quoted fields; CR, LF and CRLF; other delimiters; no header), blank
// lines and a last line without a newline, header columns unknown and
// missing, malformed records (the error names the source, the file, the
// line and the column, and the read leaves nothing), and rescue.
#include "file_support.hpp"

#include <flowlib/source/file.hpp>

#include <doctest/doctest.h>

#include <support/temp_files.hpp>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace flowtest_csv {
/// A small row for CSV cases written by hand.
struct Two {
  std::int64_t id = 0;
  std::string a;
  std::optional<std::string> b;
  friend bool operator==(const Two&, const Two&) = default;
};
FLOWLIB_SCHEMA(Two, id, a, b);
}  // namespace flowtest_csv

namespace source_file_formats {

using namespace file_source_test;
namespace fl = flowlib;

namespace {

std::vector<Rec> random_recs(std::uint64_t seed, std::size_t n) {
  std::mt19937_64 rng(seed);
  std::vector<Rec> v;
  for (std::size_t i = 0; i < n; ++i) v.push_back(random_rec(rng, static_cast<std::int64_t>(i)));
  // The edges of each type.
  Rec lo;
  lo.id = INT64_MIN;
  lo.qty = 0;
  lo.small = INT32_MIN;
  lo.day = std::chrono::sys_days{std::chrono::days{-719162}};  // 0001-01-01
  lo.at = ms_time{std::chrono::milliseconds{-62135596800000}};
  lo.score = -0.0;
  Rec hi;
  hi.id = INT64_MAX;
  hi.qty = UINT32_MAX;
  hi.small = INT32_MAX;
  hi.day = std::chrono::sys_days{std::chrono::days{2932896}};  // 9999-12-31
  hi.flag = true;
  hi.tier = Tier::gold;
  hi.ratio = 1e-3f;
  hi.score = 1.7976931348623157e308;
  v.push_back(lo);
  v.push_back(hi);
  return v;
}

std::string csv_text(const std::vector<Rec>& rows, const char* eol = "\n", char delim = ',') {
  std::string s = csv_header_line();
  if (delim != ',') std::replace(s.begin(), s.end(), ',', delim);
  s += eol;
  for (const auto& r : rows) s += csv_line(r, delim) + eol;
  return s;
}

}  // namespace

TEST_CASE("JSON lines: every column type, blank lines, CRLF and a last line without a newline") {
  flowtest::temp_dir dir("flowlib_fs_json_types");
  const auto rows = random_recs(11, 200);
  std::string text;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    text += json_line(rows[i]);
    text += i % 3 == 0 ? "\r\n" : "\n";
    if (i % 17 == 0) text += "  \t\r\n\n";  // blank: not records
  }
  text.pop_back();  // the last line ends without '\n'
  if (text.back() == '\r') text.pop_back();
  put_file(dir.path, "a.jsonl", text);
  fl::FileSource<Rec> s{"events", {.directory = dir.path}};
  CHECK(s.latest() == fl::source_position::at(rows.size()));
  CHECK(read_all(s) == rows);
}

TEST_CASE("CSV: every column type; quoted delimiters, quotes and line breaks; LF, CRLF and CR") {
  const auto rows = random_recs(12, 300);
  for (const char* eol : {"\n", "\r\n", "\r"}) {
    CAPTURE(std::string(eol) == "\n" ? "LF" : std::string(eol) == "\r" ? "CR" : "CRLF");
    flowtest::temp_dir dir("flowlib_fs_csv_types");
    put_file(dir.path, "a.csv", csv_text(rows, eol));
    fl::FileSource<Rec> s{"events", {.directory = dir.path, .format = fl::file_format::csv}};
    CHECK(s.latest() == fl::source_position::at(rows.size()));
    CHECK(read_all(s) == rows);
    // Batch by batch through the file.
    std::vector<Rec> got;
    for (std::uint64_t at = 0; at < rows.size(); at += 7)
      s.read(fl::source_position::at(at), fl::source_position::at(std::min<std::uint64_t>(at + 7, rows.size())), got);
    CHECK(got == rows);
  }
}

TEST_CASE("CSV: quoting cases by hand, other delimiters, no header, no final newline") {
  flowtest::temp_dir dir("flowlib_fs_csv_quoting");
  put_file(dir.path, "q.csv",
           "id,a\n"
           "1,\"x,y\"\n"                 // a quoted delimiter
           "2,\"say \"\"hi\"\"\"\n"      // doubled quotes
           "3,\"two\nlines\"\n"          // a quoted line break
           "\n"                          // blank line
           "4,  padded  \n"              // spaces around an unquoted field go
           "5,\"  kept  \"\n"            // quoted: kept
           "6,\"\"\n"                    // empty
           "7,last");                    // no final newline
  fl::FileSource<flowtest_csv::Two> s{"t", {.directory = dir.path, .format = fl::file_format::csv}};
  const auto got = read_all(s);
  REQUIRE(got.size() == 7);
  CHECK(got[0].a == "x,y");
  CHECK(got[1].a == "say \"hi\"");
  CHECK(got[2].a == "two\nlines");
  CHECK(got[3].a == "padded");
  CHECK(got[4].a == "  kept  ");
  CHECK(got[5].a == "");
  CHECK(got[6].a == "last");
  CHECK(got[6].id == 7);
  CHECK(!got[0].b.has_value());  // not in the header: optional -> null

  // Semicolons and tabs; without a header the schema's order.
  flowtest::temp_dir dir2("flowlib_fs_csv_delims");
  put_file(dir2.path, "s.csv", "a;id;b\n\"p;q\";1;\nz;2;w\n");
  put_file(dir2.path, "t.tsv", "3\tx y\tb\n4\t\"t\tu\"\t\n");
  fl::FileSource<flowtest_csv::Two> semi{"semi", {.directory = dir2.path, .pattern = "*.csv",
                                                  .format = fl::file_format::csv, .csv_delimiter = ';'}};
  const auto s1 = read_all(semi);
  REQUIRE(s1.size() == 2);
  CHECK(s1[0] == flowtest_csv::Two{1, "p;q", std::nullopt});
  CHECK(s1[1] == flowtest_csv::Two{2, "z", "w"});
  fl::FileSource<flowtest_csv::Two> tabs{"tabs", {.directory = dir2.path, .pattern = "*.tsv",
                                                  .format = fl::file_format::csv, .csv_delimiter = '\t',
                                                  .csv_header = false}};
  const auto s2 = read_all(tabs);
  REQUIRE(s2.size() == 2);
  CHECK(s2[0] == flowtest_csv::Two{3, "x y", "b"});
  CHECK(s2[1] == flowtest_csv::Two{4, "t\tu", std::nullopt});
}

TEST_CASE("R-SOURCE-2 a malformed JSON line fails the read naming the source, file, line and column") {
  flowtest::temp_dir dir("flowlib_fs_json_bad");
  const auto rows = random_recs(13, 5);
  std::string a, b;
  for (int i = 0; i < 3; ++i) a += json_line(rows[static_cast<std::size_t>(i)]) + "\n";
  b = json_line(rows[3]) + "\n\n";  // line 2 blank
  std::string bad = json_line(rows[4]);
  bad.replace(bad.find("\"qty\":"), 6, "\"qty\":-");  // negative into a u32
  b += bad + "\n";
  b += json_line(rows[0]) + "\n";
  put_file(dir.path, "a.jsonl", a);
  put_file(dir.path, "b.jsonl", b);
  fl::FileSource<Rec> s{"events", {.directory = dir.path}};
  REQUIRE(s.latest() == fl::source_position::at(6));
  std::vector<Rec> out(2);
  for (int i = 0; i < 2; ++i) {
    const auto e = error_of([&] { s.read(fl::source_position::at(1), fl::source_position::at(6), out); });
    CHECK(e.code() == fl::errc::malformed_record);
    CHECK(e.flow() == "events");
    CHECK(e.column() == "qty");
    CHECK(contains(e.what(), "file 'b.jsonl' line 3"));
    CHECK(out.size() == 2);  // nothing of the failed read stays
  }
  // The records before it read; a range after it too.
  CHECK(read_range(s, 0, 4) == std::vector<Rec>(rows.begin(), rows.begin() + 4));
  CHECK(read_range(s, 5, 6) == std::vector<Rec>{rows[0]});

  // Not JSON at all: the file and the line.
  put_file(dir.path, "c.jsonl", json_line(rows[0]) + "\n{\"id\":1,\"name\":\n");
  REQUIRE(s.latest() == fl::source_position::at(8));
  const auto e = error_of([&] { read_range(s, 6, 8); });
  CHECK(e.code() == fl::errc::malformed_record);
  CHECK(contains(e.what(), "file 'c.jsonl' line 2"));
  CHECK(read_range(s, 6, 7) == std::vector<Rec>{rows[0]});
}

TEST_CASE("R-SOURCE-2 CSV: a bad field names its column and the record's first line; a wrong field count") {
  flowtest::temp_dir dir("flowlib_fs_csv_bad");
  put_file(dir.path, "a.csv",
           "id,a,b\n"
           "1,\"multi\nline\",x\n"   // lines 2-3
           "2x,y,z\n"                // line 4: id is not an integer
           "3,only\n"                // line 5: two fields of three
           "4,\"ok\",\n");
  fl::FileSource<flowtest_csv::Two> s{"t", {.directory = dir.path, .format = fl::file_format::csv}};
  REQUIRE(s.latest() == fl::source_position::at(4));
  auto e = error_of([&] { read_all(s); });
  CHECK(e.code() == fl::errc::malformed_record);
  CHECK(e.flow() == "t");
  CHECK(e.column() == "id");
  CHECK(contains(e.what(), "file 'a.csv' line 4"));
  CHECK(contains(e.what(), "not an integer"));
  CHECK(contains(e.what(), "'2x'"));
  e = error_of([&] { read_range(s, 2, 3); });
  CHECK(e.code() == fl::errc::malformed_record);
  CHECK(contains(e.what(), "file 'a.csv' line 5"));
  CHECK(contains(e.what(), "2 fields where the header has 3"));
  const auto ok = read_range(s, 0, 1);
  REQUIRE(ok.size() == 1);
  CHECK(ok[0].a == "multi\nline");
  CHECK(read_range(s, 3, 4) == std::vector<flowtest_csv::Two>{{4, "ok", std::nullopt}});
}

TEST_CASE("R-SOURCE-2 CSV header: unknown columns ignored, missing optional null, missing required fails") {
  flowtest::temp_dir dir("flowlib_fs_csv_header");
  put_file(dir.path, "a.csv", "extra,id,a\nq,1,x\n");
  put_file(dir.path, "b.csv", "a,b\ny,z\n");  // no id
  put_file(dir.path, "c.csv", "id,a,id\n1,x,2\n");
  fl::FileSource<flowtest_csv::Two> s{"t", {.directory = dir.path, .format = fl::file_format::csv}};
  REQUIRE(s.latest() == fl::source_position::at(3));
  CHECK(read_range(s, 0, 1) == std::vector<flowtest_csv::Two>{{1, "x", std::nullopt}});
  auto e = error_of([&] { read_range(s, 1, 2); });
  CHECK(e.code() == fl::errc::malformed_record);
  CHECK(e.column() == "id");
  CHECK(contains(e.what(), "file 'b.csv' line 1"));
  CHECK(contains(e.what(), "the header has no such column"));
  e = error_of([&] { read_range(s, 2, 3); });
  CHECK(e.code() == fl::errc::malformed_record);
  CHECK(contains(e.what(), "file 'c.csv'"));
  CHECK(contains(e.what(), "twice"));
}

TEST_CASE("R-SOURCE-2 rescue, JSON lines: bad values and unknown keys to the rescued column, non-JSON lines whole") {
  flowtest::temp_dir dir("flowlib_fs_json_rescue");
  put_file(dir.path, "a.jsonl",
           "{\"id\":1,\"name\":\"ok\",\"score\":2.5}\n"
           "{\"id\":2,\"name\":\"bad score\",\"score\":\"high\",\"zz\":[1, 2]}\n"
           "this is not JSON\n"
           "{\"name\":\"no id\"}\n");
  SUBCASE("rescue") {
    fl::FileSource<RecR> s{"r", {.directory = dir.path, .rescue = true}};
    const auto got = read_all(s);
    REQUIRE(got.size() == 4);
    CHECK(got[0] == RecR{1, "ok", 2.5, std::nullopt});
    CHECK(got[1] == RecR{2, "bad score", std::nullopt, "{\"score\":\"high\"}"});
    CHECK(got[2] == RecR{0, "", std::nullopt,
                         "{\"_raw\":\"this is not JSON\",\"_file\":\"a.jsonl\",\"_line\":3}"});
    CHECK(got[3] == RecR{0, "", std::nullopt,
                         "{\"_raw\":\"{\\\"name\\\":\\\"no id\\\"}\",\"_file\":\"a.jsonl\",\"_line\":4}"});
  }
  SUBCASE("rescue with unknown keys") {
    fl::FileSource<RecR> s{"r", {.directory = dir.path, .rescue = true, .rescue_unknown = true}};
    const auto got = read_all(s);
    REQUIRE(got.size() == 4);
    CHECK(got[1].rescued == "{\"score\":\"high\",\"zz\":[1, 2]}");
  }
  SUBCASE("without rescue the same file fails") {
    fl::FileSource<RecR> s{"r", {.directory = dir.path}};
    const auto e = error_of([&] { read_all(s); });
    CHECK(e.column() == "score");
    CHECK(contains(e.what(), "file 'a.jsonl' line 2"));
  }
}

TEST_CASE("R-SOURCE-2 rescue, CSV: bad fields and unknown columns as strings, wrong field counts whole") {
  flowtest::temp_dir dir("flowlib_fs_csv_rescue");
  put_file(dir.path, "a.csv",
           "id,name,score,other\n"
           "1,ok,2.5,u\n"
           "2,\"bad, score\",high,v\n"
           "3,short\n");
  SUBCASE("rescue") {
    fl::FileSource<RecR> s{"r", {.directory = dir.path, .format = fl::file_format::csv, .rescue = true}};
    const auto got = read_all(s);
    REQUIRE(got.size() == 3);
    CHECK(got[0] == RecR{1, "ok", 2.5, std::nullopt});
    CHECK(got[1] == RecR{2, "bad, score", std::nullopt, "{\"score\":\"high\"}"});
    CHECK(got[2] == RecR{0, "", std::nullopt, "{\"_raw\":\"3,short\",\"_file\":\"a.csv\",\"_line\":4}"});
  }
  SUBCASE("rescue with unknown columns") {
    fl::FileSource<RecR> s{"r", {.directory = dir.path, .format = fl::file_format::csv, .rescue = true,
                                 .rescue_unknown = true}};
    const auto got = read_all(s);
    REQUIRE(got.size() == 3);
    CHECK(got[0].rescued == "{\"other\":\"u\"}");
    CHECK(got[1].rescued == "{\"score\":\"high\",\"other\":\"v\"}");
  }
}

TEST_CASE("R-SOURCE-2 JSON lines in large batches decode as line by line: odd lines give the same rows and errors") {
  // A batch of many records is decoded as one document stream, a few
  // records line by line; both must give the same rows, and the same first
  // error, whatever the lines hold.
  const std::vector<std::string> odd = {
      "{\"id\":1,\"name\":\"x\"} {\"id\":2,\"name\":\"y\"}",  // two objects on a line
      "{\"id\":5,\"name\":\n\"z\"}",                             // an object over two lines
      "42",
      "[1,2]",
      "hello",
      "{\"id\":1,\"name\":\"x\"} junk",
      "{\"id\":\"x\",\"name\":\"n\"}",                         // a bad value
      "{\"id\":1,\"name\":\"abc}",                               // an unterminated string
      "   {\"id\":9,\"name\":\"spaced\"}  \r",                   // blanks around: fine
      "{}",                                                         // a required column missing
      "{\"id\":3,\"name\":\"ok\",\"score\":\"high\"}",           // rescued in rescue mode
  };
  std::mt19937_64 rng(21);
  for (std::size_t kind = 0; kind < odd.size(); ++kind) {
    for (const std::size_t at : {std::size_t{0}, 1 + rng() % 39, std::size_t{40}}) {  // first, inside, last
      for (const bool rescue : {false, true}) {
        CAPTURE(kind);
        CAPTURE(at);
        CAPTURE(rescue);
        flowtest::temp_dir dir("flowlib_fs_json_stream");
        std::string text;
        for (std::size_t i = 0; i <= 40; ++i) {
          if (i == at) text += odd[kind] + "\n";
          if (i == 40) break;
          text += "{\"id\":" + std::to_string(i) + ",\"name\":\"n" + std::to_string(i) + "\",\"score\":" +
                  std::to_string(i) + ".5}\n";
        }
        put_file(dir.path, "a.jsonl", text);
        fl::FileSource<RecR> s{"r", {.directory = dir.path, .rescue = rescue}};
        const std::uint64_t n = s.latest().offset();
        // Line by line: one record per read.
        std::vector<RecR> want;
        std::string want_error;
        for (std::uint64_t i = 0; i < n && want_error.empty(); ++i) {
          try {
            s.read(fl::source_position::at(i), fl::source_position::at(i + 1), want);
          } catch (const fl::error& e) {
            want_error = e.what();
          }
        }
        // All at once: the stream.
        std::vector<RecR> got;
        std::string got_error;
        try {
          s.read(s.start(), fl::source_position::at(n), got);
        } catch (const fl::error& e) {
          got_error = e.what();
        }
        CHECK(got_error == want_error);
        if (want_error.empty()) {
          CHECK(got == want);
          CHECK(got.size() == n);
        } else {
          CHECK(got.empty());
        }
      }
    }
  }
}

}  // namespace source_file_formats
