// FileSource in pipelines: files appearing between updates keep their
// numbering; a malformed record fails its batch and nothing of it is
// committed, again at every update; a file lost before it is read; rescued
// rows routed to a quarantine table; a full refresh reads the same files in
// the same order; and restarts between and inside files over a
// FileCheckpoint, with batches failing at every step of the protocol,
// against a model (every record applied once; several seeds, random file
// sizes and batch limits, both formats).
#include "file_support.hpp"

#include <flowlib/checkpoint/file.hpp>
#include <flowlib/checkpoint/memory.hpp>
#include <flowlib/flowlib.hpp>
#include <flowlib/pipeline.hpp>
#include <flowlib/source/file.hpp>
#include <flowlib/stage.hpp>
#include <flowlib/storage/file.hpp>

#include <doctest/doctest.h>

#include <support/temp_files.hpp>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace source_file_pipeline {

using namespace file_source_test;
namespace fl = flowlib;

namespace {

std::string jsonl_of(const std::vector<Rec>& rows) {
  std::string s;
  for (const auto& r : rows) s += json_line(r) + "\n";
  return s;
}

std::vector<Rec> recs(std::int64_t from, std::int64_t to) {
  std::mt19937_64 rng(static_cast<std::uint64_t>(from) + 99);
  std::vector<Rec> v;
  for (std::int64_t i = from; i < to; ++i) v.push_back(random_rec(rng, i));
  return v;
}

/// A table's rows, in its order.
template <class Table>
auto rows_of(const Table& t) {
  std::vector<typename Table::row_type> out;
  for (const auto& r : t.rows()) out.push_back(r);
  return out;
}

template <class Table>
std::vector<std::int64_t> table_ids(const Table& t) {
  std::vector<std::int64_t> out;
  for (const auto& r : t.rows()) out.push_back(r.id);
  return out;
}

std::vector<std::int64_t> iota(std::int64_t from, std::int64_t to) {
  std::vector<std::int64_t> v;
  for (std::int64_t i = from; i < to; ++i) v.push_back(i);
  return v;
}

}  // namespace

TEST_CASE("R-SOURCE-4 files appearing between updates keep their numbering; a hidden file waits for its rename") {
  flowtest::temp_dir dir("flowlib_fs_pipe_appear");
  fl::MemoryCheckpoint checkpoint;
  fl::StreamingTable<Rec> events{"events"};
  fl::FileSource<Rec> files{"event_files", {.directory = dir.path, .pattern = "*.jsonl"}};
  fl::Pipeline p{"p", checkpoint};
  p.flow("events").from(files).max_rows_per_batch(3).into(events, fl::Append{"events"});

  put_file(dir.path, "m.jsonl", jsonl_of(recs(0, 5)));
  CHECK(p.update().batches() == 2);
  CHECK(table_ids(events) == iota(0, 5));
  flowtest::write_file(dir.path / ".z.jsonl", jsonl_of(recs(100, 102)));  // still being written
  put_file(dir.path, "a.jsonl", jsonl_of(recs(5, 8)));                    // sorts before m
  p.update();
  CHECK(table_ids(events) == iota(0, 8));
  std::filesystem::rename(dir.path / ".z.jsonl", dir.path / "z.jsonl");
  p.update();
  auto want = iota(0, 8);
  want.push_back(100);
  want.push_back(101);
  CHECK(table_ids(events) == want);
  std::vector<std::string> names;
  for (const auto& f : files.files()) names.push_back(f.name);
  CHECK(names == std::vector<std::string>{"m.jsonl", "a.jsonl", "z.jsonl"});
  CHECK(p.update().batches() == 0);  // R-EXACT-2: nothing new, nothing read
}

