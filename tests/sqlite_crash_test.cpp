// Crash test with real kills (R-EXACT-1 on durable tables): a child process
// runs a pipeline of every flow type into one SQLite database file (the
// tables as SqliteStorage, the checkpoint as SqliteCheckpoint, default
// SqliteOptions), and the parent kills it with SIGKILL at random moments,
// restarting it each time until a run completes. Then the parent opens the
// database again and compares every table, full sorted contents, with the
// same pipeline run once on MemoryStorage + MemoryCheckpoint without kills:
// no row may be lost and none applied twice.
//
// The pipeline (one feed, deterministic from a seed, with redelivered
// duplicates, deletes, invalid rows and snapshots):
//   ingest   feed (at-least-once, 2 partitions) -> DedupWithinWatermark
//            -> expect_or_drop -> APPEND into bronze
//   raw      feed -> APPEND into raw (the duplicates too: the reference has them)
//   backfill feed -> APPEND ONCE into backfill (a managed table)
//   users1   feed -> AUTO CDC SCD1 with deletes into users1 (redeliveries are
//            identical changes: harmless, R-CDC-5)
//   current  TableSource{bronze} -> REPLACE USING into current (multi-hop)
//   users2   TableSource{bronze} -> AUTO CDC SCD2 with deletes into users2
//   items    snapshots -> AUTO CDC FROM SNAPSHOT SCD1 into items
//   items2   snapshots -> AUTO CDC FROM SNAPSHOT SCD2 into items_history
// in micro-batches of a few rows, so a run commits over a hundred batches and
// most kills land inside a transaction (or while the database is opened,
// its tables created or loaded: the shortest delays).
//
// The child is this program itself, forked (no exec: the parent holds no
// SQLite connection across the fork, and nothing but the seed and the path
// goes from parent to child). The child rebuilds the whole feed from the
// seed, opens the database, loops update() until nothing is left, and
// exits 0; the checkpoint's positions make a restarted child continue where
// the last commit left it. One program instead of a separate child program
// saves a build target.
//
// Rounds: each round is a new database and a new feed; the parent kills the
// child up to kills_per_round times, then lets it finish, and checks. When
// to kill is drawn from a seeded RNG: a fifth of the kills within 3 ms of
// the start (while the file is opened, the tables created or loaded, the
// flows restored), the others a random 0-3 ms after the child reported its
// 1st to 4th committed batch of the run (on a pipe), so they land inside a
// batch, mostly in its transaction, all over the run. Rounds go on until the
// kill count is reached. The fixed seed can be changed, and the kill count
// raised, by arguments:
//   sqlite_crash_test --seed 7 --kills 1000
// (read from /proc/self/cmdline: doctest ignores arguments it does not know).
// The optimised build runs 200 kills (about 20 s on two cores); under
// AddressSanitizer the default is 40 kills, to stay within the sanitizer
// build's time budget.
#include <doctest/doctest.h>

#include <flowlib/checkpoint/memory.hpp>
#include <flowlib/checkpoint/sqlite.hpp>
#include <flowlib/runtime/checkpoint_log.hpp>
#include <flowlib/flowlib.hpp>
#include <flowlib/pipeline.hpp>
#include <flowlib/source/memory.hpp>
#include <flowlib/source/snapshot.hpp>
#include <flowlib/source/table.hpp>
#include <flowlib/storage/sqlite.hpp>

#include <support/rows.hpp>

#include <sqlite3.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace fl = flowlib;

