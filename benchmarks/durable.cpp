// Durable storage side by side: what a whole run of micro-batches costs when
// its tables and checkpoint are in memory, in files (FileStorage +
// FileCheckpoint), in SQLite (SqliteStorage + SqliteCheckpoint), and in two
// hand-written SQLite loaders doing the same work.
//
// What is measured (docs/benchmarks/durable.md has the results):
//
//   run/<flow>/<system>: rows applied per wall-clock second
//   (`items_per_second`) and wall nanoseconds per row (counter `ns_per_row`)
//   of one whole run, from a fresh empty store in a fresh temporary
//   directory: 50 batches of 1e4 rows each (5e5 rows), keys uniform over
//   1e5, sequences rising forever across the run; rows are id, seq, two
//   int64 and a short string (as benchmarks/sqlite.cpp). Every system gets
//   the same rows and ends with the same table. Each batch is one
//   transaction (one commit) that also records the batch's position in the
//   input, which is what exactly-once needs. Flows (the same for every
//   system):
//     replace_using  REPLACE USING on id, sequenced by seq;
//     scd1           AUTO CDC SCD1 on id by seq (seq not stored);
//     scd2           AUTO CDC SCD2 on id by seq (every version kept, with
//                    __START_AT / __END_AT).
//   Systems:
//     memory    a Pipeline on MemoryStorage + MemoryCheckpoint (no
//               durability: the reference for what the rest costs);
//     file      a Pipeline on FileStorage + FileCheckpoint in the temporary
//               directory (a batch's table record, state and commit are
//               durable when update() returns; checkpoint/file.hpp says
//               how);
//     sqlite    a Pipeline on SqliteStorage + SqliteCheckpoint in a file in
//               the temporary directory, default SqliteOptions (WAL,
//               synchronous = full);
//     hand      a hand-written SQLite loop, WAL, synchronous = FULL: BEGIN
//               IMMEDIATE, one prepared statement per row, the batch's
//               input offset written to a progress table, COMMIT. Per row:
//                 replace_using, scd1  INSERT ... ON CONFLICT(id) DO UPDATE
//                                      ... WHERE excluded.seq > target.seq
//                                      (id is the primary key);
//                 scd2                 UPDATE target SET __END_AT = seq
//                                      WHERE id = ? AND __END_AT IS NULL (a
//                                      partial unique index on the current
//                                      versions), then INSERT the version;
//     hand_set  set-based SQL per batch, WAL, synchronous = FULL,
//               temp_store = MEMORY: BEGIN IMMEDIATE, the batch's rows into
//               a temporary table (one prepared INSERT per row), then
//                 replace_using, scd1  INSERT INTO target SELECT ... FROM
//                                      batch ON CONFLICT(id) DO UPDATE ...
//                                      WHERE excluded.seq > target.seq;
//                 scd2                 UPDATE target ... FROM (the batch's
//                                      first seq per id) closing the current
//                                      versions, then INSERT INTO target
//                                      SELECT ..., lead(seq) OVER (PARTITION
//                                      BY id ORDER BY seq) FROM batch;
//               the progress row, COMMIT.
//   Timed: the 50 batches (for the pipelines, one update() each, the first
//   of which opens the pipeline: attaches the table, creates its files or
//   SQL tables). Not timed: creating the directory, the checkpoint object,
//   the table and the pipeline declaration or the hand loop's connection,
//   schema and prepared statements; closing them and removing the
//   directory. Closing is reported apart, as the counter `close_ms` (wall
//   milliseconds per run): work a store defers past its last commit is done
//   there (SQLite's checkpoint of the WAL into the database on the last
//   close, FileCheckpoint's flush of its journal into the record files;
//   each batch was durable at its commit either way). The input rows
//   are generated once, before any benchmark, and are read by the pipelines
//   through a MemorySource behind a gate that shows one batch per update().
//   Wall time, not CPU time: a commit waits for fsync.
//
// FLOWLIB_BENCH_SMOKE=1: tiny sizes (1e3 keys, 5 batches of 200 rows);
// before the benchmarks every system runs every flow once, and each must end
// with the same final table as a reference model computed from the input:
// the SQLite files (the SqliteStorage pipeline's and both hand loops') are
// read back with a query, the FileStorage table with flowlib::read_table
// from a new FileCheckpoint over its directory, the memory table from
// memory; the two durable pipelines' tables must also be right in memory
// after the run and as a restarted pipeline loads them from the files (an
// update() that finds nothing new). Every update() must run exactly one
// batch of the batch's rows (checked in every mode). The program exits 1
// otherwise.
#include <flowlib/checkpoint/file.hpp>
#include <flowlib/checkpoint/memory.hpp>
#include <flowlib/checkpoint/sqlite.hpp>
#include <flowlib/flowlib.hpp>
#include <flowlib/pipeline.hpp>
#include <flowlib/source/memory.hpp>
#include <flowlib/runtime/export.hpp>
#include <flowlib/storage/file.hpp>
#include <flowlib/storage/sqlite.hpp>

