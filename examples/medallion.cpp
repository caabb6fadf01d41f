// flowlib's medallion example: raw text lines become typed rows (bronze),
// then cleaned rows enriched from a dimension table (silver), then a history
// of every order (gold), with transform stages (docs/stages.md), every table
// and the checkpoint in one SQLite file (docs/durable-pipelines.md).
//
//   raw_order_lines (MemorySource<RawLine>, a few lines malformed)
//     -> map(parse_order, rejected_lines)   malformed lines: flowlib::row_rejected
//     -> orders_bronze                      APPEND
//   customer_changes (MemorySource<CustomerChange>)
//     -> customers                          AUTO CDC ... STORED AS SCD TYPE 1 (the dimension)
//   TableSource{orders_bronze}
//     -> filter(not a test order)
//     -> lookup(customers, customer_id)     inner: an unknown customer's order is left out
//     -> orders_silver                      APPEND
//   TableSource{orders_silver}
//     -> orders_gold                        AUTO CDC ... STORED AS SCD TYPE 2 (history)
//
//   example_medallion [db-path]
//       Runs the pipeline over the database (default: flowlib_medallion.db in
//       the temporary directory), prints the event log and the tables, and
//       checks them against the same pipeline run in memory. Run it again:
//       it resumes from the checkpoint and finds every row applied already.
//   example_medallion --crash-test [db-path]
//       Runs a longer feed in small micro-batches in a child process and
//       kills it (SIGKILL) at random moments, several times, then runs it to
//       completion and compares every table with an uninterrupted run into a
//       second database (db-path + ".uninterrupted"). Exits 1 on a mismatch.
//
// The program exits 1 when a check fails, so it doubles as a test (it runs
// under CTest: a fresh run, a second run, the crash test).

#include <flowlib/checkpoint/sqlite.hpp>
#include <flowlib/flowlib.hpp>
#include <flowlib/storage/sqlite.hpp>

#include "print.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>
#include <random>
#include <ranges>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace fl = flowlib;
using namespace std::chrono_literals;

// --- Rows ---------------------------------------------------------------------

/// One line of the raw feed, as it arrived. A durable table stores columns
/// by name, so even the quarantine table of raw lines needs a schema.
struct RawLine {
  std::string text;
};
FLOWLIB_SCHEMA(RawLine, text);

/// A parsed order event: a new version of an order.
struct Order {
  std::int64_t order_id;
  std::int64_t customer_id;
  std::string status;
  double amount;
  std::int64_t version;  // increases with every change of an order
  friend bool operator==(const Order&, const Order&) = default;
};
FLOWLIB_SCHEMA(Order, order_id, customer_id, status, amount, version);

/// The customers feed, and the dimension it keeps current (SCD type 1: the
/// change's columns but its sequence).
struct CustomerChange {
  std::int64_t customer_id;
  std::string name;
  std::string country;
  std::int64_t seq;
};
FLOWLIB_SCHEMA(CustomerChange, customer_id, name, country, seq);

struct Customer {
  std::int64_t customer_id;
  std::string name;
  std::string country;
  friend bool operator==(const Customer&, const Customer&) = default;
};
FLOWLIB_SCHEMA(Customer, customer_id, name, country);

/// Silver: an order event with its customer.
struct EnrichedOrder {
  std::int64_t order_id;
  std::int64_t customer_id;
  std::string customer;
  std::string country;
  std::string status;
  double amount;
  std::int64_t version;
  friend bool operator==(const EnrichedOrder&, const EnrichedOrder&) = default;
};
FLOWLIB_SCHEMA(EnrichedOrder, order_id, customer_id, customer, country, status, amount, version);

/// Gold: the versions of every order (SCD type 2: __START_AT and __END_AT of
/// the sequence's type; a null __END_AT is the current version).
struct OrderVersion {
  std::int64_t order_id;
  std::string customer;
  std::string country;
  std::string status;
  double amount;
  std::int64_t start_at;
  std::optional<std::int64_t> end_at;
  friend bool operator==(const OrderVersion&, const OrderVersion&) = default;
};
FLOWLIB_SCHEMA(OrderVersion, order_id, customer, country, status, amount, (start_at, "__START_AT"),
               (end_at, "__END_AT"));

