// FileStorage (storage/file.hpp): a table's rows as delta and snapshot
// records in the pipeline's checkpoint. What its header comment promises,
// checked through pipelines over a FileCheckpoint in a temporary directory:
//   - every column type round-trips, under the same row ids (R-DURABLE-6);
//   - a failure at every fault point of every batch, each followed by a
//     reopen from the directory (or a retry in the same process), gives the
//     uninterrupted result (R-EXACT-1);
//   - a record counts only with its writer's commit, also when a later
//     commit of the same batch id changed nothing in the table;
//   - the snapshot schedule keeps a table's records bounded;
//   - a damaged record is errc::checkpoint_corrupt naming it, and nothing
//     is loaded;
//   - full refresh, and a refresh cut short, finished at the next open or
//     never begun (R-EXACT-5);
//   - read_table and export_table_csv read what the pipeline committed;
//   - the refusal of a volatile checkpoint (R-DURABLE-1); FileStorage over
//     an SqliteCheckpoint; the store unattached, as the memory store;
//   - a direct insert whose write fails changes nothing (R-WHERE-5).
// (R-DURABLE-6 where no other rule is named.) Each runs over the
// FileCheckpoint as it is, a batch's records one journal entry, and, where
// a failed batch matters, over the FileCheckpoint without its batches
// (test_store below), where a failed batch's records stay behind and only
// the writers' commits decide.
// The reopen semantics of every flow type, and the multi-hop pipeline
// reopened between updates, are in tests/storage/durable/.
#include <doctest/doctest.h>

#include <flowlib/checkpoint/file.hpp>
#include <flowlib/checkpoint/memory.hpp>
#include <flowlib/checkpoint/sqlite.hpp>
#include <flowlib/flowlib.hpp>
#include <flowlib/pipeline.hpp>
#include <flowlib/runtime/checkpoint_log.hpp>
#include <flowlib/runtime/export.hpp>
#include <flowlib/source/memory.hpp>
#include <flowlib/source/table.hpp>
#include <flowlib/storage/file.hpp>
#include <flowlib/storage/memory.hpp>

#include <support/durable_configs.hpp>
#include <support/durable_world.hpp>
#include <support/errors.hpp>
#include <support/reference_model.hpp>
#include <support/rows.hpp>
#include <support/temp_files.hpp>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace storage_file_file {

namespace fl = flowlib;
using namespace std::string_literals;
using layout = fl::detail::file_table_layout;
using flowtest::sorted;

using flowtest::memory_dir;
using flowtest::rows_by_id;
using config = flowtest::file_durable;
using namespace flowtest::durable;  // the main scenario: Ev, world, feed_step, uninterrupted()

template <class Row>
using Durable = fl::StreamingTable<Row, fl::FileStorage>;

// --- Reading what the records hold ------------------------------------------------

/// A table's rows in row id order (read_table's order).
template <class Table>
std::vector<typename Table::row_type> in_id_order(const Table& t) {
  std::vector<typename Table::row_type> out;
  for (auto& [id, r] : rows_by_id(t)) out.push_back(r);
  return out;
}

/// The names of table `name`'s records in `ck`.
std::vector<std::string> records_of(const fl::checkpoint_store& ck, const std::string& name) {
  return ck.list(layout::dir(name));
}

/// The code of the error `f` throws; errc{} when it throws none.
template <class F>
fl::errc code_of(F&& f) {
  try {
    f();
  } catch (const fl::error& e) {
    return e.code();
  }
  return fl::errc{};
}

/// A checkpoint store over a FileCheckpoint (the test's, or one of its own
/// over a directory), for two purposes:
///   - with `batches` false it drops the batch bracket (begin_batch(),
///     commit_batch(), abort_batch()): every write and removal goes to the
///     directory at once, each record atomic on its own and a batch's set of
///     them not, as in a durable store without transactions (FileStorage
///     takes any durable checkpoint). A failed batch's records stay behind
///     there, and only their writers' commits decide whether they count.
///     FileCheckpoint itself journals a batch's records together, so a
///     failed batch leaves none;
///   - change number `fail_at` (writes, removals and batch commits, counted
///     from 0) fails with errc::checkpoint_io and does nothing, as a full or
///     failing disk would.
class test_store final : public fl::checkpoint_store {
 public:
  test_store(fl::FileCheckpoint& inner, bool batches) : inner_(&inner), batches_(batches) {}
  test_store(const std::filesystem::path& dir, bool batches)
      : owned_(std::make_unique<fl::FileCheckpoint>(dir)), inner_(owned_.get()), batches_(batches) {}

  std::optional<std::uint64_t> fail_at;
  std::uint64_t changes = 0;  // changes attempted so far
  bool failed = false;        // whether fail_at was reached

  bool durable() const noexcept override { return inner_->durable(); }
  std::string describe() const override { return inner_->describe(); }
  std::optional<std::string> read(std::string_view path) const override { return inner_->read(path); }
  std::vector<std::string> list(std::string_view path) const override { return inner_->list(path); }
  void write(std::string_view path, std::string_view bytes) override {
    change("write", path);
    inner_->write(path, bytes);
  }
  void remove(std::string_view path) override {
    change("remove", path);
    inner_->remove(path);
  }
  void remove_many(const std::vector<std::string>& paths) override {
    change("remove", paths.empty() ? std::string_view{} : std::string_view{paths.front()});
    inner_->remove_many(paths);
  }
  void begin_batch() override {
    if (batches_) inner_->begin_batch();
  }
  void commit_batch() override {
    if (!batches_) return;
    change("commit", "");
    inner_->commit_batch();
  }
  void abort_batch() noexcept override {
    if (batches_) inner_->abort_batch();
  }

 private:
  void change(const char* what, std::string_view path) {
    const std::uint64_t n = changes++;
    if (fail_at && n == *fail_at) {
      failed = true;
      throw fl::error(fl::errc::checkpoint_io, "checkpoint", "", "",
                      std::string("injected failure: ") + what + " '" + std::string(path) + "'");
    }
  }
  std::unique_ptr<fl::FileCheckpoint> owned_;
  fl::FileCheckpoint* inner_;
  bool batches_;
};

/// The two ways a test runs FileStorage: over the FileCheckpoint (a batch's
/// records journaled together), and over it without batches (test_store).
constexpr bool batch_modes[] = {true, false};
inline std::string batch_mode_name(bool batches) {
  return batches ? "FileCheckpoint, batches journaled" : "FileCheckpoint without batches";
}

// --- The main scenario (support/durable_world.hpp) --------------------------------

/// The records hold what memory holds, table by table.
void check_stored(const fl::checkpoint_store& ck, const world<fl::FileStorage>& w) {
  w.for_each_table([&](const auto& t) { config::check_same(ck, t); });
}

/// The same for the tables flow `flow` writes; returns how many of their
/// records do not count.
std::size_t check_stored_of(const fl::checkpoint_store& ck, const world<fl::FileStorage>& w, std::string_view flow) {
  if (flow == "ingest") return config::check_same(ck, w.bronze);
  if (flow == "current") return config::check_same(ck, w.current);
  if (flow == "users1") return config::check_same(ck, w.users1);
  if (flow == "users2") return config::check_same(ck, w.users2);
  REQUIRE(flow == "log");
  return config::check_same(ck, w.log) + config::check_same(ck, w.rejected);
}

/// One program over a checkpoint directory: checkpoint, tables, pipeline
/// (destroyed in the reverse order: the pipeline, the tables, then the
/// checkpoint they point to).
struct program_checkpoint {
  test_store checkpoint;
  program_checkpoint(const std::filesystem::path& dir, bool batches) : checkpoint(dir, batches) {}
};
struct program : program_checkpoint, world_program<fl::FileStorage> {
  program(const std::filesystem::path& dir, fl::MemorySource<Ev>& feed, bool batches,
          fl::PipelineOptions options = {})
      : program_checkpoint(dir, batches), world_program(checkpoint, feed, std::move(options)) {}
};

// --- (a) Column types -----------------------------------------------------------------

enum class Color : std::uint8_t { red = 1, green = 2, blue = 250 };
enum class Level : std::int16_t { low = -300, mid = 0, high = 300 };