#include "support/pipeline_rig.hpp"
#include "support/smoke.hpp"

#include <benchmark/benchmark.h>
#include <malloc.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/vfs.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

namespace fl = flowlib;
namespace fb = flowlib_bench;

namespace bench_durable {

// --- Rows and flows (as benchmarks/sqlite.cpp) --------------------------------------------

struct Row {
  std::int64_t id;
  std::int64_t seq;
  std::int64_t a;
  std::int64_t b;
  std::string tag;
};
FLOWLIB_SCHEMA(Row, id, seq, a, b, tag);

struct Row1 {
  std::int64_t id;
  std::int64_t a;
  std::int64_t b;
  std::string tag;
};
FLOWLIB_SCHEMA(Row1, id, a, b, tag);

struct Row2 {
  std::int64_t id;
  std::int64_t a;
  std::int64_t b;
  std::string tag;
  std::int64_t start_at;
  std::optional<std::int64_t> end_at;
};
FLOWLIB_SCHEMA(Row2, id, a, b, tag, (start_at, "__START_AT"), (end_at, "__END_AT"));

using Replace = fl::ReplaceUsing<fl::Key<&Row::id>, fl::Seq<&Row::seq>>;
using Scd1 = fl::AutoCdc<fl::Key<&Row::id>, fl::Seq<&Row::seq>, fl::Scd1, fl::except_column_list<"seq">>;
using Scd2 = fl::AutoCdc<fl::Key<&Row::id>, fl::Seq<&Row::seq>, fl::Scd2<>, fl::except_column_list<"seq">>;

enum class flow_kind { replace_using, scd1, scd2 };
constexpr std::array<flow_kind, 3> all_flows{flow_kind::replace_using, flow_kind::scd1, flow_kind::scd2};
const char* name(flow_kind k) {
  switch (k) {
    case flow_kind::replace_using: return "replace_using";
    case flow_kind::scd1: return "scd1";
    case flow_kind::scd2: return "scd2";
  }
  return "?";
}

enum class system_kind { memory, file, sqlite, hand, hand_set };
constexpr std::array<system_kind, 5> all_systems{system_kind::memory, system_kind::file, system_kind::sqlite,
                                                system_kind::hand, system_kind::hand_set};
const char* name(system_kind s) {
  switch (s) {
    case system_kind::memory: return "memory";
    case system_kind::file: return "file";
    case system_kind::sqlite: return "sqlite";
    case system_kind::hand: return "hand";
    case system_kind::hand_set: return "hand_set";
  }
  return "?";
}

// --- The workload ---------------------------------------------------------------------------

std::int64_t key_space() { return fb::smoke_mode() ? 1000 : 100000; }
std::size_t batch_count() { return fb::smoke_mode() ? 5 : 50; }
std::size_t batch_rows() { return fb::smoke_mode() ? 200 : 10000; }
std::int64_t total_rows() { return static_cast<std::int64_t>(batch_count() * batch_rows()); }

/// The run's input, generated once: batch i is rows [i * batch_rows(),
/// (i + 1) * batch_rows()) of `rows`; `source` holds the same rows (the
/// pipelines read it through a gate, one batch per update()).
struct workload {
  std::vector<Row> rows;
  fl::MemorySource<Row> source{"source"};
  workload() {
    std::mt19937_64 g{0x5eedu};
    std::uniform_int_distribution<std::int64_t> key(0, key_space() - 1);
    static constexpr std::array<const char*, 5> tags = {"ios", "android", "web", "tv", "desktop"};
    const auto n = static_cast<std::size_t>(total_rows());
    rows.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
      const std::int64_t id = key(g);
      const auto a = static_cast<std::int64_t>(g() >> 1);
      const auto b = static_cast<std::int64_t>(g() % 1000);
      rows.push_back(Row{id, static_cast<std::int64_t>(i) + 1, a, b, tags[g() % tags.size()]});
    }
    source.append(rows);
  }
  const Row* batch_begin(std::size_t i) const { return rows.data() + i * batch_rows(); }
  const Row* batch_end(std::size_t i) const { return batch_begin(i) + batch_rows(); }
};

