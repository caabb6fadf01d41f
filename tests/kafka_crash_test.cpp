// Crash test with real kills of a pipeline that reads a Kafka topic and
// writes both durable tables and a Kafka topic (R-SINK-1 with R-EXACT-1 and
// R-SOURCE-5): a child process runs the pipeline, and the parent kills it
// with SIGKILL at random moments, restarting it each time until a run
// completes. Then the parent compares the tables and every record of the
// output topic with the same pipeline run once in memory without kills: no
// row may be lost and none written twice, in the tables or in the topic.
//
// The cluster is librdkafka's mock cluster (tests/support/kafka_mock.hpp),
// in the parent. Each round has an input topic of 3 partitions, filled by
// the parent with records whose values are JSON rows (written with
// kafka_json_value, read back by KafkaSource's JSON decoding), and an
// output topic of 4 partitions. The child's pipeline ("crash"), whose
// flows an update runs in this order:
//   store   KafkaSource(input) -> APPEND into events (SqliteStorage)
//   export  KafkaSource(input) -> map to Out -> KafkaSink(output), keyed
//   latest  KafkaSource(input) -> REPLACE USING by key, seq into latest
// with its tables in one SQLite database and its checkpoint in the same
// file (SqliteCheckpoint), in micro-batches of a few rows, so that a run
// commits some 60 batches and most kills land inside one: in a SQLite
// transaction, in the sink's writes, or between the sink's writes and the
// commit (the batch is then delivered again after the restart and must
// find its records there). To make the last two more frequent, the child's
// sink sends each record at once (linger.ms 0) and pauses 0.3 ms before
// handing over the next (its fault hook), and its pipeline pauses 2 ms
// between the sink's writes and the commit (the pipeline's fault hook).
//
// The child is this program itself, started with fork() and, at once,
// exec() of /proc/self/exe: a child that only forked would share the
// parent's librdkafka state (its threads do not survive a fork), and the
// exec gives it fresh handles. Between the two it keeps only stdin, stdout,
// stderr and the write end of its progress pipe (moved to fd 3) and closes
// every other inherited descriptor (close_range): a child holding the
// parent's connections to the mock cluster would keep them open after the
// parent closed them. Its arguments are the cluster's bootstrap address,
// the database path and the two topics; a static initialiser of this file
// sees "--kafka-crash-child" in the command line and runs the child
// instead of the tests (so the program needs no second main). The child
// opens the database, loops update() until nothing is left and exits 0,
// writing one byte to fd 3 per committed batch; the checkpoint makes a
// restarted child continue where the last commit left it.
//
// When to kill (a seeded RNG): a fifth of the kills 0 to 80 ms after the
// start (exec, librdkafka and SQLite setup, the first batches), the others
// after the run reported its 1st to 4th committed batch, 0 to 3 ms later
// (mostly the next batch's first steps or SQLite commit) or 0 to 30 ms
// later (anywhere in a sink batch: its tail read, its records handed to the
// producer, the wait for their delivery reports, the commit after them).
// After each kill, before the restart, the parent waits for the mock
// cluster to have handled everything the dead child sent (two watermark
// requests over a connection of its own: the cluster serves connections in
// one thread, so the second answer comes after the child's last request,
// which the kernel had delivered before the kill returned) and reads what
// the kill left: on a copy of the database, the last batch of `export`
// the checkpoint committed; in the output topic, records of a later batch
// (written, not committed: the restart must not write them again). It
// counts the kills that left such records, and those that left a batch
// cut short (some of its records, not all).
//
// After a round: the database's tables equal the reference's; the output
// topic holds exactly the reference's batches of `export`, each record once
// with its batch id and index, each partition in batch order; the database
// opened again by a pipeline (with its sink) finds nothing to do and
// writes nothing. Rounds go on until the kill count is reached; the seed
// and the count can be changed:
//   kafka_crash_test --seed 7 --kills 1000
// (read from /proc/self/cmdline: doctest ignores arguments it does not
// know). The optimised build runs 200 kills, AddressSanitizer 40. A failure
// names its round's seed and the kill's number in the round.
#include <doctest/doctest.h>

#include <flowlib/checkpoint/memory.hpp>
#include <flowlib/checkpoint/sqlite.hpp>
#include <flowlib/flowlib.hpp>
#include <flowlib/pipeline.hpp>
#include <flowlib/runtime/checkpoint_log.hpp>
#include <flowlib/sink/kafka.hpp>
#include <flowlib/source/kafka.hpp>
#include <flowlib/storage/sqlite.hpp>