/// A column of every type FileStorage encodes, and an optional of each.
struct AllTypes {
  std::int64_t id = 0;
  bool flag = false;
  std::int8_t i8 = 0;
  std::uint8_t u8 = 0;
  std::int16_t i16 = 0;
  std::uint16_t u16 = 0;
  std::int32_t i32 = 0;
  std::uint32_t u32 = 0;
  std::int64_t i64 = 0;
  std::uint64_t u64 = 0;
  Color color = Color::red;
  Level level = Level::mid;
  float f = 0;
  double d = 0;
  std::string s;
  std::chrono::sys_days day{};
  ms_time at{};
  std::optional<bool> o_flag;
  std::optional<std::int8_t> o_i8;
  std::optional<std::uint8_t> o_u8;
  std::optional<std::int16_t> o_i16;
  std::optional<std::uint16_t> o_u16;
  std::optional<std::int32_t> o_i32;
  std::optional<std::uint32_t> o_u32;
  std::optional<std::int64_t> o_i64;
  std::optional<std::uint64_t> o_u64;
  std::optional<Color> o_color;
  std::optional<Level> o_level;
  std::optional<float> o_f;
  std::optional<double> o_d;
  std::optional<std::string> o_s;
  std::optional<std::chrono::sys_days> o_day;
  std::optional<ms_time> o_at;
  friend bool operator==(const AllTypes&, const AllTypes&) = default;
};
FLOWLIB_SCHEMA(AllTypes, id, flag, i8, u8, i16, u16, i32, u32, i64, u64, color, level, f, d, s, day, at,
               o_flag, o_i8, o_u8, o_i16, o_u16, o_i32, o_u32, o_i64, o_u64, o_color, o_level, o_f, o_d,
               o_s, o_day, o_at);

/// The floating-point columns' bit patterns (== cannot tell -0.0 from 0.0,
/// nor compare NaNs).
std::vector<std::uint64_t> float_bits(const AllTypes& r) {
  return {std::bit_cast<std::uint32_t>(r.f), std::bit_cast<std::uint64_t>(r.d),
          r.o_f ? std::bit_cast<std::uint32_t>(*r.o_f) : 1u, r.o_d ? std::bit_cast<std::uint64_t>(*r.o_d) : 1u};
}

/// Sets every integer column of `r`, and its optional, to the largest or the
/// smallest value of its type.
void set_integer_limits(AllTypes& r, bool largest) {
  const auto limit = [largest]<class T>(T) {
    return largest ? std::numeric_limits<T>::max() : std::numeric_limits<T>::min();
  };
  r.o_flag = r.flag = largest;
  r.o_i8 = r.i8 = limit(r.i8);
  r.o_u8 = r.u8 = limit(r.u8);
  r.o_i16 = r.i16 = limit(r.i16);
  r.o_u16 = r.u16 = limit(r.u16);
  r.o_i32 = r.i32 = limit(r.i32);
  r.o_u32 = r.u32 = limit(r.u32);
  r.o_i64 = r.i64 = limit(r.i64);
  r.o_u64 = r.u64 = limit(r.u64);
  r.o_color = r.color = largest ? Color::blue : Color::green;
  r.o_level = r.level = largest ? Level::high : Level::low;
}

std::vector<AllTypes> all_type_rows() {
  using namespace std::chrono;
  using lim64 = std::numeric_limits<std::int64_t>;
  std::vector<AllTypes> rows(5);
  // Largest values, every optional set.
  AllTypes& a = rows[0];
  a.id = 1;
  set_integer_limits(a, true);
  a.f = std::numeric_limits<float>::max();
  a.d = std::numeric_limits<double>::infinity();
  a.s = "commas, \"quotes\", 'single'\nnew line\r\nCRLF and a NUL \0 in the middle"s;
  a.day = sys_days{year{2024} / 2 / 29};
  a.at = t0 + milliseconds(123);
  a.o_f = std::numeric_limits<float>::denorm_min();
  a.o_d = std::numeric_limits<double>::max();
  a.o_s = "\0"s;
  a.o_day = sys_days{year{9999} / 12 / 31};
  a.o_at = ms_time{milliseconds(lim64::max())};
  // Smallest values, every optional set.
  AllTypes& b = rows[1];
  b.id = 2;
  set_integer_limits(b, false);
  b.o_color = Color::red;
  b.f = -std::numeric_limits<float>::infinity();
  b.d = -0.0;
  b.s = std::string(70'000, 'x') + "\n";  // longer than 16 bits can count
  b.day = sys_days{year{1969} / 12 / 31};
  b.at = ms_time{milliseconds(-1)};
  b.o_f = -0.0f;
  b.o_d = std::numeric_limits<double>::denorm_min();
  b.o_s = "";  // set, and empty: not the same as nullopt
  b.o_day = sys_days{year{1} / 1 / 1};
  b.o_at = ms_time{milliseconds(lim64::min())};
  // Defaults; every optional empty.
  rows[2].id = 3;
  // A NaN (its bits compared), and a string of every byte value.
  AllTypes& n = rows[3];
  n.id = 4;
  n.f = std::numeric_limits<float>::quiet_NaN();
  n.d = -std::numeric_limits<double>::quiet_NaN();
  for (int c = 0; c < 256; ++c) n.s.push_back(static_cast<char>(c));
  n.o_f = std::numeric_limits<float>::signaling_NaN();
  n.o_s = n.s;
  // Ordinary values.
  AllTypes& o = rows[4];
  o.id = 5;
  o.flag = true;
  o.i8 = -5;
  o.u8 = 7;
  o.i16 = -1234;
  o.u16 = 4321;
  o.i32 = -123456;
  o.u32 = 654321;
  o.i64 = -1'234'567'890'123;
  o.u64 = 9'876'543'210'987;
  o.f = 1.5f;
  o.d = 0.1;
  o.s = "plain";
  o.day = sys_days{year{2026} / 1 / 1};
  o.at = t0;
  o.o_i32 = -7;
  o.o_d = 2.5;
  o.o_s = "x,y";
  return rows;
}

/// Whether two vectors of AllTypes hold the same rows, bit for bit.
void check_all_types(const std::vector<AllTypes>& got, const std::vector<AllTypes>& want) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    CAPTURE(i);
    CHECK(float_bits(got[i]) == float_bits(want[i]));
    AllTypes g = got[i], w = want[i];
    g.f = w.f = 0;  // compared above, by bits
    g.d = w.d = 0;
    if (g.o_f && w.o_f) g.o_f = w.o_f = 0.0f;
    if (g.o_d && w.o_d) g.o_d = w.o_d = 0.0;
    CHECK(g == w);
  }
  CHECK(std::signbit(got.at(1).d));
  CHECK(std::isnan(got.at(3).f));
  CHECK(got.at(0).s.size() == want.at(0).s.size());  // the NUL did not end it
}

TEST_CASE("R-DURABLE-6: every column type round-trips through FileStorage records: ints of every width, enums, float and double bit for bit, strings with commas, quotes, newlines and NUL bytes, dates, time points, an optional of each, empty or not") {
  const memory_dir dir{"flowlib_file_types"};
  const std::vector<AllTypes> rows = all_type_rows();
  fl::MemorySource<AllTypes> feed{"feed"};
  for (const auto& r : rows) feed.append(r);
  std::map<fl::row_id, AllTypes> before;
  {
    fl::FileCheckpoint ck{dir.path};
    Durable<AllTypes> t{"all_types"};
    fl::Pipeline p{"types", ck};
    p.flow("load").from(feed).max_rows_per_batch(2).into(t, fl::Append{"load"});
    p.update();
    REQUIRE(t.size() == rows.size());
    before = rows_by_id(t);
  }
  // Read straight from the records.
  const fl::FileCheckpoint ck{dir.path};
  check_all_types(fl::read_table<AllTypes>(ck, "all_types"), rows);
  // Loaded by a new program: the same rows under the same ids.
  fl::FileCheckpoint ck2{dir.path};
  Durable<AllTypes> t{"all_types"};
  fl::Pipeline p{"types", ck2};
  p.flow("load").from(feed).max_rows_per_batch(2).into(t, fl::Append{"load"});
  CHECK(p.update().batches() == 0);
  const auto after = rows_by_id(t);
  REQUIRE(after.size() == before.size());
  std::vector<AllTypes> a, b;
  for (const auto& [id, r] : after) a.push_back(r);
  for (const auto& [id, r] : before) b.push_back(r);
  check_all_types(a, b);
  std::vector<fl::row_id> ids_after, ids_before;
  for (const auto& [id, r] : after) ids_after.push_back(id);
  for (const auto& [id, r] : before) ids_before.push_back(id);
  CHECK(ids_after == ids_before);
}

// --- (b) A failure at every fault point of every batch ---------------------------------