// AUTO CDC ... KEYS (customer_id) SEQUENCE BY seq COLUMNS * EXCEPT (seq) STORED AS SCD TYPE 1
using CustomersScd1 = fl::AutoCdc<fl::Key<&CustomerChange::customer_id>, fl::Seq<&CustomerChange::seq>,
                                  fl::Scd1, fl::except_column_list<"seq">>;
// AUTO CDC ... KEYS (order_id) SEQUENCE BY version
//   COLUMNS * EXCEPT (customer_id, version) STORED AS SCD TYPE 2
using OrderHistory = fl::AutoCdc<fl::Key<&EnrichedOrder::order_id>, fl::Seq<&EnrichedOrder::version>,
                                 fl::Scd2<>, fl::except_column_list<"customer_id", "version">>;

// --- The stages' functions ------------------------------------------------------

std::int64_t integer(std::string_view s, const char* what) {
  std::int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || end != s.data() + s.size()) {
    throw fl::row_rejected(std::string(what) + " is not an integer: '" + std::string(s) + "'");
  }
  return v;
}

double number(std::string_view s, const char* what) {
  double v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || end != s.data() + s.size()) {
    throw fl::row_rejected(std::string(what) + " is not a number: '" + std::string(s) + "'");
  }
  return v;
}

/// map(): "order_id,customer_id,status,amount,version" -> Order. A line it
/// cannot read is rejected (flowlib::row_rejected): with a quarantine table
/// given to map(), it goes there whole, with the reason, and the batch goes
/// on; the other lines are committed with it.
Order parse_order(const RawLine& line) {
  std::vector<std::string_view> f;
  for (auto part : std::views::split(std::string_view(line.text), ','))
    f.emplace_back(part.begin(), part.end());
  if (f.size() != 5) {
    throw fl::row_rejected("expected 5 comma-separated fields, found " + std::to_string(f.size()));
  }
  return Order{integer(f[0], "order_id"), integer(f[1], "customer_id"), std::string(f[2]),
               number(f[3], "amount"), integer(f[4], "version")};
}

/// filter(): the load generator's orders (customer 0) are not business.
constexpr std::int64_t test_customer = 0;
bool not_a_test_order(const Order& o) { return o.customer_id != test_customer; }

/// lookup()'s combine: an inner lookup calls it with the customer of the
/// order's customer_id.
EnrichedOrder with_customer(Order o, const Customer& c) {
  return EnrichedOrder{o.order_id, o.customer_id, c.name, c.country, std::move(o.status), o.amount,
                       o.version};
}

// --- Tables, feeds and flows ---------------------------------------------------

/// What outlives a process: the feeds (re-appended by each run), the tables
/// and the checkpoint. The checkpoint comes first: the tables close before
/// it.
template <class Storage = fl::MemoryStorage, class Checkpoint = fl::MemoryCheckpoint>
struct Medallion {
  template <class... A>
  explicit Medallion(A&&... checkpoint_args) : checkpoint(std::forward<A>(checkpoint_args)...) {}
  Checkpoint checkpoint;
  fl::MemorySource<RawLine> raw_lines{"raw_order_lines"};
  fl::MemorySource<CustomerChange> customer_changes{"customer_changes"};
  fl::StreamingTable<fl::Quarantined<RawLine>, Storage> rejected{"rejected_lines"};
  fl::StreamingTable<Order, Storage> bronze{"orders_bronze"};
  fl::StreamingTable<Customer, Storage> customers{"customers"};
  fl::StreamingTable<EnrichedOrder, Storage> silver{"orders_silver"};
  fl::StreamingTable<OrderVersion, Storage> gold{"orders_gold"};
};