workload& the_workload() {
  static workload w;
  return w;
}

/// A temporary directory (mkdtemp under the system's temporary directory),
/// removed with everything in it on destruction.
class temp_dir {
 public:
  temp_dir() {
    std::string t = (std::filesystem::temp_directory_path() / "flowlib_bench_durable_XXXXXX").string();
    fb::require(::mkdtemp(t.data()) != nullptr, "mkdtemp failed in " + t);
    path_ = t;
  }
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  const std::filesystem::path& path() const noexcept { return path_; }

 private:
  std::filesystem::path path_;
};

// --- Final tables as text lines (the fingerprint) -------------------------------------------

using lines = std::vector<std::string>;

std::string text(std::int64_t v) { return std::to_string(v); }
std::string text(const std::optional<std::int64_t>& v) { return v ? std::to_string(*v) : "NULL"; }

std::string line(const Row& r) { return text(r.id) + "|" + text(r.seq) + "|" + text(r.a) + "|" + text(r.b) + "|" + r.tag + "|"; }
std::string line(const Row1& r) { return text(r.id) + "|" + text(r.a) + "|" + text(r.b) + "|" + r.tag + "|"; }
std::string line(const Row2& r) {
  return text(r.id) + "|" + text(r.a) + "|" + text(r.b) + "|" + r.tag + "|" + text(r.start_at) + "|" + text(r.end_at) + "|";
}

template <class Range>
lines lines_of(Range&& rows) {  // a filter view is not const-iterable
  lines out;
  for (const auto& r : rows) out.push_back(line(r));
  std::sort(out.begin(), out.end());
  return out;
}

/// The query reading a flow's final table back from any of the SQLite
/// files (the SqliteStorage pipeline's and the hand loops' tables have these
/// columns under these names).
const char* final_table_query(flow_kind k) {
  switch (k) {
    case flow_kind::replace_using: return "SELECT id, seq, a, b, tag FROM target";
    case flow_kind::scd1: return "SELECT id, a, b, tag FROM target";
    case flow_kind::scd2: return "SELECT id, a, b, tag, __START_AT, __END_AT FROM target";
  }
  return "";
}

lines lines_of_sqlite(const std::filesystem::path& db_path, flow_kind k) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK)
    fb::require(false, "smoke: cannot open " + db_path.string());
  sqlite3_stmt* s = nullptr;
  if (sqlite3_prepare_v2(db, final_table_query(k), -1, &s, nullptr) != SQLITE_OK)
    fb::require(false, std::string("smoke: ") + sqlite3_errmsg(db));
  lines out;
  while (sqlite3_step(s) == SQLITE_ROW) {
    std::string l;
    for (int c = 0; c < sqlite3_column_count(s); ++c) {
      const auto* t = sqlite3_column_text(s, c);
      l += (t == nullptr ? std::string("NULL") : std::string(reinterpret_cast<const char*>(t))) + "|";
    }
    out.push_back(std::move(l));
  }
  sqlite3_finalize(s);
  sqlite3_close(db);
  std::sort(out.begin(), out.end());
  return out;
}

