// SqliteStorage and SqliteCheckpoint: column mapping, refusals, failures at
// every step of a batch and of the database (full, read-only, locked), and
// the tables as other SQLite readers see them (R-EXACT-*, R-TABLE-*,
// R-DURABLE-*). The reopen semantics of every flow type are in
// tests/storage/durable/, for both durable configurations.
#include <doctest/doctest.h>

#include <flowlib/checkpoint/file.hpp>
#include <flowlib/checkpoint/memory.hpp>
#include <flowlib/checkpoint/sqlite.hpp>
#include <flowlib/flowlib.hpp>
#include <flowlib/pipeline.hpp>
#include <flowlib/source/memory.hpp>
#include <flowlib/storage/sqlite.hpp>

#include <support/durable_configs.hpp>
#include <support/durable_world.hpp>
#include <support/errors.hpp>
#include <support/temp_files.hpp>

#include <sqlite3.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace storage_sqlite_sqlite {

namespace fl = flowlib;
using flowtest::sqlite_durable;
using namespace flowtest::durable;  // the main scenario: Ev, world, feed_step, uninterrupted()

enum class Color : std::uint8_t { red = 1, green = 2, blue = 250 };

struct AllTypes {
  std::int64_t id = 0;
  std::int8_t small = 0;
  std::uint64_t big = 0;
  bool flag = false;
  float f = 0;
  double d = 0;
  std::string s;
  std::optional<std::string> os;
  std::optional<std::int32_t> oi;
  std::chrono::sys_days day{};
  std::optional<std::chrono::sys_days> oday;
  ms_time at{};
  std::chrono::sys_time<std::chrono::nanoseconds> ns{};
  std::optional<ms_time> oat;
  Color color = Color::red;
  friend bool operator==(const AllTypes&, const AllTypes&) = default;
};
FLOWLIB_SCHEMA(AllTypes, id, small, big, flag, f, d, s, os, oi, day, oday, at, ns, oat, color);

template <class Row>
using Durable = fl::StreamingTable<Row, fl::SqliteStorage>;

/// A database file of its own for one test; removed (with its WAL files)
/// before and after.
struct db_file : flowtest::temp_db {
  explicit db_file(const std::string& name) : temp_db("flowlib_sqlite_test_" + name) {}
};

fl::SqliteOptions fast() { return sqlite_durable::options(); }

/// Runs `sql` on a connection of its own (an administrator, another program).
void admin(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  char* err = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err);
  const std::string msg = err != nullptr ? err : "";
  sqlite3_free(err);
  sqlite3_close(db);
  REQUIRE_MESSAGE(rc == SQLITE_OK, msg);
}

/// The first column of the first row of `sql`, read through a read-only
/// connection of its own.
std::string query(const std::string& path, const std::string& sql) { return flowtest::sql_reader(path).text(sql); }

/// The database holds what every table of `w` holds in memory.
void check_stored(const std::string& path, const world<fl::SqliteStorage>& w) {
  w.for_each_table([&](const auto& t) { sqlite_durable::check_same(path, t); });
}

/// One program of the main scenario over the database at `path`.
struct sqlite_checkpoint {
  fl::SqliteCheckpoint ck;
  sqlite_checkpoint(const std::string& path, const fl::SqliteOptions& o) : ck(path, o) {}
};
struct program : sqlite_checkpoint, world_program<fl::SqliteStorage> {
  program(const std::string& path, fl::MemorySource<Ev>& feed, const fl::SqliteOptions& o = fast(),
          fl::PipelineOptions options = {})
      : sqlite_checkpoint(path, o), world_program(ck, feed, std::move(options)) {}
};

/// A program that committed the first step of `feed`.
struct after_first_step : program {
  world_rows committed;
  after_first_step(const std::string& path, fl::MemorySource<Ev>& feed, const fl::SqliteOptions& o = fast())
      : program(path, feed, o) {
    feed_step(feed, 0);
    pipeline.update();
    committed = w.rows();
  }
};