/// Declares the four flows (0: each flow reads everything in one batch).
/// The pipeline runs a table's writers before its readers: customers and
/// orders_bronze, then orders_silver (it reads both), then orders_gold. So
/// each batch of orders_silver sees the customers as the customer changes
/// read so far made them (R-STAGE-6); a later change of a customer
/// enriches the orders read after it, not those already in silver.
///
/// Silver is appended to, one row per order event, so that gold, reading
/// it through a TableSource, sees every version of an order however the
/// feed was cut into batches (SCD type 2 orders them by version).
template <class M>
void declare(fl::Pipeline& pipeline, M& m, std::size_t rows_per_batch) {
  pipeline.flow("customers")
      .from(m.customer_changes)
      .max_rows_per_batch(rows_per_batch)
      .into(m.customers, CustomersScd1{"customers"});
  pipeline.flow("orders_bronze")
      .from(m.raw_lines)
      .map(parse_order, m.rejected)
      .max_rows_per_batch(rows_per_batch)
      .into(m.bronze, fl::Append{"orders_bronze"});
  pipeline.flow("orders_silver")
      .from(fl::TableSource{m.bronze})
      .filter(not_a_test_order)
      .lookup(m.customers, fl::join_on(&Order::customer_id, &Customer::customer_id), with_customer)
      .max_rows_per_batch(rows_per_batch)
      .into(m.silver, fl::Append{"orders_silver"});
  pipeline.flow("orders_gold")
      .from(fl::TableSource{m.silver})
      .max_rows_per_batch(rows_per_batch)
      .into(m.gold, OrderHistory{"orders_gold"});
}

struct Feeds {
  std::vector<RawLine> lines;
  std::vector<CustomerChange> customers;
};

template <class M>
void append(M& m, const Feeds& f) {
  m.raw_lines.append(f.lines);
  m.customer_changes.append(f.customers);
}

/// The feed of a normal run: three orders' lifecycles, a test order, an
/// order of a customer the dimension does not know, three malformed lines.
Feeds story_feeds() {
  Feeds f;
  for (const char* text : {"1001,1,placed,45.50,1",   "1002,2,placed,120.00,1",
                           "1001,1,paid,45.50,2",     "1003,3,placed,18.25,1",
                           "1004,0,placed,1.00,1",    "1002,2,paid,120.00,2",
                           "1005;2;placed;60.00;1",   "1001,1,shipped,45.50,3",
                           "1006,9,placed,75.00,1",   "1003,3,cancelled,18.25,2",
                           "1007,1,placed,abc,1",     "1002,2,shipped,120.00,3",
                           "1008,3,placed,30.00",     "1001,1,delivered,45.50,4"})
    f.lines.push_back({text});
  f.customers = {{1, "Ada", "UK", 1}, {2, "Grace", "US", 2}, {3, "Edsger", "NL", 3},
                 {2, "Grace", "CA", 4}};  // Grace moved: SCD type 1 keeps her latest row
  return f;
}

/// The crash test's feed: longer, the same kinds of rows.
Feeds crash_feeds() {
  static const char* statuses[] = {"placed", "paid", "shipped", "delivered"};
  Feeds f;
  for (int i = 0; i < 160; ++i) {
    const int order = 2000 + i % 40;
    const int customer = order % 11;  // 0: test orders; 10: no such customer
    char text[96];
    std::snprintf(text, sizeof text, "%d,%d,%s,%d.%02d,%d", order, customer, statuses[i / 40],
                  10 + order % 90, i % 100, i / 40 + 1);
    f.lines.push_back({i % 17 == 16 ? std::string(text) + ",extra" : std::string(text)});
  }
  for (int c = 1; c < 10; ++c)
    f.customers.push_back({c, "customer " + std::to_string(c), c % 2 ? "NL" : "FR", c});
  for (int c = 1; c < 10; c += 3)
    f.customers.push_back({c, "customer " + std::to_string(c), "BE", 10 + c});
  return f;
}

// --- The event log, printed -----------------------------------------------------

using print::field;

/// "MAP 14->11, LOOKUP 10->9": the stages array of a flow_progress line.
std::string stage_counts(std::string_view line) {
  std::string out;
  std::size_t at = line.find("\"stages\":[");
  const std::size_t end = at == std::string_view::npos ? at : line.find(']', at);
  while (at != std::string_view::npos && (at = line.find('{', at)) < end) {
    const std::string_view st = line.substr(at, line.find('}', at) - at + 1);
    out += (out.empty() ? "" : ", ") + field(st, "stage") + ' ' + field(st, "num_input_rows") +
           "->" + field(st, "num_output_rows");
    at += st.size();
  }
  return out;
}

