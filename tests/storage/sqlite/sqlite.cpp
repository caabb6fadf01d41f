// SqliteStorage and SqliteCheckpoint: column mapping, reopening, refusals,
// failures at every step of a batch and of the database (full, read-only,
// locked), and the tables as other SQLite readers see them (R-EXACT-*,
// R-TABLE-*, R-DURABLE-*).
#include <doctest/doctest.h>

#include <flowlib/checkpoint/file.hpp>
#include <flowlib/checkpoint/memory.hpp>
#include <flowlib/checkpoint/sqlite.hpp>
#include <flowlib/flowlib.hpp>
#include <flowlib/pipeline.hpp>
#include <flowlib/source/memory.hpp>
#include <flowlib/source/table.hpp>
#include <flowlib/storage/sqlite.hpp>

#include <support/temp_files.hpp>

#include <sqlite3.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace storage_sqlite_sqlite {

namespace fl = flowlib;

using ms_time = std::chrono::sys_time<std::chrono::milliseconds>;
const ms_time t0{std::chrono::milliseconds(1'700'000'000'000)};

struct Ev {
  std::int64_t id = 0;
  std::string name;
  std::int64_t amount = 0;
  std::int64_t seq = 0;
  ms_time at{};
  friend bool operator==(const Ev&, const Ev&) = default;
};
FLOWLIB_SCHEMA(Ev, id, name, amount, seq, at);

struct Cur {
  std::int64_t id = 0;
  std::string name;
  std::int64_t amount = 0;
  friend bool operator==(const Cur&, const Cur&) = default;
};
FLOWLIB_SCHEMA(Cur, id, name, amount);

struct Hist {
  std::int64_t id = 0;
  std::string name;
  std::int64_t amount = 0;
  std::int64_t start_at = 0;
  std::optional<std::int64_t> end_at;
  friend bool operator==(const Hist&, const Hist&) = default;
};
FLOWLIB_SCHEMA(Hist, id, name, amount, (start_at, "__START_AT"), (end_at, "__END_AT"));

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

using Current = fl::ReplaceUsing<fl::Key<&Ev::id>, fl::Seq<&Ev::seq>>;
using Cdc1 = fl::AutoCdc<fl::Key<&Ev::id>, fl::Seq<&Ev::seq>, fl::Scd1, fl::except_column_list<"seq", "at">>;
using Cdc2 = fl::AutoCdc<fl::Key<&Ev::id>, fl::Seq<&Ev::seq>, fl::Scd2<>, fl::except_column_list<"seq", "at">>;
using Dedup = fl::DedupWithinWatermark<fl::Key<&Ev::id, &Ev::seq>, fl::EventTime<&Ev::at>>;

/// A database file of its own for one test; removed (with its WAL files)
/// before and after.
struct db_file : flowtest::temp_db {
  explicit db_file(const std::string& name) : temp_db("flowlib_sqlite_test_" + name) {}
};

fl::SqliteOptions fast() {
  fl::SqliteOptions o;
  o.synchronous = fl::SqliteSync::off;  // these tests do not cut the power
  return o;
}

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

/// The first column of the first row of `sql`, as text ("NULL" for NULL).
std::string query(sqlite3* db, const std::string& sql) {
  sqlite3_stmt* st = nullptr;
  REQUIRE(sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) == SQLITE_OK);
  std::string out = "(no row)";
  if (sqlite3_step(st) == SQLITE_ROW) {
    const auto* t = sqlite3_column_text(st, 0);
    out = t != nullptr ? reinterpret_cast<const char*>(t) : "NULL";
  }
  sqlite3_finalize(st);
  return out;
}
std::string query(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
  const std::string out = query(db, sql);
  sqlite3_close(db);
  return out;
}

template <class Table>
std::map<fl::row_id, typename Table::row_type> by_id(const Table& t) {
  std::map<fl::row_id, typename Table::row_type> m;
  t.store().for_each_row([&](fl::row_id id, const auto& r) { m.emplace(id, r); });
  return m;
}

