// Durable pipelines: what a micro-batch costs when the tables and the
// checkpoint are in SQLite (SqliteStorage + SqliteCheckpoint), against the
// same pipeline in memory and against a hand-written SQLite loop doing the
// same work on the same file system.
//
// What is measured (docs/benchmarks/sqlite.md has the results):
//
// 1. batch/<flow>/batch:<B>/<way>: rows per wall-clock second
//    (`items_per_second`) of one micro-batch of B rows (1e3, 1e4, 1e5), for
//    each flow type, three ways:
//      sqlite   a Pipeline over a MemorySource, one flow into a
//               StreamingTable<_, SqliteStorage>, SqliteCheckpoint in a file
//               (default SqliteOptions: WAL, synchronous = full): one
//               update() per batch, so one transaction per batch holding
//               the row changes, the state and the commit record;
//      memory   the same Pipeline on MemoryStorage + MemoryCheckpoint;
//      hand     a hand-written loop over the same rows into a file database
//               with the same settings (WAL, synchronous = FULL): BEGIN
//               IMMEDIATE, one prepared statement per row, the batch's
//               source offset written to a progress table, COMMIT:
//                 append         INSERT;
//                 replace_using  INSERT ... ON CONFLICT(id) DO UPDATE ...
//                                WHERE excluded.seq > seq (id is the
//                                primary key);
//                 scd1           the same upsert (the input has no deletes);
//                 scd2           UPDATE ... SET __END_AT = seq WHERE id = ?
//                                AND __END_AT IS NULL (a partial unique index
//                                on the current versions), then INSERT the
//                                new version.
//    Rows: id, seq, two int64, a short string; keys uniform over 1e5;
//    sequences rise forever. REPLACE USING and AUTO CDC targets hold every
//    key before timing starts (filled the same way, untimed), so a batch
//    mostly updates; append and SCD2 targets grow as the benchmark runs.
//    Wall time, not CPU time: a commit waits for fsync.
//
// 2. open/rows:<N>: opening a database holding a REPLACE USING table of N =
//    1e6 rows: SqliteCheckpoint + table + Pipeline, and an update() that
//    finds nothing new (it attaches and loads the table, the flow rebuilds
//    its key index from the rows). items = rows. Baseline open/rows:<N>/select:
//    a plain `SELECT *` of the same table into a std::vector of rows.
//
// FLOWLIB_BENCH_SMOKE=1: tiny sizes; before the benchmarks, the three ways
// of part 1 apply the same batches and must end with the same SQL table
// contents (the SQLite pipeline's file and the hand loop's file are read
// back with the same query) and the memory pipeline the same rows; the
// program exits 1 otherwise.
#include <flowlib/checkpoint/memory.hpp>
#include <flowlib/checkpoint/sqlite.hpp>
#include <flowlib/flowlib.hpp>
#include <flowlib/pipeline.hpp>
#include <flowlib/source/memory.hpp>
#include <flowlib/storage/sqlite.hpp>

#include "support/smoke.hpp"

#include <benchmark/benchmark.h>
#include <sqlite3.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fl = flowlib;
namespace fb = flowlib_bench;