#include <support/kafka_mock.hpp>
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
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

namespace fl = flowlib;

namespace kafka_crash {

/// An input record (the input topic's JSON values).
struct In {
  std::int64_t id = 0;
  std::string key;
  std::int64_t seq = 0;
  std::int64_t amount = 0;
  std::optional<std::string> note;
  friend bool operator==(const In&, const In&) = default;
};
FLOWLIB_SCHEMA(In, id, key, seq, amount, note);

/// An output record (the output topic's JSON values).
struct Out {
  std::int64_t id = 0;
  std::string key;
  std::int64_t cents = 0;
  bool large = false;
  friend bool operator==(const Out&, const Out&) = default;
};
FLOWLIB_SCHEMA(Out, id, key, cents, large);

Out to_out(const In& r) { return Out{r.id, r.key, r.amount * 100, r.amount >= 500}; }

using Latest = fl::ReplaceUsing<fl::Key<&In::key>, fl::Seq<&In::seq>>;

constexpr int input_partitions = 3;
constexpr int output_partitions = 4;
constexpr const char* child_flag = "--kafka-crash-child";

/// The input of one round, regenerated identically from its seed: (partition, row).
std::vector<std::pair<std::int32_t, In>> make_input(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::pair<std::int32_t, In>> out;
  const int n = 220 + static_cast<int>(rng() % 60);
  for (int i = 0; i < n; ++i) {
    In r;
    r.id = i;
    r.key = "k";
    r.key += std::to_string(rng() % 17);
    r.seq = i;
    r.amount = static_cast<std::int64_t>(rng() % 1000);
    if (rng() % 5 != 0) {
      r.note = "n";
      *r.note += std::to_string(rng() % 100);
    }
    out.emplace_back(static_cast<std::int32_t>(rng() % input_partitions), r);
  }
  return out;
}

/// Writes the round's input into `topic`.
void fill_input(flowtest::kafka_mock& mock, const std::string& topic, std::uint64_t seed) {
  std::vector<flowtest::mock_record> records;
  for (const auto& [p, r] : make_input(seed)) {
    flowtest::mock_record m;
    m.partition = p;
    m.key = r.key;
    m.value = fl::kafka_json_value(r);
    records.push_back(std::move(m));
  }
  mock.produce(topic, records);
}

/// The sources, tables and checkpoint of one process. The checkpoint is the
/// first member, so that it is destroyed after the tables attached to it.
template <class Storage, class Checkpoint>
struct world {
  template <class... A>
  world(const std::string& brokers, const std::string& input, A&&... checkpoint_args)
      : checkpoint(std::forward<A>(checkpoint_args)...), source{"input", source_options(brokers, input)} {}

  static fl::KafkaSourceOptions<In> source_options(const std::string& brokers, const std::string& input) {
    fl::KafkaSourceOptions<In> o;
    o.brokers = brokers;
    o.topic = input;
    o.config = {{"log_level", "0"}};
    return o;
  }