namespace sqlite_crash {

using ms_time = std::chrono::sys_time<std::chrono::milliseconds>;

/// One change of the feed; the column types cover the SQL encodings
/// (integers, text, NULL, a time point, a date, a double, a bool).
struct Ev {
  std::int64_t id = 0;
  std::int64_t seq = 0;
  ms_time ts{};
  std::string op;
  std::optional<std::string> name;
  std::int64_t amount = 0;
  std::chrono::sys_days day{};
  double score = 0;
  bool vip = false;
  friend bool operator==(const Ev&, const Ev&) = default;
};
FLOWLIB_SCHEMA(Ev, id, seq, ts, op, name, amount, day, score, vip);

struct User1 {
  std::int64_t id = 0;
  std::optional<std::string> name;
  std::int64_t amount = 0;
  std::chrono::sys_days day{};
  friend bool operator==(const User1&, const User1&) = default;
};
FLOWLIB_SCHEMA(User1, id, name, amount, day);

struct User2 {
  std::int64_t id = 0;
  std::optional<std::string> name;
  std::int64_t amount = 0;
  std::int64_t start_at = 0;
  std::optional<std::int64_t> end_at;
  friend bool operator==(const User2&, const User2&) = default;
};
FLOWLIB_SCHEMA(User2, id, name, amount, (start_at, "__START_AT"), (end_at, "__END_AT"));

using flowtest::Item;
using flowtest::ItemHistory;

struct IsDelete {
  bool operator()(const Ev& e) const { return e.op == "DELETE"; }
};

using Dedup = fl::DedupWithinWatermark<fl::Key<&Ev::id, &Ev::seq>, fl::EventTime<&Ev::ts>>;
using Current = fl::ReplaceUsing<fl::Key<&Ev::id>, fl::Seq<&Ev::seq>>;
using Scd1 = fl::AutoCdc<fl::Key<&Ev::id>, fl::Seq<&Ev::seq>, fl::Scd1, fl::apply_as_deletes<IsDelete>,
                         fl::except_column_list<"seq", "ts", "op", "score", "vip">>;
using Scd2 = fl::AutoCdc<fl::Key<&Ev::id>, fl::Seq<&Ev::seq>, fl::Scd2<>, fl::apply_as_deletes<IsDelete>,
                         fl::except_column_list<"seq", "ts", "op", "day", "score", "vip">>;
using Items = fl::AutoCdcFromSnapshot<fl::Key<&Item::k>, fl::Scd1>;
using ItemsHistory = fl::AutoCdcFromSnapshot<fl::Key<&Item::k>, fl::Scd2<>>;
using Snap = fl::Snapshot<Item, std::int64_t>;

/// The feed of one round, regenerated identically from its seed.
struct feed_data {
  std::vector<std::pair<std::uint32_t, Ev>> events;  // (partition, event)
  std::vector<Snap> snapshots;
};

feed_data make_feed(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<std::uint64_t>(n)); };
  feed_data out;
  std::int64_t seq = 0;
  ms_time t{std::chrono::milliseconds(1'700'000'000'000)};
  const std::chrono::sys_days d0 = std::chrono::January / 1 / 2026;
  std::vector<Ev> sent;
  const int n = 450 + pick(100);
  for (int i = 0; i < n; ++i) {
    Ev e;
    if (!sent.empty() && pick(8) == 0) {  // a redelivery of a recent event
      e = sent[sent.size() - 1 - static_cast<std::size_t>(pick(static_cast<int>(std::min<std::size_t>(sent.size(), 10))))];
    } else {
      e.id = pick(40);
      e.seq = ++seq;
      t += std::chrono::milliseconds(200 + pick(2000));
      e.ts = t - std::chrono::milliseconds(pick(1500));
      e.op = pick(9) == 0 ? "DELETE" : "UPSERT";
      if (pick(12) != 0) e.name = "n" + std::to_string(pick(6));
      e.amount = pick(25) == 0 ? -1 : pick(1000) - 100;
      e.day = d0 + std::chrono::days(pick(400) - 200);
      e.score = static_cast<double>(pick(1'000'000)) / 7.0;
      e.vip = pick(2) == 0;
      sent.push_back(e);
    }
    out.events.emplace_back(static_cast<std::uint32_t>(e.id % 2), e);
  }
  for (std::int64_t version = 1; version <= 24; ++version) {
    Snap snap;
    snap.version = version * 10 + pick(5);
    for (int k = 0; k < 12; ++k)
      if (pick(4) != 0) snap.rows.push_back({k, "v" + std::to_string(pick(3))});
    out.snapshots.push_back(std::move(snap));
  }
  return out;
}

/// The sources, tables and checkpoint of one process. The checkpoint is the
/// first member, so that it is destroyed after the tables attached to it.
template <class Storage, class Checkpoint>
struct world {
  template <class... A>
  explicit world(A&&... checkpoint_args) : checkpoint(std::forward<A>(checkpoint_args)...) {}