/// The final table computed from the input (REPLACE USING: each key's row
/// of highest seq; SCD1 the same without seq; SCD2: per key, each change in
/// seq order closes the current version at its seq and opens one, unless
/// its values equal the current version's).
lines reference_lines(flow_kind k) {
  const workload& w = the_workload();
  if (k == flow_kind::scd2) {
    std::map<std::int64_t, std::vector<Row2>> versions;
    for (const Row& r : w.rows) {  // rows are in seq order
      auto& v = versions[r.id];
      if (!v.empty() && !v.back().end_at) {
        if (v.back().a == r.a && v.back().b == r.b && v.back().tag == r.tag) continue;
        v.back().end_at = r.seq;
      }
      v.push_back(Row2{r.id, r.a, r.b, r.tag, r.seq, std::nullopt});
    }
    lines out;
    for (const auto& [id, v] : versions)
      for (const Row2& r : v) out.push_back(line(r));
    std::sort(out.begin(), out.end());
    return out;
  }
  std::map<std::int64_t, const Row*> last;
  for (const Row& r : w.rows) last[r.id] = &r;
  lines out;
  for (const auto& [id, r] : last)
    out.push_back(k == flow_kind::replace_using ? line(*r) : line(Row1{r->id, r->a, r->b, r->tag}));
  std::sort(out.begin(), out.end());
  return out;
}

/// FNV-1a over the lines (printed in smoke mode, to compare by eye).
std::uint64_t fingerprint(const lines& ls) {
  std::uint64_t h = 1469598103934665603ull;
  for (const auto& l : ls)
    for (char c : l + "\n") h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return h;
}

// --- The systems ----------------------------------------------------------------------------

/// One system's run: built before timing (untimed), then apply(i) for each
/// batch i in order (timed), then destroyed (untimed).
struct rig {
  virtual ~rig() = default;
  virtual void apply(std::size_t batch) = 0;
  /// The final table as the process holds it (the pipelines' memory
  /// working set); empty for the hand loops, which hold nothing.
  virtual lines in_memory() const { return {}; }
};

template <flow_kind K, class S>
struct target_of {
  using type = fl::StreamingTable<Row, S>;
};
template <class S>
struct target_of<flow_kind::scd1, S> {
  using type = fl::StreamingTable<Row1, S>;
};
template <class S>
struct target_of<flow_kind::scd2, S> {
  using type = fl::StreamingTable<Row2, S>;
};

std::filesystem::path sqlite_file(const std::filesystem::path& dir) { return dir / "run.db"; }

template <flow_kind K, class Storage, class Checkpoint>
struct pipeline_rig final : rig {
  std::unique_ptr<Checkpoint> checkpoint;
  fb::gated_source<fl::MemorySource<Row>> gate{the_workload().source};
  typename target_of<K, Storage>::type target{"target"};
  std::unique_ptr<fl::Pipeline> pipeline;  // declared last: destroyed first

  explicit pipeline_rig(const std::filesystem::path& dir) {
    if constexpr (std::is_same_v<Checkpoint, fl::SqliteCheckpoint>) {
      checkpoint = std::make_unique<Checkpoint>(sqlite_file(dir).string());
    } else if constexpr (std::is_same_v<Checkpoint, fl::FileCheckpoint>) {
      checkpoint = std::make_unique<Checkpoint>(dir / "checkpoint");
    } else {
      checkpoint = std::make_unique<Checkpoint>();
    }
    pipeline = std::make_unique<fl::Pipeline>("durable", *checkpoint);
    auto f = pipeline->flow("target").from(gate);
    if constexpr (K == flow_kind::replace_using) std::move(f).into(target, Replace{"target"});
    if constexpr (K == flow_kind::scd1) std::move(f).into(target, Scd1{"target"});
    if constexpr (K == flow_kind::scd2) std::move(f).into(target, Scd2{"target"});
  }
  /// Opens the pipeline over a checkpoint holding the whole run: an
  /// update() that must find nothing new (it attaches and loads the table).
  void reopen() {
    gate.open(static_cast<std::uint64_t>(total_rows()));
    const auto s = pipeline->update();
    fb::require(s.batches() == 0, "smoke: a pipeline reopened after the run must find nothing new");
  }
  void apply(std::size_t) override {
    gate.open(batch_rows());
    const auto s = pipeline->update();
    fb::require(s.batches() == 1 && s.input_rows() == batch_rows(),
                "each update() must run exactly one micro-batch of the batch's rows");
  }
  lines in_memory() const override { return lines_of(target.rows()); }
};