  Checkpoint checkpoint;
  fl::KafkaSource<In> source;
  fl::StreamingTable<In, Storage> events{"events"};
  fl::StreamingTable<In, Storage> latest{"latest"};
};

using durable_world = world<fl::SqliteStorage, fl::SqliteCheckpoint>;
using memory_world = world<fl::MemoryStorage, fl::MemoryCheckpoint>;

fl::KafkaSinkOptions<Out> sink_options(const std::string& brokers, const std::string& output) {
  fl::KafkaSinkOptions<Out> o;
  o.brokers = brokers;
  o.topic = output;
  o.writer = "crash";
  o.config = {{"log_level", "0"}};
  o.key = [](const Out& r) { return std::optional<std::string>(r.key); };
  return o;
}

/// The pipeline; the export flow ends in `export_into` (a KafkaSink in the
/// child and after a round, a ForeachBatch recording the batches in the
/// reference).
template <class W, class Export>
std::unique_ptr<fl::Pipeline> make_pipeline(W& w, Export&& export_into, bool widen_windows = false) {
  fl::PipelineOptions opt;
  opt.snapshot_interval = 4;
  opt.retain_batches = 2;
  if (widen_windows) {
    // In the child: a pause between the sink's writes and the commit.
    opt.fault_hook = [](fl::fault_point p, std::string_view flow, std::uint64_t) {
      if (p == fl::fault_point::after_table_write && flow == "export")
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
    };
  }
  auto p = std::make_unique<fl::Pipeline>("crash", w.checkpoint, std::move(opt));
  // An update runs each flow's batches in turn, in this order.
  p->flow("store").from(w.source).max_rows_per_batch(12).into(w.events, fl::Append{"store"});
  export_into(p->flow("export").from(w.source).map([](const In& r) { return to_out(r); }).max_rows_per_batch(8));
  p->flow("latest").from(w.source).max_rows_per_batch(25).into(w.latest, Latest{"latest"});
  return p;
}

/// Runs `p` until an update finds nothing new; `progress_fd` (when not -1)
/// gets one byte per committed batch.
std::uint64_t run_to_end(fl::Pipeline& p, int progress_fd = -1) {
  fl::UpdateOptions options;
  options.now = std::chrono::system_clock::time_point{std::chrono::seconds(1'750'000'000)};
  if (progress_fd != -1) {
    options.on_progress = [progress_fd](const fl::FlowProgress&) {
      const char b = 1;
      (void)!::write(progress_fd, &b, 1);
    };
  }
  std::uint64_t batches = 0;
  for (;;) {
    const auto s = p.update(options);
    if (s.batches() == 0) return batches;
    batches += s.batches();
  }
}

/// The child: the arguments after child_flag, nothing else from the parent.
int child_main(const std::vector<std::string>& args) noexcept {
  try {
    if (args.size() != 4) throw std::runtime_error("expected: brokers database input output");
    const std::string& brokers = args[0];
    durable_world w{brokers, args[2], args[1]};
    // Each record is sent at once and the next one handed over a little
    // later, so that a kill cuts a batch short more often.
    auto o = sink_options(brokers, args[3]);
    o.producer_config = {{"linger.ms", "0"}};
    o.fault_hook = [](std::uint64_t, std::size_t) { std::this_thread::sleep_for(std::chrono::microseconds(300)); };
    auto p = make_pipeline(w, [&](auto&& b) { std::move(b).into(fl::KafkaSink<Out>{std::move(o)}); }, true);
    run_to_end(*p, 3);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kafka_crash_test child: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "kafka_crash_test child: an exception that is not a std::exception\n");
  }
  return 2;
}

/// The program's arguments, from /proc/self/cmdline.
std::vector<std::string> command_line() {
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
  return args;
}

/// `--name N` or `--name=N` on the command line, else `fallback`.
std::uint64_t argument(const std::string& name, std::uint64_t fallback) {
  const auto args = command_line();
  const std::string flag = "--" + name;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == flag && i + 1 < args.size()) return std::stoull(args[i + 1]);
    if (args[i].rfind(flag + "=", 0) == 0) return std::stoull(args[i].substr(flag.size() + 1));
  }
  return fallback;
}

// --- The reference and the checks --------------------------------------------------

/// The pipeline of a round run once in memory, never killed: its tables and
/// the export flow's batches (batch id -> rows).
struct reference {
  reference(const std::string& brokers, const std::string& input) : w(brokers, input) {
    auto p = make_pipeline(w, [this](auto&& b) {
      std::move(b).into(fl::ForeachBatch<Out>{[this](std::uint64_t id, std::span<const Out> rows) {
        batches[id] = std::vector<Out>(rows.begin(), rows.end());
      }});
    });
    run_to_end(*p);
  }
  memory_world w;
  std::map<std::uint64_t, std::vector<Out>> batches;
};

/// A consumer of the parent's own: the fence after a kill and the reading
/// of the output topic.
struct topic_reader {
  explicit topic_reader(const flowtest::kafka_mock& mock) {
    fl::detail::kafka_properties props = fl::detail::kafka_consumer_settings("kafka_crash_test");
    props.emplace_back("bootstrap.servers", mock.bootstraps());
    props.emplace_back("log_level", "0");
    handle = fl::detail::make_kafka_handle(RD_KAFKA_CONSUMER, fl::detail::make_kafka_conf(props, ctx), ctx);
  }
  fl::detail::kafka_context ctx{"kafka_crash_test", fl::errc::source_io};
  fl::detail::kafka_handle handle;

