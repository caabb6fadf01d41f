// Reopen semantics: every flow type, run through a Pipeline over
// MemorySources, on two configurations:
//   MemoryConfig  MemoryStorage tables + MemoryCheckpoint;
//   SqliteConfig  SqliteStorage tables + SqliteCheckpoint in a temporary file.
// Each case runs (a) in one Pipeline, and (b) closing and reopening between
// every two batches: for SQLite the pipeline, the tables and the checkpoint
// are destroyed and built again from the file; for memory the tables and the
// checkpoint are kept and a new Pipeline is built (a restart of the program
// over state that outlives it). Both must give the rows each rule says
// (R-TABLE-2, R-USING-4, R-CDC-1..4, R-CDC-8, R-DEDUP-3), so they are equal to
// each other, and an update after the last batch must find nothing to do
// (R-EXACT-2). Randomised over several seeds and batch splits. A REPLACE
// WHERE target on SqliteStorage is reopened from the file and compared with
// a memory run (R-DURABLE-1, R-WHERE-1, R-WHERE-7), and rows inserted into
// it directly are written at once and found after a restart (R-WHERE-5).
#include <doctest/doctest.h>
#include <sqlite3.h>

#include <flowlib/checkpoint/memory.hpp>
#include <flowlib/checkpoint/sqlite.hpp>
#include <flowlib/flowlib.hpp>
#include <flowlib/pipeline.hpp>
#include <flowlib/source/memory.hpp>
#include <flowlib/source/snapshot.hpp>
#include <flowlib/source/table.hpp>
#include <flowlib/storage/sqlite.hpp>

#include <support/auto_cdc_model.hpp>

#include <support/rows.hpp>
#include <support/temp_files.hpp>

#include <algorithm>
#include <chrono>
#include <compare>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace storage_sqlite_durable_semantics {

namespace fl = flowlib;

using ms_time = std::chrono::sys_time<std::chrono::milliseconds>;

/// A row with a column of every kind the SQL mapping encodes.
struct Rec {
  std::int64_t k = 0;
  std::int64_t seq = 0;
  std::string v;
  std::optional<double> x;
  std::chrono::sys_days day{};
  ms_time at{};
  bool flag = false;
  friend bool operator==(const Rec&, const Rec&) = default;
  friend auto operator<=>(const Rec&, const Rec&) = default;
};
FLOWLIB_SCHEMA(Rec, k, seq, v, x, day, at, flag);

using flowtest::Item;
using flowtest::ItemHistory;

using Snap = fl::Snapshot<Item, std::int64_t>;
using Replace = fl::ReplaceUsing<fl::Key<&Rec::k>, fl::Seq<&Rec::seq>>;
using Dedup = fl::DedupWithinWatermark<fl::Key<&Rec::k, &Rec::seq>, fl::EventTime<&Rec::at>>;
using SnapScd1 = fl::AutoCdcFromSnapshot<fl::Key<&Item::k>, fl::Scd1>;
using SnapScd2 = fl::AutoCdcFromSnapshot<fl::Key<&Item::k>, fl::Scd2<>>;

// --- The two configurations ------------------------------------------------------

/// Tables and checkpoint in memory; reopening builds only a new Pipeline.
struct MemoryConfig {
  using storage = fl::MemoryStorage;
  template <class Tables>
  struct env {
    fl::MemoryCheckpoint checkpoint_;
    Tables tables_;
    fl::checkpoint_store& checkpoint() { return checkpoint_; }
    Tables& tables() { return tables_; }
    void reopen() {}
  };
};

/// Tables and checkpoint in one SQLite file; reopening destroys both and
/// builds them again from the file (the tables load at the next update).
struct SqliteConfig {
  using storage = fl::SqliteStorage;
  template <class Tables>
  struct env {
    flowtest::temp_db db{"flowlib_durable"};  // removed after close()
    std::unique_ptr<fl::SqliteCheckpoint> checkpoint_;
    std::unique_ptr<Tables> tables_;
    env() { open(); }
    ~env() { close(); }
    env(const env&) = delete;
    env& operator=(const env&) = delete;
    fl::checkpoint_store& checkpoint() { return *checkpoint_; }
    Tables& tables() { return *tables_; }
    void reopen() {
      close();
      open();
    }