/// What the database holds for table `name`: its rows by id, as a fresh
/// table attached through a read-only connection loads them.
template <class Row>
struct stored {
  std::map<fl::row_id, Row> rows;
  std::size_t id_bound = 0;
  std::vector<Row> log;
  std::uint64_t log_begin = 0, log_end = 0;
};
template <class Row>
stored<Row> load(const std::string& path, const std::string& name) {
  fl::SqliteOptions o;
  o.read_only = true;
  fl::SqliteCheckpoint ck{path, o};
  Durable<Row> t{name};
  t.store().attach(ck, t.name(), t.append_log());
  stored<Row> s;
  s.rows = by_id(t);
  s.id_bound = t.store().id_bound();
  s.log_begin = t.append_log().begin_offset();
  s.log_end = t.append_log().end_offset();
  t.append_log().read(s.log_begin, s.log_end, s.log);
  return s;
}
template <class Row>
void check_same(const std::string& path, const Durable<Row>& t) {
  const auto s = load<Row>(path, t.name());
  CHECK(s.rows == by_id(t));
  CHECK(s.id_bound == t.store().id_bound());
  CHECK(s.log_begin == t.append_log().begin_offset());
  CHECK(s.log_end == t.append_log().end_offset());
}

/// The tables of the main scenario: a new set is a restarted program.
struct world {
  Durable<Ev> bronze{"bronze"};
  Durable<Ev> current{"current"};
  Durable<Cur> users1{"users1"};
  Durable<Hist> users2{"users2"};
  Durable<Ev> log{"log"};
  Durable<fl::Quarantined<Ev>> rejected{"rejected"};

  void declare(fl::Pipeline& p, fl::MemorySource<Ev>& feed) {
    p.flow("ingest")
        .from(feed)
        .through(Dedup{std::chrono::seconds(30), "dedup"})
        .max_rows_per_batch(7)
        .into(bronze, fl::Append{"ingest"});
    p.flow("current").from(fl::TableSource{bronze}).max_rows_per_batch(5).into(current, Current{"current"});
    p.flow("users1").from(fl::TableSource{bronze}).max_rows_per_batch(6).into(users1, Cdc1{"users1"});
    p.flow("users2").from(fl::TableSource{bronze}).max_rows_per_batch(4).into(users2, Cdc2{"users2"});
    p.flow("log")
        .from(feed)
        .quarantine(rejected, fl::expectations(fl::expect_or_quarantine(
                                  "non_negative", [](const Ev& e) { return e.amount >= 0; })))
        .max_rows_per_batch(9)
        .into(log, fl::Append{"log"});
  }
  struct result {
    std::vector<Ev> bronze, current, log;
    std::vector<Cur> users1;
    std::vector<Hist> users2;
    std::vector<fl::Quarantined<Ev>> rejected;
    friend bool operator==(const result&, const result&) = default;
  };
  result rows() const {
    return {bronze.sorted_rows(), current.sorted_rows(), log.sorted_rows(),
            users1.sorted_rows(), users2.sorted_rows(), rejected.sorted_rows()};
  }
  void check_stored(const std::string& path) const {
    check_same(path, bronze);
    check_same(path, current);
    check_same(path, users1);
    check_same(path, users2);
    check_same(path, log);
    check_same(path, rejected);
  }
};

/// Step `s` of the feed: new events, some redelivered, some negative.
void feed_step(fl::MemorySource<Ev>& feed, int s) {
  for (int i = 0; i < 12; ++i) {
    const Ev e{(s * 7 + i) % 9, "n" + std::to_string(s) + "_" + std::to_string(i),
               i % 5 == 4 ? -1 : i, s * 100 + i, t0 + std::chrono::seconds(s * 20 + i)};
    feed.append(e);
    if (i % 4 == 1) feed.append(e);  // a redelivery: dedup drops it
  }
}

constexpr int steps = 4;

/// The main scenario run without interruption: the expected result. With
/// `together`, the steps after the first are fed at once, to one update.
world::result uninterrupted(bool together = false) {
  db_file f("uninterrupted");
  fl::MemorySource<Ev> feed{"feed"};
  fl::SqliteCheckpoint ck{f.path, fast()};
  world w;
  fl::Pipeline p{"main", ck};
  w.declare(p, feed);
  for (int s = 0; s < steps; ++s) {
    feed_step(feed, s);
    if (!together || s == 0 || s == steps - 1) p.update();
  }
  return w.rows();
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const fl::error& e) {
    return e.what();
  }
  return "no error";
}