namespace bench {

struct Row {
  std::int64_t id;
  std::int64_t seq;
  std::int64_t a;
  std::int64_t b;
  std::string tag;
  friend bool operator==(const Row&, const Row&) = default;
};
FLOWLIB_SCHEMA(Row, id, seq, a, b, tag);

struct Row1 {
  std::int64_t id;
  std::int64_t a;
  std::int64_t b;
  std::string tag;
  friend bool operator==(const Row1&, const Row1&) = default;
};
FLOWLIB_SCHEMA(Row1, id, a, b, tag);

struct Row2 {
  std::int64_t id;
  std::int64_t a;
  std::int64_t b;
  std::string tag;
  std::int64_t start_at;
  std::optional<std::int64_t> end_at;
  friend bool operator==(const Row2&, const Row2&) = default;
};
FLOWLIB_SCHEMA(Row2, id, a, b, tag, (start_at, "__START_AT"), (end_at, "__END_AT"));

using Replace = fl::ReplaceUsing<fl::Key<&Row::id>, fl::Seq<&Row::seq>>;
using Scd1 = fl::AutoCdc<fl::Key<&Row::id>, fl::Seq<&Row::seq>, fl::Scd1, fl::except_column_list<"seq">>;
using Scd2 = fl::AutoCdc<fl::Key<&Row::id>, fl::Seq<&Row::seq>, fl::Scd2<>, fl::except_column_list<"seq">>;

enum class flow_kind { append, replace_using, scd1, scd2 };
constexpr std::array<flow_kind, 4> all_kinds{flow_kind::append, flow_kind::replace_using, flow_kind::scd1,
                                             flow_kind::scd2};
const char* name(flow_kind k) {
  switch (k) {
    case flow_kind::append: return "append";
    case flow_kind::replace_using: return "replace_using";
    case flow_kind::scd1: return "scd1";
    case flow_kind::scd2: return "scd2";
  }
  return "?";
}

std::int64_t key_space() { return fb::smoke_mode() ? 1000 : 100000; }
std::vector<std::int64_t> batch_sizes() {
  return fb::smoke_mode() ? std::vector<std::int64_t>{100, 1000} : std::vector<std::int64_t>{1000, 10000, 100000};
}
std::int64_t open_rows() { return fb::smoke_mode() ? 10000 : 1000000; }

std::filesystem::path temp_root() {
  static const std::filesystem::path p =
      std::filesystem::temp_directory_path() / ("flowlib_bench_sqlite_" + std::to_string(::getpid()));
  return p;
}
std::string fresh_db(std::string_view what) {
  static int n = 0;
  std::filesystem::create_directories(temp_root());
  const auto p = temp_root() / (std::string(what) + "_" + std::to_string(n++) + ".db");
  for (const char* s : {"", "-wal", "-shm"}) std::filesystem::remove(p.string() + s);
  return p.string();
}

/// Batches of rows with rising sequences, the same for every way of a
/// configuration (one generator per rig, same seed).
struct row_maker {
  std::mt19937_64 g{0x5eedu};
  std::int64_t next_seq = 1;
  Row row(std::int64_t id) {
    static constexpr std::array<const char*, 5> tags = {"ios", "android", "web", "tv", "desktop"};
    return Row{id, next_seq++, static_cast<std::int64_t>(g() >> 1), static_cast<std::int64_t>(g() % 1000),
               tags[g() % tags.size()]};
  }
  std::vector<Row> batch(std::int64_t n) {
    std::vector<Row> out;
    out.reserve(static_cast<std::size_t>(n));
    std::uniform_int_distribution<std::int64_t> key(0, key_space() - 1);
    for (std::int64_t i = 0; i < n; ++i) out.push_back(row(key(g)));
    return out;
  }
  /// Every key once (the fill of keyed targets).
  std::vector<Row> every_key() {
    std::vector<Row> out;
    for (std::int64_t k = 0; k < key_space(); ++k) out.push_back(row(k));
    return out;
  }
};

// --- The pipeline ways --------------------------------------------------------------

/// A rig applies one batch per run(): stage() (untimed) then run() (timed).
struct rig {
  virtual ~rig() = default;
  virtual void stage(std::vector<Row> rows) = 0;
  virtual void run() = 0;
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

template <flow_kind K, class Storage, class Checkpoint>
struct pipeline_rig final : rig {
  std::string path;
  std::unique_ptr<Checkpoint> checkpoint;
  fl::MemorySource<Row> source{"source"};
  typename target_of<K, Storage>::type target{"target"};
  std::unique_ptr<fl::Pipeline> pipeline;