TEST_CASE("R-SOURCE-2 a malformed record fails its batch: nothing of it committed, the error repeats") {
  flowtest::temp_dir dir("flowlib_fs_pipe_bad");
  auto rows = recs(0, 10);
  std::string text = jsonl_of(std::vector<Rec>(rows.begin(), rows.begin() + 6));
  text += "{\"id\":6,\"name\":\"x\",\"flag\":\"maybe\"}\n";  // line 7
  text += jsonl_of(std::vector<Rec>(rows.begin() + 7, rows.end()));
  put_file(dir.path, "a.jsonl", text);
  fl::MemoryCheckpoint checkpoint;
  fl::StreamingTable<Rec> events{"events"};
  fl::FileSource<Rec> files{"event_files", {.directory = dir.path}};
  fl::Pipeline p{"p", checkpoint};
  p.flow("events").from(files).max_rows_per_batch(4).into(events, fl::Append{"events"});
  for (int attempt = 0; attempt < 3; ++attempt) {
    CAPTURE(attempt);
    const auto e = error_of([&] { p.update(); });
    CHECK(e.code() == fl::errc::malformed_record);
    CHECK(e.flow() == "event_files");
    CHECK(e.column() == "flag");
    CHECK(contains(e.what(), "file 'a.jsonl' line 7"));
    CHECK(table_ids(events) == iota(0, 4));  // batch [0, 4) committed; [4, 8) not
    if (attempt == 1) put_file(dir.path, "b.jsonl", jsonl_of(recs(10, 12)));  // stays behind it
  }
}

TEST_CASE("R-SOURCE-2 rescue turned on after a malformed record: the same checkpoint goes on from the failed batch") {
  flowtest::temp_dir dir("flowlib_fs_pipe_rescue_later");
  std::string text;
  for (int i = 0; i < 6; ++i) text += "{\"id\":" + std::to_string(i) + ",\"name\":\"n\"}\n";
  text += "{\"id\":6,\"name\":7}\n";  // line 7: a number for a string
  text += "{\"id\":7,\"name\":\"n\"}\n";
  put_file(dir.path, "a.jsonl", text);
  fl::MemoryCheckpoint checkpoint;
  fl::StreamingTable<RecR> table{"t"};
  {
    fl::FileSource<RecR> strict{"raw", {.directory = dir.path}};
    fl::Pipeline p{"p", checkpoint};
    p.flow("t").from(strict).max_rows_per_batch(4).into(table, fl::Append{"t"});
    CHECK(error_of([&] { p.update(); }).code() == fl::errc::malformed_record);
    CHECK(table.size() == 4);
  }
  fl::FileSource<RecR> lenient{"raw", {.directory = dir.path, .rescue = true}};
  fl::Pipeline p{"p", checkpoint};
  p.flow("t").from(lenient).max_rows_per_batch(4).into(table, fl::Append{"t"});
  p.update();
  const auto rows = rows_of(table);
  REQUIRE(rows.size() == 8);
  for (std::int64_t i = 0; i < 8; ++i) CHECK(rows[static_cast<std::size_t>(i)].id == i);
  CHECK(rows[6].rescued == "{\"name\":7}");
  CHECK(!rows[7].rescued.has_value());
}

