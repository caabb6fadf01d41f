// flowlib's flagship example: a pipeline that keeps a table of bookings
// current and their full history, from a feed that redelivers rows, across
// a failed batch and a restart.
//
//   booking_updates (MemorySource, at-least-once)
//     -> DedupWithinWatermark on (booking_id, booking_update_id)
//     -> expect_or_drop positive_amount, expect_or_fail known_status
//     -> bookings_current   REPLACE USING (booking_id) SEQUENCE BY booking_update_id
//     -> bookings_history   AUTO CDC ... STORED AS SCD TYPE 2
//
// The story: a first update in micro-batches of at most 4 rows; a batch
// that fails (a status the program does not know) and leaves both tables
// as they were; the fix and the retry of the same rows; then the process
// "stops": its Pipeline is destroyed, more updates arrive (one a redelivery
// of a row from before), and a new Pipeline over the same checkpoint,
// source and tables resumes where the old one committed. Every update's
// event log is printed as it is written.
//
// Every result is checked against what the flows' contracts say
// (docs/semantics.md): the program exits 1 if any differs, so it doubles as
// a test (it runs under CTest). examples/replace_using.cpp shows the flows
// applied by hand, batch by batch.
//
// With a database path (`example_flagship bookings.db`), the tables and the
// checkpoint are SqliteStorage and SqliteCheckpoint in that file
// (docs/durable-pipelines.md), and the program processes a longer feed in
// micro-batches, slowly enough to be interrupted: kill it (Ctrl-C, kill -9)
// and run it again, and it resumes after the last committed batch, then
// checks that the tables equal an uninterrupted run in memory: nothing lost,
// nothing applied twice. The rest of the program is written once, templated
// on the storage policy.

#include <flowlib/checkpoint/sqlite.hpp>
#include <flowlib/flowlib.hpp>
#include <flowlib/storage/sqlite.hpp>

#include "print.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <optional>
#include <ranges>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace fl = flowlib;
using namespace std::chrono_literals;
using ms_time = std::chrono::sys_time<std::chrono::milliseconds>;

// --- Rows, flows and what outlives a process ----------------------------------

/// One row of the feed: a new version of a booking.
struct BookingUpdate {
  std::int64_t booking_id;
  std::string status;
  double total_amount;
  std::int64_t booking_update_id;  // increases with every update of a booking
  ms_time updated_at;              // event time: when the booking changed
  friend bool operator==(const BookingUpdate&, const BookingUpdate&) = default;
};
FLOWLIB_SCHEMA(BookingUpdate, booking_id, status, total_amount, booking_update_id, updated_at);

/// A version of a booking: SCD type 2 adds __START_AT and __END_AT (of the
/// sequence's type; null __END_AT: the current version).
struct BookingVersion {
  std::int64_t booking_id;
  std::string status;
  double total_amount;
  std::int64_t start_at;
  std::optional<std::int64_t> end_at;
  friend bool operator==(const BookingVersion&, const BookingVersion&) = default;
};
FLOWLIB_SCHEMA(BookingVersion, booking_id, status, total_amount, (start_at, "__START_AT"),
               (end_at, "__END_AT"));

using Id = fl::Key<&BookingUpdate::booking_id>;
using UpdateId = fl::Seq<&BookingUpdate::booking_update_id>;
// A redelivery repeats (booking_id, booking_update_id); kept for an hour of event time.
using Dedup =
    fl::DedupWithinWatermark<fl::Key<&BookingUpdate::booking_id, &BookingUpdate::booking_update_id>,
                             fl::EventTime<&BookingUpdate::updated_at>>;
// REPLACE USING (booking_id) SEQUENCE BY booking_update_id
using Current = fl::ReplaceUsing<Id, UpdateId>;
// AUTO CDC ... KEYS (booking_id) SEQUENCE BY booking_update_id
//   COLUMNS * EXCEPT (booking_update_id, updated_at) STORED AS SCD TYPE 2
using History = fl::AutoCdc<Id, UpdateId, fl::Scd2<>,
                            fl::except_column_list<"booking_update_id", "updated_at">>;

/// What survives a restart of the program: the feed, the tables and the
/// checkpoint (in memory by default; with SqliteStorage and a
/// SqliteCheckpoint they survive the process). The Pipeline itself holds
/// nothing that must survive. The checkpoint comes first: a database's
/// tables are closed before it.
template <class Storage = fl::MemoryStorage, class Checkpoint = fl::MemoryCheckpoint>
struct Durable {
  template <class... A>
  explicit Durable(A&&... checkpoint_args) : checkpoint(std::forward<A>(checkpoint_args)...) {}
  Checkpoint checkpoint;
  fl::MemorySource<BookingUpdate> feed{"booking_updates",
                                       {.guarantee = fl::delivery::at_least_once}};
  fl::StreamingTable<BookingUpdate, Storage> current{"bookings_current"};
  fl::StreamingTable<BookingVersion, Storage> history{"bookings_history"};
};

