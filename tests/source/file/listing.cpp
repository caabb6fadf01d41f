// FileSource (source/file.hpp) without a pipeline: the listing (which files,
// in which order, numbered how), the source contract
// (support/source_contract.hpp) over files of random sizes in both formats,
// files changed or removed before and after they are read, the file list
// in a checkpoint, and the checksum.
#include "file_support.hpp"

#include <flowlib/checkpoint/memory.hpp>
#include <flowlib/source/detail/file_manifest.hpp>
#include <flowlib/source/file.hpp>

#include <doctest/doctest.h>

#include <support/source_contract.hpp>
#include <support/temp_files.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

namespace source_file_listing {

using namespace file_source_test;
namespace fl = flowlib;

static_assert(fl::source<fl::FileSource<Rec>>);
static_assert(fl::source<fl::FileSource<RecR>>);

namespace {

/// A JSON lines file of records with the given ids.
std::string jsonl(std::int64_t from, std::int64_t to) {
  std::mt19937_64 rng(static_cast<std::uint64_t>(from) * 7919 + 1);
  std::string s;
  for (std::int64_t i = from; i < to; ++i) s += json_line(random_rec(rng, i)) + "\n";
  return s;
}

std::vector<std::int64_t> ids(const std::vector<Rec>& rows) {
  std::vector<std::int64_t> out;
  for (const auto& r : rows) out.push_back(r.id);
  return out;
}

std::vector<std::int64_t> iota(std::int64_t from, std::int64_t to) {
  std::vector<std::int64_t> v;
  for (std::int64_t i = from; i < to; ++i) v.push_back(i);
  return v;
}

std::vector<std::string> names(const fl::FileSource<Rec>& s) {
  std::vector<std::string> out;
  for (const auto& f : s.files()) out.push_back(f.name);
  return out;
}

// FileSource under the contract suite (support/source_contract.hpp): each
// append is a new file, named after the ones before it, with CRLF line
// ends and blank lines (not records) here and there; an empty append is an
// empty file (a CSV header only).
struct file_harness {
  fl::file_format format;
  std::mt19937_64 rng;
  flowtest::temp_dir dir{"flowlib_fs_model"};
  fl::FileSource<Rec> s;
  int files = 0;