void print_event(std::string_view line) {
  std::cout << "    update " << field(line, "update_id") << ' ';
  if (field(line, "event_type") == "update_progress") {
    std::cout << "update_progress " << field(line, "state") << '\n';
    return;
  }
  std::cout << field(line, "flow") << " batch " << field(line, "batch_id") << ' '
            << field(line, "status") << ": " << field(line, "num_input_rows") << " rows in";
  if (const std::string s = stage_counts(line); !s.empty()) std::cout << " [" << s << ']';
  for (const char* m : {"quarantined", "filtered", "unmatched", "upserted"}) {
    const std::string v = field(line, std::string("num_") + m + "_rows");
    if (!v.empty() && v != "0") std::cout << ", " << v << ' ' << m;
  }
  std::cout << '\n';
  if (field(line, "flow") == "orders_silver") std::cout << "      in full: " << line << '\n';
}

// --- Checks ------------------------------------------------------------------------

int failures = 0;
void check(bool ok, std::string_view what) {
  if (!ok) {
    ++failures;
    std::cerr << "CHECK FAILED: " << what << '\n';
  }
}

/// A quarantined line, flattened for printing.
struct RejectedLine {
  std::string flow;
  std::string reason;
  std::uint64_t batch_id;
  std::string text;
};
FLOWLIB_SCHEMA(RejectedLine, flow, reason, batch_id, text);

template <class M>
std::vector<RejectedLine> rejected_lines(const M& m) {
  std::vector<RejectedLine> out;
  for (const auto& q : m.rejected.sorted_rows()) out.push_back({q.flow, q.expectation, q.batch_id, q.row.text});
  return out;
}

/// Compares every table of `a` with `b`'s, printing one line per table
/// when `show` is set. True when all are equal.
template <class A, class B>
bool same_tables(const A& a, const B& b, bool show, const std::string& a_name = {},
                 const std::string& b_name = {}) {
  bool all = true;
  const int wa = static_cast<int>(a_name.size());
  const int wb = static_cast<int>(b_name.size());
  if (show) std::printf("  %-15s %s  %s\n", "table", a_name.c_str(), b_name.c_str());
  const auto one = [&](const char* name, const auto& x, const auto& y) {
    const auto rx = x.sorted_rows();
    const auto ry = y.sorted_rows();
    all = all && rx == ry;
    if (show) {
      std::printf("  %-15s %*s  %*s  %s\n", name, wa, (std::to_string(rx.size()) + " rows").c_str(), wb,
                  (std::to_string(ry.size()) + " rows").c_str(), rx == ry ? "equal" : "DIFFERENT");
    }
  };
  one("rejected_lines", a.rejected, b.rejected);
  one("orders_bronze", a.bronze, b.bronze);
  one("customers", a.customers, b.customers);
  one("orders_silver", a.silver, b.silver);
  one("orders_gold", a.gold, b.gold);
  return all;
}

/// A table's rows by order_id, then version (or __START_AT).
template <class Table>
auto by_order(const Table& t) {
  auto v = t.sorted_rows();
  std::ranges::sort(v, {}, [](const auto& x) {
    if constexpr (requires { x.version; }) return std::pair(x.order_id, x.version);
    else return std::pair(x.order_id, x.start_at);
  });
  return v;
}

// --- A run over a database ----------------------------------------------------------

using Durable = Medallion<fl::SqliteStorage, fl::SqliteCheckpoint>;

fl::UpdateOptions logical_clock() {
  fl::UpdateOptions o;
  o.now = std::chrono::sys_days{std::chrono::March / 2 / 2026} + 9h;  // reproducible timestamps
  return o;
}

