// Standalone streams with a FileCheckpoint (restarts, foreach-batch ids,
// operator state), IMPORT CHECKPOINT (each clause of R-TABLE-4), and
// checkpoints that are corrupt, truncated, of another version or made by
// another definition: a clear error, and the checkpoint left as it was.
#include <doctest/doctest.h>

#include <flowlib/checkpoint/file.hpp>
#include <flowlib/checkpoint/memory.hpp>
#include <flowlib/flowlib.hpp>
#include <flowlib/pipeline.hpp>
#include <flowlib/source/memory.hpp>
#include <flowlib/stream.hpp>

#include <support/errors.hpp>
#include <support/temp_files.hpp>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace runtime_stream {

namespace fl = flowlib;
using flowtest::contains;
using flowtest::message_of;
namespace fs = std::filesystem;

using ms_time = std::chrono::sys_time<std::chrono::milliseconds>;

struct Click {
  std::string session;
  std::int64_t n = 0;
  ms_time at{};
  friend bool operator==(const Click&, const Click&) = default;
};
FLOWLIB_SCHEMA(Click, session, n, at);

using Dedup = fl::DedupWithinWatermark<fl::Key<&Click::session, &Click::n>, fl::EventTime<&Click::at>>;

const ms_time t0{std::chrono::milliseconds(1'700'000'000'000)};
Click c(std::string s, std::int64_t n, int sec) { return {std::move(s), n, t0 + std::chrono::seconds(sec)}; }

// A directory for a FileCheckpoint, which makes it.
struct temp_dir : flowtest::temp_path {
  temp_dir() : temp_path("flowlib_stream_test") {}
};

// Every file under `dir` with its bytes.
std::map<std::string, std::string> snapshot_dir(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    std::ifstream in(e.path(), std::ios::binary);
    out[fs::relative(e.path(), dir).string()] = std::string(std::istreambuf_iterator<char>(in), {});
  }
  return out;
}

struct exported {
  std::map<std::uint64_t, std::vector<Click>> batches;
  fl::ForeachBatch<Click> sink() {
    return fl::ForeachBatch<Click>{[this](std::uint64_t id, std::span<const Click> rows) {
      batches[id] = std::vector<Click>(rows.begin(), rows.end());  // idempotent by batch id
    }};
  }
  std::vector<Click> all() const {
    std::vector<Click> v;
    for (const auto& [id, rows] : batches) v.insert(v.end(), rows.begin(), rows.end());
    return v;
  }
};

TEST_CASE("Stream: a FileCheckpoint restart resumes after the last commit with the dedup state (R-EXACT-1, R-DEDUP-6)") {
  temp_dir dir;
  fl::MemorySource<Click> feed{"clicks", {.partitions = 1, .guarantee = fl::delivery::at_least_once}};
  exported out;
  {
    fl::FileCheckpoint ckpt{dir.path};
    fl::Stream s{"clicks", ckpt};
    s.from(feed).through(Dedup{std::chrono::minutes(10), "dedup"}).max_rows_per_batch(2).into(out.sink());
    feed.append(c("a", 1, 0));
    feed.append(c("a", 1, 0));  // redelivered
    feed.append(c("b", 1, 5));
    s.run();
  }
  CHECK(out.all() == std::vector<Click>{c("a", 1, 0), c("b", 1, 5)});
  const std::uint64_t last_id = out.batches.rbegin()->first;
  feed.append(c("a", 1, 0));  // redelivered after the restart: the restored state removes it
  feed.append(c("c", 1, 9));
  fl::FileCheckpoint ckpt{dir.path};  // a new object over the same directory
  fl::Stream s{"clicks", ckpt};
  s.from(feed).through(Dedup{std::chrono::minutes(10), "dedup"}).max_rows_per_batch(2).into(out.sink());
  const auto sum = s.run();
  CHECK(sum.input_rows() == 2);  // nothing read twice
  CHECK(out.batches.rbegin()->first == last_id + 1);
  CHECK(out.all() == std::vector<Click>{c("a", 1, 0), c("b", 1, 5), c("c", 1, 9)});
}

TEST_CASE("Stream: a durable checkpoint over a volatile table is refused, with nothing written (R-EXACT-1)") {
  temp_dir dir;
  fl::MemorySource<Click> feed{"clicks"};
  fl::StreamingTable<Click> table{"clicks"};
  fl::FileCheckpoint ckpt{dir.path};
  fl::Stream s{"clicks", ckpt};
  s.from(feed).into(table, fl::Append{"clicks"});
  feed.append(c("a", 1, 0));
  CHECK(contains(message_of(fl::errc::checkpoint_mismatch, [&] { s.run(); }), "durable"));
  CHECK(table.empty());
  CHECK(snapshot_dir(dir.path).empty());
}