TEST_CASE("R-EXACT-1, R-DURABLE-6: a failure at every fault point of every batch of every flow (append, REPLACE USING, SCD1, SCD2 with deletes, quarantine; multi-hop), each followed by a reopen from the directory (or in the same program) and a retry, gives the uninterrupted result") {
  const auto expected = uninterrupted();
  for (const bool batches : batch_modes)
  for (const bool restart : {true, false}) {
    INFO(batch_mode_name(batches));
    CAPTURE(restart);
    const memory_dir dir{"flowlib_file_faults"};
    fl::MemorySource<Ev> feed{"feed"};
    // Every step of every batch fails once: the first time the hook is
    // called there (the retry replays the batch, with the same id, up to
    // its next step that has not failed yet).
    std::set<std::tuple<std::string, std::uint64_t, fl::fault_point>> failed;
    std::string failed_flow;
    fl::PipelineOptions opt;
    opt.snapshot_interval = 2;
    opt.fault_hook = [&](fl::fault_point at, std::string_view flow, std::uint64_t batch) {
      if (failed.emplace(std::string(flow), batch, at).second) {
        failed_flow = flow;
        throw injected(std::string(flow) + " batch " + std::to_string(batch) + " at " + fl::to_string(at));
      }
    };
    std::size_t stale = 0;  // failed batches' records left in the directory
    auto prog = std::make_unique<program>(dir.path, feed, batches, opt);
    for (int s = 0; s < steps; ++s) {
      feed_step(feed, s);
      for (;;) {
        try {
          prog->pipeline.update();
          break;
        } catch (const injected& e) {
          const std::string what = e.what();
          CAPTURE(what);
          // The records of the tables the failed flow writes hold what
          // memory holds: its batch's records, if any were written, do not
          // count. (Every table is checked at the end.)
          stale += check_stored_of(prog->checkpoint, prog->w, failed_flow);
          if (restart) {
            prog.reset();  // the program ends; the next one opens the directory
            prog = std::make_unique<program>(dir.path, feed, batches, opt);
          }
        }
      }
    }
    check_stored(prog->checkpoint, prog->w);
    CHECK(prog->w.rows() == expected);
    // Every batch failed at each of its 7 steps, in every flow.
    std::map<std::pair<std::string, std::uint64_t>, std::size_t> steps_failed;
    for (const auto& [flow, batch, at] : failed) steps_failed[{flow, batch}] += 1;
    std::set<std::string> flows;
    for (const auto& [fb, n] : steps_failed) {
      CAPTURE(fb.first);
      CAPTURE(fb.second);
      CHECK(n == 7);
      flows.insert(fb.first);
    }
    CHECK(flows.size() == 5);
    CHECK(steps_failed.size() > 30);
    // Journaled, a failed batch writes nothing; without batches its table
    // records stay behind until the next write or open, and must not count.
    if (batches) CHECK(stale == 0);
    if (!batches) CHECK(stale > 20);
    // Opened again: nothing to do, same rows.
    prog.reset();
    program again{dir.path, feed, batches, opt};
    CHECK(again.pipeline.update().batches() == 0);
    CHECK(again.w.rows() == expected);
  }
}

// --- (c) A record counts only with its writer's commit ----------------------------------

struct Reading {
  std::int64_t id = 0;
  std::int64_t value = 0;
  friend bool operator==(const Reading&, const Reading&) = default;
  friend auto operator<=>(const Reading&, const Reading&) = default;
};
FLOWLIB_SCHEMA(Reading, id, value);

/// Rows [first, first + n): every third one negative (quarantined).
std::vector<Reading> readings(std::int64_t first, std::int64_t n) {
  std::vector<Reading> out;
  for (std::int64_t i = first; i < first + n; ++i) out.push_back({i, i % 3 == 2 ? -i : i * 10});
  return out;
}
std::vector<Reading> valid(const std::vector<Reading>& rows) {
  std::vector<Reading> out;
  for (const auto& r : rows)
    if (r.value >= 0) out.push_back(r);
  return out;
}
std::vector<Reading> invalid(const std::vector<Reading>& rows) {
  std::vector<Reading> out;
  for (const auto& r : rows)
    if (r.value < 0) out.push_back(r);
  return out;
}
std::vector<Reading> concat(std::vector<Reading> a, const std::vector<Reading>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}
template <class Table>
std::vector<Reading> quarantined_rows(const Table& q) {
  std::vector<Reading> out;
  for (const auto& r : q.sorted_rows()) out.push_back(r.row);
  return sorted(out);
}

/// Keys 0..3, each at sequence `seq`.
std::vector<Ev> versions(std::int64_t seq) {
  std::vector<Ev> out;
  for (std::int64_t k = 0; k < 4; ++k) out.push_back({k, "v" + std::to_string(seq), 0, seq, t0});
  return out;
}

/// A program of the scenario of (c), two flows, each fed in a run of its
/// own:
///   f  readings -> keeps the rows while `pass` is true -> quarantines the
///      negative ones into q -> appends the others to t;
///   g  versions -> while `pass` is false, makes every sequence older than
///      any in the table -> REPLACE USING into u (older rows change nothing).
struct stale_program {
  test_store checkpoint;
  Durable<Reading> t{"t"};
  Durable<fl::Quarantined<Reading>> q{"q"};
  Durable<Ev> u{"u"};
  fl::Pipeline pipeline;
  stale_program(const std::filesystem::path& dir, bool batches, fl::MemorySource<Reading>& readings_feed,
                fl::MemorySource<Ev>& versions_feed, const bool& pass, fl::PipelineOptions options = {})
      : checkpoint(dir, batches), pipeline("stale", checkpoint, std::move(options)) {
    pipeline.flow("f")
        .from(readings_feed)
        .filter([&pass](const Reading&) { return pass; })
        .quarantine(q, fl::expectations(fl::expect_or_quarantine(
                           "non_negative", [](const Reading& r) { return r.value >= 0; })))
        .into(t, fl::Append{"f"});
    pipeline.flow("g")
        .from(versions_feed)
        .map([&pass](Ev e) {
          if (!pass) e.seq -= 1000;
          return e;
        })
        .into(u, Current{"g"});
  }
};

TEST_CASE("R-DURABLE-6, R-EXACT-1: the record of a batch that failed is not loaded, and a later commit of the same batch id that changed nothing in the table (a filter kept no row; REPLACE USING got only older sequences) does not make it count, retried in the same program or after a restart") {
  const auto a = readings(0, 6), b = readings(100, 6), c = readings(200, 6);
  for (const bool batches : batch_modes)
  for (const bool older : {false, true})
  for (const bool restart : {false, true}) {
    INFO(batch_mode_name(batches));
    INFO((older ? "g: REPLACE USING, the retry's rows all older" : "f: filter, quarantine, append; the retry keeps no row"));
    CAPTURE(restart);
    const memory_dir dir{"flowlib_file_stale"};
    fl::MemorySource<Reading> readings_feed{"readings"};
    fl::MemorySource<Ev> versions_feed{"versions"};
    bool pass = true;
    bool armed = false;
    fl::PipelineOptions opt;
    opt.fault_hook = [&](fl::fault_point at, std::string_view, std::uint64_t batch) {
      // After the tables wrote batch 1's records, before its commit.
      if (armed && at == fl::fault_point::before_commit && batch == 1) {
        armed = false;
        throw injected("before the commit of batch 1");
      }
    };
    const auto open = [&] {
      return std::make_unique<stale_program>(dir.path, batches, readings_feed, versions_feed, pass, opt);
    };
    const auto feed = [&](int n) {
      if (older) {
        versions_feed.append(versions(10 * (n + 1)));
      } else {
        readings_feed.append(n == 0 ? a : n == 1 ? b : c);
      }
    };
    // The rows of the tables and what the records hold, as they must be.
    const auto check = [&](stale_program& p, bool with_c) {
      if (older) {
        CHECK(p.u.sorted_rows() == versions(with_c ? 30 : 10));
      } else {
        CHECK(sorted(p.t.sorted_rows()) == sorted(valid(with_c ? concat(a, c) : a)));
        CHECK(quarantined_rows(p.q) == sorted(invalid(with_c ? concat(a, c) : a)));
      }
      config::check_same(p.checkpoint, p.t);
      config::check_same(p.checkpoint, p.q);
      config::check_same(p.checkpoint, p.u);
    };
    auto prog = open();
    feed(0);
    prog->pipeline.update();  // batch 0
    feed(1);
    armed = true;
    CHECK_THROWS_AS(prog->pipeline.update(), injected);  // batch 1 fails
    // Without batches its records were written and do not count (the test
    // would prove nothing otherwise); journaled, none were written.
    const std::size_t stale = older ? config::load<Ev>(prog->checkpoint, "u").stale
                                    : config::load<Reading>(prog->checkpoint, "t").stale +
                                          config::load<fl::Quarantined<Reading>>(prog->checkpoint, "q").stale;
    CHECK(stale == (batches ? 0 : older ? 1 : 2));
    check(*prog, false);
    if (restart) {
      prog.reset();
      prog = open();
    }
    // The retry of batch 1 (same positions) changes nothing in the tables,
    // and commits batch 1.
    pass = false;
    const auto s = prog->pipeline.update();
    REQUIRE(s.flow(older ? "g" : "f") != nullptr);
    CHECK(s.flow(older ? "g" : "f")->batches == 1);
    check(*prog, false);
    // The program ends right after that commit; the next one loads the
    // tables: batch 1's first records must not count now that batch 1
    // committed.
    prog.reset();
    pass = true;
    prog = open();
    CHECK(prog->pipeline.update().batches() == 0);
    check(*prog, false);
    // And the tables go on from there.
    feed(2);
    prog->pipeline.update();
    check(*prog, true);
    prog.reset();
    prog = open();
    CHECK(prog->pipeline.update().batches() == 0);
    check(*prog, true);
  }
}

