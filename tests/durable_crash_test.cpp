// Crash test with real kills (R-EXACT-1 on durable tables), once per durable
// configuration: a child process runs a pipeline of every flow type on
// durable tables and a durable checkpoint, and the parent kills it with
// SIGKILL at random moments, restarting it each time until a run completes.
// Then the parent reads every table back and compares it, full sorted
// contents, with the same pipeline run once on MemoryStorage +
// MemoryCheckpoint without kills: no row may be lost and none applied twice.
//
// The configurations, one test case each, chosen with doctest's -tc filter
// ("*[sqlite]", "*[file]"; CTest runs them as durable_crash_test_sqlite and
// durable_crash_test_file). The pipeline is built by the same templates over
// the storage and checkpoint types (world<Storage, Checkpoint>).
//   sqlite  the tables as SqliteStorage, the checkpoint as SqliteCheckpoint,
//           in one database file (default SqliteOptions). After a round:
//           PRAGMA integrity_check; the file opened again (checkpoint,
//           tables, pipeline: an update finds nothing new, R-EXACT-2) and
//           every table compared; each SQL table's row count read with
//           plain SQLite (no leftover of a killed transaction that the
//           loader would hide).
//   file    the tables as FileStorage, the checkpoint as FileCheckpoint, in
//           one directory per round. After every kill, before the restart,
//           on a copy of the directory (a FileCheckpoint over the directory
//           itself could do the restart's recovery in its place): each
//           table a source-fed flow writes, read with flowlib::read_table
//           (runtime/export.hpp: the committed rows, without a pipeline),
//           must equal the reference's table after the flow's last committed
//           batch: nothing of an uncommitted batch shows, nothing committed
//           is missing. (Those flows cut their batches the same way in every
//           run and are their tables' only writers; the TableSource flows
//           are checked after the round only.) After a round: every table
//           read with read_table() and compared before anything opens the
//           directory again; then the directory opened again (checkpoint,
//           tables, pipeline: an update finds nothing new) and every table
//           compared, and read with read_table() again. The ".tmp-" files
//           of killed children are not checked: FileCheckpoint removes them
//           at its next write into their folder, not on open.
// Both: the committed batch counts of the flows reading the feed or the
// snapshots equal the reference's.
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
// most kills land inside a batch: in its SQLite transaction, or, with
// FileCheckpoint, in its staging or its commit (the batch's records
// appended to the directory's journal as one entry, then one fdatasync),
// or while a full journal's records are written to their own files and
// synced; the shortest delays while the database or directory is opened
// and the tables created or loaded.
//
// The child is this program itself, forked (no exec: the parent holds no
// SQLite connection or checkpoint object across the fork, and nothing but
// the seed and the path goes from parent to child). The child rebuilds the
// whole feed from the seed, opens the database or directory, loops update()
// until nothing is left, and exits 0; the checkpoint's positions make a
// restarted child continue where the last commit left it. One program
// instead of a separate child program saves a build target.
//
// Rounds: each round is a new database or directory and a new feed; the
// parent kills the child up to kills_per_round times, then lets it finish,
// and checks. When to kill is drawn from a seeded RNG (usual_plan()): a
// fifth of the kills within 3 ms of the start (while the file or directory
// is opened, the tables created or loaded, the flows restored), the others
// a random 0-3 ms after the child reported its 1st to 4th committed batch
// of the run (one byte per commit, on a pipe), so they land inside a batch,
// all over the run. The file configuration (file_config::plan()) changes a
// quarter of those to 0-300 us after the report (the next batch's first
// steps, the start of its commit), and aims another quarter at the commit
// that fills the journal (64 entries: it then writes every entry's records
// to their files and syncs them, the longest step of a run): the parent
// reads the journal at each report and kills 0-20 ms after it holds 62
// entries. It prints how many kills left journal entries, an entry cut
// short, or came while the records were being written to their files.
// Rounds go on until the kill count is reached. The fixed seed can be
// changed, and the kill count raised, by arguments:
//   durable_crash_test -tc='*[file]' --seed 7 --kills 1000
// (read from /proc/self/cmdline: doctest ignores arguments it does not know;
// without -tc both configurations run, each to the kill count). A failure
// names its round's seed and the kill's number in the round. The optimised
// build runs 200 kills per configuration, AddressSanitizer 40, to stay
// within the sanitizer build's time budget.
#include <doctest/doctest.h>