TEST_CASE("IMPORT CHECKPOINT: copied on the first update, resumed with the operator state, ignored later, not re-imported on full refresh, the original untouched (R-TABLE-4)") {
  fl::MemorySource<Click> feed{"clicks", {.partitions = 1, .guarantee = fl::delivery::at_least_once}};
  fl::StreamingTable<Click> events{"events"};
  fl::MemoryCheckpoint stream_ckpt;
  {
    fl::Stream s{"ingest", stream_ckpt};
    s.from(feed).through(Dedup{std::chrono::minutes(10), "dedup"}).into(events, fl::Append{"ingest"});
    feed.append(c("a", 1, 0));
    feed.append(c("b", 1, 1));
    s.run();
  }
  REQUIRE(events.size() == 2);
  const auto stream_bytes = stream_ckpt.byte_size();
  const auto stream_records = stream_ckpt.record_count();

  fl::MemoryCheckpoint ckpt;
  fl::Pipeline p{"events", ckpt};
  p.flow("ingest")
      .from(feed)
      .through(Dedup{std::chrono::minutes(10), "dedup"})
      .import_checkpoint(stream_ckpt, "ingest")
      .into(events, fl::Append{"ingest"});
  feed.append(c("a", 1, 0));  // a redelivery of a row the stream saw: the imported state drops it
  feed.append(c("c", 1, 2));
  const auto s1 = p.update();
  CHECK(s1.flows[0].input_rows == 2);  // resumed after the stream's last commit
  CHECK(s1.flows[0].deduplicated_rows == 1);
  CHECK(events.sorted_rows() == std::vector<Click>{c("a", 1, 0), c("b", 1, 1), c("c", 1, 2)});
  CHECK(stream_ckpt.byte_size() == stream_bytes);  // the original is never modified
  CHECK(stream_ckpt.record_count() == stream_records);

  // Later updates ignore the import clause, even after a restart and with
  // the stream moved on (here over another table of the same name).
  feed.append(c("d", 1, 3));
  {
    fl::Stream s{"ingest", stream_ckpt};
    fl::StreamingTable<Click> other{"events"};
    s.from(feed).through(Dedup{std::chrono::minutes(10), "dedup"}).into(other, fl::Append{"ingest"});
    CHECK(s.run().input_rows() == 3);
  }
  feed.append(c("e", 1, 4));
  fl::Pipeline p2{"events", ckpt};
  p2.flow("ingest")
      .from(feed)
      .through(Dedup{std::chrono::minutes(10), "dedup"})
      .import_checkpoint(stream_ckpt, "ingest")
      .into(events, fl::Append{"ingest"});
  CHECK(p2.update().flows[0].input_rows == 2);  // d and e: from the pipeline's own position
  CHECK(events.size() == 5);

  // A full refresh starts from an empty checkpoint: every row of the source
  // is processed again, and the import is not taken again.
  p2.full_refresh(events);
  const auto s3 = p2.update();
  CHECK(s3.flows[0].input_rows == feed.size());
  CHECK(events.sorted_rows() == std::vector<Click>{c("a", 1, 0), c("b", 1, 1), c("c", 1, 2),
                                                   c("d", 1, 3), c("e", 1, 4)});
}

TEST_CASE("IMPORT CHECKPOINT: a stream the checkpoint does not hold is a clear error (R-TABLE-4)") {
  fl::MemorySource<Click> feed{"clicks"};
  fl::StreamingTable<Click> events{"events"};
  fl::MemoryCheckpoint empty;
  fl::MemoryCheckpoint ckpt;
  fl::Pipeline p{"events", ckpt};
  p.flow("ingest").from(feed).import_checkpoint(empty, "nope").into(events, fl::Append{"ingest"});
  CHECK(contains(message_of(fl::errc::checkpoint_mismatch, [&] { p.update(); }), "no stream named 'nope'"));
  CHECK(ckpt.record_count() == 0);
}

// A pipeline over a file checkpoint whose only table-free flow is a
// foreach-batch sink, run a few batches; returns the checkpoint's files.
void run_export(const fs::path& dir, fl::MemorySource<Click>& feed, exported& out) {
  fl::FileCheckpoint ckpt{dir};
  fl::Pipeline p{"export", ckpt, {.snapshot_interval = 3}};
  p.flow("export").from(feed).through(Dedup{std::chrono::minutes(10), "dedup"}).max_rows_per_batch(1).into(out.sink());
  p.update();
}