// --- (d) The snapshot schedule ------------------------------------------------------------

/// Header fields of a record's payload (see storage/file.hpp).
layout::header header_of(const fl::checkpoint_store& ck, const std::string& path) {
  const auto bytes = ck.read(path);
  REQUIRE(bytes.has_value());
  fl::byte_reader in{*bytes, 0, "test", "", fl::errc::checkpoint_corrupt};
  return layout::read_header(in);
}

TEST_CASE("R-DURABLE-6: with snapshot_interval = 2 a table's records stay bounded over many batches (snapshots are taken, older records removed), and a reopen after them gives the same rows") {
  constexpr std::uint64_t interval = 2;
  constexpr int updates = 60;
  const memory_dir dir{"flowlib_file_schedule"};
  fl::MemorySource<Ev> feed{"feed"};
  fl::MemorySource<Ev> feed_ref{"feed"};
  // Every update sends a new version of each of 8 keys, some of them
  // deletes: every batch changes every row of the two tables.
  const auto step = [](int s) {
    std::vector<Ev> out;
    for (std::int64_t k = 0; k < 8; ++k) {
      out.push_back({k, "v" + std::to_string(s), s * 10 + k, s, t0 + std::chrono::seconds(s), (s + k) % 5 == 0});
    }
    return out;
  };
  const auto declare = [](fl::Pipeline& p, fl::MemorySource<Ev>& src, auto& cur, auto& users) {
    p.flow("current").from(src).into(cur, Current{"current"});
    p.flow("users1").from(src).into(users, Cdc1{"users1"});
  };
  fl::MemoryCheckpoint mem;
  fl::StreamingTable<Ev> ref_cur{"current"};
  fl::StreamingTable<Cur> ref_users{"users1"};
  fl::Pipeline ref{"schedule", mem};
  declare(ref, feed_ref, ref_cur, ref_users);

  fl::PipelineOptions opt;
  opt.snapshot_interval = interval;
  std::map<fl::row_id, Ev> cur_ids;
  std::map<fl::row_id, Cur> users_ids;
  {
    fl::FileCheckpoint ck{dir.path};
    Durable<Ev> cur{"current"};
    Durable<Cur> users{"users1"};
    fl::Pipeline p{"schedule", ck, opt};
    declare(p, feed, cur, users);
    std::set<std::uint64_t> snapshots;  // the snapshot records seen: 2 * seq + (table == "current")
    std::size_t most = 0;
    std::uint64_t highest_seq = 0;
    for (int s = 0; s < updates; ++s) {
      feed.append(step(s));
      feed_ref.append(step(s));
      p.update();
      ref.update();
      for (const std::string table : {"current", "users1"}) {
        CAPTURE(table);
        CAPTURE(s);
        const auto names = records_of(ck, table);
        most = std::max(most, names.size());
        // At most: the last snapshot with `interval` deltas after it, and
        // the new snapshot (the older ones go at the table's next write).
        CHECK(names.size() <= interval + 2);
        for (const auto& n : names) {
          const std::string path = layout::dir(table) + "/" + n;
          const auto seq = layout::parse_seq(n);
          REQUIRE(seq.has_value());
          highest_seq = std::max(highest_seq, *seq);
          if (header_of(ck, path).what == layout::kind::snapshot) snapshots.insert(*seq * 2 + (table == "current"));
        }
      }
      CHECK(sorted(cur.sorted_rows()) == sorted(ref_cur.sorted_rows()));
    }
    // One record per batch, a snapshot every few: the folder was renewed.
    CHECK(highest_seq >= updates - 1);
    CHECK(snapshots.size() >= 2 * (updates / (interval + 1)) - 2);
    CHECK(most >= 2);
    cur_ids = rows_by_id(cur);
    users_ids = rows_by_id(users);
    config::check_same(ck, cur);
    config::check_same(ck, users);
    // In their own files (the journal applied), nothing else in the folders:
    // no temporary file left, no record the listing does not show.
    ck.flush();
    for (const std::string table : {"current", "users1"}) {
      std::vector<std::string> files;
      for (const auto& e : std::filesystem::directory_iterator(dir.path / layout::dir(table))) {
        files.push_back(e.path().filename().string());
      }
      std::sort(files.begin(), files.end());
      CHECK(files == records_of(ck, table));
    }
  }
  fl::FileCheckpoint ck{dir.path};
  Durable<Ev> cur{"current"};
  Durable<Cur> users{"users1"};
  fl::Pipeline p{"schedule", ck, opt};
  declare(p, feed, cur, users);
  CHECK(p.update().batches() == 0);
  CHECK(rows_by_id(cur) == cur_ids);
  CHECK(rows_by_id(users) == users_ids);
  CHECK(cur.sorted_rows() == ref_cur.sorted_rows());
  CHECK(users.sorted_rows() == ref_users.sorted_rows());
  // And it goes on as the reference does.
  for (int s = updates; s < updates + 5; ++s) {
    feed.append(step(s));
    feed_ref.append(step(s));
    p.update();
    ref.update();
  }
  CHECK(cur.sorted_rows() == ref_cur.sorted_rows());
  CHECK(users.sorted_rows() == ref_users.sorted_rows());
}

// --- (e) Damaged records ------------------------------------------------------------------

struct Flagged {
  std::int64_t id = 0;
  std::string s;
  bool ok = false;  // the last column: its byte is the last of a row
  friend bool operator==(const Flagged&, const Flagged&) = default;
  friend auto operator<=>(const Flagged&, const Flagged&) = default;
};
FLOWLIB_SCHEMA(Flagged, id, s, ok);

/// Every file under `dir`, with its bytes.
std::map<std::string, std::string> files_under(const std::filesystem::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) out[e.path().lexically_relative(dir).string()] = flowtest::read_file(e.path());
  }
  return out;
}