#include <flowlib/checkpoint/file.hpp>
#include <flowlib/checkpoint/memory.hpp>
#include <flowlib/checkpoint/sqlite.hpp>
#include <flowlib/runtime/checkpoint_log.hpp>
#include <flowlib/runtime/export.hpp>
#include <flowlib/flowlib.hpp>
#include <flowlib/pipeline.hpp>
#include <flowlib/source/memory.hpp>
#include <flowlib/source/snapshot.hpp>
#include <flowlib/source/table.hpp>
#include <flowlib/storage/file.hpp>
#include <flowlib/storage/sqlite.hpp>

#include <support/durable_configs.hpp>
#include <support/rows.hpp>
#include <support/temp_files.hpp>

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
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <system_error>
#include <thread>
#include <type_traits>
#include <vector>

namespace fl = flowlib;

namespace durable_crash {

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

/// `prefix` followed by `n` ("n3"). Not `"n" + std::to_string(n)`: GCC 12 at
/// -O3 warns about that expression (a false -Wrestrict, GCC bug 105329).
std::string tagged(const char* prefix, int n) {
  std::string s(prefix);
  s += std::to_string(n);
  return s;
}

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
      if (pick(12) != 0) e.name = tagged("n", pick(6));
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
      if (pick(4) != 0) snap.rows.push_back({k, tagged("v", pick(3))});
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
/// committed batch; `after_batch` (when set) is called with the flow's name
/// after each of its committed batches.
template <class W>
std::uint64_t run_to_end(W& w, int progress_fd = -1,
                         std::function<void(const std::string&)> after_batch = {}) {
  auto p = make_pipeline(w);
  std::uint64_t batches = 0;
  fl::UpdateOptions options = fixed_clock();
  if (progress_fd != -1) {
    options.on_progress = [progress_fd](const fl::FlowProgress&) {
      const char b = 1;
      (void)!::write(progress_fd, &b, 1);
    };
  } else if (after_batch) {
    options.on_progress = [&after_batch](const fl::FlowProgress& progress) { after_batch(progress.flow); };
  }
  for (;;) {
    const auto s = p->update(options);
    if (s.batches() == 0) return batches;
    batches += s.batches();
  }
}

/// Calls f(a's table, b's table, name) for every table of two worlds.
template <class A, class B, class F>
void for_each_table(A& a, B& b, F&& f) {
  f(a.bronze, b.bronze, "bronze");
  f(a.raw, b.raw, "raw");
  f(a.backfill, b.backfill, "backfill");
  f(a.current, b.current, "current");
  f(a.users1, b.users1, "users1");
  f(a.users2, b.users2, "users2");
  f(a.items, b.items, "items");
  f(a.items_history, b.items_history, "items_history");
}

/// A table's sorted contents after each committed batch of the one flow
/// that writes it (index: the flow's batch number).
template <class Row>
struct table_history {
  const char* flow;
  const char* table;
  std::vector<std::vector<Row>> after_batch;
};

/// The reference of one round: the pipeline in memory, never killed, and
/// the contents of the tables of the source-fed flows after each of their
/// batches (their batches are cut the same way in every run, and each is
/// its table's only writer, so a killed run's committed tables must equal
/// one of these).
struct reference {
  explicit reference(std::uint64_t seed) {
    w.fill(make_feed(seed));
    run_to_end(w, -1, [this](const std::string& flow) {
      if (flow == bronze.flow) bronze.after_batch.push_back(w.bronze.sorted_rows());
      if (flow == raw.flow) raw.after_batch.push_back(w.raw.sorted_rows());
      if (flow == backfill.flow) backfill.after_batch.push_back(w.backfill.sorted_rows());
      if (flow == users1.flow) users1.after_batch.push_back(w.users1.sorted_rows());
      if (flow == items.flow) items.after_batch.push_back(w.items.sorted_rows());
      if (flow == items_history.flow) items_history.after_batch.push_back(w.items_history.sorted_rows());
    });
  }
  reference(const reference&) = delete;
  reference& operator=(const reference&) = delete;