  pipeline_rig() {
    if constexpr (std::is_same_v<Checkpoint, fl::SqliteCheckpoint>) {
      path = fresh_db(name(K));
      checkpoint = std::make_unique<Checkpoint>(path);
    } else {
      checkpoint = std::make_unique<Checkpoint>();
    }
    pipeline = std::make_unique<fl::Pipeline>("bench", *checkpoint);
    auto f = pipeline->flow("target").from(source);
    if constexpr (K == flow_kind::append) std::move(f).into(target, fl::Append{"target"});
    if constexpr (K == flow_kind::replace_using) std::move(f).into(target, Replace{"target"});
    if constexpr (K == flow_kind::scd1) std::move(f).into(target, Scd1{"target"});
    if constexpr (K == flow_kind::scd2) std::move(f).into(target, Scd2{"target"});
  }
  ~pipeline_rig() override {
    pipeline.reset();
    checkpoint.reset();
  }
  void stage(std::vector<Row> rows) override { source.append(std::move(rows)); }
  void run() override {
    const auto s = pipeline->update();
    if (fb::smoke_mode()) fb::require(s.batches() == 1, "one update must run exactly one micro-batch");
  }
};

// --- The hand-written SQLite loop ------------------------------------------------------

class hand_rig final : public rig {
 public:
  hand_rig(flow_kind k, std::string path) : kind_(k), path_(std::move(path)) {
    check(sqlite3_open(path_.c_str(), &db_), "open");
    exec("PRAGMA journal_mode=WAL");
    exec("PRAGMA synchronous=FULL");  // SqliteOptions' default
    exec("CREATE TABLE progress(k TEXT PRIMARY KEY, offset INTEGER)");
    switch (k) {
      case flow_kind::append:
        exec("CREATE TABLE target(id INTEGER, seq INTEGER, a INTEGER, b INTEGER, tag TEXT)");
        row_ = prepare("INSERT INTO target(id, seq, a, b, tag) VALUES(?1, ?2, ?3, ?4, ?5)");
        break;
      case flow_kind::replace_using:
      case flow_kind::scd1:
        exec("CREATE TABLE target(id INTEGER PRIMARY KEY, seq INTEGER, a INTEGER, b INTEGER, tag TEXT)");
        row_ = prepare(
            "INSERT INTO target(id, seq, a, b, tag) VALUES(?1, ?2, ?3, ?4, ?5) ON CONFLICT(id) DO UPDATE "
            "SET seq = excluded.seq, a = excluded.a, b = excluded.b, tag = excluded.tag "
            "WHERE excluded.seq > target.seq");
        break;
      case flow_kind::scd2:
        exec("CREATE TABLE target(id INTEGER, a INTEGER, b INTEGER, tag TEXT, __START_AT INTEGER, "
             "__END_AT INTEGER)");
        exec("CREATE UNIQUE INDEX target_current ON target(id) WHERE __END_AT IS NULL");
        close_ = prepare("UPDATE target SET __END_AT = ?2 WHERE id = ?1 AND __END_AT IS NULL");
        row_ = prepare("INSERT INTO target(id, a, b, tag, __START_AT, __END_AT) VALUES(?1, ?3, ?4, ?5, ?2, NULL)");
        break;
    }
    progress_ = prepare("INSERT OR REPLACE INTO progress(k, offset) VALUES('source', ?1)");
  }
  ~hand_rig() override {
    for (sqlite3_stmt* s : {row_, close_, progress_}) sqlite3_finalize(s);
    sqlite3_close(db_);
  }
  hand_rig(const hand_rig&) = delete;
  hand_rig& operator=(const hand_rig&) = delete;

  void stage(std::vector<Row> rows) override { rows_ = std::move(rows); }
  void run() override {
    exec("BEGIN IMMEDIATE");
    for (const Row& r : rows_) {
      if (close_ != nullptr) {
        sqlite3_bind_int64(close_, 1, r.id);
        sqlite3_bind_int64(close_, 2, r.seq);
        step(close_);
      }
      sqlite3_bind_int64(row_, 1, r.id);
      sqlite3_bind_int64(row_, 2, r.seq);
      sqlite3_bind_int64(row_, 3, r.a);
      sqlite3_bind_int64(row_, 4, r.b);
      sqlite3_bind_text(row_, 5, r.tag.data(), static_cast<int>(r.tag.size()), SQLITE_STATIC);
      step(row_);
    }
    offset_ += static_cast<std::int64_t>(rows_.size());
    sqlite3_bind_int64(progress_, 1, offset_);
    step(progress_);
    exec("COMMIT");
  }
  flow_kind kind() const noexcept { return kind_; }

 private:
  void check(int rc, const char* what) {
    if (rc != SQLITE_OK && rc != SQLITE_DONE && rc != SQLITE_ROW)
      fb::require(false, std::string("sqlite ") + what + ": " + sqlite3_errmsg(db_));
  }
  void exec(const char* sql) { check(sqlite3_exec(db_, sql, nullptr, nullptr, nullptr), sql); }
  sqlite3_stmt* prepare(const char* sql) {
    sqlite3_stmt* s = nullptr;
    check(sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &s, nullptr), sql);
    return s;
  }
  void step(sqlite3_stmt* s) {
    check(sqlite3_step(s), "step");
    sqlite3_reset(s);
  }