  Checkpoint checkpoint;
  fl::MemorySource<Ev> feed{"feed", {.partitions = 2, .guarantee = fl::delivery::at_least_once}};
  fl::MemorySource<Snap> snapshots{"snapshots"};
  fl::StreamingTable<Ev, Storage> bronze{"bronze"};
  fl::StreamingTable<Ev, Storage> raw{"raw"};
  fl::ManagedTable<Ev, Storage> backfill{"backfill"};
  fl::StreamingTable<Ev, Storage> current{"current"};
  fl::StreamingTable<User1, Storage> users1{"users1"};
  fl::StreamingTable<User2, Storage> users2{"users2"};
  fl::StreamingTable<Item, Storage> items{"items"};
  fl::StreamingTable<ItemHistory, Storage> items_history{"items_history"};

  void fill(const feed_data& f) {
    for (const auto& [part, e] : f.events) feed.append_to(part, e);
    for (const auto& s : f.snapshots) snapshots.append(s);
  }
};

using durable_world = world<fl::SqliteStorage, fl::SqliteCheckpoint>;
using memory_world = world<fl::MemoryStorage, fl::MemoryCheckpoint>;

const char* const flow_names[] = {"ingest", "raw",     "backfill", "users1",
                                  "current", "users2", "items",    "items2"};
// Flows reading the feed or the snapshots directly: their micro-batches are
// cut the same way in every run (from the last commit, max_rows_per_batch
// rows), so their committed batch counts must equal the reference's. The
// TableSource flows see what their upstream committed when they start, so
// a killed run cuts their batches differently (their tables may not).
const char* const source_fed[] = {"ingest", "raw", "backfill", "users1", "items", "items2"};

template <class W>
std::unique_ptr<fl::Pipeline> make_pipeline(W& w) {
  fl::PipelineOptions opt;
  opt.snapshot_interval = 4;
  opt.retain_batches = 2;
  auto p = std::make_unique<fl::Pipeline>("crash", w.checkpoint, std::move(opt));
  p->flow("ingest")
      .from(w.feed)
      .through(Dedup{std::chrono::seconds(20), "dedup"})
      .expect(fl::expectations(fl::expect_or_drop("non_negative", [](const Ev& e) { return e.amount >= 0; })))
      .max_rows_per_batch(16)
      .into(w.bronze, fl::Append{"ingest"});
  p->flow("raw").from(w.feed).max_rows_per_batch(40).into(w.raw, fl::Append{"raw"});
  p->flow("backfill").from(w.feed).into(w.backfill, fl::Append<fl::Once>{"backfill"});
  p->flow("users1").from(w.feed).max_rows_per_batch(25).into(w.users1, Scd1{"users1"});
  p->flow("current").from(fl::TableSource{w.bronze}).max_rows_per_batch(20).into(w.current, Current{"current"});
  p->flow("users2").from(fl::TableSource{w.bronze}).max_rows_per_batch(25).into(w.users2, Scd2{"users2"});
  p->flow("items").from(w.snapshots).max_rows_per_batch(2).into(w.items, Items{"items"});
  p->flow("items2").from(w.snapshots).max_rows_per_batch(5).into(w.items_history, ItemsHistory{"items2"});
  return p;
}

/// The update's logical clock: the same in every run.
fl::UpdateOptions fixed_clock() {
  fl::UpdateOptions o;
  o.now = std::chrono::system_clock::time_point{std::chrono::seconds(1'750'000'000)};
  return o;
}

/// Runs the pipeline until an update finds nothing new; returns the number
/// of batches committed. `progress_fd` (when not -1) gets one byte per
/// committed batch.
template <class W>
std::uint64_t run_to_end(W& w, int progress_fd = -1) {
  auto p = make_pipeline(w);
  std::uint64_t batches = 0;
  fl::UpdateOptions options = fixed_clock();
  if (progress_fd != -1) {
    options.on_progress = [progress_fd](const fl::FlowProgress&) {
      const char b = 1;
      (void)!::write(progress_fd, &b, 1);
    };
  }
  for (;;) {
    const auto s = p->update(options);
    if (s.batches() == 0) return batches;
    batches += s.batches();
  }
}

/// The child: everything from the seed and the file, nothing else.
int child_main(const std::string& path, std::uint64_t seed, int progress_fd) noexcept {
  try {
    durable_world w{path};
    w.fill(make_feed(seed));
    run_to_end(w, progress_fd);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sqlite_crash_test child: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "sqlite_crash_test child: an exception that is not a std::exception\n");
  }
  return 2;
}

/// `--name N` or `--name=N` on the command line, else `fallback`.
std::uint64_t argument(const std::string& name, std::uint64_t fallback) {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  std::size_t at = 0;
  while (at < all.size()) {
    const auto end = all.find('\0', at);
    args.push_back(all.substr(at, end - at));
    if (end == std::string::npos) break;
    at = end + 1;
  }
  const std::string flag = "--" + name;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == flag && i + 1 < args.size()) return std::stoull(args[i + 1]);
    if (args[i].rfind(flag + "=", 0) == 0) return std::stoull(args[i].substr(flag.size() + 1));
  }
  return fallback;
}