  std::vector<std::int64_t> highs(const std::string& topic) {
    std::vector<std::int32_t> parts(output_partitions);
    for (int i = 0; i < output_partitions; ++i) parts[static_cast<std::size_t>(i)] = i;
    return fl::detail::query_offsets(handle.get(), topic, parts, true, std::chrono::seconds(30), ctx);
  }

  struct record {
    std::int32_t partition = 0;
    std::int64_t offset = 0;
    std::uint64_t batch = 0, index = 0, count = 0;
    std::optional<std::string> key;
    std::string value;
  };
  /// Every record of the output topic, each partition in offset order.
  std::vector<record> read_all(const std::string& topic) {
    const auto high = highs(topic);
    std::vector<fl::detail::kafka_offset_range> ranges;
    for (int i = 0; i < output_partitions; ++i) ranges.push_back({i, 0, high[static_cast<std::size_t>(i)]});
    std::vector<record> out;
    fl::detail::read_offset_ranges(handle.get(), topic, std::span<const fl::detail::kafka_offset_range>(ranges),
                                   std::chrono::seconds(30), ctx, [&](fl::detail::kafka_message&& m) {
                                     record r;
                                     r.partition = m->partition;
                                     r.offset = m->offset;
                                     if (m->key) r.key = std::string(static_cast<const char*>(m->key), m->key_len);
                                     r.value.assign(static_cast<const char*>(m->payload), m->len);
                                     rd_kafka_headers_t* hdrs = nullptr;
                                     REQUIRE(rd_kafka_message_headers(m.get(), &hdrs) == RD_KAFKA_RESP_ERR_NO_ERROR);
                                     const auto number = [&](std::string_view name) {
                                       std::string_view v;
                                       REQUIRE(fl::detail::kafka_sink_header(hdrs, name, v));
                                       return std::stoull(std::string(v));
                                     };
                                     std::string_view w, f;
                                     REQUIRE(fl::detail::kafka_sink_header(hdrs, fl::kafka_sink_headers::writer, w));
                                     REQUIRE(fl::detail::kafka_sink_header(hdrs, fl::kafka_sink_headers::flow, f));
                                     CHECK(w == "crash");
                                     CHECK(f == "export");
                                     r.batch = number(fl::kafka_sink_headers::batch);
                                     r.index = number(fl::kafka_sink_headers::index);
                                     r.count = number(fl::kafka_sink_headers::count);
                                     out.push_back(std::move(r));
                                   });
    std::stable_sort(out.begin(), out.end(), [](const record& a, const record& b) {
      return a.partition != b.partition ? a.partition < b.partition : a.offset < b.offset;
    });
    return out;
  }
};

struct totals {
  std::size_t kills = 0;
  std::size_t kills_in_batches = 0;      // after the run had committed a batch
  std::size_t kills_uncommitted = 0;     // left records of an export batch not committed
  std::size_t kills_partial = 0;         // of which the batch was cut short
  std::size_t runs = 0;
  std::size_t rounds = 0;
  std::uint64_t batches = 0;
  std::size_t rows = 0;
  std::size_t records = 0;
};

/// The output topic equals the reference's batches: each record of each
/// batch once, at its key's partition, with the row's value; each partition
/// in (batch, index) order; nothing else.
void check_output(const std::vector<topic_reader::record>& got, const reference& ref, totals& t) {
  std::map<std::pair<std::uint64_t, std::uint64_t>, int> seen;
  std::map<std::int32_t, std::pair<std::uint64_t, std::uint64_t>> last;
  for (const auto& r : got) {
    INFO("output record at partition " << r.partition << " offset " << r.offset << ": batch " << r.batch << " index "
                                       << r.index);
    const auto b = ref.batches.find(r.batch);
    REQUIRE_MESSAGE(b != ref.batches.end(), "a batch the reference does not have");
    REQUIRE(r.index < b->second.size());
    CHECK(r.count == b->second.size());
    const Out& want = b->second[r.index];
    CHECK(r.value == fl::kafka_json_value(want));
    CHECK(r.key == want.key);
    CHECK(r.partition == fl::kafka_key_partition(want.key, output_partitions));
    const auto at = std::make_pair(r.batch, r.index);
    CHECK_MESSAGE(++seen[at] == 1, "written twice");
    if (const auto l = last.find(r.partition); l != last.end()) CHECK_MESSAGE(l->second < at, "out of batch order");
    last[r.partition] = at;
  }
  std::size_t want_records = 0;
  for (const auto& [id, rows] : ref.batches) {
    want_records += rows.size();
    for (std::size_t i = 0; i < rows.size(); ++i)
      CHECK_MESSAGE(seen.count(std::make_pair(id, std::uint64_t{i})) == 1, "batch " << id << " record " << i << " is missing");
  }
  CHECK(got.size() == want_records);
  t.records += got.size();
}