  flow_kind kind_;
  std::string path_;
  sqlite3* db_ = nullptr;
  sqlite3_stmt* row_ = nullptr;
  sqlite3_stmt* close_ = nullptr;
  sqlite3_stmt* progress_ = nullptr;
  std::vector<Row> rows_;
  std::int64_t offset_ = 0;
};

enum class way { sqlite, memory, hand };
const char* name(way w) { return w == way::sqlite ? "sqlite" : w == way::memory ? "memory" : "hand"; }

template <flow_kind K>
std::unique_ptr<rig> make_rig_of(way w, std::string* path) {
  if (w == way::memory) return std::make_unique<pipeline_rig<K, fl::MemoryStorage, fl::MemoryCheckpoint>>();
  if (w == way::sqlite) {
    auto r = std::make_unique<pipeline_rig<K, fl::SqliteStorage, fl::SqliteCheckpoint>>();
    if (path != nullptr) *path = r->path;
    return r;
  }
  const std::string p = fresh_db(std::string("hand_") + name(K));
  if (path != nullptr) *path = p;
  return std::make_unique<hand_rig>(K, p);
}

std::unique_ptr<rig> make_rig(flow_kind k, way w, std::string* path = nullptr) {
  switch (k) {
    case flow_kind::append: return make_rig_of<flow_kind::append>(w, path);
    case flow_kind::replace_using: return make_rig_of<flow_kind::replace_using>(w, path);
    case flow_kind::scd1: return make_rig_of<flow_kind::scd1>(w, path);
    case flow_kind::scd2: return make_rig_of<flow_kind::scd2>(w, path);
  }
  return nullptr;
}

void batch_benchmark(benchmark::State& state, flow_kind k, std::int64_t batch, way w) {
  row_maker rows;
  auto r = make_rig(k, w);
  if (k != flow_kind::append) {  // keyed targets hold every key before timing
    r->stage(rows.every_key());
    r->run();
  }
  for (auto _ : state) {
    state.PauseTiming();
    r->stage(rows.batch(batch));
    state.ResumeTiming();
    r->run();
  }
  state.SetItemsProcessed(state.iterations() * batch);
  r.reset();  // after the timed loop: not measured
}

// --- Opening a database ------------------------------------------------------------------

struct open_fixture {
  std::string path;
  std::vector<Row> rows;  // what the source holds (its positions are in the checkpoint)
  open_fixture() {
    path = fresh_db("open");
    fl::SqliteCheckpoint ckpt{path};
    fl::MemorySource<Row> source{"source"};
    fl::StreamingTable<Row, fl::SqliteStorage> target{"target"};
    fl::Pipeline p{"open", ckpt};
    p.flow("target").from(source).into(target, Replace{"target"});
    row_maker maker;
    for (std::int64_t i = 0; i < open_rows(); ++i) rows.push_back(maker.row(i));
    source.append(rows);
    p.update();
  }
};

open_fixture& the_open_fixture() {
  static open_fixture f;
  return f;
}

void open_benchmark(benchmark::State& state) {
  const std::string& path = the_open_fixture().path;
  fl::MemorySource<Row> source{"source"};  // what the checkpoint's positions refer to
  source.append(the_open_fixture().rows);
  for (auto _ : state) {
    fl::SqliteCheckpoint ckpt{path};
    fl::StreamingTable<Row, fl::SqliteStorage> target{"target"};
    fl::Pipeline p{"open", ckpt};
    p.flow("target").from(source).into(target, Replace{"target"});
    const auto s = p.update();  // opens: attach, load, restore; nothing new
    if (s.batches() != 0 || target.size() != static_cast<std::size_t>(open_rows()))
      fb::require(false, "open: the table must load every row and find nothing new");
    benchmark::DoNotOptimize(target.size());
  }
  state.SetItemsProcessed(state.iterations() * open_rows());
}

void select_benchmark(benchmark::State& state) {
  const std::string& path = the_open_fixture().path;
  for (auto _ : state) {
    sqlite3* db = nullptr;
    sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
    sqlite3_stmt* s = nullptr;
    sqlite3_prepare_v2(db, "SELECT id, seq, a, b, tag FROM target", -1, &s, nullptr);
    std::vector<Row> rows;
    while (sqlite3_step(s) == SQLITE_ROW) {
      const auto* t = reinterpret_cast<const char*>(sqlite3_column_text(s, 4));
      rows.push_back(Row{sqlite3_column_int64(s, 0), sqlite3_column_int64(s, 1), sqlite3_column_int64(s, 2),
                         sqlite3_column_int64(s, 3),
                         std::string(t, static_cast<std::size_t>(sqlite3_column_bytes(s, 4)))});
    }
    sqlite3_finalize(s);
    sqlite3_close(db);
    if (rows.size() != static_cast<std::size_t>(open_rows())) fb::require(false, "select: every row");
    benchmark::DoNotOptimize(rows.data());
  }
  state.SetItemsProcessed(state.iterations() * open_rows());
}

// --- Smoke checks ------------------------------------------------------------------------

/// The rows of `table` in `path` as text lines, by the query `cols`.
std::vector<std::string> dump(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr);
  sqlite3_stmt* s = nullptr;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &s, nullptr) != SQLITE_OK)
    fb::require(false, std::string("smoke: ") + sqlite3_errmsg(db));
  std::vector<std::string> out;
  while (sqlite3_step(s) == SQLITE_ROW) {
    std::string line;
    for (int c = 0; c < sqlite3_column_count(s); ++c) {
      const auto* t = sqlite3_column_text(s, c);
      line += (t == nullptr ? std::string("NULL") : std::string(reinterpret_cast<const char*>(t))) + "|";
    }
    out.push_back(std::move(line));
  }
  sqlite3_finalize(s);
  sqlite3_close(db);
  return out;
}