TEST_CASE("R-DURABLE-2: every column type round-trips through SQLite, NULL for an empty optional") {
  db_file f("types");
  using namespace std::chrono;
  const std::vector<AllTypes> rows{
      {1, -128, std::numeric_limits<std::uint64_t>::max(), true, 1.5f, -2.25, "a \"quoted\" 'text'",
       std::nullopt, std::nullopt, sys_days{year{2024} / 2 / 29}, std::nullopt,
       ms_time{milliseconds(-1)}, sys_time<nanoseconds>{nanoseconds(1'700'000'000'123'456'789)},
       std::nullopt, Color::blue},
      {2, 127, 0, false, -0.0f, 1e300, "", std::string("x"), -7, sys_days{year{1969} / 12 / 31},
       sys_days{year{1} / 1 / 1}, t0, {}, t0 + milliseconds(5), Color::green},
  };
  fl::MemorySource<AllTypes> feed{"feed"};
  for (const auto& r : rows) feed.append(r);
  {
    fl::SqliteCheckpoint ck{f.path, fast()};
    Durable<AllTypes> t{"all_types"};
    fl::Pipeline p{"types", ck};
    p.flow("load").from(feed).into(t, fl::Append{"load"});
    p.update();
    CHECK(t.size() == 2);
  }
  const auto s = sqlite_durable::load<AllTypes>(f.path, "all_types");
  std::vector<AllTypes> back;
  for (const auto& [id, r] : s.rows) back.push_back(r);
  CHECK(back == rows);
  // As other SQL readers see the values.
  const flowtest::sql_reader reader{f.path};
  auto sql = [&](const std::string& expr, int id = 1) {
    return reader.text("SELECT " + expr + " FROM all_types WHERE id = " + std::to_string(id));
  };
  CHECK(sql("day") == "2024-02-29");
  CHECK(sql("typeof(day)") == "text");
  CHECK(sql("day", 2) == "1969-12-31");
  CHECK(sql("oday", 2) == "0001-01-01");
  CHECK(sql("typeof(os)") == "null");
  CHECK(sql("typeof(oi)") == "null");
  CHECK(sql("oi", 2) == "-7");
  CHECK(sql("flag") == "1");
  CHECK(sql("big") == "-1");  // 2^64-1 as its two's complement
  CHECK(sql("at") == "-1");   // milliseconds since the epoch
  CHECK(sql("ns") == "1700000000123456789");
  CHECK(sql("color") == "250");
  CHECK(sql("typeof(d)") == "real");
  CHECK(sql("s") == "a \"quoted\" 'text'");
}

TEST_CASE("R-DURABLE-2: an SCD2 target's __START_AT and __END_AT are ordinary columns, NULL for the open version") {
  db_file f("scd2_columns");
  fl::MemorySource<Ev> feed{"feed"};
  feed.append(Ev{1, "a", 1, 10, t0});
  feed.append(Ev{1, "b", 2, 20, t0});
  {
    fl::SqliteCheckpoint ck{f.path, fast()};
    Durable<Hist> h{"hist"};
    fl::Pipeline p{"scd2", ck};
    p.flow("h").from(feed).into(h, Cdc2{"h"});
    p.update();
    CHECK(h.size() == 2);
  }
  const flowtest::sql_reader reader{f.path};
  CHECK(reader.text("SELECT count(*) FROM hist") == "2");
  CHECK(reader.text("SELECT \"__END_AT\" FROM hist WHERE name = 'a'") == "20");
  CHECK(reader.text("SELECT typeof(\"__END_AT\") FROM hist WHERE name = 'b'") == "null");
  CHECK(reader.text("SELECT \"__START_AT\" FROM hist WHERE name = 'b'") == "20");
}