  file_harness(fl::file_format f, std::uint64_t seed)
      : format(f), rng(seed), s{"events", {.directory = dir.path, .format = f}} {}
  const fl::FileSource<Rec>& source() const { return s; }
  std::vector<std::uint32_t> partitions() const { return {0}; }
  Rec row(std::uint64_t n) { return random_rec(rng, static_cast<std::int64_t>(n)); }
  void append(std::uint32_t, const std::vector<Rec>& rows) {
    const bool csv = format == fl::file_format::csv;
    std::string text = csv ? std::string(csv_header_line()) + "\n" : "";
    for (const auto& r : rows) {
      text += csv ? csv_line(r) : json_line(r);
      text += rng() % 5 == 0 ? "\r\n" : "\n";
      if (rng() % 7 == 0) text += "\n";
    }
    char name[16];
    std::snprintf(name, sizeof name, "f%04d", files++);
    put_file(dir.path, name, text);
  }
};

}  // namespace

TEST_CASE("R-SOURCE-4 file checksum: XXH64's published values, in one piece and in many") {
  using fl::detail::xxh64;
  CHECK(xxh64::of("") == 0xef46db3751d8e999ull);
  CHECK(xxh64::of("a") == 0xd24ec4f1a98c6e5bull);
  CHECK(xxh64::of("abc") == 0x44bc2cf5ad770999ull);
  CHECK(xxh64::of("foo") == 0x33bf00a859c4ba3full);
  CHECK(xxh64::of("xxhash") == 0x32dd38952c4bc720ull);
  CHECK(xxh64::of("abcdefghijklmnopqrstuvwxyz12345") == 0x467605901b01d6f6ull);
  CHECK(xxh64::of("0123456789abcdefghijklmnopqrstuvwxyz") == 0x69196c1b3af0bff9ull);
  // Streaming: any cut into pieces gives the one-piece digest.
  std::mt19937_64 rng(5);
  for (int round = 0; round < 50; ++round) {
    std::string text(rng() % 300, '\0');
    for (char& c : text) c = static_cast<char>(rng());
    xxh64 h;
    std::size_t at = 0;
    while (at < text.size()) {
      const std::size_t n = std::min<std::size_t>(text.size() - at, rng() % 40);
      h.update(text.data() + at, n);
      at += n;
    }
    CHECK(h.digest() == xxh64::of(text));
    if (!text.empty()) {
      std::string other = text;
      other[rng() % other.size()] ^= 1;
      CHECK(xxh64::of(other) != xxh64::of(text));
    }
  }
}

TEST_CASE("R-SOURCE-4 files are numbered as first listed: by name within a listing, later listings after") {
  flowtest::temp_dir dir("flowlib_fs_order");
  fl::FileSource<Rec> s{"events", {.directory = dir.path, .pattern = "*.jsonl"}};
  CHECK(s.latest() == fl::source_position::at(0));
  put_file(dir.path, "b.jsonl", jsonl(3, 5));
  put_file(dir.path, "a.jsonl", jsonl(0, 3));
  CHECK(s.latest() == fl::source_position::at(5));
  CHECK(names(s) == std::vector<std::string>{"a.jsonl", "b.jsonl"});
  // A name sorting first, found later, comes after: numbers never move.
  put_file(dir.path, "0.jsonl", jsonl(5, 9));
  put_file(dir.path, "c.jsonl", jsonl(9, 10));
  CHECK(s.latest() == fl::source_position::at(10));
  CHECK(names(s) == std::vector<std::string>{"a.jsonl", "b.jsonl", "0.jsonl", "c.jsonl"});
  CHECK(ids(read_all(s)) == iota(0, 10));
  const auto files = s.files();
  REQUIRE(files.size() == 4);
  CHECK(files[2].first_record == 5);
  CHECK(files[2].records == 4);
  CHECK(files[2].size == jsonl(5, 9).size());
  CHECK(files[2].checksum == fl::detail::xxh64::of(jsonl(5, 9)));
  CHECK(s.changed_files().empty());
  CHECK(s.delivery() == fl::delivery::exactly_once);
  CHECK(s.name() == "events");
}

TEST_CASE("R-SOURCE-4 order by modification time, then name") {
  flowtest::temp_dir dir("flowlib_fs_mtime");
  fl::FileSource<Rec> s{"events", {.directory = dir.path, .order = fl::file_order::modified_then_name}};
  put_file(dir.path, "c", jsonl(0, 1), 1'700'000'100);
  put_file(dir.path, "a", jsonl(1, 2), 1'700'000'300);
  put_file(dir.path, "b", jsonl(2, 3), 1'700'000'100);
  s.latest();
  CHECK(names(s) == std::vector<std::string>{"b", "c", "a"});
  CHECK(s.files()[1].mtime_ns == std::int64_t{1'700'000'100} * 1'000'000'000);
  // An older file found later still comes after the ones listed.
  put_file(dir.path, "d", jsonl(3, 4), 1'600'000'000);
  s.latest();
  CHECK(names(s) == std::vector<std::string>{"b", "c", "a", "d"});
  CHECK(ids(read_all(s)) == std::vector<std::int64_t>{2, 0, 1, 3});
}

TEST_CASE("R-SOURCE-4 hidden names, other names and directories are not listed; a file renamed in is") {
  flowtest::temp_dir dir("flowlib_fs_hidden");
  fl::FileSource<Rec> s{"events", {.directory = dir.path, .pattern = "*.jsonl"}};
  flowtest::write_file(dir.path / ".half.jsonl", jsonl(0, 2));  // being written
  flowtest::write_file(dir.path / "_meta.jsonl", jsonl(10, 11));
  flowtest::write_file(dir.path / "x.jsonl.tmp", jsonl(20, 21));
  std::filesystem::create_directory(dir.path / "sub.jsonl");
  flowtest::write_file(dir.path / "sub.jsonl" / "inner.jsonl", jsonl(30, 31));
  CHECK(s.latest() == fl::source_position::at(0));
  CHECK(s.files().empty());
  // Renamed into place: listed whole.
  std::filesystem::rename(dir.path / ".half.jsonl", dir.path / "half.jsonl");
  CHECK(s.latest() == fl::source_position::at(2));
  CHECK(ids(read_all(s)) == iota(0, 2));
  CHECK(names(s) == std::vector<std::string>{"half.jsonl"});
}

TEST_CASE("R-SOURCE-1 plan: at most the limit, across files, never beyond the last listed record") {
  flowtest::temp_dir dir("flowlib_fs_plan");
  fl::FileSource<Rec> s{"events", {.directory = dir.path}};
  put_file(dir.path, "a", jsonl(0, 3));
  put_file(dir.path, "b", "");  // no records
  put_file(dir.path, "c", jsonl(3, 7));
  const auto at = [](std::uint64_t o) { return fl::source_position::at(o); };
  CHECK(s.plan(at(0), 0) == at(0));  // nothing listed yet
  CHECK(s.latest() == at(7));
  CHECK(s.plan(at(0), 0) == at(7));
  CHECK(s.plan(at(2), 2) == at(4));
  CHECK(s.plan(at(6), 5) == at(7));
  CHECK(s.plan(at(7), 5) == at(7));
  CHECK(ids(read_range(s, 2, 4)) == std::vector<std::int64_t>{2, 3});
  auto e = error_of([&] { s.plan(at(8), 1); });
  CHECK(e.code() == fl::errc::invalid_argument);
  CHECK(contains(e.what(), "beyond the last listed record"));
  std::vector<Rec> out;
  e = error_of([&] { s.read(at(5), at(3), out); });
  CHECK(e.code() == fl::errc::invalid_argument);
  fl::source_position two;
  two.set(1, 1);
  e = error_of([&] { s.read(at(0), two, out); });
  CHECK(contains(e.what(), "partition 0 only"));
  CHECK(out.empty());
}

TEST_CASE("R-SOURCE-1 the source contract over files of both formats, listed as they appear, in batches through them") {
  for (const auto format : {fl::file_format::json_lines, fl::file_format::csv}) {
    for (std::uint64_t seed : {1u, 2u, 3u}) {
      CAPTURE(seed);
      CAPTURE(static_cast<int>(format));
      file_harness h(format, seed);
      flowtest::check_source_contract(h, seed, {.steps = 12, .most_appended = 60, .most_limit = 25, .replays = 40});
    }
  }
}

TEST_CASE("R-SOURCE-3 a listed file removed or changed before it is read: SOURCE_DATA_LOST, nothing read") {
  flowtest::temp_dir dir("flowlib_fs_lost");
  fl::FileSource<Rec> s{"events", {.directory = dir.path}};
  put_file(dir.path, "a", jsonl(0, 2));
  put_file(dir.path, "b", jsonl(2, 5), 1'700'000'000);
  REQUIRE(s.latest() == fl::source_position::at(5));
  const auto b = dir.path / "b";
  const std::string original = flowtest::read_file(b);

  const auto expect_lost = [&](const char* what) {
    CAPTURE(what);
    std::vector<Rec> out(1);  // what was there stays
    for (int i = 0; i < 2; ++i) {  // and the error repeats
      const auto e = error_of([&] { s.read(fl::source_position::at(1), fl::source_position::at(4), out); });
      CHECK(e.code() == fl::errc::source_data_lost);
      CHECK(e.flow() == "events");
      CHECK(contains(e.what(), "file 'b' (records 2 to 4 of the source)"));
      CHECK(contains(e.what(), what));
      CHECK(out.size() == 1);
    }
    // Records before it still read.
    CHECK(ids(read_range(s, 0, 2)) == iota(0, 2));
  };

  SUBCASE("removed") {
    std::filesystem::remove(b);
    expect_lost("was removed");
  }
  SUBCASE("longer") {
    flowtest::write_file(b, original + json_line(Rec{}) + "\n");
    expect_lost("changed");
  }
  SUBCASE("the same size and time, other bytes") {
    std::string other = original;
    other[other.find("\"id\":3")] = ' ';  // still three lines
    flowtest::write_file(b, other);
    set_mtime(b, 1'700'000'000);
    expect_lost("checksum");
  }
  SUBCASE("the same bytes, another modification time") {
    set_mtime(b, 1'700'000'001);
    expect_lost("modification time");
  }
  SUBCASE("put back as it was: readable again") {
    std::filesystem::remove(b);
    expect_lost("was removed");
    put_file(dir.path, "b", original, 1'700'000'000);
    CHECK(ids(read_range(s, 1, 4)) == iota(1, 4));
  }
}

TEST_CASE("R-SOURCE-4 a file changed or removed after it was read is never read again; changed_files() says so") {
  flowtest::temp_dir dir("flowlib_fs_changed");
  fl::FileSource<Rec> s{"events", {.directory = dir.path}};
  put_file(dir.path, "a", jsonl(0, 2));
  put_file(dir.path, "b", jsonl(2, 4));
  put_file(dir.path, "c", jsonl(4, 5));
  REQUIRE(s.latest() == fl::source_position::at(5));
  CHECK(ids(read_range(s, 0, 5)) == iota(0, 5));
  // Rewritten under the same name, removed: the list keeps them as listed.
  put_file(dir.path, "a", jsonl(100, 110));
  std::filesystem::remove(dir.path / "b");
  put_file(dir.path, "d", jsonl(5, 7));
  CHECK(s.latest() == fl::source_position::at(7));
  CHECK(names(s) == std::vector<std::string>{"a", "b", "c", "d"});
  const auto changed = s.changed_files();
  REQUIRE(changed.size() == 2);
  CHECK(changed[0].name == "a");
  CHECK(changed[0].change == fl::file_change::modified);
  CHECK(changed[0].first_record == 0);
  CHECK(changed[0].records == 2);
  CHECK(changed[1].name == "b");
  CHECK(changed[1].change == fl::file_change::removed);
  CHECK(changed[1].first_record == 2);
  // Reading on from where the reader was is unaffected.
  CHECK(ids(read_range(s, 5, 7)) == iota(5, 7));
  // Reading them again (a replay, a full refresh) is lost data.
  CHECK(error_of([&] { read_range(s, 0, 1); }).code() == fl::errc::source_data_lost);
  CHECK(error_of([&] { read_range(s, 2, 3); }).code() == fl::errc::source_data_lost);
}

TEST_CASE("R-SOURCE-4 the file list in the checkpoint: another source over it names the same records") {
  flowtest::temp_dir dir("flowlib_fs_manifest");
  fl::MemoryCheckpoint checkpoint;
  put_file(dir.path, "b", jsonl(0, 3));
  std::vector<std::string> first_names;
  {
    fl::FileSource<Rec> s{"events", {.directory = dir.path}};
    s.attach(checkpoint);
    CHECK(s.latest() == fl::source_position::at(3));
    put_file(dir.path, "a", jsonl(3, 5));  // sorts first, listed second
    CHECK(s.latest() == fl::source_position::at(5));
    first_names = names(s);
    CHECK(checkpoint.list("sources/" + fl::detail::checkpoint_name_hex("events") + "/files").size() == 2);
  }
  put_file(dir.path, "c", jsonl(5, 6));
  fl::FileSource<Rec> again{"events", {.directory = dir.path}};
  again.attach(checkpoint);
  CHECK(names(again) == first_names);  // from the checkpoint, before any listing
  CHECK(again.latest() == fl::source_position::at(6));
  CHECK(names(again) == std::vector<std::string>{"b", "a", "c"});
  CHECK(ids(read_range(again, 2, 6)) == iota(2, 6));
  // Unattached, a source's list is its own, as the directory is now.
  fl::FileSource<Rec> alone{"events", {.directory = dir.path}};
  CHECK(alone.latest() == fl::source_position::at(6));
  CHECK(names(alone) == std::vector<std::string>{"a", "b", "c"});
  // Attached to that checkpoint, the checkpoint's list wins.
  alone.attach(checkpoint);
  CHECK(names(alone) == std::vector<std::string>{"b", "a", "c"});
}

TEST_CASE("R-SOURCE-4 a list made before attaching goes to an empty checkpoint at the next listing") {
  flowtest::temp_dir dir("flowlib_fs_late_attach");
  fl::MemoryCheckpoint checkpoint;
  put_file(dir.path, "a", jsonl(0, 2));
  fl::FileSource<Rec> s{"events", {.directory = dir.path}};
  CHECK(s.latest() == fl::source_position::at(2));
  s.attach(checkpoint);
  const std::string folder = "sources/" + fl::detail::checkpoint_name_hex("events") + "/files";
  CHECK(checkpoint.list(folder).empty());
  CHECK(s.plan(s.start(), 0) == fl::source_position::at(0));  // not in the checkpoint yet
  CHECK(s.latest() == fl::source_position::at(2));
  CHECK(checkpoint.list(folder).size() == 1);
  s.detach();
  put_file(dir.path, "b", jsonl(2, 3));
  CHECK(s.latest() == fl::source_position::at(3));
  CHECK(checkpoint.list(folder).size() == 1);  // detached: memory only
}

TEST_CASE("R-SOURCE-4 a checkpoint's list for another format, or one that does not add up, is refused") {
  flowtest::temp_dir dir("flowlib_fs_manifest_bad");
  fl::MemoryCheckpoint checkpoint;
  put_file(dir.path, "a", jsonl(0, 2));
  {
    fl::FileSource<Rec> s{"events", {.directory = dir.path}};
    s.attach(checkpoint);
    s.latest();
  }
  fl::FileSource<Rec> csv{"events", {.directory = dir.path, .format = fl::file_format::csv}};
  auto e = error_of([&] { csv.attach(checkpoint); });
  CHECK(e.code() == fl::errc::checkpoint_mismatch);
  CHECK(contains(e.what(), "JSON lines"));
  CHECK(contains(e.what(), "CSV"));

  const std::string folder = "sources/" + fl::detail::checkpoint_name_hex("events") + "/files";
  const auto rec = checkpoint.list(folder).front();
  std::string raw = *checkpoint.raw(folder + "/" + rec);
  raw[raw.size() / 2] ^= 0x40;
  checkpoint.put_raw(folder + "/" + rec, raw);
  fl::FileSource<Rec> json{"events", {.directory = dir.path}};
  e = error_of([&] { json.attach(checkpoint); });
  CHECK(e.code() == fl::errc::checkpoint_corrupt);
  // A list that skips files.
  fl::MemoryCheckpoint gap;
  gap.write(folder + "/00000000000000000001",
            fl::detail::encode_manifest(fl::detail::manifest_format{}, 1, nullptr, 0));
  e = error_of([&] { json.attach(gap); });
  CHECK(e.code() == fl::errc::checkpoint_corrupt);
  CHECK(contains(e.what(), "gap"));
}

TEST_CASE("R-SOURCE-1 a directory that cannot be listed is SOURCE_IO_ERROR; bad options are refused") {
  flowtest::temp_path missing("flowlib_fs_missing");
  fl::FileSource<Rec> s{"events", {.directory = missing.path}};
  const auto e = error_of([&] { s.latest(); });
  CHECK(e.code() == fl::errc::source_io);
  CHECK(contains(e.what(), missing.path.string()));
  CHECK(error_of([] { fl::FileSource<Rec>("x", {}); }).code() == fl::errc::invalid_argument);
  CHECK(error_of([] { fl::FileSource<Rec>("x", {.directory = "/tmp", .pattern = ""}); }).code() ==
        fl::errc::invalid_argument);
  CHECK(error_of([] { fl::FileSource<Rec>("x", {.directory = "/tmp", .csv_delimiter = '"'}); }).code() ==
        fl::errc::invalid_argument);
  // Rescue needs a string column of the rescued column's name.
  CHECK(contains(error_of([] { fl::FileSource<Rec>("x", {.directory = "/tmp", .rescue = true}); }).what(),
                 "has no column '_rescued_data'"));
  CHECK(contains(error_of([] {
                   fl::FileSource<Rec>("x", {.directory = "/tmp", .rescue = true, .rescued_column = "id"});
                 }).what(),
                 "must be a std::string"));
  fl::FileSource<RecR> ok("x", {.directory = "/tmp", .rescue = true});
  CHECK(ok.options().rescued_column == "_rescued_data");
}

}  // namespace source_file_listing