int run(const std::string& path) {
  const Feeds feeds = story_feeds();

  // What the pipeline gives in memory, for the checks.
  Medallion<> expected;
  append(expected, feeds);
  {
    fl::Pipeline pipeline{"medallion", expected.checkpoint};
    declare(pipeline, expected, 0);
    pipeline.update(logical_clock());
  }

  Durable m{path};
  append(m, feeds);  // the whole feed, every run: the checkpoint says where each flow resumes
  fl::Pipeline pipeline{"medallion", m.checkpoint};
  declare(pipeline, m, 0);
  fl::EventLog events{print_event};
  pipeline.event_log(events);

  std::cout << "== " << feeds.lines.size() << " raw order lines and " << feeds.customers.size()
            << " customer changes into " << path << "\n  event log:\n";
  const fl::UpdateSummary summary = pipeline.update(logical_clock());
  bool all_applied_before = true;
  for (const auto& f : summary.flows) {
    all_applied_before = all_applied_before && f.batches == 0;
    std::cout << "  summary: " << f.flow << ": " << f.batches << " batch(es), " << f.input_rows
              << " rows read in this run";
    if (f.batches == 0) std::cout << " (applied by an earlier run)";
    std::cout << '\n';
  }
  std::cout << '\n';
  print::table("rejected_lines (map's quarantine: the lines parse_order rejected)", rejected_lines(m));
  print::table("orders_bronze (by order, then version)", by_order(m.bronze));
  print::table("customers (the dimension, SCD type 1)", m.customers.sorted_rows());
  print::table("orders_silver (no test order 1004; order 1006's customer 9 is unknown)", by_order(m.silver));
  print::table("orders_gold (SCD type 2, by order, then __START_AT)", by_order(m.gold));

  check(same_tables(m, expected, false), "the tables equal the same pipeline run in memory");
  check(m.rejected.size() == 3 && m.silver.size() == 9 && m.gold.size() == 9,
        "3 lines rejected, 9 silver rows, 9 order versions");
  if (failures != 0) {
    std::cerr << "\nmedallion: " << failures << " check(s) FAILED\n";
    return 1;
  }
  if (all_applied_before) {
    std::cout << "\nmedallion: nothing to do: every row was applied by an earlier run, and the "
                 "tables\n  loaded from the file equal the pipeline run in memory\n";
  } else {
    std::cout << "\nmedallion: the tables equal the same pipeline run in memory; run the program "
                 "again:\n  it resumes from the checkpoint in "
              << path << " and finds nothing to do\n";
  }
  return 0;
}

// --- Killed and restarted ---------------------------------------------------------------

void remove_database(const std::string& path) {
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) std::filesystem::remove(path + suffix);
}

/// One run of the crash test's pipeline to its end. With a pipe, writes one
/// byte to it after each committed batch.
fl::UpdateSummary run_crash_pipeline(Durable& m, int progress_fd, std::size_t rows_per_batch) {
  append(m, crash_feeds());
  fl::Pipeline pipeline{"medallion", m.checkpoint};
  declare(pipeline, m, rows_per_batch);
  fl::UpdateOptions options = logical_clock();
  if (progress_fd >= 0) {
    options.on_progress = [progress_fd](const fl::FlowProgress&) {
      const char byte = 1;
      if (::write(progress_fd, &byte, 1) != 1) std::_Exit(3);
    };
  }
  return pipeline.update(options);
}