   private:
    void open() {
      // synchronous = off: the suite checks reopening, not power loss, and
      // flushing to the disk would make it slow (a process that ends loses
      // nothing at any level; durable_crash_test kills with the default).
      checkpoint_ = std::make_unique<fl::SqliteCheckpoint>(db.path, fl::SqliteOptions{.synchronous = fl::SqliteSync::off});
      tables_ = std::make_unique<Tables>();
    }
    void close() {
      tables_.reset();  // the tables first: they use the checkpoint's connection
      checkpoint_.reset();
    }
  };
};

// --- The runner ------------------------------------------------------------------

/// Declares the flows with `declare(pipeline, tables)`, then for each of
/// `batches` steps appends that step's rows (`feed(i)`) and updates; with
/// `reopen`, closes and reopens everything after every update. Returns
/// `result(tables)` after a last update that must find nothing new.
template <class Config, template <class> class TablesT, class Declare, class Feed, class Result>
auto run_case(std::size_t batches, bool reopen, Declare&& declare, Feed&& feed, Result&& result) {
  using Tables = TablesT<typename Config::storage>;
  typename Config::template env<Tables> env;
  std::unique_ptr<fl::Pipeline> p;
  const auto open = [&] {
    p = std::make_unique<fl::Pipeline>("durable", env.checkpoint());
    declare(*p, env.tables());
  };
  open();
  for (std::size_t i = 0; i < batches; ++i) {
    feed(i);
    p->update();
    if (reopen) {
      p.reset();
      env.reopen();
      open();
    }
  }
  CHECK(p->update().batches() == 0);  // R-EXACT-2
  return result(env.tables());
}

using flowtest::sorted;

/// Cuts `rows` into random consecutive pieces of at least one row: about
/// 1..max_batches of them, now and then a few more.
template <class T>
std::vector<std::vector<T>> split(const std::vector<T>& rows, std::mt19937& rng, std::size_t max_batches = 8) {
  std::vector<std::vector<T>> out;
  std::size_t i = 0;
  const std::size_t target = std::uniform_int_distribution<std::size_t>(1, max_batches)(rng);
  while (i < rows.size()) {
    const std::size_t left = rows.size() - i;
    const std::size_t pieces_left = target > out.size() ? target - out.size() : 1;
    const std::size_t most = pieces_left <= 1 ? left : std::max<std::size_t>(1, 2 * left / pieces_left);
    const std::size_t len = std::uniform_int_distribution<std::size_t>(1, std::min(left, most))(rng);
    out.emplace_back(rows.begin() + static_cast<std::ptrdiff_t>(i),
                     rows.begin() + static_cast<std::ptrdiff_t>(i + len));
    i += len;
  }
  return out;
}

#if defined(__SANITIZE_ADDRESS__)
constexpr unsigned seeds = 4;
#else
constexpr unsigned seeds = 10;
#endif

const ms_time t0{std::chrono::milliseconds(1'760'000'000'000)};

/// Random records: keys 0..5, sequences 0..7 (ties on purpose), values that
/// exercise every column type, NULL included.
std::vector<Rec> random_recs(std::mt19937& rng, int n) {
  std::uniform_int_distribution<int> key(0, 5), seq(0, 7), pct(0, 99), day(-400, 400);
  std::vector<Rec> out;
  for (int i = 0; i < n; ++i) {
    Rec r;
    r.k = key(rng);
    r.seq = seq(rng);
    r.v = pct(rng) < 10 ? std::string("") : "value " + std::to_string(pct(rng)) + (pct(rng) < 10 ? " it's \"quoted\"" : "");
    if (pct(rng) < 70) r.x = static_cast<double>(pct(rng)) / 3.0 - 10.0;
    r.day = std::chrono::sys_days{std::chrono::January / 1 / 2026} + std::chrono::days(day(rng));
    r.at = t0 + std::chrono::milliseconds(i * 1000 + pct(rng));
    r.flag = pct(rng) < 50;
    out.push_back(r);
  }
  return out;
}