TEST_CASE("R-EXACT-1: a failure at every step of every batch leaves the SQL tables equal to the memory tables, and a retry gives the uninterrupted result") {
  const auto expected = uninterrupted();
  std::size_t failures = 0;
  std::set<fl::fault_point> points;
  // Every 8th step (8 is prime to the 7 steps of a batch, so every
  // fault_point is hit, in batches of every flow).
  for (int k = 0;; k += 8) {
    db_file f("faults");
    fl::MemorySource<Ev> feed{"feed"};
    int calls = 0;
    bool hit = false;
    fl::PipelineOptions opt;
    opt.snapshot_interval = 2;
    opt.fault_hook = [&](fl::fault_point at, std::string_view, std::uint64_t) {
      if (calls++ == k) {
        hit = true;
        points.insert(at);
        throw injected("injected");
      }
    };
    program prog{f.path, feed, fast(), opt};
    for (int s = 0; s < steps; ++s) {
      feed_step(feed, s);
      try {
        prog.pipeline.update();
      } catch (const injected&) {
        ++failures;
        check_stored(f.path, prog.w);  // the database holds what memory holds
        prog.pipeline.update();        // the retry
      }
    }
    check_stored(f.path, prog.w);
    CHECK(prog.w.rows() == expected);
    if (!hit) break;
  }
  CHECK(failures > 20);
  CHECK(points.size() == 7);
}

TEST_CASE("R-DURABLE-3: a changed SQL table (a missing, extra or retyped column) is refused naming the table and the column; the file is left byte for byte") {
  db_file f("schema");
  fl::MemorySource<Ev> feed{"feed"};
  feed.append(Ev{1, "a", 1, 1, t0});
  const auto open = [&] {
    fl::SqliteCheckpoint ck{f.path, fast()};
    Durable<Ev> t{"events"};
    fl::Pipeline p{"schema", ck};
    p.flow("e").from(feed).into(t, fl::Append{"e"});
    p.update();
  };
  open();
  auto refused = [&](const std::string& change, const std::string& column) {
    admin(f.path, change);
    const std::string before = f.bytes();
    REQUIRE(!before.empty());
    const fl::error e = flowtest::error_of(open);
    CHECK(e.code() == fl::errc::checkpoint_mismatch);
    CHECK(e.column() == column);
    CHECK(flowtest::contains(e.what(), "SQL table 'events'"));
    CHECK(f.bytes() == before);
  };
  SUBCASE("missing") { refused("ALTER TABLE events DROP COLUMN name", "name"); }
  SUBCASE("extra") { refused("ALTER TABLE events ADD COLUMN extra INTEGER", "extra"); }
  SUBCASE("retyped") {
    refused("DROP TABLE events; CREATE TABLE events(\"__flowlib_row_id\" INTEGER PRIMARY KEY, id "
            "INTEGER, name TEXT, amount TEXT, seq INTEGER, at INTEGER, del INTEGER)",
            "amount");
  }
}

TEST_CASE("R-DURABLE-3: a database of a newer format version is refused and left as it is") {
  db_file f("version");
  { fl::SqliteCheckpoint ck{f.path, fast()}; }
  admin(f.path, "UPDATE flowlib_meta SET value = 2 WHERE key = 'format_version'");
  const std::string before = f.bytes();
  CHECK(flowtest::contains(flowtest::message_of(fl::errc::checkpoint_corrupt,
                                                [&] { fl::SqliteCheckpoint ck{f.path, fast()}; }),
                           "format version 2 is newer"));
  CHECK(f.bytes() == before);
  // Not a database at all.
  db_file g("not_a_db");
  { std::ofstream(g.path) << "this is not an SQLite database, it is a text file of some length......"; }
  CHECK(flowtest::contains(flowtest::message_of(fl::errc::checkpoint_corrupt,
                                                [&] { fl::SqliteCheckpoint ck{g.path, fast()}; }),
                           "not a database"));
}