void smoke_check(flow_kind k) {
  std::string sqlite_path, hand_path;
  {
    auto a = make_rig(k, way::sqlite, &sqlite_path);
    auto b = make_rig(k, way::hand, &hand_path);
    auto c = make_rig(k, way::memory);
    row_maker ra, rb, rc;
    if (k != flow_kind::append) {
      a->stage(ra.every_key());
      b->stage(rb.every_key());
      c->stage(rc.every_key());
      a->run();
      b->run();
      c->run();
    }
    for (int i = 0; i < 5; ++i) {
      a->stage(ra.batch(300));
      b->stage(rb.batch(300));
      c->stage(rc.batch(300));
      a->run();
      b->run();
      c->run();
    }
  }
  const std::string sql = k == flow_kind::scd2 ? "SELECT id, a, b, tag, __START_AT, __END_AT FROM target ORDER BY id, __START_AT"
                          : k == flow_kind::append ? "SELECT id, seq, a, b, tag FROM target ORDER BY seq"
                                                   : "SELECT id, a, b, tag FROM target ORDER BY id";
  const auto x = dump(sqlite_path, sql);
  fb::require(!x.empty() && x == dump(hand_path, sql),
              std::string("smoke: the SQLite pipeline and the hand loop disagree on ") + name(k));
}

}  // namespace bench

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  if (fb::smoke_mode()) {
    for (auto k : bench::all_kinds) bench::smoke_check(k);
    std::printf("smoke checks passed: the SQLite pipeline and the hand-written loop write the same tables\n");
  }
  for (auto k : bench::all_kinds)
    for (std::int64_t b : bench::batch_sizes())
      for (auto w : {bench::way::sqlite, bench::way::memory, bench::way::hand})
        benchmark::RegisterBenchmark(("batch/" + std::string(bench::name(k)) + "/batch:" + std::to_string(b) +
                                      "/" + bench::name(w))
                                         .c_str(),
                                     [k, b, w](benchmark::State& s) { bench::batch_benchmark(s, k, b, w); })
            ->UseRealTime()
            ->Unit(benchmark::kMillisecond);
  const std::string open = "open/rows:" + std::to_string(bench::open_rows());
  benchmark::RegisterBenchmark(open.c_str(), bench::open_benchmark)->UseRealTime()->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark((open + "/select").c_str(), bench::select_benchmark)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  std::error_code ec;
  std::filesystem::remove_all(bench::temp_root(), ec);
  return 0;
}