TEST_CASE("R-DURABLE-6: a truncated or altered table record is errc::checkpoint_corrupt naming the record; nothing is loaded, nothing in the directory changes, and the repaired record loads again") {
  const memory_dir dir{"flowlib_file_corrupt"};
  fl::MemorySource<Flagged> feed{"feed"};
  const auto declare = [&](fl::Pipeline& p, Durable<Flagged>& t) {
    p.flow("f").from(feed).into(t, fl::Append{"f"});
  };
  fl::PipelineOptions opt;
  opt.snapshot_interval = 2;
  std::vector<Flagged> committed;
  {
    fl::FileCheckpoint ck{dir.path};
    Durable<Flagged> t{"t"};
    fl::Pipeline p{"p", ck, opt};
    declare(p, t);
    for (int s = 0; s < 5; ++s) {
      for (int i = 0; i < 3; ++i) feed.append(Flagged{s * 10 + i, "row " + std::to_string(i), i % 2 == 0});
      p.update();
    }
    committed = t.sorted_rows();
    ck.flush();  // every record in its own file, to be damaged there
  }
  REQUIRE(committed.size() == 15);
  fl::FileCheckpoint ck{dir.path};
  const auto live = layout::read(ck, "t", [&](std::string_view f, std::uint64_t b) {
    return fl::detail::export_committed(ck, f, b);
  });
  REQUIRE(live.live.size() >= 2);  // a snapshot and a delta at least
  REQUIRE(live.live.front().head.what == layout::kind::snapshot);
  REQUIRE(live.live.back().head.what == layout::kind::delta);

  // An open of the pipeline over the damaged directory fails as `why` says,
  // naming `record`, with nothing loaded and nothing changed on disk.
  const auto refused = [&](const std::string& record, const std::string& why) {
    CAPTURE(record);
    CAPTURE(why);
    const auto before = files_under(dir.path);
    {
      fl::FileCheckpoint ck2{dir.path};
      Durable<Flagged> t{"t"};
      fl::Pipeline p{"p", ck2, opt};
      declare(p, t);
      const std::string m = flowtest::message_of(fl::errc::checkpoint_corrupt, [&] { p.update(); });
      CHECK_MESSAGE(flowtest::contains(m, "'" + record + "'"), m);
      CHECK_MESSAGE(flowtest::contains(m, why), m);
      CHECK(t.empty());
      CHECK(t.append_log().end_offset() == 0);
      CHECK(code_of([&] { (void)fl::read_table<Flagged>(ck2, "t"); }) == fl::errc::checkpoint_corrupt);
      std::ostringstream csv;
      CHECK(code_of([&] { fl::export_table_csv<Flagged>(ck2, "t", csv); }) == fl::errc::checkpoint_corrupt);
    }
    CHECK(files_under(dir.path) == before);
  };
  // The record `rec`'s payload changed by `change`, written back with a
  // valid frame (the checkpoint's checksum passes; FileStorage must see it).
  const auto with_payload = [&](const layout::listing::rec& rec, auto change, const std::string& why) {
    const std::string original = *ck.read(rec.path);
    std::string bytes = original;
    change(bytes);
    ck.write(rec.path, bytes);
    refused(rec.path, why);
    ck.write(rec.path, original);
  };
  // The file itself damaged (the checkpoint's frame fails).
  const auto with_file = [&](const layout::listing::rec& rec, auto change, const std::string& why) {
    const auto path = dir.path / rec.path;
    const std::string original = flowtest::read_file(path);
    std::string bytes = original;
    change(bytes);
    flowtest::write_file(path, bytes);
    refused(rec.path, why);
    flowtest::write_file(path, original);
  };
  for (const auto* rec : {&live.live.front(), &live.live.back()}) {
    CAPTURE(rec->path);
    with_file(*rec, [](std::string& b) { b.resize(b.size() / 2); }, "");
    with_file(*rec, [](std::string& b) { b[b.size() / 2] = static_cast<char>(b[b.size() / 2] ^ 0x10); }, "");
    with_payload(*rec, [](std::string& b) { b.pop_back(); }, "nothing was loaded");
    with_payload(*rec, [](std::string& b) { b.resize(b.size() / 2); }, "nothing was loaded");
    with_payload(*rec, [](std::string& b) { b.push_back('\0'); }, "trailing bytes");
    with_payload(*rec, [](std::string& b) { b[0] = 9; }, "format version 9");
    with_payload(*rec, [](std::string& b) { b[1] = 2; }, "neither a delta nor a snapshot");
    // The last row's bool (before the append log's two counts) is 2.
    with_payload(*rec, [](std::string& b) { b[b.size() - 17] = 2; }, "column 'ok'");
    // The id bound (after version, kind, flow name, batch) above 2^32.
    with_payload(
        *rec,
        [](std::string& b) {
          const std::size_t at = 2 + 4 + static_cast<std::size_t>(static_cast<unsigned char>(b[2])) + 8;
          b[at + 5] = 1;
        },
        "id bound");
  }
  // A committed delta without its snapshot: the snapshot removed.
  {
    const std::string original = *ck.read(live.live.front().path);
    ck.remove(live.live.front().path);
    refused(live.live[1].path, "without a committed snapshot");
    ck.write(live.live.front().path, original);
  }
  // Repaired: it loads again, every row.
  {
    fl::FileCheckpoint ck2{dir.path};
    Durable<Flagged> t{"t"};
    fl::Pipeline p{"p", ck2, opt};
    declare(p, t);
    CHECK(p.update().batches() == 0);
    CHECK(t.sorted_rows() == committed);
  }
  // The store attached by hand: a damaged record changes nothing in memory
  // either (the rows it held stay, it stays unattached).
  {
    const std::string original = *ck.read(live.live.back().path);
    std::string bytes = original;
    bytes.pop_back();
    ck.write(live.live.back().path, bytes);
    Durable<Flagged> t{"t"};
    t.store().reserve(2);
    t.store().insert(Flagged{1, "kept", true});
    t.store().insert(Flagged{2, "kept too", false});
    fl::durable_context context;
    context.committed = [&](std::string_view f, std::uint64_t b) { return fl::detail::export_committed(ck, f, b); };
    CHECK(code_of([&] { t.store().attach(ck, t.name(), t.append_log(), context); }) == fl::errc::checkpoint_corrupt);
    CHECK(t.sorted_rows() == std::vector<Flagged>{{1, "kept", true}, {2, "kept too", false}});
    CHECK_FALSE(t.store().attached());
    ck.write(live.live.back().path, original);
  }
}

// --- (f) Full refresh ------------------------------------------------------------------

/// The rows of refresh step `s`: 6 keys, distinct sequences; every fourth
/// negative (quarantined).
std::vector<Ev> refresh_rows(int s) {
  std::vector<Ev> out;
  for (int i = 0; i < 5; ++i) {
    out.push_back({(s * 3 + i) % 6, "r" + std::to_string(s) + "_" + std::to_string(i), (s + i) % 4 == 3 ? -5 : i,
                   s * 10 + i, t0, false});
  }
  return out;
}

/// The refresh scenario's program: "cur" reads the feed, quarantines the
/// negative rows into `rejected`, REPLACE USING into `current`; "all"
/// reads the feed too, quarantines the rows of amount 3 or more into the
/// same `rejected`, appends the others to `raw`. The refresh of `current`
/// leaves "all", `raw` and its rows in `rejected` alone.
template <class Checkpoint>
struct refresh_program {
  Durable<Ev> current{"current"};
  Durable<fl::Quarantined<Ev>> rejected{"rejected"};
  Durable<Ev> raw{"raw"};
  fl::Pipeline pipeline;
  refresh_program(Checkpoint& ck, fl::MemorySource<Ev>& feed) : pipeline("refresh", ck) {
    pipeline.flow("cur")
        .from(feed)
        .quarantine(rejected, fl::expectations(fl::expect_or_quarantine(
                                  "non_negative", [](const Ev& e) { return e.amount >= 0; })))
        .into(current, Current{"cur"});
    pipeline.flow("all")
        .from(feed)
        .quarantine(rejected, fl::expectations(fl::expect_or_quarantine(
                                  "small", [](const Ev& e) { return e.amount < 3; })))
        .into(raw, fl::Append{"all"});
  }
};

/// The rows flow `flow` quarantined into `q`, sorted.
std::vector<Ev> rejected_rows(const Durable<fl::Quarantined<Ev>>& q, const std::string& flow) {
  std::vector<Ev> out;
  for (const auto& r : q.sorted_rows())
    if (r.flow == flow) out.push_back(r.row);
  return sorted(out);
}

/// What the refresh scenario must hold after feeding `rows`: each key's
/// latest non-negative row in `current`, the negative rows quarantined by
/// "cur", the rows of amount 3 or more by "all", the others in `raw`; each
/// once.
struct refresh_expected {
  std::vector<Ev> current, cur_rejected, all_rejected, raw;
  explicit refresh_expected(const std::vector<Ev>& rows) {
    std::vector<Ev> good;
    for (const Ev& e : rows) {
      (e.amount >= 0 ? good : cur_rejected).push_back(e);
      (e.amount < 3 ? raw : all_rejected).push_back(e);
    }
    current = flowtest::final_state<fl::Key<&Ev::id>, fl::Seq<&Ev::seq>>(good);  // R-USING-4
    cur_rejected = sorted(cur_rejected);
    all_rejected = sorted(all_rejected);
    raw = sorted(raw);
  }
  template <class P>
  void check(const P& p) const {
    CHECK(sorted(p.current.sorted_rows()) == current);
    CHECK(rejected_rows(p.rejected, "cur") == cur_rejected);
    CHECK(rejected_rows(p.rejected, "all") == all_rejected);
    CHECK(p.rejected.size() == cur_rejected.size() + all_rejected.size());
    CHECK(sorted(p.raw.sorted_rows()) == raw);
  }
};