template <class A, class B>
void compare_tables(const A& got, const B& want, totals& t) {
  const auto g = got.events.sorted_rows();
  const auto e = want.events.sorted_rows();
  CHECK(g.size() == e.size());
  CHECK(g == e);
  const auto gl = got.latest.sorted_rows();
  const auto el = want.latest.sorted_rows();
  CHECK(gl.size() == el.size());
  CHECK(gl == el);
  t.rows += e.size() + el.size();
}

/// When to kill a child: once it has reported `after_batches` commits in
/// this run (0: from its start), `delay` later.
struct kill_plan {
  std::size_t after_batches = 0;
  std::chrono::microseconds delay{0};
};

template <class Rng>
kill_plan plan_kill(Rng& rng) {
  kill_plan k;
  const int kind = std::uniform_int_distribution<int>(0, 9)(rng);
  if (kind < 2) {  // a fifth: early
    k.delay = std::chrono::microseconds(std::uniform_int_distribution<std::int64_t>(0, 80'000)(rng));
    return k;
  }
  k.after_batches = std::uniform_int_distribution<std::size_t>(1, 6)(rng);
  const std::int64_t span = kind < 6 ? 3'000 : 30'000;
  k.delay = std::chrono::microseconds(std::uniform_int_distribution<std::int64_t>(0, span)(rng));
  return k;
}

/// Starts the child (fork, then exec of this program); SIGKILLs it as
/// `plan` says unless it ended before. Returns true when it completed.
bool run_child(const std::vector<std::string>& args, std::optional<kill_plan> plan, totals& t) {
  // Everything the child needs is made before the fork: between fork and
  // exec it calls only dup2, close_range and execv.
  std::vector<std::string> argv_s{"/proc/self/exe", child_flag};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : argv_s) argv.push_back(a.data());
  argv.push_back(nullptr);
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  std::fflush(nullptr);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    if (::dup2(fds[1], 3) != 3) _exit(126);
    ::close_range(4, ~0U, 0);
    ::execv("/proc/self/exe", argv.data());
    _exit(127);
  }
  ::close(fds[1]);
  ++t.runs;
  std::size_t committed = 0;
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

/// After a kill: waits until the cluster has handled what the child sent,
/// then counts what the kill left in the output topic beyond the last
/// export batch the checkpoint committed (read on a copy of the database).
void after_kill(topic_reader& reader, const std::string& output, const std::string& db, totals& t) {
  (void)reader.highs(output);
  (void)reader.highs(output);
  if (!std::filesystem::exists(db)) return;  // killed before it made the database
  const std::string copy = db + ".inspect";
  for (const char* suffix : {"", "-wal"}) {
    std::filesystem::remove(copy + suffix);
    if (std::filesystem::exists(db + suffix)) std::filesystem::copy_file(db + suffix, copy + suffix);
  }
  std::optional<std::uint64_t> committed;
  {
    fl::SqliteCheckpoint checkpoint{copy};
    if (const auto c = fl::detail::checkpoint_log(checkpoint).last_commit("export")) committed = c->batch;
  }
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) std::filesystem::remove(copy + suffix);
  std::map<std::uint64_t, std::pair<std::size_t, std::uint64_t>> beyond;  // batch -> (records, count)
  for (const auto& r : reader.read_all(output)) {
    if (committed && r.batch <= *committed) continue;
    auto& b = beyond[r.batch];
    ++b.first;
    b.second = r.count;
  }
  // At most one batch of a flow is ever uncommitted.
  CHECK(beyond.size() <= 1);
  if (!beyond.empty()) {
    ++t.kills_uncommitted;
    if (beyond.begin()->second.first < beyond.begin()->second.second) ++t.kills_partial;
  }
}