  memory_world w;
  table_history<Ev> bronze{"ingest", "bronze", {}};
  table_history<Ev> raw{"raw", "raw", {}};
  table_history<Ev> backfill{"backfill", "backfill", {}};
  table_history<User1> users1{"users1", "users1", {}};
  table_history<Item> items{"items", "items", {}};
  table_history<ItemHistory> items_history{"items2", "items_history", {}};
};

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

struct totals {
  std::size_t kills = 0;
  std::size_t kills_in_batches = 0;  // after the run had committed a batch: inside the batch loop
  std::size_t kills_short = 0;           // 0-300 us after a commit report
  std::size_t kills_aimed_at_apply = 0;  // at the commit that fills the journal (file)
  std::size_t kills_with_journal = 0;    // left journal entries for the restart to read (file)
  std::size_t kills_torn_journal = 0;    // left a journal entry cut short: inside a commit (file)
  std::size_t kills_in_apply = 0;        // while the journal's records went to their files (file)
  std::size_t kills_mid_write = 0;       // left a ".tmp-" file of its own: inside a file write (file)
  std::size_t runs = 0;
  pid_t last_child = 0;  // the pid of the last child started
  std::size_t rounds = 0;
  std::uint64_t batches = 0;
  std::size_t rows = 0;
  std::size_t rows_after_kills = 0;  // rows read with read_table() after a kill (file)
};

/// Compares every table of `w` (opened again after the round) with the
/// reference, and the committed batch counts; `extra(got, want, name)` adds
/// the configuration's own checks of each table.
template <class W, class Extra>
void compare_with_reference(W& w, reference& ref, totals& t, Extra&& extra) {
  for_each_table(w, ref.w, [&](const auto& got, const auto& want, const char* name) {
    INFO("table " << name);
    const auto g = got.sorted_rows();
    const auto e = want.sorted_rows();
    CHECK(g.size() == e.size());
    CHECK(g == e);
    extra(got, want, name);
    t.rows += e.size();
  });
  const fl::detail::checkpoint_log got_log(w.checkpoint);
  const fl::detail::checkpoint_log ref_log(ref.w.checkpoint);
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

/// When to kill a child: once it has reported `after_batches` commits in
/// this run (0: from its start), or, when `until` is set, at the first
/// report after which until() holds; `delay` later.
struct kill_plan {
  std::size_t after_batches = 0;
  std::function<bool()> until;
  std::chrono::microseconds delay{0};
  bool short_delay = false;        // 0-300 us after a commit report
  bool aimed_at_apply = false;     // at the commit that fills the journal (file)
  std::size_t journal_before = 0;  // the journal's entries when the child started (file)
};

/// The plan of most kills: a fifth within 3 ms of the start (while the file
/// or directory is opened, the tables created or loaded, the flows
/// restored), the others 0 to 3 ms after the run reported its 1st to 4th
/// commit: inside the next batch, most of the time in its transaction or
/// its commit. So a round's kills spread over the whole run, every flow's
/// batches included.
template <class Rng>
kill_plan usual_plan(Rng& rng, bool& early) {
  kill_plan k;
  early = std::uniform_int_distribution<int>(0, 4)(rng) == 0;
  k.after_batches = early ? 0 : std::uniform_int_distribution<std::size_t>(1, 4)(rng);
  k.delay = std::chrono::microseconds(std::uniform_int_distribution<std::int64_t>(0, 3'000)(rng));
  return k;
}

// --- The configurations --------------------------------------------------------
// Each names its storage and checkpoint policies, where a round's data goes,
// how kills after a commit report are timed, what it checks after a kill
// and after a round.

struct sqlite_config {
  static constexpr const char* name = "sqlite";
  using durable_world = world<flowtest::sqlite_durable::storage, flowtest::sqlite_durable::checkpoint>;
  template <class Rng>
  static kill_plan plan(Rng& rng, const std::string&) {
    bool early = false;
    return usual_plan(rng, early);
  }

  /// A round's database file.
  static std::string location(const std::filesystem::path& dir, std::size_t round) {
    return (dir / ("round" + std::to_string(round) + ".db")).string();
  }
  static void remove(const std::string& path) { flowtest::remove_database(path); }
  static void after_kill(const std::string&, pid_t, const kill_plan&, reference&, totals&) {}
  static void print_kills(const totals&) {}

  static void after_round(const std::string& path, std::uint64_t seed, reference& ref, totals& t) {
    const flowtest::sql_reader sql(path);
    CHECK(sql.text("PRAGMA integrity_check") == "ok");
    durable_world w{path};
    w.fill(make_feed(seed));
    auto p = make_pipeline(w);
    CHECK(p->update(fixed_clock()).batches() == 0);
    compare_with_reference(w, ref, t, [&](const auto&, const auto& want, const char* name) {
      // The SQL table itself holds exactly those rows (no leftover of a
      // killed transaction that the loader would hide).
      CHECK(sql.text("SELECT COUNT(*) FROM \"" + std::string(name) + "\"") == std::to_string(want.size()));
    });
  }
};

/// The journal a killed child left in its checkpoint directory
/// (checkpoint/file.hpp: a batch is one entry appended to ".journal-log",
/// the commit point; at 64 entries their records are written to their own
/// files, synced, and the journal removed). Read for the counts the test
/// prints and to aim kills; nothing is asserted on it.
struct journal_state {
  std::size_t entries = 0;  // complete entries: committed batches the restart reads
  bool torn = false;        // bytes after them: an entry cut short (its batch not committed)
};
journal_state journal_at(const std::filesystem::path& dir) {
  journal_state out;
  // Its entries, each a framed record (detail/checkpoint_record.hpp).
  const std::string journal = flowtest::read_file(dir / ".journal-log");
  const std::string_view bytes = journal;
  std::size_t at = 0;
  while (bytes.size() - at >= fl::detail::checkpoint_record_overhead) {
    const std::uint64_t length = fl::detail::checkpoint_get_le(bytes, at + 8, 8);
    if (length > bytes.size() - at - fl::detail::checkpoint_record_overhead) break;
    const std::size_t size = static_cast<std::size_t>(length) + fl::detail::checkpoint_record_overhead;
    try {
      (void)fl::detail::unframe(bytes.substr(at, size), "journal");
    } catch (const fl::error&) {
      break;
    }
    ++out.entries;
    at += size;
  }
  out.torn = at != bytes.size();
  return out;
}

/// The ".tmp-<pid>-..." files process `pid` left under `dir`: record files
/// it was writing.
std::size_t temp_files_of(const std::filesystem::path& dir, pid_t pid) {
  const std::string temp = ".tmp-" + std::to_string(pid) + "-";
  std::size_t n = 0;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (it->path().filename().string().starts_with(temp)) ++n;
  }
  return n;
}

/// `table`'s committed rows, read with read_table(), equal the reference's
/// after the last batch its flow committed (none: no rows).
template <class Row>
std::size_t check_committed(fl::FileCheckpoint& checkpoint, const table_history<Row>& h) {
  INFO("table " << h.table << " (flow " << h.flow << ") read with read_table() after a kill");
  const auto last = fl::detail::checkpoint_log(checkpoint).last_commit(h.flow);
  const auto got = flowtest::sorted(fl::read_table<Row>(checkpoint, h.table));
  if (!last) {
    CHECK(got.empty());
    return got.size();
  }
  CAPTURE(last->batch);
  REQUIRE(last->batch < h.after_batch.size());
  const auto& want = h.after_batch[last->batch];
  CHECK(got.size() == want.size());
  CHECK(got == want);
  return got.size();
}

struct file_config {
  static constexpr const char* name = "file";
  using durable_world = world<flowtest::file_durable::storage, flowtest::file_durable::checkpoint>;
  /// FileCheckpoint writes the journal's records to their files when the
  /// journal reaches this many entries (its batches_before_apply).
  static constexpr std::size_t apply_after = 64;

  /// The usual plan, but of the kills after a commit report a quarter come
  /// 0 to 300 us after it instead of 0 to 3 ms (the first steps of the next
  /// batch: planning, reading, staging; or the start of its commit), and a
  /// quarter are aimed at the commit that fills the journal (it then writes
  /// every entry's records to their files and syncs them, the longest step
  /// of a run, about 20 ms here): 0 to 20 ms after the first report at
  /// which the journal holds apply_after - 2 entries or more (each report,
  /// the parent reads the journal: a write outside a batch is an entry too).
  template <class Rng>
  static kill_plan plan(Rng& rng, const std::string& dir) {
    bool early = false;
    kill_plan k = usual_plan(rng, early);
    k.journal_before = journal_at(dir).entries;
    if (early) return k;
    const int kind = std::uniform_int_distribution<int>(0, 3)(rng);
    if (kind == 0) {
      k.short_delay = true;
      k.delay = std::chrono::microseconds(std::uniform_int_distribution<std::int64_t>(0, 300)(rng));
    } else if (kind == 1 && k.journal_before + 2 < apply_after) {
      k.aimed_at_apply = true;
      k.until = [dir] { return journal_at(dir).entries + 2 >= apply_after; };
      k.delay = std::chrono::microseconds(std::uniform_int_distribution<std::int64_t>(0, 20'000)(rng));
    }
    return k;
  }

  /// A round's checkpoint directory (FileCheckpoint creates it).
  static std::string location(const std::filesystem::path& dir, std::size_t round) {
    return (dir / ("round" + std::to_string(round))).string();
  }
  static void remove(const std::string& dir) {
    std::filesystem::remove_all(dir);
    std::filesystem::remove_all(dir + ".inspect");
  }

  static void after_kill(const std::string& dir, pid_t child, const kill_plan& plan, reference& ref,
                         totals& t) {
    if (!std::filesystem::exists(dir)) return;  // killed before the directory was made
    const journal_state journal = journal_at(dir);
    if (temp_files_of(dir, child) > 0) ++t.kills_mid_write;
    if (journal.entries > 0) ++t.kills_with_journal;
    // It filled the journal (or added to a full one) and did not empty it.
    if (journal.entries >= apply_after && journal.entries > plan.journal_before) ++t.kills_in_apply;
    if (journal.torn) ++t.kills_torn_journal;
    // Read a copy: the restarted child must find the directory exactly as
    // the kill left it, and a FileCheckpoint may write into its directory
    // (it applies the journal it found at its first write or flush).
    const std::string copy = dir + ".inspect";
    std::filesystem::remove_all(copy);
    std::filesystem::copy(dir, copy, std::filesystem::copy_options::recursive);
    {
      fl::FileCheckpoint checkpoint{copy};
      t.rows_after_kills += check_committed(checkpoint, ref.bronze);
      t.rows_after_kills += check_committed(checkpoint, ref.raw);
      t.rows_after_kills += check_committed(checkpoint, ref.backfill);
      t.rows_after_kills += check_committed(checkpoint, ref.users1);
      t.rows_after_kills += check_committed(checkpoint, ref.items);
      t.rows_after_kills += check_committed(checkpoint, ref.items_history);
    }
    std::filesystem::remove_all(copy);
  }

  static void print_kills(const totals& t) {
    std::printf("durable_crash_test [file]: of the kills, %zu came 0-300 us after a commit report, %zu were "
                "aimed at the commit that fills the journal; %zu left journal entries (committed batches not "
                "in their files yet), %zu a journal entry cut short (killed inside a commit), %zu came while "
                "the journal's records were written to their files (%zu left a .tmp- file); %zu rows read "
                "with read_table() after the kills\n",
                t.kills_short, t.kills_aimed_at_apply, t.kills_with_journal, t.kills_torn_journal,
                t.kills_in_apply, t.kills_mid_write, t.rows_after_kills);
  }

  static void after_round(const std::string& dir, std::uint64_t seed, reference& ref, totals& t) {
    // Every table as the last child left it, read without a pipeline.
    const auto exported = [](const fl::FileCheckpoint& checkpoint, const auto& want, const char* name) {
      using Row = typename std::remove_cvref_t<decltype(want)>::row_type;
      INFO("table " << name << " read with read_table()");
      const auto got = flowtest::sorted(fl::read_table<Row>(checkpoint, name));
      const auto e = want.sorted_rows();
      CHECK(got.size() == e.size());
      CHECK(got == e);
    };
    {
      const fl::FileCheckpoint checkpoint{dir};
      for_each_table(ref.w, ref.w, [&](const auto& want, const auto&, const char* name) {
        exported(checkpoint, want, name);
      });
    }
    durable_world w{dir};
    w.fill(make_feed(seed));
    auto p = make_pipeline(w);
    CHECK(p->update(fixed_clock()).batches() == 0);
    compare_with_reference(w, ref, t, [&](const auto&, const auto& want, const char* name) {
      exported(w.checkpoint, want, name);
    });
  }
};

/// The child: everything from the seed and the location, nothing else.
template <class Config>
int child_main(const std::string& location, std::uint64_t seed, int progress_fd) noexcept {
  try {
    typename Config::durable_world w{location};
    w.fill(make_feed(seed));
    run_to_end(w, progress_fd);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "durable_crash_test child (%s): %s\n", Config::name, e.what());
  } catch (...) {
    std::fprintf(stderr, "durable_crash_test child (%s): an exception that is not a std::exception\n",
                 Config::name);
  }
  return 2;
}

/// Starts the child; SIGKILLs it as `plan` says unless it ended before.
/// Returns true when the child completed (exit 0).
template <class Config>
bool run_child(const std::string& location, std::uint64_t seed, std::optional<kill_plan> plan, totals& t) {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  std::fflush(nullptr);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(fds[0]);
    const int rc = child_main<Config>(location, seed, fds[1]);
    std::fflush(nullptr);
    _exit(rc);
  }
  ::close(fds[1]);
  ++t.runs;
  t.last_child = pid;
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
    if (plan->until) {
      while (read_some() && !plan->until()) {
      }
    } else {
      while (committed < plan->after_batches && read_some()) {
      }
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
    if (plan->short_delay) ++t.kills_short;
    if (plan->aimed_at_apply) ++t.kills_aimed_at_apply;
    return false;
  }
  REQUIRE_MESSAGE(WIFEXITED(status), "the child ended by signal " << WTERMSIG(status));
  REQUIRE_MESSAGE(WEXITSTATUS(status) == 0, "the child failed (its message is above)");
  return true;
}

template <class Config>
void crash_test() {
#if defined(__SANITIZE_ADDRESS__)
  constexpr std::uint64_t default_kills = 40;
#else
  constexpr std::uint64_t default_kills = 200;
#endif
  const std::uint64_t seed = argument("seed", 20261205);
  const std::uint64_t kill_target = argument("kills", default_kills);
  constexpr std::size_t kills_per_round = 50;
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() /
      ("flowlib_crash_" + std::string(Config::name) + "_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  totals t;

  // When to kill: Config::plan (usual_plan, and the file configuration's
  // own shares), drawn from a seeded RNG.
  std::mt19937_64 rng(seed ^ 0x5eedu);
  while (t.kills < kill_target) {
    const std::uint64_t round_seed = seed * 1000 + t.rounds;
    CAPTURE(round_seed);
    const std::string location = Config::location(dir, t.rounds);
    Config::remove(location);

    // The reference: the same pipeline in memory, never killed.
    reference ref(round_seed);

    std::size_t killed = 0;
    bool done = false;
    while (!done && killed < kills_per_round && t.kills < kill_target) {
      CAPTURE(killed);  // the kill's number in this round
      const kill_plan plan = Config::plan(rng, location);
      done = run_child<Config>(location, round_seed, plan, t);
      if (!done) {
        ++killed;
        Config::after_kill(location, t.last_child, plan, ref, t);
      }
    }
    if (!done) REQUIRE(run_child<Config>(location, round_seed, std::nullopt, t));

    // Open it again: the tables load, nothing is left to do (R-EXACT-2).
    Config::after_round(location, round_seed, ref, t);
    Config::remove(location);
    ++t.rounds;
  }
  std::filesystem::remove_all(dir);
  std::printf("durable_crash_test [%s]: seed %llu: %zu kills (SIGKILL) over %zu rounds (%zu of them "
              "after the run had committed a batch, inside the batch loop), %zu child runs, %llu batches "
              "committed, %zu rows checked against the reference\n",
              Config::name, static_cast<unsigned long long>(seed), t.kills, t.rounds, t.kills_in_batches,
              t.runs, static_cast<unsigned long long>(t.batches), t.rows);
  Config::print_kills(t);
  CHECK(t.kills >= kill_target);
  CHECK(t.kills_in_batches * 2 >= t.kills);  // most kills hit a running batch loop
}

}  // namespace durable_crash

TEST_CASE("R-EXACT-1, R-DURABLE-1: SIGKILL at random moments loses no committed batch and applies none twice "
          "(SqliteStorage + SqliteCheckpoint) [sqlite]") {
  durable_crash::crash_test<durable_crash::sqlite_config>();
}

TEST_CASE("R-EXACT-1, R-DURABLE-1: SIGKILL at random moments loses no committed batch and applies none twice "
          "(FileStorage + FileCheckpoint) [file]") {
  durable_crash::crash_test<durable_crash::file_config>();
}