TEST_CASE("R-EXACT-5, R-DURABLE-6: a full refresh of a FileStorage table empties it in the records too (its flow's quarantined rows with it, another flow's kept); after a restart the flow reads its source from the start") {
  for (const bool batches : batch_modes) {
    INFO(batch_mode_name(batches));
    const memory_dir dir{"flowlib_file_refresh"};
    fl::MemorySource<Ev> feed{"feed"};
    std::vector<Ev> first, all;
    for (int s = 0; s < 3; ++s) {
      const auto r = refresh_rows(s);
      all.insert(all.end(), r.begin(), r.end());
      if (s < 2) first.insert(first.end(), r.begin(), r.end());
    }
    {
      test_store ck{dir.path, batches};
      refresh_program<test_store> prog{ck, feed};
      for (int s = 0; s < 2; ++s) {
        feed.append(refresh_rows(s));
        prog.pipeline.update();
      }
      const refresh_expected before{first};
      before.check(prog);
      REQUIRE(!before.cur_rejected.empty());
      REQUIRE(!before.all_rejected.empty());
      prog.pipeline.full_refresh(prog.current);
      CHECK(prog.current.empty());
      CHECK(rejected_rows(prog.rejected, "cur").empty());
      CHECK(rejected_rows(prog.rejected, "all") == before.all_rejected);  // another flow's
      CHECK(sorted(prog.raw.sorted_rows()) == before.raw);                 // not refreshed
      config::check_same(ck, prog.current);
      config::check_same(ck, prog.rejected);
      config::check_same(ck, prog.raw);
      CHECK(fl::read_table<Ev>(ck, "current").empty());
      CHECK(ck.list("refreshes").empty());  // finished
    }
    test_store ck{dir.path, batches};
    refresh_program<test_store> prog{ck, feed};
    feed.append(refresh_rows(2));
    const auto s = prog.pipeline.update();
    REQUIRE(s.flow("cur") != nullptr);
    CHECK(s.flow("cur")->input_rows == all.size());  // from the start
    REQUIRE(s.flow("all") != nullptr);
    CHECK(s.flow("all")->input_rows == 5);  // from where it was
    refresh_expected{all}.check(prog);
  }
}

TEST_CASE("R-EXACT-5, R-DURABLE-6: a full refresh cut short by a failing write, removal or commit (at every one of its changes) is finished, or never happened, at the next open: the table and its flow agree, another flow's quarantined rows stay; in the same program and after a restart") {
  std::vector<Ev> all;
  for (int s = 0; s < 3; ++s) {
    const auto r = refresh_rows(s);
    all.insert(all.end(), r.begin(), r.end());
  }
  const refresh_expected want{all};
  for (const bool batches : batch_modes)
  for (const bool restart : {false, true}) {
    INFO(batch_mode_name(batches));
    CAPTURE(restart);
    std::set<bool> outcomes;  // whether the refresh happened
    int cut_short = 0;
    for (std::uint64_t j = 0;; ++j) {
      CAPTURE(j);
      const memory_dir dir{"flowlib_file_refresh_cut"};
      fl::MemorySource<Ev> feed{"feed"};
      auto ck = std::make_unique<test_store>(dir.path, batches);
      auto prog = std::make_unique<refresh_program<test_store>>(*ck, feed);
      for (int s = 0; s < 2; ++s) {
        feed.append(refresh_rows(s));
        prog->pipeline.update();
      }
      ck->fail_at = ck->changes + j;
      bool threw = false;
      try {
        prog->pipeline.full_refresh(prog->current);
      } catch (const fl::error& e) {
        CHECK(e.code() == fl::errc::checkpoint_io);
        threw = true;
      }
      CHECK(threw == ck->failed);
      ck->fail_at.reset();
      if (!threw) {
        CHECK(j > 2);  // a refresh writes and removes several records
        break;
      }
      ++cut_short;
      if (restart) {
        prog.reset();
        ck.reset();
        ck = std::make_unique<test_store>(dir.path, batches);
        prog = std::make_unique<refresh_program<test_store>>(*ck, feed);
      }
      feed.append(refresh_rows(2));
      std::optional<fl::UpdateSummary> s;
      try {
        s = prog->pipeline.update();
      } catch (const fl::error& e) {
        FAIL_CHECK("the update after the refresh was cut short failed: " << std::string(e.what()));
        continue;
      }
      REQUIRE(s->flow("cur") != nullptr);
      const auto read = s->flow("cur")->input_rows;
      CHECK((read == all.size() || read == 5));
      outcomes.insert(read == all.size());
      // The table and its flow agree: each key's latest row, each rejected
      // row once, whether the refresh happened or not.
      want.check(*prog);
      CHECK(ck->list("refreshes").empty());
      config::check_same(*ck, prog->current);
      config::check_same(*ck, prog->rejected);
      config::check_same(*ck, prog->raw);
      // And once more from the directory: the same rows, nothing to do.
      prog.reset();
      refresh_program<test_store> again{*ck, feed};
      CHECK(again.pipeline.update().batches() == 0);
      want.check(again);
    }
    CHECK(cut_short > 2);
    // Journaled, the refresh is one batch: cut short, it never happened.
    // Without batches it is cut before its intent record is written (never
    // happened), and after (finished at the next open).
    CHECK(outcomes == (batches ? std::set<bool>{false} : std::set<bool>{false, true}));
  }
}

TEST_CASE("R-EXACT-5, R-DURABLE-6: a full refresh cut short after it reset its flow's records, of a table holding a direct insert from before the flow's rows, is finished at the next open: the inserted row goes with the rest") {
  const auto a = readings(0, 4), b = readings(10, 4), c = readings(20, 4);
  const std::vector<Reading> direct{{999, 9}};
  const auto all = concat(concat(a, b), c);
  for (const bool batches : batch_modes)
  for (const bool restart : {false, true}) {
    INFO(batch_mode_name(batches));
    CAPTURE(restart);
    std::set<bool> outcomes;  // whether the refresh happened
    for (std::uint64_t j = 0;; ++j) {
      CAPTURE(j);
      const memory_dir dir{"flowlib_file_refresh_intent"};
      fl::MemorySource<Reading> feed{"feed"};
      auto ck = std::make_unique<test_store>(dir.path, batches);
      auto t = std::make_unique<Durable<Reading>>("t");
      auto p = std::make_unique<fl::Pipeline>("intent", *ck);
      const auto declare = [&] { p->flow("f").from(feed).into(*t, fl::Append{"f"}); };
      declare();
      feed.append(a);
      p->update();
      p->full_refresh(*t);   // complete: the table's records start with its image
      fl::dml_insert(*t, direct);  // counts at once, whatever the flow does
      p->update();           // the flow reads a again
      feed.append(b);
      p->update();
      REQUIRE(sorted(t->sorted_rows()) == sorted(concat(direct, concat(a, b))));
      ck->fail_at = ck->changes + j;
      bool threw = false;
      try {
        p->full_refresh(*t);
      } catch (const fl::error& e) {
        CHECK(e.code() == fl::errc::checkpoint_io);
        threw = true;
      }
      ck->fail_at.reset();
      if (!threw) break;
      if (restart) {
        p.reset();
        t.reset();
        ck.reset();
        ck = std::make_unique<test_store>(dir.path, batches);
        t = std::make_unique<Durable<Reading>>("t");
        p = std::make_unique<fl::Pipeline>("intent", *ck);
        declare();
      }
      feed.append(c);
      std::optional<fl::UpdateSummary> s;
      try {
        s = p->update();
      } catch (const fl::error& e) {
        FAIL_CHECK("the update after the refresh was cut short failed: " << std::string(e.what()));
        continue;
      }
      REQUIRE(s->flow("f") != nullptr);
      const auto read = s->flow("f")->input_rows;
      const bool happened = read == all.size();
      CHECK((happened || read == c.size()));
      outcomes.insert(happened);
      // Refreshed: every row of the source once, the direct insert gone.
      // Not: the direct insert kept, every row of the source once.
      CHECK(sorted(t->sorted_rows()) == sorted(happened ? all : concat(direct, all)));
      config::check_same(*ck, *t);
    }
    CHECK(outcomes == (batches ? std::set<bool>{false} : std::set<bool>{false, true}));
  }
}

// --- (g) read_table, export_table_csv ----------------------------------------------------

struct Csv {
  std::int64_t id = 0;
  std::string text;
  std::optional<std::int32_t> maybe;
  bool flag = false;
  double d = 0;
  float f = 0;
  std::chrono::sys_days day{};
  ms_time at{};
  Color color = Color::red;
  std::int8_t small = 0;
  std::optional<std::string> note;
  friend bool operator==(const Csv&, const Csv&) = default;
};
FLOWLIB_SCHEMA(Csv, id, text, maybe, flag, d, f, day, at, color, small, note);