/// The SQLite connection both hand loops use: WAL, synchronous = FULL (as
/// SqliteOptions' default), the progress table and the target table.
class sql_rig : public rig {
 public:
  sql_rig(flow_kind k, const std::filesystem::path& path) : kind_(k) {
    check(sqlite3_open(path.c_str(), &db_), "open");
    exec("PRAGMA journal_mode=WAL");
    exec("PRAGMA synchronous=FULL");
    exec("CREATE TABLE progress(k TEXT PRIMARY KEY, offset INTEGER)");
    if (k == flow_kind::scd2) {
      exec("CREATE TABLE target(id INTEGER, a INTEGER, b INTEGER, tag TEXT, __START_AT INTEGER, "
           "__END_AT INTEGER)");
      exec("CREATE UNIQUE INDEX target_current ON target(id) WHERE __END_AT IS NULL");
    } else {
      exec("CREATE TABLE target(id INTEGER PRIMARY KEY, seq INTEGER, a INTEGER, b INTEGER, tag TEXT)");
    }
    progress_ = prepare("INSERT OR REPLACE INTO progress(k, offset) VALUES('source', ?1)");
  }
  ~sql_rig() override {
    for (sqlite3_stmt* s : statements_) sqlite3_finalize(s);
    sqlite3_close(db_);
  }
  sql_rig(const sql_rig&) = delete;
  sql_rig& operator=(const sql_rig&) = delete;

 protected:
  void check(int rc, const char* what) {
    if (rc != SQLITE_OK && rc != SQLITE_DONE && rc != SQLITE_ROW)
      fb::require(false, std::string("sqlite ") + what + ": " + sqlite3_errmsg(db_));
  }
  void exec(const char* sql) { check(sqlite3_exec(db_, sql, nullptr, nullptr, nullptr), sql); }
  sqlite3_stmt* prepare(const char* sql) {
    sqlite3_stmt* s = nullptr;
    check(sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &s, nullptr), sql);
    statements_.push_back(s);
    return s;
  }
  void step(sqlite3_stmt* s) {
    check(sqlite3_step(s), "step");
    sqlite3_reset(s);
  }
  /// Binds ?1..?5 to id, seq, a, b, tag.
  static void bind_row(sqlite3_stmt* s, const Row& r) {
    sqlite3_bind_int64(s, 1, r.id);
    sqlite3_bind_int64(s, 2, r.seq);
    sqlite3_bind_int64(s, 3, r.a);
    sqlite3_bind_int64(s, 4, r.b);
    sqlite3_bind_text(s, 5, r.tag.data(), static_cast<int>(r.tag.size()), SQLITE_STATIC);
  }
  /// The batch's position: the input offset after its last row.
  void record_progress(std::size_t batch) {
    sqlite3_bind_int64(progress_, 1, static_cast<std::int64_t>((batch + 1) * batch_rows()));
    step(progress_);
  }

  flow_kind kind_;

 private:
  sqlite3* db_ = nullptr;
  sqlite3_stmt* progress_ = nullptr;
  std::vector<sqlite3_stmt*> statements_;
};