TEST_CASE("R-SOURCE-3 a file lost before it is read fails the update; put back, it is read") {
  flowtest::temp_dir dir("flowlib_fs_pipe_lost");
  put_file(dir.path, "a", jsonl_of(recs(0, 3)));
  put_file(dir.path, "b", jsonl_of(recs(3, 6)), 1'700'000'000);
  fl::MemoryCheckpoint checkpoint;
  fl::StreamingTable<Rec> events{"events"};
  fl::FileSource<Rec> files{"event_files", {.directory = dir.path}};
  fl::Pipeline p{"p", checkpoint};
  p.flow("events").from(files).max_rows_per_batch(2).into(events, fl::Append{"events"});
  REQUIRE(files.latest() == fl::source_position::at(6));  // listed
  const std::string b = flowtest::read_file(dir.path / "b");
  std::filesystem::remove(dir.path / "b");
  const auto e = error_of([&] { p.update(); });
  CHECK(e.code() == fl::errc::source_data_lost);
  CHECK(contains(e.what(), "file 'b'"));
  CHECK(table_ids(events) == iota(0, 2));  // [0,2) committed, [2,4) needs b
  put_file(dir.path, "b", b, 1'700'000'000);
  p.update();
  CHECK(table_ids(events) == iota(0, 6));
}

TEST_CASE("R-SOURCE-2 rescued rows go to a quarantine table through map and row_rejected, or a filter drops them") {
  flowtest::temp_dir dir("flowlib_fs_pipe_rescue");
  put_file(dir.path, "a.jsonl",
           "{\"id\":1,\"name\":\"a\"}\n"
           "{\"id\":2,\"name\":\"b\",\"score\":\"n/a\"}\n"
           "garbage\n"
           "{\"id\":4,\"name\":\"d\",\"score\":1.5}\n");
  fl::MemoryCheckpoint checkpoint;
  fl::FileSource<RecR> files{"raw", {.directory = dir.path, .rescue = true}};
  fl::StreamingTable<RecR> good{"good"};
  fl::StreamingTable<fl::Quarantined<RecR>> rejected{"rejected"};
  fl::StreamingTable<RecR> filtered{"filtered"};
  fl::Pipeline p{"p", checkpoint};
  p.flow("good")
      .from(files)
      .map(
          [](const RecR& r) {
            if (r.rescued) throw fl::row_rejected("rescued: " + *r.rescued);
            return r;
          },
          rejected)
      .into(good, fl::Append{"good"});
  p.flow("filtered")
      .from(files)
      .filter([](const RecR& r) { return !r.rescued.has_value(); })
      .into(filtered, fl::Append{"filtered"});
  p.update();
  CHECK(good.size() == 2);
  CHECK(filtered.size() == 2);
  const auto q = rows_of(rejected);
  REQUIRE(q.size() == 2);
  std::set<std::string> reasons;
  for (const auto& r : q) reasons.insert(r.expectation);
  CHECK(reasons == std::set<std::string>{
                       "rescued: {\"score\":\"n/a\"}",
                       "rescued: {\"_raw\":\"garbage\",\"_file\":\"a.jsonl\",\"_line\":3}"});
}

TEST_CASE("R-EXACT-5 a full refresh reads the same files in the same order") {
  flowtest::temp_dir dir("flowlib_fs_pipe_refresh");
  fl::MemoryCheckpoint checkpoint;
  fl::StreamingTable<Rec> events{"events"};
  fl::FileSource<Rec> files{"event_files", {.directory = dir.path, .order = fl::file_order::modified_then_name}};
  fl::Pipeline p{"p", checkpoint};
  p.flow("events").from(files).max_rows_per_batch(4).into(events, fl::Append{"events"});
  put_file(dir.path, "b", jsonl_of(recs(0, 5)), 1'700'000'000);
  put_file(dir.path, "a", jsonl_of(recs(5, 7)), 1'700'000'500);
  p.update();
  put_file(dir.path, "c", jsonl_of(recs(7, 9)), 1'600'000'000);  // older, listed later
  p.update();
  const auto before = rows_of(events);
  CHECK(table_ids(events) == iota(0, 9));
  p.full_refresh(events);
  CHECK(events.empty());
  p.update();
  CHECK(rows_of(events) == before);
}

TEST_CASE("R-SOURCE-1 R-SOURCE-4 restarts between and inside files, with failed batches, against a model") {
  for (const auto format : {fl::file_format::json_lines, fl::file_format::csv}) {
    for (std::uint64_t seed : {1u, 2u, 3u}) {
      CAPTURE(static_cast<int>(format));
      CAPTURE(seed);
      std::mt19937_64 rng(seed * 1000 + static_cast<std::uint64_t>(format));
      flowtest::temp_dir data("flowlib_fs_restart_data");
      flowtest::memory_dir ckdir("flowlib_fs_restart_ckpt");  // no slow fsyncs: restarts, not power loss
      std::map<std::string, std::vector<std::int64_t>> file_ids;  // the model: each file's ids
      std::int64_t next_id = 0;
      int next_file = 0;
      std::string pending_hidden;  // a file written under a hidden name, renamed in later

      // By modification time, random ones: a source that listed the
      // directory afresh would number the files otherwise, so the list
      // must come from the checkpoint.
      const fl::FileSourceOptions options{.directory = data.path, .format = format,
                                          .order = fl::file_order::modified_then_name};
      std::unique_ptr<fl::FileSource<Rec>> source;
      std::unique_ptr<fl::FileCheckpoint> checkpoint;
      std::unique_ptr<fl::StreamingTable<Rec, fl::FileStorage>> table;
      std::unique_ptr<fl::Pipeline> pipeline;
      bool fail_armed = false;
      int injected = 0;
      fl::fault_point fail_at = fl::fault_point::positions_recorded;
      std::uint64_t fail_batch = 0;

      const auto open = [&] {
        if (!source || rng() % 2 == 0) source = std::make_unique<fl::FileSource<Rec>>("files", options);
        checkpoint = std::make_unique<fl::FileCheckpoint>(ckdir.path);
        table = std::make_unique<fl::StreamingTable<Rec, fl::FileStorage>>("events");
        fl::PipelineOptions po;
        po.max_rows_per_batch = 1 + rng() % 13;
        po.snapshot_interval = 1 + rng() % 4;
        po.fault_hook = [&](fl::fault_point at, std::string_view, std::uint64_t batch) {
          if (fail_armed && at == fail_at && batch >= fail_batch) {
            fail_armed = false;
            ++injected;
            throw std::runtime_error("injected failure");
          }
        };
        pipeline = std::make_unique<fl::Pipeline>("p", *checkpoint, po);
        pipeline->flow("events").from(*source).into(*table, fl::Append{"events"});
      };
      const auto close = [&] {
        pipeline.reset();
        table.reset();
        checkpoint.reset();
      };
      const auto add_file = [&](bool hidden) {
        const std::size_t n = rng() % 5 == 0 ? 0 : rng() % 30;
        std::vector<Rec> rows;
        for (std::size_t i = 0; i < n; ++i) rows.push_back(random_rec(rng, next_id++));
        std::string text = format == fl::file_format::csv ? std::string(csv_header_line()) + "\n" : "";
        for (const auto& r : rows) text += (format == fl::file_format::csv ? csv_line(r) : json_line(r)) + "\n";
        char name[16];
        std::snprintf(name, sizeof name, "f%03d", next_file++);
        auto& ids = file_ids[name];
        for (const auto& r : rows) ids.push_back(r.id);
        const auto mtime = static_cast<std::int64_t>(1'600'000'000 + rng() % 100'000'000);
        if (hidden) {
          flowtest::write_file(data.path / ("." + std::string(name)), text);
          set_mtime(data.path / ("." + std::string(name)), mtime);
          pending_hidden = name;
        } else {
          put_file(data.path, name, text, mtime);
        }
      };
      // The committed rows must be a prefix of the records in the source's
      // order, each once.
      const auto check_prefix = [&] {
        std::vector<std::int64_t> order;
        for (const auto& f : source->files())
          for (auto id : file_ids.at(f.name)) order.push_back(id);
        const auto got = table_ids(*table);
        REQUIRE(got.size() <= order.size());
        CHECK(got == std::vector<std::int64_t>(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(got.size())));
        return got.size() == order.size();
      };

      open();
      for (int step = 0; step < 14; ++step) {
        CAPTURE(step);
        for (int k = static_cast<int>(rng() % 3); k > 0; --k) add_file(false);
        if (!pending_hidden.empty() && rng() % 2 == 0) {
          std::filesystem::rename(data.path / ("." + pending_hidden), data.path / pending_hidden);
          pending_hidden.clear();
        } else if (pending_hidden.empty() && rng() % 4 == 0) {
          add_file(true);
        }
        if (rng() % 2 == 0) {
          fail_armed = true;
          fail_at = static_cast<fl::fault_point>(rng() % 7);
          fail_batch = rng() % 6;
        }
        try {
          pipeline->update();
        } catch (const std::runtime_error&) {
          // an injected failure: the batch it hit was undone (or kept, after its commit)
        }
        fail_armed = false;
        check_prefix();
        if (rng() % 2 == 0) {
          close();
          open();
        }
      }
      // At the end every record is in the table exactly once.
      if (!pending_hidden.empty())
        std::filesystem::rename(data.path / ("." + pending_hidden), data.path / pending_hidden);
      close();
      open();
      pipeline->update();
      CHECK(check_prefix());
      CHECK(table_ids(*table).size() == static_cast<std::size_t>(next_id));
      CHECK(pipeline->update().batches() == 0);
      CHECK(injected > 0);
      close();
    }
  }
}

}  // namespace source_file_pipeline