// The program's configuration (update 3's fix adds a status).
std::set<std::string> known_statuses{"pending", "confirmed", "cancelled"};

/// Declares the two flows; a restarted program declares them again, the same.
//
// The history reads the feed with the same stages rather than
// bookings_current through a TableSource: bookings_current keeps only the
// version that won its micro-batch (below, booking 101's updates 1 and 3
// come in one batch and only 3 reaches the table), so a history read from
// it would depend on how the feed was cut into batches. From the feed,
// SCD type 2 sees every valid update.
template <class D>
void declare(fl::Pipeline& pipeline, D& d) {
  const auto checks = [] {
    return fl::expectations(
        fl::expect_or_drop("positive_amount",
                           [](const BookingUpdate& b) { return b.total_amount > 0; }),
        fl::expect_or_fail("known_status", [](const BookingUpdate& b) {
          return known_statuses.contains(b.status);
        }));
  };
  pipeline.flow("bookings_current")
      .from(d.feed)
      .through(Dedup{1h, "redeliveries"})
      .expect(checks())
      .max_rows_per_batch(4)
      .into(d.current, Current{"bookings_current"});
  pipeline.flow("bookings_history")
      .from(d.feed)
      .through(Dedup{1h, "redeliveries"})
      .expect(checks())
      .max_rows_per_batch(4)
      .into(d.history, History{"bookings_history"});
}

// --- The event log, printed; self-checks --------------------------------------

using print::field;

std::vector<std::string> event_lines;  // every line, for the checks

void print_event(std::string_view line) {
  event_lines.emplace_back(line);
  if (event_lines.size() == 2) std::cout << "    one line in full:\n    " << line << '\n';
  std::cout << "    event: update " << field(line, "update_id") << ' ' << field(line, "event_type");
  if (field(line, "event_type") == "update_progress") {
    std::cout << ' ' << field(line, "state");
  } else {
    std::cout << ' ' << field(line, "flow") << " batch " << field(line, "batch_id") << ' '
              << field(line, "status") << ", positions " << field(line, "start_position") << " -> "
              << field(line, "end_position");
    if (field(line, "status") == "COMPLETED") {
      std::cout << ": " << field(line, "num_input_rows") << " rows in, "
                << field(line, "num_deduplicated_rows") << " deduplicated, "
                << field(line, "num_dropped_rows") << " dropped";
    }
  }
  if (!field(line, "code").empty()) std::cout << " (" << field(line, "code") << ')';
  std::cout << '\n';
}

int failures = 0;
void check(bool ok, std::string_view what) {
  if (!ok) {
    ++failures;
    std::cerr << "CHECK FAILED: " << what << '\n';
  }
}

/// Each flow of the summary: batches, rows read, deduplicated, dropped.
void check_summary(const fl::UpdateSummary& s, std::uint64_t batches, std::uint64_t in,
                   std::uint64_t dedup, std::uint64_t dropped, std::string_view what) {
  check(s.flows.size() == 2, what);
  for (const auto& f : s.flows) {
    std::cout << "  summary: " << f.flow << ": " << f.batches << " batch(es), " << f.input_rows
              << " rows read, " << f.deduplicated_rows << " deduplicated, " << f.dropped_rows
              << " dropped\n";
    check(f.batches == batches && f.input_rows == in && f.deduplicated_rows == dedup &&
              f.dropped_rows == dropped,
          what);
  }
}

/// The history by booking, then __START_AT.
template <class D>
std::vector<BookingVersion> versions(const D& d) {
  std::vector<BookingVersion> v = d.history.sorted_rows();
  std::ranges::sort(v, {}, [](const auto& x) { return std::pair(x.booking_id, x.start_at); });
  return v;
}

/// The expected rows are listed by booking_id (as sorted_rows() sorts
/// bookings_current), the history's by booking, then __START_AT.
template <class D>
bool tables_are(const D& d, const std::vector<BookingUpdate>& current,
                const std::vector<BookingVersion>& history) {
  return d.current.sorted_rows() == current && versions(d) == history;
}

template <class D>
void show_and_check(const D& d, const std::vector<BookingUpdate>& current,
                    const std::vector<BookingVersion>& history, std::string_view what) {
  print::table("bookings_current", d.current.sorted_rows());
  print::table("bookings_history (by booking, then __START_AT)", versions(d));
  check(tables_are(d, current, history), what);
}

// --- The story ----------------------------------------------------------------