struct injected : std::runtime_error {
  using std::runtime_error::runtime_error;
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
  const auto s = load<AllTypes>(f.path, "all_types");
  std::vector<AllTypes> back;
  for (const auto& [id, r] : s.rows) back.push_back(r);
  CHECK(back == rows);
  // As other SQL readers see the values.
  const std::string q = "SELECT %s FROM all_types WHERE id = 1";
  auto sql = [&](const std::string& expr, int id = 1) {
    return query(f.path, "SELECT " + expr + " FROM all_types WHERE id = " + std::to_string(id));
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
  CHECK(query(f.path, "SELECT count(*) FROM hist") == "2");
  CHECK(query(f.path, "SELECT \"__END_AT\" FROM hist WHERE name = 'a'") == "20");
  CHECK(query(f.path, "SELECT typeof(\"__END_AT\") FROM hist WHERE name = 'b'") == "null");
  CHECK(query(f.path, "SELECT \"__START_AT\" FROM hist WHERE name = 'b'") == "20");
}

TEST_CASE("R-EXACT-1, R-DURABLE-1: reopening between updates (new tables, checkpoint and pipeline) gives the uninterrupted result; every row keeps its id") {
  const auto expected = uninterrupted();
  db_file f("reopen");
  fl::MemorySource<Ev> feed{"feed"};
  world::result last;
  for (int s = 0; s < steps; ++s) {
    feed_step(feed, s);
    fl::SqliteCheckpoint ck{f.path, fast()};
    world w;
    fl::Pipeline p{"main", ck};
    w.declare(p, feed);
    const auto summary = p.update();
    CHECK(summary.batches() > 0);
    w.check_stored(f.path);  // rows, ids, id bounds and append logs as committed
    last = w.rows();
  }
  CHECK(last.bronze.size() > 0);
  CHECK(last.users2.size() > last.users1.size());
  CHECK(last.rejected.size() > 0);
  CHECK(last == expected);
  // Reopened once more with nothing new: nothing to do, same rows.
  fl::SqliteCheckpoint ck{f.path, fast()};
  world w;
  fl::Pipeline p{"main", ck};
  w.declare(p, feed);
  CHECK(p.update().batches() == 0);
  CHECK(w.rows() == expected);
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
    fl::SqliteCheckpoint ck{f.path, fast()};
    world w;
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
    fl::Pipeline p{"main", ck, opt};
    w.declare(p, feed);
    for (int s = 0; s < steps; ++s) {
      feed_step(feed, s);
      try {
        p.update();
      } catch (const injected&) {
        ++failures;
        w.check_stored(f.path);  // the database holds what memory holds
        p.update();              // the retry
      }
    }
    w.check_stored(f.path);
    CHECK(w.rows() == expected);
    if (!hit) break;
  }
  CHECK(failures > 20);
  CHECK(points.size() == 7);
}

TEST_CASE("R-DURABLE-3: a changed SQL table (a missing, extra or retyped column) is refused naming the table and the column; the file is left byte for byte") {
  db_file f("schema");
  fl::MemorySource<Ev> feed{"feed"};
  feed.append(Ev{1, "a", 1, 1, t0});
  {
    fl::SqliteCheckpoint ck{f.path, fast()};
    Durable<Ev> t{"events"};
    fl::Pipeline p{"schema", ck};
    p.flow("e").from(feed).into(t, fl::Append{"e"});
    p.update();
  }
  auto refused = [&](const std::string& change, const std::string& column) {
    admin(f.path, change);
    const std::string before = f.bytes();
    REQUIRE(!before.empty());
    {
      fl::SqliteCheckpoint ck{f.path, fast()};
      Durable<Ev> t{"events"};
      fl::Pipeline p{"schema", ck};
      p.flow("e").from(feed).into(t, fl::Append{"e"});
      try {
        p.update();
        FAIL("no error");
      } catch (const fl::error& e) {
        CHECK(e.code() == fl::errc::checkpoint_mismatch);
        CHECK(e.column() == column);
        CHECK(std::string(e.what()).find("SQL table 'events'") != std::string::npos);
      }
    }
    CHECK(f.bytes() == before);
  };
  SUBCASE("missing") { refused("ALTER TABLE events DROP COLUMN name", "name"); }
  SUBCASE("extra") { refused("ALTER TABLE events ADD COLUMN extra INTEGER", "extra"); }
  SUBCASE("retyped") {
    refused("DROP TABLE events; CREATE TABLE events(\"__flowlib_row_id\" INTEGER PRIMARY KEY, id "
            "INTEGER, name TEXT, amount TEXT, seq INTEGER, at INTEGER)",
            "amount");
  }
}

TEST_CASE("R-DURABLE-3: a database of a newer format version is refused and left as it is") {
  db_file f("version");
  { fl::SqliteCheckpoint ck{f.path, fast()}; }
  admin(f.path, "UPDATE flowlib_meta SET value = 2 WHERE key = 'format_version'");
  const std::string before = f.bytes();
  try {
    fl::SqliteCheckpoint ck{f.path, fast()};
    FAIL("no error");
  } catch (const fl::error& e) {
    CHECK(e.code() == fl::errc::checkpoint_corrupt);
    CHECK(std::string(e.what()).find("format version 2 is newer") != std::string::npos);
  }
  CHECK(f.bytes() == before);
  // Not a database at all.
  db_file g("not_a_db");
  { std::ofstream(g.path) << "this is not an SQLite database, it is a text file of some length......"; }
  try {
    fl::SqliteCheckpoint ck{g.path, fast()};
    FAIL("no error");
  } catch (const fl::error& e) {
    CHECK(e.code() == fl::errc::checkpoint_corrupt);
    CHECK(std::string(e.what()).find("not a database") != std::string::npos);
  }
}