TEST_CASE("R-EXACT-3: another flow definition over the same database is a checkpoint mismatch; a durable table needs the SQLite checkpoint") {
  db_file f("definition");
  fl::MemorySource<Ev> feed{"feed"};
  feed.append(Ev{1, "a", 1, 1, t0});
  // An update of the flow "f" into a durable table over `ck`, as REPLACE
  // USING or as an append; the error's message, and the table's rows after
  // it.
  const auto refused = [&](fl::checkpoint_store& ck, bool append) {
    Durable<Ev> t{"t"};
    fl::Pipeline p{"p", ck};
    if (append) {
      p.flow("f").from(feed).into(t, fl::Append{"f"});
    } else {
      p.flow("f").from(feed).into(t, Current{"f"});
    }
    const std::string m = flowtest::message_of(fl::errc::checkpoint_mismatch, [&] { p.update(); });
    return std::pair(m, t.size());
  };
  {
    fl::SqliteCheckpoint ck{f.path, fast()};
    Durable<Ev> t{"t"};
    fl::Pipeline p{"p", ck};
    p.flow("f").from(feed).into(t, Current{"f"});
    p.update();
  }
  {
    fl::SqliteCheckpoint ck{f.path, fast()};
    CHECK(flowtest::contains(refused(ck, true).first, "CHECKPOINT_MISMATCH"));
  }
  {
    fl::MemoryCheckpoint mem;
    CHECK(flowtest::contains(refused(mem, false).first, "CHECKPOINT_MISMATCH"));
  }
  {
    const flowtest::temp_path dir{"flowlib_sqlite_test_filecheckpoint"};
    fl::FileCheckpoint file{dir.path.string()};
    const auto [m, rows] = refused(file, false);
    CHECK(flowtest::contains(m, "CHECKPOINT_MISMATCH"));
    CHECK(flowtest::contains(m, "SqliteCheckpoint"));
    CHECK(rows == 0);
  }
  {
    db_file g("noname");
    fl::SqliteCheckpoint ck{g.path, fast()};
    Durable<Ev> t{""};
    fl::Pipeline p{"q", ck};
    p.flow("g").from(feed).into(t, fl::Append{"g"});
    const std::string m = flowtest::error_of([&] { p.update(); }).what();
    CHECK_MESSAGE(flowtest::contains(m, "needs a name"), m);
  }
}

TEST_CASE("R-EXACT-5, R-DURABLE-1: a full refresh empties the SQL table together with the flow's checkpoint; after a restart the flow reads its source from the start") {
  db_file f("refresh");
  fl::MemorySource<Ev> feed{"feed"};
  for (int i = 0; i < 5; ++i) feed.append(Ev{i % 3, "n" + std::to_string(i), i, i, t0});
  std::vector<Ev> before;
  {
    fl::SqliteCheckpoint ck{f.path, fast()};
    Durable<Ev> t{"t"};
    fl::Pipeline p{"p", ck};
    p.flow("f").from(feed).into(t, Current{"f"});
    p.update();
    before = t.sorted_rows();
    REQUIRE(before.size() == 3);
    p.full_refresh(t);
    CHECK(t.size() == 0);
    CHECK(query(f.path, "SELECT count(*) FROM t") == "0");
    sqlite_durable::check_same(f.path, t);
  }
  fl::SqliteCheckpoint ck{f.path, fast()};
  Durable<Ev> t{"t"};
  fl::Pipeline p{"p", ck};
  p.flow("f").from(feed).into(t, Current{"f"});
  CHECK(p.update().flows[0].input_rows == 5);
  CHECK(t.sorted_rows() == before);
}