/// The row-at-a-time loop (benchmarks/sqlite.cpp's hand baseline).
class hand_rig final : public sql_rig {
 public:
  hand_rig(flow_kind k, const std::filesystem::path& path) : sql_rig(k, path) {
    if (k == flow_kind::scd2) {
      close_ = prepare("UPDATE target SET __END_AT = ?2 WHERE id = ?1 AND __END_AT IS NULL");
      row_ = prepare("INSERT INTO target(id, a, b, tag, __START_AT, __END_AT) VALUES(?1, ?3, ?4, ?5, ?2, NULL)");
    } else {
      row_ = prepare(
          "INSERT INTO target(id, seq, a, b, tag) VALUES(?1, ?2, ?3, ?4, ?5) ON CONFLICT(id) DO UPDATE "
          "SET seq = excluded.seq, a = excluded.a, b = excluded.b, tag = excluded.tag "
          "WHERE excluded.seq > target.seq");
    }
  }
  void apply(std::size_t batch) override {
    const workload& w = the_workload();
    exec("BEGIN IMMEDIATE");
    for (const Row* r = w.batch_begin(batch); r != w.batch_end(batch); ++r) {
      if (close_ != nullptr) {
        sqlite3_bind_int64(close_, 1, r->id);
        sqlite3_bind_int64(close_, 2, r->seq);
        step(close_);
      }
      bind_row(row_, *r);
      step(row_);
    }
    record_progress(batch);
    exec("COMMIT");
  }

 private:
  sqlite3_stmt* row_ = nullptr;
  sqlite3_stmt* close_ = nullptr;
};

/// Set-based SQL per batch: the rows into a temporary table, then one or two
/// statements over it.
class hand_set_rig final : public sql_rig {
 public:
  hand_set_rig(flow_kind k, const std::filesystem::path& path) : sql_rig(k, path) {
    exec("PRAGMA temp_store=MEMORY");
    exec("CREATE TEMP TABLE batch(id INTEGER, seq INTEGER, a INTEGER, b INTEGER, tag TEXT)");
    clear_ = prepare("DELETE FROM temp.batch");
    stage_ = prepare("INSERT INTO temp.batch(id, seq, a, b, tag) VALUES(?1, ?2, ?3, ?4, ?5)");
    if (k == flow_kind::scd2) {
      // Close each key's current version at the batch's first seq for it;
      // then insert every version of the batch, each closed at the next seq
      // of its key within the batch (the last one open).
      apply_.push_back(prepare(
          "UPDATE target SET __END_AT = m.first_seq "
          "FROM (SELECT id, min(seq) AS first_seq FROM temp.batch GROUP BY id) AS m "
          "WHERE target.id = m.id AND target.__END_AT IS NULL"));
      apply_.push_back(prepare(
          "INSERT INTO target(id, a, b, tag, __START_AT, __END_AT) "
          "SELECT id, a, b, tag, seq, lead(seq) OVER (PARTITION BY id ORDER BY seq) FROM temp.batch"));
    } else {
      // Several rows of one key in a batch: the one of highest seq wins
      // whatever the order, by the WHERE of the update.
      apply_.push_back(prepare(
          "INSERT INTO target(id, seq, a, b, tag) SELECT id, seq, a, b, tag FROM temp.batch WHERE true "
          "ON CONFLICT(id) DO UPDATE SET seq = excluded.seq, a = excluded.a, b = excluded.b, "
          "tag = excluded.tag WHERE excluded.seq > target.seq"));
    }
  }
  void apply(std::size_t batch) override {
    const workload& w = the_workload();
    exec("BEGIN IMMEDIATE");
    step(clear_);
    for (const Row* r = w.batch_begin(batch); r != w.batch_end(batch); ++r) {
      bind_row(stage_, *r);
      step(stage_);
    }
    for (sqlite3_stmt* s : apply_) step(s);
    record_progress(batch);
    exec("COMMIT");
  }

 private:
  sqlite3_stmt* clear_ = nullptr;
  sqlite3_stmt* stage_ = nullptr;
  std::vector<sqlite3_stmt*> apply_;
};

template <flow_kind K>
std::unique_ptr<rig> make_rig_of(system_kind s, const std::filesystem::path& dir) {
  switch (s) {
    case system_kind::memory:
      return std::make_unique<pipeline_rig<K, fl::MemoryStorage, fl::MemoryCheckpoint>>(dir);
    case system_kind::file: return std::make_unique<pipeline_rig<K, fl::FileStorage, fl::FileCheckpoint>>(dir);
    case system_kind::sqlite:
      return std::make_unique<pipeline_rig<K, fl::SqliteStorage, fl::SqliteCheckpoint>>(dir);
    case system_kind::hand: return std::make_unique<hand_rig>(K, sqlite_file(dir));
    case system_kind::hand_set: return std::make_unique<hand_set_rig>(K, sqlite_file(dir));
  }
  return nullptr;
}