/// R-USING-4: for every key, all of the input's rows carrying that key's
/// highest sequence.
std::vector<Rec> replace_using_model(const std::vector<Rec>& rows) {
  std::map<std::int64_t, std::int64_t> top;
  for (const Rec& r : rows) {
    auto [it, fresh] = top.try_emplace(r.k, r.seq);
    if (!fresh) it->second = std::max(it->second, r.seq);
  }
  std::vector<Rec> out;
  for (const Rec& r : rows)
    if (top.at(r.k) == r.seq) out.push_back(r);
  return sorted(out);
}

// --- Tables of each case ---------------------------------------------------------

template <class S>
struct append_tables {
  fl::StreamingTable<Rec, S> events{"events"};
  fl::ManagedTable<Rec, S> backfill{"backfill"};
};

template <class S>
struct replace_tables {
  fl::StreamingTable<Rec, S> current{"current"};
  fl::StreamingTable<Rec, S> bronze{"bronze"};
  fl::StreamingTable<Rec, S> silver{"silver"};
};

template <class S>
struct cdc_tables {
  fl::StreamingTable<model::Row, S> scd1{"users_scd1"};
  fl::StreamingTable<model::Version, S> scd2{"users_scd2"};
};

template <class S>
struct snapshot_tables {
  fl::StreamingTable<Item, S> scd1{"items"};
  fl::StreamingTable<ItemHistory, S> scd2{"items_history"};
};

template <class S>
struct dedup_tables {
  fl::StreamingTable<Rec, S> events{"events"};
};

}  // namespace storage_sqlite_durable_semantics

// doctest's names for the configurations (specialisations in doctest's namespace).
TYPE_TO_STRING_AS("durable_semantics::MemoryConfig",
                  storage_sqlite_durable_semantics::MemoryConfig);
TYPE_TO_STRING_AS("durable_semantics::SqliteConfig",
                  storage_sqlite_durable_semantics::SqliteConfig);