int crash_test(const std::string& path) {
  constexpr std::size_t rows_per_batch = 8;
  constexpr int kills = 6;
  const std::string reference_path = path + ".uninterrupted";
  remove_database(path);
  remove_database(reference_path);

  // The uninterrupted run, into a second database (closed before any fork:
  // a SQLite connection must not cross one).
  const auto started = std::chrono::steady_clock::now();
  std::uint64_t batches = 0;
  {
    Durable reference{reference_path};
    batches = run_crash_pipeline(reference, -1, rows_per_batch).batches();
  }
  const auto took = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started);
  const unsigned seed = std::random_device{}();
  std::mt19937 random(seed);
  std::printf("== crash test: %zu raw lines in batches of %zu rows: %llu batches uninterrupted (%.0f ms)\n"
              "   into %s; now into %s, %d runs killed at random moments (seed %u)\n",
              crash_feeds().lines.size(), rows_per_batch, static_cast<unsigned long long>(batches),
              took.count(), reference_path.c_str(), path.c_str(), kills, seed);
  std::fflush(stdout);

  int killed = 0;
  for (int k = 1; k <= kills; ++k) {
    // Kill after a random number of committed batches, plus up to 3 ms: in
    // a batch, during its commit, or while the file is being opened.
    const std::uint64_t after = std::uniform_int_distribution<std::uint64_t>(0, 2 * batches / kills)(random);
    const auto extra = std::chrono::microseconds(std::uniform_int_distribution<int>(0, 3000)(random));
    int fds[2];
    if (::pipe(fds) != 0) return 2;
    const pid_t child = ::fork();
    if (child < 0) return 2;
    if (child == 0) {
      ::close(fds[0]);
      int rc = 0;
      try {
        Durable m{path};
        run_crash_pipeline(m, fds[1], rows_per_batch);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "child: %s\n", e.what());
        rc = 1;
      }
      std::_Exit(rc);  // no exit handlers: the parent's, copied by fork(), are not the child's
    }
    ::close(fds[1]);
    std::uint64_t seen = 0;
    char byte;
    bool finished = false;
    while (seen < after) {
      const ssize_t n = ::read(fds[0], &byte, 1);
      if (n == 1) {
        ++seen;
      } else if (n == 0 || errno != EINTR) {
        finished = true;  // the child completed (or died) before the planned kill
        break;
      }
    }
    if (!finished) std::this_thread::sleep_for(extra);
    ::kill(child, SIGKILL);
    int status = 0;
    ::waitpid(child, &status, 0);
    while (::read(fds[0], &byte, 1) == 1) ++seen;  // batches committed before the signal landed
    ::close(fds[0]);
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) {
      ++killed;
      std::printf("  run %d: SIGKILL after %llu committed batch(es) (+%.1f ms)\n", k,
                  static_cast<unsigned long long>(seen), static_cast<double>(extra.count()) / 1000);
    } else if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
      std::printf("  run %d: completed (%llu batches) before the kill\n", k,
                  static_cast<unsigned long long>(seen));
    } else {
      std::printf("  run %d: the child failed (status %d)\n", k, status);
      return 1;
    }
    std::fflush(stdout);
  }

  // Restarted once more, to the end; then both databases are opened again
  // (an update with nothing to do loads the tables) and compared.
  Durable m{path};
  const fl::UpdateSummary last = run_crash_pipeline(m, -1, rows_per_batch);
  std::printf("  last run: %llu batch(es) left to run, resumed after the last committed one\n",
              static_cast<unsigned long long>(last.batches()));
  Durable reference{reference_path};
  check(run_crash_pipeline(reference, -1, rows_per_batch).batches() == 0,
        "the uninterrupted database has nothing left to run");
  const bool same = same_tables(m, reference, true, "killed and restarted", "uninterrupted");
  check(same, "the tables equal an uninterrupted run");
  check(m.rejected.size() > 0 && m.silver.size() > 0 && m.gold.size() > m.silver.size() / 2,
        "the crash test's tables have rows");
  if (failures != 0) {
    std::cerr << "\nmedallion: crash test FAILED: the tables differ from an uninterrupted run\n";
    return 1;
  }
  std::printf("\nmedallion: killed %d times and restarted on SQLite: every table equals the "
              "uninterrupted run\n  (no row lost, none applied twice)\n",
              killed);
  return 0;
}

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  const auto temp = [](const char* name) { return (std::filesystem::temp_directory_path() / name).string(); };
  try {
    if (!args.empty() && args[0] == "--crash-test") {
      return crash_test(args.size() > 1 ? args[1] : temp("flowlib_medallion_crash.db"));
    }
    if (args.size() > 1 || (!args.empty() && args[0].starts_with("-"))) {
      std::cerr << "usage: example_medallion [db-path]\n"
                   "       example_medallion --crash-test [db-path]\n";
      return 2;
    }
    return run(!args.empty() ? args[0] : temp("flowlib_medallion.db"));
  } catch (const fl::error& e) {
    std::cerr << "medallion: " << e.what() << '\n';
    return 1;
  }
}