std::unique_ptr<rig> make_rig(flow_kind k, system_kind s, const std::filesystem::path& dir) {
  switch (k) {
    case flow_kind::replace_using: return make_rig_of<flow_kind::replace_using>(s, dir);
    case flow_kind::scd1: return make_rig_of<flow_kind::scd1>(s, dir);
    case flow_kind::scd2: return make_rig_of<flow_kind::scd2>(s, dir);
  }
  return nullptr;
}

// --- The benchmark --------------------------------------------------------------------------

void run_benchmark(benchmark::State& state, flow_kind k, system_kind s) {
  the_workload();  // generated before the first timed run
  std::chrono::steady_clock::duration timed{};  // the timed parts, for ns_per_row
  std::chrono::steady_clock::duration closing{};  // untimed, reported apart: close_ms
  for (auto _ : state) {
    state.PauseTiming();
    auto dir = std::make_unique<temp_dir>();
    auto r = make_rig(k, s, dir->path());
    state.ResumeTiming();
    const auto t0 = std::chrono::steady_clock::now();
    for (std::size_t i = 0; i < batch_count(); ++i) r->apply(i);
    const auto t1 = std::chrono::steady_clock::now();
    timed += t1 - t0;
    state.PauseTiming();
    r.reset();  // closes: work a store deferred (SQLite's WAL checkpoint, a journal's flush) is done here
    closing += std::chrono::steady_clock::now() - t1;
    dir.reset();
    malloc_trim(0);  // every run starts from the same state (see support/fixture_slot.hpp)
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * total_rows());
  // Wall nanoseconds per row applied (the reciprocal of items_per_second).
  const auto ns = std::chrono::duration<double, std::nano>(timed).count();
  state.counters["ns_per_row"] = ns / static_cast<double>(state.iterations() * total_rows());
  // Wall milliseconds of closing the store after the run (not in the time
  // above): deferred work shows here.
  state.counters["close_ms"] = benchmark::Counter(
      std::chrono::duration<double, std::milli>(closing).count(), benchmark::Counter::kAvgIterations);
}

// --- Smoke checks ---------------------------------------------------------------------------

/// The table as a restarted pipeline loads it from `dir` (a new checkpoint
/// object, table and pipeline over the files the run left).
template <flow_kind K, class Storage, class Checkpoint>
lines reopened_lines(const std::filesystem::path& dir) {
  pipeline_rig<K, Storage, Checkpoint> again{dir};
  again.reopen();
  return again.in_memory();
}

template <class Storage, class Checkpoint>
lines reopened_lines(flow_kind k, const std::filesystem::path& dir) {
  switch (k) {
    case flow_kind::replace_using: return reopened_lines<flow_kind::replace_using, Storage, Checkpoint>(dir);
    case flow_kind::scd1: return reopened_lines<flow_kind::scd1, Storage, Checkpoint>(dir);
    case flow_kind::scd2: return reopened_lines<flow_kind::scd2, Storage, Checkpoint>(dir);
  }
  return {};
}

/// The table as flowlib::read_table reads it from the checkpoint in `dir`,
/// without a pipeline.
template <flow_kind K>
lines exported_lines(const std::filesystem::path& dir) {
  const fl::FileCheckpoint reopened{dir / "checkpoint"};
  using row_t = typename target_of<K, fl::FileStorage>::type::row_type;
  return lines_of(fl::read_table<row_t>(reopened, "target"));
}
lines exported_lines(flow_kind k, const std::filesystem::path& dir) {
  switch (k) {
    case flow_kind::replace_using: return exported_lines<flow_kind::replace_using>(dir);
    case flow_kind::scd1: return exported_lines<flow_kind::scd1>(dir);
    case flow_kind::scd2: return exported_lines<flow_kind::scd2>(dir);
  }
  return {};
}