std::string open_error(const fs::path& dir, fl::MemorySource<Click>& feed) {
  exported out;
  try {
    run_export(dir, feed, out);
  } catch (const fl::error& e) {
    return std::string(to_string(e.code())) + ": " + e.what();
  }
  return "no error";
}

TEST_CASE("A corrupt, truncated or unknown-version checkpoint fails to open with a clear error and is never overwritten (R-EXACT-1)") {
  fl::MemorySource<Click> feed{"clicks"};
  for (int i = 0; i < 5; ++i) feed.append(c("s", i, i));
  temp_dir master;
  exported out;
  run_export(master.path, feed, out);
  fl::FileCheckpoint(master.path).flush();  // every record in its own file, no journal
  const auto files = snapshot_dir(master.path);
  REQUIRE(files.size() > 5);

  std::size_t cases = 0;
  for (const auto& [name, bytes] : files) {
    CAPTURE(name);
    for (int kind = 0; kind < 3; ++kind) {
      temp_dir dir;
      fs::copy(master.path, dir.path, fs::copy_options::recursive);
      std::string bad = bytes;
      if (kind == 0) bad[bad.size() / 2] = static_cast<char>(bad[bad.size() / 2] ^ 0x20);  // a flipped bit
      if (kind == 1) bad.resize(bad.size() - 3);                                          // truncated
      if (kind == 2) bad[4] = 9;                                                          // version 9
      std::ofstream(dir.path / name, std::ios::binary | std::ios::trunc) << bad;
      const auto before = snapshot_dir(dir.path);
      const std::string err = open_error(dir.path, feed);
      CAPTURE(err);
      // The pipeline record and the commit log are read at every open; the
      // other records when a restore needs them. Every damaged record that
      // is read is reported, naming it; none is ever rewritten.
      if (err != "no error") {
        CHECK(err.rfind("CHECKPOINT_CORRUPT", 0) == 0);
        CHECK(err.find(name.substr(name.rfind('/') + 1)) != std::string::npos);
        if (kind == 2) CHECK(err.find("unknown format version 9") != std::string::npos);
        if (kind == 1) CHECK(err.find("truncated") != std::string::npos);
        ++cases;
      }
      CHECK(snapshot_dir(dir.path) == before);
    }
  }
  CHECK(cases >= 9);
  MESSAGE("corrupt-checkpoint cases reported: " << cases);
}

TEST_CASE("IMPORT CHECKPOINT from a FileCheckpoint stream with a foreach-batch sink: the dedup state and position carry over (R-TABLE-4)") {
  temp_dir dir;
  fl::MemorySource<Click> feed{"clicks", {.partitions = 1, .guarantee = fl::delivery::at_least_once}};
  exported out;
  {
    fl::FileCheckpoint stream_ckpt{dir.path};
    fl::Stream s{"ingest", stream_ckpt};
    s.from(feed).through(Dedup{std::chrono::minutes(10), "dedup"}).into(out.sink());
    feed.append(c("a", 1, 0));
    feed.append(c("b", 1, 1));
    s.run();
  }
  const auto files = snapshot_dir(dir.path);
  fl::FileCheckpoint stream_ckpt{dir.path};
  fl::StreamingTable<Click> events{"events"};
  fl::MemoryCheckpoint ckpt;
  {
    // Other operators than the stream's: refused, nothing imported.
    fl::Pipeline p{"events", ckpt};
    p.flow("ingest").from(feed).import_checkpoint(stream_ckpt, "ingest").into(events, fl::Append{"ingest"});
    CHECK(contains(message_of(fl::errc::checkpoint_mismatch, [&] { p.update(); }), "must be the same, in order"));
    CHECK(ckpt.record_count() == 0);
  }
  fl::MemoryCheckpoint ckpt2;
  fl::Pipeline p{"events", ckpt2};
  p.flow("ingest")
      .from(feed)
      .through(Dedup{std::chrono::minutes(10), "dedup"})
      .import_checkpoint(stream_ckpt, "ingest")
      .into(events, fl::Append{"ingest"});
  feed.append(c("b", 1, 1));  // seen by the stream
  feed.append(c("c", 1, 2));
  const auto s = p.update();
  CHECK(s.flows[0].input_rows == 2);
  CHECK(s.flows[0].deduplicated_rows == 1);
  CHECK(events.sorted_rows() == std::vector<Click>{c("c", 1, 2)});  // the stream's rows went to its sink
  CHECK(snapshot_dir(dir.path) == files);  // the original is never modified
}

}  // namespace runtime_stream