const ms_time t0 = std::chrono::sys_days{std::chrono::March / 2 / 2026} + 9h;
BookingUpdate u(std::int64_t id, std::string status, double amount, std::int64_t seq,
                std::chrono::minutes at) {
  return {id, std::move(status), amount, seq, t0 + at};
}

int run_durable(const std::string& path);

int main(int argc, char** argv) {
  if (argc > 1) return run_durable(argv[1]);
  Durable<> d;
  fl::EventLog events{print_event};
  fl::UpdateOptions clock;  // a logical clock: the log's timestamps are reproducible
  clock.now = t0 + 30min;

  {  // ---- The first run of the program ----
    fl::Pipeline pipeline{"bookings", d.checkpoint};
    declare(pipeline, d);
    pipeline.event_log(events);

    d.feed.append(std::vector<BookingUpdate>{
        u(101, "pending", 450.00, 1, 0min),   u(102, "pending", 980.50, 2, 1min),
        u(101, "confirmed", 450.00, 3, 2min), u(103, "pending", -120.00, 4, 3min),  // dropped
        u(102, "pending", 980.50, 2, 1min),  // a redelivery of update 2: dedup removes it
        u(103, "pending", 120.00, 5, 4min)});
    std::cout << "== Update 1: six rows, in micro-batches of at most 4\n";
    check_summary(pipeline.update(clock), 2, 6, 1, 1, "update 1: summary");
    const auto now = std::nullopt;  // __END_AT of a current version
    std::vector<BookingUpdate> current{u(101, "confirmed", 450.00, 3, 2min),
                                       u(102, "pending", 980.50, 2, 1min),
                                       u(103, "pending", 120.00, 5, 4min)};
    std::vector<BookingVersion> history{{101, "pending", 450.00, 1, 3},
                                        {101, "confirmed", 450.00, 3, now},
                                        {102, "pending", 980.50, 2, now},
                                        {103, "pending", 120.00, 5, now}};
    show_and_check(d, current, history, "update 1: tables");

    d.feed.append(std::vector<BookingUpdate>{u(104, "pending", 75.00, 6, 5min),
                                             u(101, "on hold", 450.00, 7, 6min)});
    std::cout << "\n== Update 2: a status the program does not know fails the batch\n";
    try {
      pipeline.update(clock);
      check(false, "update 2 must fail");
    } catch (const fl::error& e) {
      std::cout << "  caught: " << e.what() << '\n';
      check(e.code() == fl::errc::expectation_failed && e.column() == "known_status" &&
                e.key() == "booking_id=101",
            "update 2: the error names the expectation and the key");
    }
    check(tables_are(d, current, history), "update 2: tables unchanged");
    std::cout << "  bookings_current and bookings_history are as after update 1, and so is the\n"
                 "  dedup state: the retry will see the two rows as new.\n";

    std::cout << "\n== Update 3: the fix (\"on hold\" is a known status); the batch again\n";
    known_statuses.insert("on hold");
    check_summary(pipeline.update(clock), 1, 2, 0, 0, "update 3: summary");
    current = {u(101, "on hold", 450.00, 7, 6min), u(102, "pending", 980.50, 2, 1min),
               u(103, "pending", 120.00, 5, 4min), u(104, "pending", 75.00, 6, 5min)};
    history = {{101, "pending", 450.00, 1, 3}, {101, "confirmed", 450.00, 3, 7},
               {101, "on hold", 450.00, 7, now},   {102, "pending", 980.50, 2, now},
               {103, "pending", 120.00, 5, now},   {104, "pending", 75.00, 6, now}};
    show_and_check(d, current, history, "update 3: tables");
  }  // The program stops: its Pipeline, with the flows' state in memory, is gone.

  // While it is down, more updates arrive, and the feed redelivers 104's
  // update 6 from before the restart.
  d.feed.append(std::vector<BookingUpdate>{u(102, "cancelled", 980.50, 8, 20min),
                                           u(104, "pending", 75.00, 6, 5min),
                                           u(105, "pending", 60.00, 9, 21min)});

  {  // ---- The program starts again: a new Pipeline, the same checkpoint ----
    fl::Pipeline pipeline{"bookings", d.checkpoint};
    declare(pipeline, d);
    pipeline.event_log(events);
    std::cout << "\n== After a restart: a new Pipeline resumes from the checkpoint\n";
    clock.now = t0 + 45min;
    check_summary(pipeline.update(clock), 1, 3, 1, 0, "after the restart: summary");
    std::cout << "  Only the 3 new rows were read. The redelivered update 6 of booking 104 was\n"
                 "  removed by the dedup state restored from the checkpoint; without it, REPLACE\n"
                 "  USING would have added a second row for 104 (an equal sequence, R-USING-2).\n";
    const auto now = std::nullopt;
    const std::vector<BookingUpdate> current{
        u(101, "on hold", 450.00, 7, 6min), u(102, "cancelled", 980.50, 8, 20min),
        u(103, "pending", 120.00, 5, 4min), u(104, "pending", 75.00, 6, 5min),
        u(105, "pending", 60.00, 9, 21min)};
    const std::vector<BookingVersion> history{
        {101, "pending", 450.00, 1, 3},   {101, "confirmed", 450.00, 3, 7},
        {101, "on hold", 450.00, 7, now}, {102, "pending", 980.50, 2, 8},
        {102, "cancelled", 980.50, 8, now}, {103, "pending", 120.00, 5, now},
        {104, "pending", 75.00, 6, now},  {105, "pending", 60.00, 9, now}};
    show_and_check(d, current, history, "after the restart: tables");
  }

  // The log saw the failed batch and the failed update.
  const auto count = [](std::string_view text) {
    return std::ranges::count_if(event_lines, [&](auto& l) { return l.find(text) != l.npos; });
  };
  check(count(R"("status":"FAILED")") == 1 && count(R"("state":"FAILED")") == 1,
        "event log: one failed batch, one failed update");
  check(count(R"("event_type":"flow_progress")") == 9, "event log: one line per batch run (9)");

  if (failures != 0) {
    std::cerr << "\nflagship: " << failures << " check(s) FAILED\n";
    return 1;
  }
  std::cout << "\nflagship: every result matches the flows' contracts\n";
  return 0;
}