/// Runs `s` over the whole workload and returns the final table read from
/// where the system keeps it (see the header comment); for the durable
/// pipelines, also checks the table in memory and as a restart loads it.
lines final_table(flow_kind k, system_kind s) {
  temp_dir dir;
  auto r = make_rig(k, s, dir.path());
  for (std::size_t i = 0; i < batch_count(); ++i) r->apply(i);
  const lines held = r->in_memory();
  r.reset();  // closed: what follows reads what is on disk
  const lines ref = reference_lines(k);
  std::string what = std::string(" for ") + name(k) + " (reference: " + std::to_string(ref.size()) + " rows)";
  switch (s) {
    case system_kind::memory: return held;
    case system_kind::file: {
      fb::require(held == ref, "smoke: FileStorage's table in memory is wrong" + what);
      const lines exported = exported_lines(k, dir.path());  // first: the files as the run left them
      const lines again = reopened_lines<fl::FileStorage, fl::FileCheckpoint>(k, dir.path());
      what += ", got " + std::to_string(again.size()) + " rows";
      fb::require(again == ref, "smoke: FileStorage's table as a restart loads it is wrong" + what);
      return exported;
    }
    case system_kind::sqlite: {
      fb::require(held == ref, "smoke: SqliteStorage's table in memory is wrong" + what);
      const lines again = reopened_lines<fl::SqliteStorage, fl::SqliteCheckpoint>(k, dir.path());
      what += ", got " + std::to_string(again.size()) + " rows";
      fb::require(again == ref, "smoke: SqliteStorage's table as a restart loads it is wrong" + what);
      return lines_of_sqlite(sqlite_file(dir.path()), k);
    }
    case system_kind::hand:
    case system_kind::hand_set: return lines_of_sqlite(sqlite_file(dir.path()), k);
  }
  return {};
}

void smoke_check(flow_kind k) {
  const lines ref = reference_lines(k);
  fb::require(!ref.empty(), "smoke: empty reference");
  std::printf("%-14s reference     %zu rows  fingerprint %016llx\n", name(k), ref.size(),
              static_cast<unsigned long long>(fingerprint(ref)));
  for (system_kind s : all_systems) {
    const lines got = final_table(k, s);
    std::printf("%-14s %-13s %zu rows  fingerprint %016llx\n", name(k), name(s), got.size(),
                static_cast<unsigned long long>(fingerprint(got)));
    fb::require(got == ref, std::string("smoke: ") + name(s) + " ends with another table than the reference for " +
                                name(k));
  }
}

/// The file system the temporary directories are on (a tmpfs makes every
/// fsync free, and the durable numbers meaningless).
std::string temp_fs() {
  struct ::statfs st {};
  const auto dir = std::filesystem::temp_directory_path();
  if (::statfs(dir.c_str(), &st) != 0) return dir.string() + " (statfs failed)";
  const auto magic = static_cast<unsigned long>(st.f_type);
  const char* kind = magic == 0x01021994ul ? "tmpfs: fsync is free, durable numbers are meaningless"
                     : magic == 0xEF53ul  ? "ext2/3/4"
                     : magic == 0x58465342ul ? "xfs"
                     : magic == 0x9123683Eul ? "btrfs"
                                             : "other";
  return dir.string() + " (" + kind + ")";
}

}  // namespace bench_durable

int main(int argc, char** argv) {
  namespace bd = bench_durable;
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("temp_dir", bd::temp_fs());
  benchmark::AddCustomContext("workload", std::to_string(bd::batch_count()) + " batches x " +
                                              std::to_string(bd::batch_rows()) + " rows, keys uniform over " +
                                              std::to_string(bd::key_space()));
  if (fb::smoke_mode()) {
    for (auto k : bd::all_flows) bd::smoke_check(k);
    std::printf("smoke checks passed: every system ends with the reference table\n");
  }
  for (auto k : bd::all_flows)
    for (auto s : bd::all_systems)
      benchmark::RegisterBenchmark(("run/" + std::string(bd::name(k)) + "/" + bd::name(s)).c_str(),
                                   [k, s](benchmark::State& st) { bd::run_benchmark(st, k, s); })
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