void crash_test() {
#if defined(__SANITIZE_ADDRESS__)
  constexpr std::uint64_t default_kills = 40;
#else
  constexpr std::uint64_t default_kills = 200;
#endif
  const std::uint64_t seed = argument("seed", 20261207);
  const std::uint64_t kill_target = argument("kills", default_kills);
  constexpr std::size_t kills_per_round = 25;
  flowtest::kafka_mock mock;
  flowtest::temp_dir dir{"flowlib_kafka_crash"};
  topic_reader reader(mock);
  totals t;
  std::mt19937_64 rng(seed ^ 0x5eedu);
  while (t.kills < kill_target) {
    const std::uint64_t round_seed = seed * 1000 + t.rounds;
    CAPTURE(round_seed);
    const std::string input = "input" + std::to_string(t.rounds);
    const std::string output = "output" + std::to_string(t.rounds);
    mock.create_topic(input, input_partitions);
    mock.create_topic(output, output_partitions);
    fill_input(mock, input, round_seed);
    const std::string db = (dir.path / ("round" + std::to_string(t.rounds) + ".db")).string();
    const std::vector<std::string> args{mock.bootstraps(), db, input, output};

    reference ref(mock.bootstraps(), input);
    REQUIRE(!ref.batches.empty());

    std::size_t killed = 0;
    bool done = false;
    while (!done && killed < kills_per_round && t.kills < kill_target) {
      CAPTURE(killed);  // the kill's number in this round
      done = run_child(args, plan_kill(rng), t);
      if (!done) {
        ++killed;
        after_kill(reader, output, db, t);
      }
    }
    if (!done) REQUIRE(run_child(args, std::nullopt, t));

    // The topic and the tables as the last child left them, then opened
    // again: nothing is left to do, nothing is written.
    check_output(reader.read_all(output), ref, t);
    {
      durable_world w{mock.bootstraps(), input, db};
      auto p = make_pipeline(w, [&](auto&& b) {
        std::move(b).into(fl::KafkaSink<Out>{sink_options(mock.bootstraps(), output)});
      });
      CHECK(run_to_end(*p) == 0);
      compare_tables(w, ref.w, t);
      const fl::detail::checkpoint_log got_log(w.checkpoint);
      const fl::detail::checkpoint_log ref_log(ref.w.checkpoint);
      for (const char* flow : {"store", "latest", "export"}) {
        INFO("flow " << flow);
        const auto got = got_log.last_commit(flow);
        REQUIRE(got.has_value());
        CHECK(got->batch == ref_log.last_commit(flow)->batch);
        t.batches += got->batch + 1;
      }
    }
    std::size_t want_records = 0;
    for (const auto& [id, rows] : ref.batches) want_records += rows.size();
    CHECK(reader.read_all(output).size() == want_records);  // the reopened pipeline wrote nothing
    for (const char* suffix : {"", "-wal", "-shm", "-journal"}) std::filesystem::remove(db + suffix);
    ++t.rounds;
  }
  std::printf("kafka_crash_test: seed %llu: %zu kills (SIGKILL) over %zu rounds (%zu after the run had committed "
              "a batch), %zu child runs, %llu batches committed, %zu table rows and %zu output records checked "
              "against the reference; %zu kills left records of an export batch not committed (%zu of them a "
              "batch cut short)\n",
              static_cast<unsigned long long>(seed), t.kills, t.rounds, t.kills_in_batches, t.runs,
              static_cast<unsigned long long>(t.batches), t.rows, t.records, t.kills_uncommitted, t.kills_partial);
  CHECK(t.kills >= kill_target);
  CHECK(t.kills_in_batches * 2 >= t.kills);  // most kills hit a running batch loop
  // Some kills came between the sink's writes and the commit (about one in
  // seven: a short run, as under AddressSanitizer, may see none).
  if (kill_target >= 100) CHECK(t.kills_uncommitted > 0);
}

/// The child's entry: when the command line says so, this runs before main()
/// and the process ends here.
[[maybe_unused]] const bool child_started = [] {
  const auto args = command_line();
  if (args.size() < 2 || args[1] != child_flag) return false;
  std::_Exit(child_main(std::vector<std::string>(args.begin() + 2, args.end())));
}();

}  // namespace kafka_crash

TEST_CASE("R-SINK-1, R-EXACT-1: SIGKILL at random moments loses no row and writes none twice, in the tables "
          "or the output topic (KafkaSource -> SqliteStorage + SqliteCheckpoint, KafkaSink)") {
  kafka_crash::crash_test();
}