TEST_CASE("R-DURABLE-6: read_table and export_table_csv read the committed rows of FileStorage tables in row id order, skip the record of a batch that did not commit, and quote CSV exactly") {
  using namespace std::chrono;
  const memory_dir dir{"flowlib_file_export"};
  fl::MemorySource<Csv> feed{"feed"};
  feed.append(std::vector<Csv>{
      {1, "plain", 7, true, 0.1, 1.5f, sys_days{year{2024} / 2 / 29}, t0 + milliseconds(123), Color::blue, -5, std::nullopt},
      {2, "a,b", std::nullopt, false, -2.25, -0.0f, sys_days{year{1969} / 12 / 31}, ms_time{milliseconds(-1)}, Color::green, 127, ""},
      {3, "say \"hi\"", -1, true, 1e300, 3.0f, sys_days{year{1} / 1 / 1}, ms_time{}, Color::red, -128, "n,\"q\""},
      {4, "line1\nline2", 0, false, 3.0, 0.25f, sys_days{year{2026} / 1 / 1}, t0, Color::red, 0, "x"},
      {5, "cr\rhere", std::nullopt, false, -0.0, 1e-7f, sys_days{year{2000} / 12 / 1}, t0, Color::red, 1, std::nullopt},
      {6, "", 2147483647, true, 5e-324, 100.0f, sys_days{year{9999} / 12 / 31}, t0, Color::red, 2, "tab\there"},
  });
  const std::string header = "id,text,maybe,flag,d,f,day,at,color,small,note\n";
  const std::string expected = header +
                               "1,plain,7,true,0.1,1.5,2024-02-29,1700000000123,250,-5,\n"
                               "2,\"a,b\",,false,-2.25,-0,1969-12-31,-1,2,127,\n"
                               "3,\"say \"\"hi\"\"\",-1,true,1e+300,3,0001-01-01,0,1,-128,\"n,\"\"q\"\"\"\n"
                               "4,\"line1\nline2\",0,false,3,0.25,2026-01-01,1700000000000,1,0,x\n"
                               "5,\"cr\rhere\",,false,-0,1e-07,2000-12-01,1700000000000,1,1,\n"
                               "6,,2147483647,true,5e-324,100,9999-12-31,1700000000000,1,2,tab\there\n";
  const auto csv_of = [&](const fl::checkpoint_store& ck, const std::string& table) {
    std::ostringstream out;
    fl::export_table_csv<Csv>(ck, table, out);
    return out.str();
  };
  fl::FileCheckpoint ck{dir.path};
  CHECK(csv_of(ck, "csv") == header);  // no records yet: empty
  CHECK(fl::read_table<Csv>(ck, "csv").empty());
  bool fail = false;
  fl::PipelineOptions opt;
  opt.fault_hook = [&](fl::fault_point at, std::string_view, std::uint64_t) {
    if (fail && at == fl::fault_point::before_commit) throw injected("before the commit");
  };
  // The pipeline writes without batches, so that a failed batch's record
  // stays in the directory for the readers to skip (test_store).
  test_store unbatched{ck, false};
  Durable<Csv> t{"csv"};
  fl::Pipeline p{"export", unbatched, opt};
  p.flow("load").from(feed).max_rows_per_batch(4).into(t, fl::Append{"load"});
  p.update();
  REQUIRE(t.size() == 6);
  CHECK(fl::read_table<Csv>(ck, "csv") == in_id_order(t));
  CHECK(csv_of(ck, "csv") == expected);
  {
    const fl::FileCheckpoint other{dir.path};  // another reader of the directory
    CHECK(csv_of(other, "csv") == expected);
  }
  // A batch that fails after its record was written: not read.
  feed.append(Csv{7, "uncommitted", 1, true, 1, 1, sys_days{}, t0, Color::red, 0, std::nullopt});
  fail = true;
  CHECK_THROWS_AS(p.update(), injected);
  CHECK(config::load<Csv>(ck, "csv").stale == 1);  // the record is there
  CHECK(csv_of(ck, "csv") == expected);
  CHECK(fl::read_table<Csv>(ck, "csv") == in_id_order(t));
  CHECK(config::load<Csv>(ck, "csv").stale == 1);  // and left alone by the readers
  // Committed: read.
  fail = false;
  p.update();
  CHECK(csv_of(ck, "csv") == expected + "7,uncommitted,1,true,1,1,1970-01-01,1700000000000,1,0,\n");
  CHECK(fl::read_table<Csv>(ck, "csv") == in_id_order(t));
}

TEST_CASE("R-DURABLE-6: read_table equals every table of the multi-hop pipeline, with erased rows and ids reused, in row id order; a quarantine table's CSV names its bookkeeping columns") {
  const memory_dir dir{"flowlib_file_export_world"};
  fl::MemorySource<Ev> feed{"feed"};
  fl::PipelineOptions opt;
  opt.snapshot_interval = 3;
  program prog{dir.path, feed, true, opt};
  for (int s = 0; s < steps; ++s) {
    feed_step(feed, s);
    prog.pipeline.update();
  }
  const fl::FileCheckpoint reader{dir.path};
  CHECK(fl::read_table<Ev>(reader, "bronze") == in_id_order(prog.w.bronze));
  CHECK(fl::read_table<Ev>(reader, "current") == in_id_order(prog.w.current));
  CHECK(fl::read_table<Cur>(reader, "users1") == in_id_order(prog.w.users1));
  CHECK(fl::read_table<Hist>(reader, "users2") == in_id_order(prog.w.users2));
  CHECK(fl::read_table<Ev>(reader, "log") == in_id_order(prog.w.log));
  CHECK(fl::read_table<fl::Quarantined<Ev>>(reader, "rejected") == in_id_order(prog.w.rejected));
  // SCD1 with deletes leaves holes in its ids.
  CHECK(prog.w.users1.store().id_bound() > prog.w.users1.size());
  std::ostringstream csv;
  fl::export_table_csv<fl::Quarantined<Ev>>(reader, "rejected", csv);
  const std::string text = csv.str();
  CHECK(text.substr(0, text.find('\n')) ==
        "__flowlib_flow,__flowlib_expectation,__flowlib_batch_id,id,name,amount,seq,at,del");
  const auto first = in_id_order(prog.w.rejected).front();
  const std::string line = first.flow + "," + first.expectation + "," + std::to_string(first.batch_id) + "," +
                           std::to_string(first.row.id) + "," + first.row.name + "," +
                           std::to_string(first.row.amount) + "," + std::to_string(first.row.seq) + "," +
                           std::to_string(first.row.at.time_since_epoch().count()) + "," +
                           (first.row.del ? "true" : "false");
  CHECK(text.substr(text.find('\n') + 1, line.size() + 1) == line + "\n");
}

// --- (h) Refusals -----------------------------------------------------------------------

TEST_CASE("R-DURABLE-1: FileStorage over a MemoryCheckpoint is refused (checkpoint_mismatch), by the pipeline and by the store itself; MemoryStorage over a FileCheckpoint stays refused; nothing is written") {
  fl::MemorySource<Ev> feed{"feed"};
  feed_step(feed, 0);
  {
    fl::MemoryCheckpoint mem;
    Durable<Ev> t{"t"};
    fl::Pipeline p{"p", mem};
    p.flow("f").from(feed).into(t, fl::Append{"f"});
    const std::string m = flowtest::message_of(fl::errc::checkpoint_mismatch, [&] { p.update(); });
    CHECK(flowtest::contains(m, "CHECKPOINT_MISMATCH"));
    CHECK(code_of([&] { p.update(); }) == fl::errc::checkpoint_mismatch);
    CHECK(t.empty());
    CHECK_FALSE(t.store().attached());
  }
  {
    fl::MemoryCheckpoint mem;
    Durable<Ev> t{"t"};
    fl::durable_context context;
    context.committed = [](std::string_view, std::uint64_t) { return true; };
    const std::string m = flowtest::error_of([&] { t.store().attach(mem, t.name(), t.append_log(), context); }).what();
    CHECK(flowtest::contains(m, "CHECKPOINT_MISMATCH"));
    CHECK(flowtest::contains(m, "FileCheckpoint"));
    CHECK_FALSE(t.store().attached());
    CHECK(mem.list("").empty());
  }
  {
    const memory_dir dir{"flowlib_file_refused"};
    fl::FileCheckpoint ck{dir.path};
    fl::StreamingTable<Ev> t{"t"};  // MemoryStorage
    fl::Pipeline p{"p", ck};
    p.flow("f").from(feed).into(t, fl::Append{"f"});
    CHECK(code_of([&] { p.update(); }) == fl::errc::checkpoint_mismatch);
    CHECK(t.empty());
    CHECK(ck.list("").empty());
  }
  {
    // A pipeline with a FileStorage table and a MemoryStorage one.
    const memory_dir dir{"flowlib_file_refused_mixed"};
    fl::FileCheckpoint ck{dir.path};
    Durable<Ev> a{"a"};
    fl::StreamingTable<Ev> b{"b"};
    fl::Pipeline p{"p", ck};
    p.flow("fa").from(feed).into(a, fl::Append{"fa"});
    p.flow("fb").from(feed).into(b, fl::Append{"fb"});
    CHECK(code_of([&] { p.update(); }) == fl::errc::checkpoint_mismatch);
    CHECK(a.empty());
    CHECK(b.empty());
    CHECK(ck.list("").empty());
  }
}