namespace storage_sqlite_durable_semantics {

TEST_CASE_TEMPLATE("R-DURABLE-1, R-TABLE-2: append, fan-in of two sources and ONCE give the same rows with and without reopening",
                   Config, MemoryConfig, SqliteConfig) {
  for (unsigned seed = 1; seed <= seeds; ++seed) {
    std::mt19937 rng(seed);
    const auto a = split(random_recs(rng, 30), rng);
    const auto b = split(random_recs(rng, 20), rng, a.size());
    std::vector<Rec> all;
    for (const auto& c : a) all.insert(all.end(), c.begin(), c.end());
    for (const auto& c : b) all.insert(all.end(), c.begin(), c.end());
    using result = std::pair<std::vector<Rec>, std::vector<Rec>>;
    std::optional<result> previous;
    for (const bool reopen : {false, true}) {
      CAPTURE(seed);
      CAPTURE(reopen);
      fl::MemorySource<Rec> src_a{"a"};
      fl::MemorySource<Rec> src_b{"b"};
      const auto got = run_case<Config, append_tables>(
          a.size(), reopen,
          [&](fl::Pipeline& p, auto& t) {
            p.flow("from_a").from(src_a).into(t.events, fl::Append{"from_a"});
            p.flow("from_b").from(src_b).into(t.events, fl::Append{"from_b"});
            p.flow("backfill").from(src_a).into(t.backfill, fl::AppendOnce<>{"backfill"});
          },
          [&](std::size_t i) {
            src_a.append(a[i]);
            for (std::size_t j = i; j < b.size() && (j == i || i + 1 == a.size()); ++j) src_b.append(b[j]);
          },
          [](auto& t) { return result(sorted(t.events.sorted_rows()), sorted(t.backfill.sorted_rows())); });
      CHECK(got.first == sorted(all));  // every row of both sources, once
      CHECK(got.second == sorted(a[0]));  // ONCE: what the first update saw, never again
      if (previous) CHECK(got == *previous);
      previous = got;
    }
  }
}

TEST_CASE_TEMPLATE("R-DURABLE-1, R-USING-4: REPLACE USING from a source and through a TableSource (multi-hop) with and without reopening",
                   Config, MemoryConfig, SqliteConfig) {
  for (unsigned seed = 1; seed <= seeds; ++seed) {
    std::mt19937 rng(100 + seed);
    const std::vector<Rec> rows = random_recs(rng, 40);
    const auto batches = split(rows, rng);
    const std::vector<Rec> want = replace_using_model(rows);
    using result = std::pair<std::vector<Rec>, std::vector<Rec>>;
    std::optional<result> previous;
    for (const bool reopen : {false, true}) {
      CAPTURE(seed);
      CAPTURE(reopen);
      fl::MemorySource<Rec> src{"src"};
      const auto got = run_case<Config, replace_tables>(
          batches.size(), reopen,
          [&](fl::Pipeline& p, auto& t) {
            p.flow("current").from(src).into(t.current, Replace{"current"});
            p.flow("bronze").from(src).into(t.bronze, fl::Append{"bronze"});
            p.flow("silver").from(fl::TableSource{t.bronze}).into(t.silver, Replace{"silver"});
          },
          [&](std::size_t i) { src.append(batches[i]); },
          [&](auto& t) {
            CHECK(sorted(t.bronze.sorted_rows()) == sorted(rows));
            return result(sorted(t.current.sorted_rows()), sorted(t.silver.sorted_rows()));
          });
      CHECK(got.first == want);
      CHECK(got.second == want);  // the append log survived every reopen
      if (previous) CHECK(got == *previous);
      previous = got;
    }
  }
}

TEST_CASE_TEMPLATE("R-DURABLE-1, R-CDC-1, R-CDC-2, R-CDC-3, R-CDC-4: AUTO CDC SCD1 (deletes, tombstones, truncates) and SCD2 (history) with and without reopening",
                   Config, MemoryConfig, SqliteConfig) {
  for (unsigned seed = 1; seed <= 3 * seeds; ++seed) {
    std::mt19937 rng(200 + seed);
    // Out of order, then all of it again in another order: late changes
    // and identical redeliveries (R-CDC-1).
    const std::vector<model::Change> scd1_changes = model::random_feed(rng, true);
    const std::vector<model::Change> scd2_changes = model::random_feed(rng, false);
    std::vector<model::Change> feed1 = scd1_changes, feed2 = scd2_changes;
    std::shuffle(feed1.begin(), feed1.end(), rng);
    std::shuffle(feed2.begin(), feed2.end(), rng);
    auto again1 = scd1_changes, again2 = scd2_changes;
    std::shuffle(again1.begin(), again1.end(), rng);
    std::shuffle(again2.begin(), again2.end(), rng);
    feed1.insert(feed1.end(), again1.begin(), again1.end());
    feed2.insert(feed2.end(), again2.begin(), again2.end());
    const auto b1 = split(feed1, rng, 10);
    const auto b2 = split(feed2, rng, b1.size());
    const auto want1 = model::reference_scd1(scd1_changes, false);
    const auto want2 = model::reference_scd2(scd2_changes, true, false);
    using result = std::pair<std::vector<model::Row>, std::vector<model::Version>>;
    std::optional<result> previous;
    for (const bool reopen : {false, true}) {
      CAPTURE(seed);
      CAPTURE(reopen);
      INFO("SCD1 changes: " << scd1_changes);
      INFO("SCD2 changes: " << scd2_changes);
      fl::MemorySource<model::Change> src1{"changes1"};
      fl::MemorySource<model::Change> src2{"changes2"};
      const auto got = run_case<Config, cdc_tables>(
          b1.size(), reopen,
          [&](fl::Pipeline& p, auto& t) {
            p.flow("scd1").from(src1).into(t.scd1, model::Scd1{"scd1"});
            p.flow("scd2").from(src2).into(t.scd2, model::Scd2{"scd2"});
          },
          [&](std::size_t i) {
            src1.append(b1[i]);
            for (std::size_t j = i; j < b2.size() && (j == i || i + 1 == b1.size()); ++j) src2.append(b2[j]);
          },
          [](auto& t) { return result(sorted(t.scd1.sorted_rows()), sorted(t.scd2.sorted_rows())); });
      CHECK(got.first == want1);
      CHECK(got.second == want2);
      if (previous) CHECK(got == *previous);
      previous = got;
    }
  }
}

TEST_CASE_TEMPLATE("R-DURABLE-1, R-CDC-8: AUTO CDC FROM SNAPSHOT, SCD1 and SCD2, with and without reopening", Config,
                   MemoryConfig, SqliteConfig) {
  for (unsigned seed = 1; seed <= seeds; ++seed) {
    std::mt19937 rng(300 + seed);
    std::uniform_int_distribution<int> pct(0, 99);
    std::vector<Snap> snaps;
    std::int64_t version = 0;
    const int n = 2 + pct(rng) % 8;
    for (int s = 0; s < n; ++s) {
      Snap snap;
      version += 1 + pct(rng) % 5;
      snap.version = version;
      for (std::int64_t k = 0; k < 6; ++k)
        if (pct(rng) < 70) snap.rows.push_back({k, "v" + std::to_string(pct(rng) % 3)});
      snaps.push_back(std::move(snap));
    }
    // The model: SCD1 is the last snapshot; SCD2 walks the snapshots in
    // version order, opening a version when a key appears or changes and
    // closing it at the version where it changes or disappears.
    const std::vector<Item> want1 = sorted(snaps.back().rows);
    std::vector<ItemHistory> want2;
    std::map<std::int64_t, std::size_t> open;  // key -> index into want2
    for (const Snap& s : snaps) {
      std::set<std::int64_t> seen;
      for (const Item& it : s.rows) {
        seen.insert(it.k);
        auto o = open.find(it.k);
        if (o != open.end() && want2[o->second].v == it.v) continue;
        if (o != open.end()) want2[o->second].end_at = s.version;
        want2.push_back({it.k, it.v, s.version, std::nullopt});
        open[it.k] = want2.size() - 1;
      }
      for (auto o = open.begin(); o != open.end();) {
        if (seen.contains(o->first)) {
          ++o;
        } else {
          want2[o->second].end_at = s.version;
          o = open.erase(o);
        }
      }
    }
    want2 = sorted(want2);
    const auto batches = split(snaps, rng);
    using result = std::pair<std::vector<Item>, std::vector<ItemHistory>>;
    std::optional<result> previous;
    for (const bool reopen : {false, true}) {
      CAPTURE(seed);
      CAPTURE(reopen);
      fl::MemorySource<Snap> src{"snapshots"};
      const auto got = run_case<Config, snapshot_tables>(
          batches.size(), reopen,
          [&](fl::Pipeline& p, auto& t) {
            p.flow("items").from(src).into(t.scd1, SnapScd1{"items"});
            p.flow("items_history").from(src).into(t.scd2, SnapScd2{"items_history"});
          },
          [&](std::size_t i) { src.append(batches[i]); },
          [](auto& t) { return result(sorted(t.scd1.sorted_rows()), sorted(t.scd2.sorted_rows())); });
      CHECK(got.first == want1);
      CHECK(got.second == want2);
      if (previous) CHECK(got == *previous);
      previous = got;
    }
  }
}

TEST_CASE_TEMPLATE("R-DURABLE-1, R-DEDUP-3: dedup within a watermark in front of an append, with and without reopening (the dedup state survives)",
                   Config, MemoryConfig, SqliteConfig) {
  for (unsigned seed = 1; seed <= seeds; ++seed) {
    std::mt19937 rng(400 + seed);
    std::uniform_int_distribution<int> pct(0, 99);
    const std::vector<Rec> fresh = random_recs(rng, 40);
    // Each record once, in order, with redeliveries of recent ones (their
    // event times are well within the hour the dedup remembers).
    std::vector<Rec> feed;
    std::set<std::pair<std::int64_t, std::int64_t>> seen;
    std::vector<Rec> want;
    for (const Rec& r : fresh) {
      feed.push_back(r);
      if (seen.insert({r.k, r.seq}).second) want.push_back(r);
      if (pct(rng) < 30) feed.push_back(feed[feed.size() - 1 - static_cast<std::size_t>(pct(rng)) % feed.size()]);
    }
    const auto batches = split(feed, rng, 10);
    std::optional<std::vector<Rec>> previous;
    for (const bool reopen : {false, true}) {
      CAPTURE(seed);
      CAPTURE(reopen);
      fl::MemorySource<Rec> src{"src", {.partitions = 1, .guarantee = fl::delivery::at_least_once}};
      const auto got = run_case<Config, dedup_tables>(
          batches.size(), reopen,
          [&](fl::Pipeline& p, auto& t) {
            p.flow("events").from(src).through(Dedup{std::chrono::hours(1), "dedup"}).into(t.events, fl::Append{"events"});
          },
          [&](std::size_t i) { src.append(batches[i]); },
          [](auto& t) { return sorted(t.events.sorted_rows()); });
      CHECK(got == sorted(want));  // each identity once: the first delivery
      if (previous) CHECK(got == *previous);
      previous = got;
    }
  }
}

// --- REPLACE WHERE on a durable target -----------------------------------------

struct Sale {
  std::chrono::sys_days day{};
  std::int64_t id = 0;
  std::int64_t amount = 0;
};
FLOWLIB_SCHEMA(Sale, day, id, amount);

struct DayTotal {
  std::chrono::sys_days day{};
  std::int64_t sales = 0;
  std::int64_t amount = 0;
  friend bool operator==(const DayTotal&, const DayTotal&) = default;
  friend auto operator<=>(const DayTotal&, const DayTotal&) = default;
};
FLOWLIB_SCHEMA(DayTotal, day, sales, amount);

/// Day n of the calendar (day 0 is 2026-01-01), and noon of that day.
inline std::chrono::sys_days sale_day(int n) {
  return std::chrono::sys_days{std::chrono::year{2026} / std::chrono::January / 1} + std::chrono::days(n);
}
inline std::chrono::system_clock::time_point noon(int n) {
  return std::chrono::system_clock::time_point(sale_day(n)) + std::chrono::hours(12);
}
/// The options of the update at noon of day n.
inline fl::UpdateOptions at_noon(int n) {
  fl::UpdateOptions o;
  o.now = noon(n);
  return o;
}

/// The query: one row per day (it keeps days apart, so an incremental update
/// gives what a complete recompute gives, R-WHERE-7).
inline std::vector<DayTotal> daily_totals(std::span<const Sale> sales) {
  std::map<std::chrono::sys_days, DayTotal> by_day;
  for (const Sale& s : sales) {
    DayTotal& t = by_day[s.day];
    t.day = s.day;
    t.sales += 1;
    t.amount += s.amount;
  }
  std::vector<DayTotal> out;
  for (const auto& [d, t] : by_day) out.push_back(t);
  return out;
}

/// The sales a program appends before the update at noon of day n (one
/// append call per update): late sales of days the window has left are
/// never counted (R-WHERE-1).
inline std::vector<Sale> sales_before(int n) {
  switch (n) {
    case 1: return {{sale_day(0), 1, 10}, {sale_day(0), 2, 20}, {sale_day(1), 3, 5}};
    case 2: return {{sale_day(2), 4, 7}, {sale_day(1), 5, 3}, {sale_day(0), 6, 100}};
    case 3: return {{sale_day(3), 7, 1}, {sale_day(2), 8, 2}, {sale_day(1), 9, 50}};
    default: return {};
  }
}

/// The window: yesterday and later, on the update's clock.
inline flowlib::where::expr since_yesterday() {
  namespace w = flowlib::where;
  return w::col("day") >= w::current_date() - w::days(1);
}

/// Declares the REPLACE WHERE flow "totals" (query version "v1").
template <class Table>
void declare_totals(fl::Pipeline& p, fl::MemorySource<Sale>& sales, Table& totals) {
  p.flow("totals").from(sales).query(daily_totals, "v1").into(totals, fl::ReplaceWhere{since_yesterday()});
}

/// The technique of each REPLACE WHERE update in the event log's lines
/// (its planning_information events), in order.
inline std::vector<std::string> techniques_of(const std::vector<std::string>& lines) {
  std::vector<std::string> out;
  for (const std::string& l : lines) {
    if (l.find("\"event_type\":\"planning_information\"") == std::string::npos) continue;
    out.push_back(l.find("\"technique\":\"INCREMENTAL\"") != std::string::npos ? "INCREMENTAL"
                                                                                : "COMPLETE_RECOMPUTE");
  }
  return out;
}

/// What the database at `path` holds for the durable table `name`, as a
/// fresh table attached through a read-only connection loads it.
inline std::vector<DayTotal> stored_totals(const std::string& path, const std::string& name) {
  fl::SqliteCheckpoint ck{path, {.read_only = true}};
  fl::StreamingTable<DayTotal, fl::SqliteStorage> t{name};
  t.store().attach(ck, t.name(), t.append_log());
  return t.sorted_rows();
}

TEST_CASE("R-DURABLE-1, R-WHERE-1, R-WHERE-7: a REPLACE WHERE target on SqliteStorage is written with each update, loaded when the pipeline opens again, and ends equal to a memory run") {
  const std::vector<DayTotal> after_two{
      {sale_day(0), 2, 30}, {sale_day(1), 2, 8}, {sale_day(2), 1, 7}};
  const std::vector<DayTotal> after_three{
      {sale_day(0), 2, 30}, {sale_day(1), 2, 8}, {sale_day(2), 2, 9}, {sale_day(3), 1, 1}};

  // The reference: memory tables and checkpoint, one program, three updates.
  std::vector<std::string> memory_events;
  std::vector<DayTotal> memory_after_two;
  std::vector<DayTotal> memory_after_three;
  {
    fl::MemoryCheckpoint ck;
    fl::MemorySource<Sale> sales{"sales"};
    fl::StreamingTable<DayTotal> totals{"totals"};
    fl::EventLog log{[&](std::string_view line) { memory_events.emplace_back(line); }};
    fl::Pipeline p{"sales", ck};
    p.event_log(log);
    declare_totals(p, sales, totals);
    for (int n = 1; n <= 3; ++n) {
      sales.append(sales_before(n));
      p.update(at_noon(n));
      if (n == 2) memory_after_two = totals.sorted_rows();
    }
    memory_after_three = totals.sorted_rows();
  }
  CHECK(memory_after_two == after_two);
  CHECK(memory_after_three == after_three);
  CHECK(techniques_of(memory_events) ==
        std::vector<std::string>{"COMPLETE_RECOMPUTE", "INCREMENTAL", "INCREMENTAL"});

  const flowtest::temp_db db{"flowlib_durable"};
  const std::string& path = db.path;
  // The first program: two updates, then everything is destroyed.
  {
    fl::SqliteCheckpoint ck{path, {.synchronous = fl::SqliteSync::off}};
    fl::MemorySource<Sale> sales{"sales"};
    fl::StreamingTable<DayTotal, fl::SqliteStorage> totals{"totals"};
    fl::Pipeline p{"sales", ck};
    declare_totals(p, sales, totals);
    for (int n = 1; n <= 2; ++n) {
      sales.append(sales_before(n));
      p.update(at_noon(n));
    }
    CHECK(totals.sorted_rows() == memory_after_two);
  }
  // The rows are in the file, written through with each update.
  CHECK(stored_totals(path, "totals") == memory_after_two);

  // The second program: new checkpoint, table, source and pipeline over the
  // same file. The source gets the same records again, by the same appends.
  {
    fl::SqliteCheckpoint ck{path, {.synchronous = fl::SqliteSync::off}};
    fl::MemorySource<Sale> sales{"sales"};
    for (int n = 1; n <= 2; ++n) sales.append(sales_before(n));
    fl::StreamingTable<DayTotal, fl::SqliteStorage> totals{"totals"};
    std::vector<std::string> events;
    fl::EventLog log{[&](std::string_view line) { events.emplace_back(line); }};
    fl::Pipeline p{"sales", ck};
    p.event_log(log);
    declare_totals(p, sales, totals);
    CHECK(totals.empty());  // loaded when the pipeline opens, at its first update
    sales.append(sales_before(3));
    const fl::UpdateSummary s = p.update(at_noon(3));
    REQUIRE(s.flow("totals") != nullptr);
    CHECK(s.flow("totals")->batches == 1);
    CHECK(totals.sorted_rows() == memory_after_three);
    // The flow's state came back with the rows: the update is incremental,
    // as the memory run's third update is.
    CHECK(techniques_of(events) == std::vector<std::string>{"INCREMENTAL"});
  }
  CHECK(stored_totals(path, "totals") == memory_after_three);
}

TEST_CASE("R-WHERE-5, R-DURABLE-1: a direct insert into a SqliteStorage target is written at once, all or nothing, and is there after a restart") {
  const flowtest::temp_db db{"flowlib_dml"};
  const std::string& path = db.path;
  const DayTotal old_day{sale_day(-30), 9, 99};   // outside every window of the updates below
  const DayTotal in_window{sale_day(3), 100, 100};
  const auto code_of = [](auto&& f) {
    try {
      f();
    } catch (const fl::error& e) {
      return e.code();
    }
    return fl::errc{};
  };
  {
    fl::SqliteOptions o;
    o.synchronous = fl::SqliteSync::off;
    o.busy_timeout_ms = 20;
    fl::SqliteCheckpoint ck{path, o};
    fl::MemorySource<Sale> sales{"sales"};
    fl::StreamingTable<DayTotal, fl::SqliteStorage> totals{"totals"};
    fl::Pipeline p{"sales", ck};
    declare_totals(p, sales, totals);
    // Not attached before the pipeline's first update: the database's rows
    // would replace it when the pipeline opens, so it is refused.
    CHECK(code_of([&] { fl::dml_insert(totals, std::vector<DayTotal>{old_day}); }) ==
          fl::errc::invalid_argument);
    CHECK(totals.empty());
    for (int n = 1; n <= 2; ++n) {
      sales.append(sales_before(n));
      p.update(at_noon(n));
    }
    const auto committed = totals.sorted_rows();
    // Another connection holds the write lock: the insert fails as a whole.
    sqlite3* other = nullptr;
    REQUIRE(sqlite3_open(path.c_str(), &other) == SQLITE_OK);
    REQUIRE(sqlite3_exec(other, "BEGIN EXCLUSIVE", nullptr, nullptr, nullptr) == SQLITE_OK);
    CHECK(code_of([&] { fl::dml_insert(totals, std::vector<DayTotal>{old_day}); }) ==
          fl::errc::storage_io);
    CHECK(totals.sorted_rows() == committed);
    REQUIRE(sqlite3_exec(other, "COMMIT", nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(other);
    CHECK(stored_totals(path, "totals") == committed);
    // Then it is written at once, before any further update.
    fl::dml_insert(totals, std::vector<DayTotal>{old_day});
    auto with_old = committed;
    with_old.insert(with_old.begin(), old_day);
    CHECK(totals.sorted_rows() == with_old);
    CHECK(stored_totals(path, "totals") == with_old);
    // The failed attempt left nothing behind: the next update commits.
    sales.append(sales_before(3));
    p.update(at_noon(3));
  }
  // A new program over the same file: the inserted row is there, and the
  // flow's restored state still sees the table as the first program left it.
  std::vector<std::string> events;
  {
    fl::SqliteCheckpoint ck{path, {.synchronous = fl::SqliteSync::off}};
    fl::MemorySource<Sale> sales{"sales"};
    for (int n = 1; n <= 3; ++n) sales.append(sales_before(n));
    fl::StreamingTable<DayTotal, fl::SqliteStorage> totals{"totals"};
    fl::EventLog log{[&](std::string_view line) { events.emplace_back(line); }};
    fl::Pipeline p{"sales", ck};
    p.event_log(log);
    declare_totals(p, sales, totals);
    p.update(at_noon(3));  // nothing new: opens the pipeline, loads the table
    const auto rows = totals.sorted_rows();
    REQUIRE(!rows.empty());
    CHECK(rows.front() == old_day);
    // A direct insert inside the next window: that update recomputes the
    // window (R-WHERE-5), which replaces the inserted row.
    fl::dml_insert(totals, std::vector<DayTotal>{in_window});
    CHECK(stored_totals(path, "totals").size() == rows.size() + 1);
    sales.append(std::vector<Sale>{{sale_day(4), 10, 4}});
    p.update(at_noon(4));
    const auto after = totals.sorted_rows();
    CHECK(after.front() == old_day);
    CHECK(std::count(after.begin(), after.end(), in_window) == 0);
    CHECK(std::count_if(after.begin(), after.end(), [](const DayTotal& t) { return t.day == sale_day(3); }) == 1);
    CHECK(stored_totals(path, "totals") == after);
  }
  REQUIRE(!techniques_of(events).empty());
  CHECK(techniques_of(events).back() == "COMPLETE_RECOMPUTE");
}

}  // namespace storage_sqlite_durable_semantics