TEST_CASE("R-EXACT-3: another flow definition over the same database is a checkpoint mismatch; a durable table needs the SQLite checkpoint") {
  db_file f("definition");
  fl::MemorySource<Ev> feed{"feed"};
  feed.append(Ev{1, "a", 1, 1, t0});
  {
    fl::SqliteCheckpoint ck{f.path, fast()};
    Durable<Ev> t{"t"};
    fl::Pipeline p{"p", ck};
    p.flow("f").from(feed).into(t, Current{"f"});
    p.update();
  }
  {
    fl::SqliteCheckpoint ck{f.path, fast()};
    Durable<Ev> t{"t"};
    fl::Pipeline p{"p", ck};
    p.flow("f").from(feed).into(t, fl::Append{"f"});
    const auto m = message_of([&] { p.update(); });
    CHECK(m.find("CHECKPOINT_MISMATCH") != std::string::npos);
  }
  {
    fl::MemoryCheckpoint mem;
    Durable<Ev> t{"t"};
    fl::Pipeline p{"p", mem};
    p.flow("f").from(feed).into(t, Current{"f"});
    CHECK(message_of([&] { p.update(); }).find("CHECKPOINT_MISMATCH") != std::string::npos);
  }
  {
    const auto dir = std::filesystem::temp_directory_path() /
                     ("flowlib_sqlite_test_" + std::to_string(::getpid()) + "_filecheckpoint");
    std::filesystem::remove_all(dir);
    {
      fl::FileCheckpoint file{dir.string()};
      Durable<Ev> t{"t"};
      fl::Pipeline p{"p", file};
      p.flow("f").from(feed).into(t, Current{"f"});
      const auto m = message_of([&] { p.update(); });
      CHECK(m.find("CHECKPOINT_MISMATCH") != std::string::npos);
      CHECK(m.find("SqliteCheckpoint") != std::string::npos);
      CHECK(t.size() == 0);
    }
    std::filesystem::remove_all(dir);
  }
  {
    db_file g("noname");
    fl::SqliteCheckpoint ck{g.path, fast()};
    Durable<Ev> t{""};
    fl::Pipeline p{"q", ck};
    p.flow("g").from(feed).into(t, fl::Append{"g"});
    const auto m = message_of([&] { p.update(); });
    CHECK_MESSAGE(m.find("needs a name") != std::string::npos, m);
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
    check_same(f.path, t);
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
  fl::SqliteCheckpoint ck{f.path, fast()};
  world w;
  fl::Pipeline p{"main", ck};
  w.declare(p, feed);
  feed_step(feed, 0);
  p.update();
  const auto committed = w.rows();
  const std::string pages = query(ck.native_handle(), "PRAGMA page_count");
  admin(f.path, "SELECT 1");  // (another connection sees the same file)
  REQUIRE(sqlite3_exec(ck.native_handle(), ("PRAGMA max_page_count = " + pages).c_str(), nullptr,
                       nullptr, nullptr) == SQLITE_OK);
  for (int s = 1; s < steps; ++s) feed_step(feed, s);
  try {
    p.update();
    FAIL("no error");
  } catch (const fl::error& e) {
    CHECK((e.code() == fl::errc::storage_io || e.code() == fl::errc::checkpoint_io));
    CHECK(std::string(e.what()).find("the database or disk is full") != std::string::npos);
  }
  w.check_stored(f.path);
  REQUIRE(sqlite3_exec(ck.native_handle(), "PRAGMA max_page_count = 1000000", nullptr, nullptr,
                       nullptr) == SQLITE_OK);
  p.update();
  CHECK(w.rows() == expected);
  CHECK(w.rows() != committed);
  w.check_stored(f.path);
}

TEST_CASE("R-DURABLE-4: a database opened read-only fails the update with a clear error and is left as it is") {
  db_file f("readonly");
  fl::MemorySource<Ev> feed{"feed"};
  feed_step(feed, 0);
  world::result committed;
  {
    fl::SqliteCheckpoint ck{f.path, fast()};
    world w;
    fl::Pipeline p{"main", ck};
    w.declare(p, feed);
    p.update();
    committed = w.rows();
  }
  const std::string before = f.bytes();
  feed_step(feed, 1);
  {
    fl::SqliteOptions o = fast();
    o.read_only = true;
    fl::SqliteCheckpoint ck{f.path, o};
    world w;
    fl::Pipeline p{"main", ck};
    w.declare(p, feed);
    const auto m = message_of([&] { p.update(); });
    CHECK(m.find("the database file is read-only") != std::string::npos);
    CHECK(w.rows() == committed);  // loaded, not changed
  }
  CHECK(f.bytes() == before);
}

TEST_CASE("R-DURABLE-4: a database locked by another connection fails the batch with a 'locked' error; the update succeeds once the lock is released") {
  const auto expected = uninterrupted(true);
  db_file f("locked");
  fl::MemorySource<Ev> feed{"feed"};
  fl::SqliteOptions o = fast();
  o.busy_timeout_ms = 20;
  fl::SqliteCheckpoint ck{f.path, o};
  world w;
  fl::Pipeline p{"main", ck};
  w.declare(p, feed);
  feed_step(feed, 0);
  p.update();
  const auto committed = w.rows();
  sqlite3* other = nullptr;
  REQUIRE(sqlite3_open(f.path.c_str(), &other) == SQLITE_OK);
  REQUIRE(sqlite3_exec(other, "BEGIN EXCLUSIVE", nullptr, nullptr, nullptr) == SQLITE_OK);
  for (int s = 1; s < steps; ++s) feed_step(feed, s);
  const auto m = message_of([&] { p.update(); });
  CHECK(m.find("the database is locked by another connection (busy timeout 20 ms)") != std::string::npos);
  CHECK(w.rows() == committed);
  REQUIRE(sqlite3_exec(other, "COMMIT", nullptr, nullptr, nullptr) == SQLITE_OK);
  sqlite3_close(other);
  p.update();
  CHECK(w.rows() == expected);
  w.check_stored(f.path);
}

TEST_CASE("R-DURABLE-5: the tables are readable by the sqlite3 shell while the pipeline is open") {
  db_file f("shell");
  fl::MemorySource<Ev> feed{"feed"};
  feed_step(feed, 0);
  fl::SqliteCheckpoint ck{f.path};  // default options
  world w;
  fl::Pipeline p{"main", ck};
  w.declare(p, feed);
  p.update();
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
  CHECK(got == std::to_string(w.current.size()));
  CHECK(w.current.size() > 0);
}

TEST_CASE("R-DURABLE-4, R-EXACT-1: a batch whose COMMIT fails does not count: memory is rolled back and the retry gives the uninterrupted result") {
  const auto expected = uninterrupted();
  db_file f("commit_fails");
  fl::MemorySource<Ev> feed{"feed"};
  fl::SqliteCheckpoint ck{f.path, fast()};
  // Armed just before a batch's commit: SQLite's commit hook turns that one
  // COMMIT into a rollback, as a failing disk would.
  bool armed = false;
  int failed_commits = 0;
  struct hook_state {
    bool* armed;
    int* failed;
  } state{&armed, &failed_commits};
  sqlite3_commit_hook(
      ck.native_handle(),
      [](void* p) -> int {
        auto* s = static_cast<hook_state*>(p);
        if (!*s->armed) return 0;
        *s->armed = false;
        ++*s->failed;
        return 1;
      },
      &state);
  int batches = 0;
  fl::PipelineOptions opt;
  opt.fault_hook = [&](fl::fault_point at, std::string_view, std::uint64_t) {
    if (at == fl::fault_point::before_commit && ++batches % 3 == 0) armed = true;
  };
  world w;
  fl::Pipeline p{"main", ck, opt};
  w.declare(p, feed);
  int errors = 0;
  for (int s = 0; s < steps; ++s) {
    feed_step(feed, s);
    for (;;) {
      try {
        p.update();
        break;
      } catch (const fl::error& e) {
        ++errors;
        CHECK(e.code() == fl::errc::checkpoint_io);
        CHECK(std::string(e.what()).find("committing a batch") != std::string::npos);
        w.check_stored(f.path);  // memory rolled back to what the database holds
      }
    }
  }
  sqlite3_commit_hook(ck.native_handle(), nullptr, nullptr);
  // Flows of one wave (default threads) may both fail their COMMIT in one
  // update, which reports one error for both.
  CHECK(errors <= failed_commits);
  CHECK(errors > 3);
  CHECK(w.rows() == expected);
  w.check_stored(f.path);
}

}  // namespace storage_sqlite_sqlite