// --- (i) FileStorage over an SqliteCheckpoint --------------------------------------------

TEST_CASE("R-DURABLE-1, R-DURABLE-6: FileStorage over an SqliteCheckpoint keeps its records in the database, survives reopening, and a failed batch leaves no record there") {
  const auto expected = uninterrupted();
  const flowtest::temp_db db{"flowlib_file_over_sqlite"};
  fl::MemorySource<Ev> feed{"feed"};
  const fl::SqliteOptions fast = flowtest::sqlite_durable::options();
  int batches = 0;
  fl::PipelineOptions opt;
  opt.snapshot_interval = 2;
  opt.fault_hook = [&](fl::fault_point at, std::string_view, std::uint64_t) {
    if (at == fl::fault_point::before_commit && ++batches % 5 == 0) throw injected("before the commit");
  };
  int failures = 0;
  for (int s = 0; s < steps; ++s) {
    feed_step(feed, s);
    fl::SqliteCheckpoint ck{db.path, fast};
    world_program<fl::FileStorage> prog{ck, feed, opt};
    const auto& w = prog.w;
    for (;;) {
      try {
        prog.pipeline.update();
        break;
      } catch (const injected&) {
        ++failures;
        // The transaction was rolled back with the batch: no record of it.
        w.for_each_table([&](const auto& t) {
          CAPTURE(t.name());
          using Row = typename std::remove_cvref_t<decltype(t)>::row_type;
          CHECK(config::load<Row>(ck, t.name()).stale == 0);
        });
        check_stored(ck, w);
      }
    }
    check_stored(ck, w);
    CHECK(ck.list("tables").size() == 6);
  }
  CHECK(failures > 3);
  fl::SqliteCheckpoint ck{db.path, fast};
  world_program<fl::FileStorage> prog{ck, feed};
  CHECK(prog.pipeline.update().batches() == 0);
  CHECK(prog.w.rows() == expected);
  CHECK(fl::read_table<Cur>(ck, "users1") == in_id_order(prog.w.users1));
}

// --- (j) Unattached ------------------------------------------------------------------------

TEST_CASE("R-DURABLE-6, R-WHERE-5: an unattached FileStorage store is the memory store: the same ids, rows, journals and rollbacks, and it writes nothing; a direct insert is refused until a pipeline attaches it, whose checkpoint's rows then replace what it held") {
  fl::detail::memory_row_store<Ev> mem;
  fl::detail::file_row_store<Ev> file;
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> pct(0, 99);
  const auto same = [&] {
    std::map<fl::row_id, Ev> a, b;
    mem.for_each_row([&](fl::row_id id, const Ev& r) { a.emplace(id, r); });
    file.for_each_row([&](fl::row_id id, const Ev& r) { b.emplace(id, r); });
    CHECK(a == b);
    CHECK(mem.size() == file.size());
    CHECK(mem.id_bound() == file.id_bound());
  };
  std::vector<fl::row_id> live;
  for (int round = 0; round < 200; ++round) {
    const bool journal = pct(rng) < 60;
    if (journal) {
      mem.begin_journal();
      file.begin_journal();
    }
    std::vector<fl::row_id> kept = live;
    for (int op = 0; op < 6; ++op) {
      const int what = pct(rng);
      if (what < 50 || live.empty()) {
        const Ev e{round, std::string("r").append(std::to_string(op)), op, round, t0, false};
        mem.reserve(1);
        file.reserve(1);
        const auto a = mem.insert(Ev(e));
        const auto b = file.insert(Ev(e));
        CHECK(a == b);
        live.push_back(a);
      } else if (what < 80) {
        const std::size_t i = static_cast<std::size_t>(pct(rng)) % live.size();
        mem.erase(live[i]);
        file.erase(live[i]);
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
      } else {
        const std::size_t i = static_cast<std::size_t>(pct(rng)) % live.size();
        mem.assign(live[i], Ev{-1, "assigned", op, round, t0, true});
        file.assign(live[i], Ev{-1, "assigned", op, round, t0, true});
      }
    }
    if (journal) {
      file.write_changes(fl::durable_writer{"f", 1});  // unattached: nothing
      if (pct(rng) < 50) {
        mem.rollback_journal();
        file.rollback_journal();
        live = kept;
      } else {
        mem.commit_journal();
        file.commit_journal();
      }
    } else if (pct(rng) < 5) {
      mem.clear();
      file.clear();
      live.clear();
    }
    same();
  }
  CHECK_FALSE(file.attached());

  // In a table: a direct insert before the pipeline attached it is refused.
  const memory_dir dir{"flowlib_file_unattached"};
  fl::MemorySource<Ev> feed{"feed"};
  feed.append(Ev{1, "from the feed", 1, 1, t0, false});
  {
    fl::FileCheckpoint ck{dir.path};
    Durable<Ev> t{"t"};
    fl::Pipeline p{"p", ck};
    p.flow("f").from(feed).into(t, fl::Append{"f"});
    p.update();
  }
  fl::FileCheckpoint ck{dir.path};
  Durable<Ev> t{"t"};
  t.store().reserve(1);
  t.store().insert(Ev{9, "held before the pipeline opened", 9, 9, t0, false});
  CHECK(code_of([&] { fl::dml_insert(t, std::vector<Ev>{Ev{2, "direct", 2, 2, t0, false}}); }) ==
        fl::errc::invalid_argument);
  CHECK(t.size() == 1);
  CHECK(ck.list(layout::dir("t")).size() == 1);  // nothing written
  fl::Pipeline p{"p", ck};
  p.flow("f").from(feed).into(t, fl::Append{"f"});
  CHECK(p.update().batches() == 0);
  // The checkpoint is the truth: its rows replace what the table held.
  CHECK(t.sorted_rows() == std::vector<Ev>{Ev{1, "from the feed", 1, 1, t0, false}});
  CHECK(t.store().attached());
}

// --- Direct inserts that fail ------------------------------------------------------------

TEST_CASE("R-WHERE-5, R-DURABLE-4, R-DURABLE-6: a direct insert into a FileStorage table whose write fails changes nothing, in memory or in the records; the next one is written at once, as one record of its own, and survives a failed batch and a restart") {
  for (const bool batches : batch_modes) {
  INFO(batch_mode_name(batches));
  const memory_dir dir{"flowlib_file_dml_fail"};
  fl::MemorySource<Reading> feed{"feed"};
  feed.append(readings(0, 4));
  bool fail_batch = false;
  fl::PipelineOptions opt;
  opt.fault_hook = [&](fl::fault_point at, std::string_view, std::uint64_t) {
    if (fail_batch && at == fl::fault_point::before_commit) throw injected("before the commit");
  };
  const std::vector<Reading> direct{{1000, 1}, {1001, 2}};
  std::vector<Reading> committed;
  {
    test_store ck{dir.path, batches};
    Durable<Reading> t{"t"};
    fl::Pipeline p{"p", ck, opt};
    p.flow("f").from(feed).into(t, fl::Append{"f"});
    p.update();
    committed = t.sorted_rows();
    const auto files = files_under(dir.path);
    const std::size_t records = records_of(ck, "t").size();
    // Every change a direct insert makes fails in turn.
    for (std::uint64_t j = 0;; ++j) {
      CAPTURE(j);
      ck.fail_at = ck.changes + j;
      ck.failed = false;
      const auto code = code_of([&] { fl::dml_insert(t, direct); });
      ck.fail_at.reset();
      if (!ck.failed) {
        CHECK(code == fl::errc{});
        break;
      }
      CHECK(code == fl::errc::checkpoint_io);
      CHECK(t.sorted_rows() == committed);
      CHECK(files_under(dir.path) == files);
      config::check_same(ck, t);
    }
    committed = sorted(concat(committed, direct));
    CHECK(t.sorted_rows() == committed);
    config::check_same(ck, t);
    CHECK(records_of(ck, "t").size() == records + 1);
    // The next batch fails after writing its record; the insert stays.
    feed.append(readings(10, 3));
    fail_batch = true;
    CHECK_THROWS_AS(p.update(), injected);
    CHECK(t.sorted_rows() == committed);
    config::check_same(ck, t);
  }
  fail_batch = false;
  fl::FileCheckpoint ck{dir.path};
  Durable<Reading> t{"t"};
  fl::Pipeline p{"p", ck, opt};
  p.flow("f").from(feed).into(t, fl::Append{"f"});
  p.update();
  CHECK(t.sorted_rows() == sorted(concat(committed, readings(10, 3))));
  config::check_same(ck, t);
  }
}

}  // namespace storage_file_file