// --- With a database: resumable across processes -------------------------------

/// The feed of the durable run: the same every run (a log the program reads
/// again from where its checkpoint says), with a redelivery now and then.
std::vector<BookingUpdate> durable_feed() {
  static const char* statuses[] = {"pending", "confirmed", "on hold", "cancelled"};
  std::vector<BookingUpdate> out;
  for (int i = 0; i < 60; ++i) {
    out.push_back(u(200 + i % 7, statuses[(i / 7) % 4], 50.0 + i, 100 + i, std::chrono::minutes(i)));
    if (i % 6 == 5) out.push_back(out[out.size() - 3]);  // a redelivery
  }
  return out;
}

int run_durable(const std::string& path) {
  known_statuses.insert("on hold");
  const auto feed = durable_feed();
  fl::UpdateOptions options;
  options.now = t0 + 2h;

  // What an uninterrupted run gives, in memory.
  Durable<> reference;
  reference.feed.append(feed);
  {
    fl::Pipeline pipeline{"bookings", reference.checkpoint};
    declare(pipeline, reference);
    pipeline.update(options);
  }

  Durable<fl::SqliteStorage, fl::SqliteCheckpoint> d{path};
  d.feed.append(feed);  // the whole log, every run: the checkpoint says where to resume
  fl::Pipeline pipeline{"bookings", d.checkpoint};
  declare(pipeline, d);
  std::cout << "== " << feed.size() << " booking updates into " << path
            << " (tables and checkpoint); kill the program at any moment and run it again\n";
  options.on_progress = [&](const fl::FlowProgress& p) {
    if (p.batches == 1) {
      const std::size_t done = feed.size() - p.rows_planned;
      std::cout << "  " << p.flow << ": "
                << (done == 0 ? std::string("starting at the first row")
                              : "resuming after row " + std::to_string(done) +
                                    ", committed by an earlier run")
                << '\n';
    }
    std::cout << "    " << p.flow << ": batch " << p.batches << " committed (" << p.rows << '/'
              << p.rows_planned << " rows of this run)" << std::endl;
    std::this_thread::sleep_for(100ms);  // time to interrupt it
  };
  const fl::UpdateSummary summary = pipeline.update(options);
  for (const auto& f : summary.flows) {
    std::cout << "  summary: " << f.flow << ": " << f.batches << " batch(es), " << f.input_rows
              << " rows read in this run";
    if (f.batches == 0) std::cout << " (every row was applied by an earlier run)";
    std::cout << '\n';
  }
  print::table("bookings_current", d.current.sorted_rows());
  print::table("bookings_history (by booking, then __START_AT)", versions(d));
  check(tables_are(d, reference.current.sorted_rows(), versions(reference)),
        "durable run: the tables equal an uninterrupted run");
  if (failures != 0) {
    std::cerr << "\nflagship: the tables differ from an uninterrupted run\n";
    return 1;
  }
  std::cout << "\nflagship: the tables equal an uninterrupted run: no row lost, none applied twice\n"
               "  (query them: sqlite3 -readonly "
            << path << " 'SELECT * FROM bookings_current')\n";
  return 0;
}