TEST_CASE("R-DURABLE-4: a full database fails the batch with a clear error; nothing is committed, memory is rolled back, and the update succeeds once there is room") {
  const auto expected = uninterrupted(true);
  db_file f("full");
  fl::MemorySource<Ev> feed{"feed"};
  after_first_step prog{f.path, feed};
  sqlite3* db = prog.ck.native_handle();
  const std::string pages = flowtest::sql_text(db, "PRAGMA page_count");
  admin(f.path, "SELECT 1");  // (another connection sees the same file)
  REQUIRE(sqlite3_exec(db, ("PRAGMA max_page_count = " + pages).c_str(), nullptr, nullptr, nullptr) == SQLITE_OK);
  for (int s = 1; s < steps; ++s) feed_step(feed, s);
  const fl::error e = flowtest::error_of([&] { prog.pipeline.update(); });
  CHECK((e.code() == fl::errc::storage_io || e.code() == fl::errc::checkpoint_io));
  CHECK(flowtest::contains(e.what(), "the database or disk is full"));
  check_stored(f.path, prog.w);  // the failed batch rolled back in memory too
  REQUIRE(sqlite3_exec(db, "PRAGMA max_page_count = 1000000", nullptr, nullptr, nullptr) == SQLITE_OK);
  prog.pipeline.update();
  CHECK(prog.w.rows() == expected);
  CHECK(prog.w.rows() != prog.committed);
  check_stored(f.path, prog.w);
}

TEST_CASE("R-DURABLE-4: a database opened read-only fails the update with a clear error and is left as it is") {
  db_file f("readonly");
  fl::MemorySource<Ev> feed{"feed"};
  world_rows committed;
  { committed = after_first_step{f.path, feed}.committed; }
  const std::string before = f.bytes();
  feed_step(feed, 1);
  {
    fl::SqliteOptions o = fast();
    o.read_only = true;
    program prog{f.path, feed, o};
    const std::string m = flowtest::error_of([&] { prog.pipeline.update(); }).what();
    CHECK(flowtest::contains(m, "the database file is read-only"));
    CHECK(prog.w.rows() == committed);  // loaded, not changed
  }
  CHECK(f.bytes() == before);
}