/// A second, independent reader: plain SQLite, read-only.
struct raw_reader {
  sqlite3* db = nullptr;
  explicit raw_reader(const std::string& path) {
    REQUIRE(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
  }
  ~raw_reader() { sqlite3_close(db); }
  raw_reader(const raw_reader&) = delete;
  raw_reader& operator=(const raw_reader&) = delete;
  std::string text(const std::string& sql) const {
    sqlite3_stmt* st = nullptr;
    REQUIRE_MESSAGE(sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) == SQLITE_OK, sqlite3_errmsg(db));
    std::string out;
    if (sqlite3_step(st) == SQLITE_ROW) {
      const unsigned char* t = sqlite3_column_text(st, 0);
      out = t != nullptr ? reinterpret_cast<const char*>(t) : "NULL";
    }
    sqlite3_finalize(st);
    return out;
  }
};

template <class A, class B>
std::size_t check_table(const A& got, const B& want, const std::string& name, const raw_reader& sql) {
  INFO("table " << name);
  const auto g = got.sorted_rows();
  const auto w = want.sorted_rows();
  CHECK(g.size() == w.size());
  CHECK(g == w);
  // The SQL table itself holds exactly those rows (no leftover of a killed
  // transaction that the loader would hide).
  CHECK(sql.text("SELECT COUNT(*) FROM \"" + name + "\"") == std::to_string(w.size()));
  return w.size();
}

struct totals {
  std::size_t kills = 0;
  std::size_t kills_in_batches = 0;  // after the run had committed a batch: inside the batch loop
  std::size_t runs = 0;
  std::size_t rounds = 0;
  std::uint64_t batches = 0;
  std::size_t rows = 0;
};

/// When to kill a child: once it has committed `after_batches` batches in
/// this run (0: from its start), `delay` later.
struct kill_plan {
  std::size_t after_batches = 0;
  std::chrono::microseconds delay{0};
};

/// Starts the child; SIGKILLs it as `plan` says unless it ended before.
/// Returns true when the child completed (exit 0).
bool run_child(const std::string& path, std::uint64_t seed, std::optional<kill_plan> plan, totals& t) {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  std::fflush(nullptr);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(fds[0]);
    const int rc = child_main(path, seed, fds[1]);
    std::fflush(nullptr);
    _exit(rc);
  }
  ::close(fds[1]);
  ++t.runs;
  std::size_t committed = 0;  // batches this run committed (one byte each)
  char buf[256];
  const auto read_some = [&] {
    const ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n > 0) committed += static_cast<std::size_t>(n);
    return n > 0;
  };
  int status = 0;
  std::size_t committed_at_kill = 0;
  if (plan) {
    while (committed < plan->after_batches && read_some()) {
    }
    std::this_thread::sleep_for(plan->delay);
    if (waitpid(pid, &status, WNOHANG) == 0) {
      committed_at_kill = committed;
      ::kill(pid, SIGKILL);
      REQUIRE(waitpid(pid, &status, 0) == pid);
    }
  } else {
    REQUIRE(waitpid(pid, &status, 0) == pid);
  }
  while (read_some()) {  // the child is gone: read to the end
  }
  ::close(fds[0]);
  if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) {
    ++t.kills;
    if (committed_at_kill > 0) ++t.kills_in_batches;
    return false;
  }
  REQUIRE_MESSAGE(WIFEXITED(status), "the child ended by signal " << WTERMSIG(status));
  REQUIRE_MESSAGE(WEXITSTATUS(status) == 0, "the child failed (its message is above)");
  return true;
}

void remove_database(const std::string& path) {
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) std::filesystem::remove(path + suffix);
}

}  // namespace sqlite_crash

using namespace sqlite_crash;