/// Another connection that holds the database's write lock while it lives.
struct write_lock {
  sqlite3* other = nullptr;
  explicit write_lock(const std::string& path) {
    REQUIRE(sqlite3_open(path.c_str(), &other) == SQLITE_OK);
    REQUIRE(sqlite3_exec(other, "BEGIN EXCLUSIVE", nullptr, nullptr, nullptr) == SQLITE_OK);
  }
  ~write_lock() {
    CHECK(sqlite3_exec(other, "COMMIT", nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(other);
  }
  write_lock(const write_lock&) = delete;
  write_lock& operator=(const write_lock&) = delete;
};

/// Options whose busy timeout gives up on a lock soon.
fl::SqliteOptions impatient() {
  fl::SqliteOptions o = fast();
  o.busy_timeout_ms = 20;
  return o;
}

TEST_CASE("R-DURABLE-4: a database locked by another connection fails the batch with a 'locked' error; the update succeeds once the lock is released") {
  const auto expected = uninterrupted(true);
  db_file f("locked");
  fl::MemorySource<Ev> feed{"feed"};
  after_first_step prog{f.path, feed, impatient()};
  {
    const write_lock lock{f.path};
    for (int s = 1; s < steps; ++s) feed_step(feed, s);
    const std::string m = flowtest::error_of([&] { prog.pipeline.update(); }).what();
    CHECK(flowtest::contains(m, "the database is locked by another connection (busy timeout 20 ms)"));
    CHECK(prog.w.rows() == prog.committed);
  }
  prog.pipeline.update();
  CHECK(prog.w.rows() == expected);
  check_stored(f.path, prog.w);
}

TEST_CASE("R-WHERE-5, R-DURABLE-4: a direct insert into a SqliteStorage table while another connection holds the write lock fails as a whole and changes nothing; once the lock is released it is written at once") {
  db_file f("dml_locked");
  fl::MemorySource<Ev> feed{"feed"};
  after_first_step prog{f.path, feed, impatient()};
  const std::vector<Ev> direct{Ev{100, "direct", 1, 1, t0}, Ev{101, "direct too", 2, 2, t0}};
  {
    const write_lock lock{f.path};
    CHECK(flowtest::error_of([&] { fl::dml_insert(prog.w.log, direct); }).code() == fl::errc::storage_io);
    CHECK(prog.w.rows() == prog.committed);
  }
  check_stored(f.path, prog.w);
  fl::dml_insert(prog.w.log, direct);
  check_stored(f.path, prog.w);
  CHECK(prog.w.log.size() == prog.committed.log.size() + 2);
  // The failed attempt left nothing behind: the next update commits.
  feed_step(feed, 1);
  CHECK(prog.pipeline.update().batches() > 0);
  check_stored(f.path, prog.w);
}

TEST_CASE("R-DURABLE-5: the tables are readable by the sqlite3 shell while the pipeline is open") {
  db_file f("shell");
  fl::MemorySource<Ev> feed{"feed"};
  after_first_step prog{f.path, feed, fl::SqliteOptions{}};  // default options
  const std::string sql = "SELECT count(*) FROM current";
  std::string got;
  if (std::system("command -v sqlite3 > /dev/null 2>&1") == 0) {
    const std::string cmd = "sqlite3 -readonly '" + f.path + "' \"" + sql + "\"";
    FILE* pipe = ::popen(cmd.c_str(), "r");
    REQUIRE(pipe != nullptr);
    char buf[256];
    while (std::fgets(buf, sizeof buf, pipe) != nullptr) got += buf;
    CHECK(::pclose(pipe) == 0);
    while (!got.empty() && (got.back() == '\n' || got.back() == '\r')) got.pop_back();
  } else {
    MESSAGE("the sqlite3 shell was not found: reading through a second read-only connection");
    got = query(f.path, sql);
  }
  CHECK(got == std::to_string(prog.w.current.size()));
  CHECK(prog.w.current.size() > 0);
}

TEST_CASE("R-DURABLE-4, R-EXACT-1: a batch whose COMMIT fails does not count: memory is rolled back and the retry gives the uninterrupted result") {
  const auto expected = uninterrupted();
  db_file f("commit_fails");
  fl::MemorySource<Ev> feed{"feed"};
  // Armed just before a batch's commit: SQLite's commit hook turns that one
  // COMMIT into a rollback, as a failing disk would.
  bool armed = false;
  int failed_commits = 0;
  struct hook_state {
    bool* armed;
    int* failed;
  } state{&armed, &failed_commits};
  int batches = 0;
  fl::PipelineOptions opt;
  opt.fault_hook = [&](fl::fault_point at, std::string_view, std::uint64_t) {
    if (at == fl::fault_point::before_commit && ++batches % 3 == 0) armed = true;
  };
  program prog{f.path, feed, fast(), opt};
  sqlite3_commit_hook(
      prog.ck.native_handle(),
      [](void* p) -> int {
        auto* s = static_cast<hook_state*>(p);
        if (!*s->armed) return 0;
        *s->armed = false;
        ++*s->failed;
        return 1;
      },
      &state);
  int errors = 0;
  for (int s = 0; s < steps; ++s) {
    feed_step(feed, s);
    for (;;) {
      try {
        prog.pipeline.update();
        break;
      } catch (const fl::error& e) {
        ++errors;
        CHECK(e.code() == fl::errc::checkpoint_io);
        CHECK(flowtest::contains(e.what(), "committing a batch"));
        check_stored(f.path, prog.w);  // memory rolled back to what the database holds
      }
    }
  }
  sqlite3_commit_hook(prog.ck.native_handle(), nullptr, nullptr);
  // Flows of one wave (default threads) may both fail their COMMIT in one
  // update, which reports one error for both.
  CHECK(errors <= failed_commits);
  CHECK(errors > 3);
  CHECK(prog.w.rows() == expected);
  check_stored(f.path, prog.w);
}

}  // namespace storage_sqlite_sqlite