TEST_CASE("R-EXACT-1, R-DURABLE-1: SIGKILL at random moments loses no committed batch and applies none twice (SqliteStorage + SqliteCheckpoint)") {
#if defined(__SANITIZE_ADDRESS__)
  constexpr std::uint64_t default_kills = 40;
#else
  constexpr std::uint64_t default_kills = 200;
#endif
  const std::uint64_t seed = argument("seed", 20261205);
  const std::uint64_t kill_target = argument("kills", default_kills);
  constexpr std::size_t kills_per_round = 50;
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("flowlib_crash_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  totals t;

  // When to kill: a fifth of the kills within 3 ms of the start (while the
  // file is opened, the tables created or loaded, the flows restored); the
  // others after the run has committed 1 to 4 batches (it reports each on a
  // pipe), 0 to 3 ms later: inside the next batch, most of the time in its
  // transaction or its commit. So a round's kills spread over the whole run,
  // every flow's batches included.
  std::mt19937_64 rng(seed ^ 0x5eedu);
  const auto plan = [&] {
    kill_plan k;
    const bool early = std::uniform_int_distribution<int>(0, 4)(rng) == 0;
    k.after_batches = early ? 0 : std::uniform_int_distribution<std::size_t>(1, 4)(rng);
    k.delay = std::chrono::microseconds(std::uniform_int_distribution<std::int64_t>(0, 3'000)(rng));
    return k;
  };
  while (t.kills < kill_target) {
    const std::uint64_t round_seed = seed * 1000 + t.rounds;
    CAPTURE(round_seed);
    const std::string path = (dir / ("round" + std::to_string(t.rounds) + ".db")).string();
    remove_database(path);

    // The reference: the same pipeline in memory, never killed.
    memory_world ref;
    ref.fill(make_feed(round_seed));
    run_to_end(ref);

    std::size_t killed = 0;
    bool done = false;
    while (!done && killed < kills_per_round && t.kills < kill_target) {
      done = run_child(path, round_seed, plan(), t);
      if (!done) ++killed;
    }
    if (!done) REQUIRE(run_child(path, round_seed, std::nullopt, t));

    // Open the file again: the tables load, nothing is left to do (R-EXACT-2).
    {
      const raw_reader sql(path);
      CHECK(sql.text("PRAGMA integrity_check") == "ok");
      durable_world w{path};
      w.fill(make_feed(round_seed));
      auto p = make_pipeline(w);
      CHECK(p->update(fixed_clock()).batches() == 0);
      t.rows += check_table(w.bronze, ref.bronze, "bronze", sql);
      t.rows += check_table(w.raw, ref.raw, "raw", sql);
      t.rows += check_table(w.backfill, ref.backfill, "backfill", sql);
      t.rows += check_table(w.current, ref.current, "current", sql);
      t.rows += check_table(w.users1, ref.users1, "users1", sql);
      t.rows += check_table(w.users2, ref.users2, "users2", sql);
      t.rows += check_table(w.items, ref.items, "items", sql);
      t.rows += check_table(w.items_history, ref.items_history, "items_history", sql);
      const fl::detail::checkpoint_log got_log(w.checkpoint);
      const fl::detail::checkpoint_log ref_log(ref.checkpoint);
      for (const char* flow : flow_names) {
        const auto last = got_log.last_commit(flow);
        REQUIRE_MESSAGE(last.has_value(), "flow " << flow << " committed nothing");
        t.batches += last->batch + 1;
      }
      for (const char* flow : source_fed) {
        INFO("flow " << flow);
        CHECK(got_log.last_commit(flow)->batch == ref_log.last_commit(flow)->batch);
      }
    }
    remove_database(path);
    ++t.rounds;
  }
  std::filesystem::remove_all(dir);
  std::printf("sqlite_crash_test: seed %llu: %zu kills (SIGKILL) over %zu rounds (%zu of them after "
              "the run had committed a batch, inside the batch loop), %zu child runs, %llu batches "
              "committed, %zu rows checked against the reference\n",
              static_cast<unsigned long long>(seed), t.kills, t.rounds, t.kills_in_batches, t.runs,
              static_cast<unsigned long long>(t.batches), t.rows);
  CHECK(t.kills >= kill_target);
  CHECK(t.kills_in_batches * 2 >= t.kills);  // most kills hit a running batch loop
}
