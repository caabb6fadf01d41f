// The pipeline runtime: what Pipeline::update() costs over applying the same
// flows by hand, and what a commit costs against the size of the state.
//
// What is measured (docs/benchmarks/pipeline.md has the results):
//
// 1. overhead/...: rows per CPU second (`items_per_second`) of a REPLACE
//    USING flow (Key id, Seq seq; a row of five int64 and a short string;
//    keys uniform over 1e5; every row's sequence above all earlier ones) fed
//    batches of 1e3, 1e4 and 1e5 rows, on a target that already holds every
//    key, two ways on the same batches:
//      by_hand   ReplaceUsing::apply(table, batch) on a pre-built
//                std::vector per batch;
//      pipeline  the same rows in a MemorySource, a Pipeline over a
//                MemoryCheckpoint, one update() per batch: positions
//                recorded, rows copied out of the source, the table's change
//                journal, the state records, the commit record.
//    pipeline / by_hand is the runtime's overhead. Two more by-hand rows
//    take it apart: by_hand+journal runs apply() inside the table's change
//    journal, as the pipeline does; by_hand+journal+copy also copies the
//    batch into a vector and hands it on as moved rows, as the flow runner
//    does with the rows it reads. The same again with a
//    DedupWithinWatermark in front (5% of the rows redelivered; a delay that
//    keeps about 1e5 identities): by hand, dedup.process_into() then
//    apply(); in the pipeline, .through(dedup).
//
// 2. commit/...: wall time of one update() of a fixed 1e3 new rows through
//    a Stream (DedupWithinWatermark -> ForeachBatch sink) whose dedup state
//    holds N = 1e3, 1e4, 1e5, 1e6 identities (the delay keeps exactly the
//    last N identities, so the state stays at N while the benchmark runs),
//    with the default snapshot schedule (PipelineOptions::snapshot_interval:
//    a snapshot once at least 10 deltas and a snapshot's worth of delta
//    bytes were written since the last one, so the larger the state, the
//    rarer its snapshots). Three ways: by_hand (dedup.process_into and the callback, no
//    checkpoint: the floor), memory (MemoryCheckpoint), file
//    (FileCheckpoint in a temporary directory: fsyncs included, that is the
//    real cost). Each update is timed on its own and counted apart as a
//    delta or a snapshot update: the counters delta_us and snapshot_us are
//    the medians of each kind within a run (delta1_us and delta9_us: of the
//    first and of the ninth delta after a snapshot), delta_bytes and snapshot_bytes
//    the bytes the checkpoint stored for one batch (records with their
//    frames; support/pipeline_rig.hpp counts them). Wall time, not CPU
//    time: a process waiting for fsync uses no CPU.
//
// 3. map_filter/...: rows per CPU second of a flow with transform stages,
//    `.map(parse_event).filter(keep_event)` (a raw record of three int64, an
//    int32 and a short string parsed into part 1's Row; 10% of the rows
//    filtered out), into part 1's REPLACE USING target, batches of 1e3, 1e4
//    and 1e5 raw rows, against the same two lambdas applied by hand:
//      by_hand           one fused loop over the raw batch (each row parsed
//                        into a local, moved into a reused vector if kept),
//                        the kept rows moved into a MemorySource<Row>, the
//                        same pipeline without stages;
//      by_hand_two_pass  the same, but the loop does what the stages do:
//                        every row parsed into the vector, then erase_if;
//      stages            the raw rows appended to a MemorySource<RawEvent>,
//                        the pipeline with the two stages.
//    Each iteration appends one raw batch to the source (a copy: the raw
//    batch is the pool's) and runs one update(); the rows read are discarded
//    between iterations, timer stopped. stages / by_hand is the cost of the
//    stages. paired runs the three in turn within each iteration, timing
//    each on the thread's CPU clock (counters *_ns_per_row and the ratios
//    stages_over_hand, two_pass_over_hand): on a shared machine the
//    separate rows move by more than the difference asked about.
//
// One micro-batch per update() (parts 1 and 2): update() reads everything
// its source holds, so the rows of a whole run are appended up front (timer
// stopped) and a gate (support/pipeline_rig.hpp) shows the pipeline one
// more batch before each update. When the rows run out, the consumed ones are discarded and
// the next run appended, timer stopped (rarely: every 1e6 rows or so).
//
// FLOWLIB_BENCH_SMOKE=1: tiny sizes, and before the benchmarks run, both
// ways of part 1 apply the same batches and must end with the same table,
// each update must have run exactly one batch, part 2's stream must
// deliver what the dedup by hand emits, and the three ways of part 3 must
// end with the same table, the filter stage removing exactly the rows the
// loop by hand leaves out; the program exits 1 otherwise.
#include <flowlib/checkpoint/file.hpp>
#include <flowlib/checkpoint/memory.hpp>
#include <flowlib/flowlib.hpp>
#include <flowlib/pipeline.hpp>
#include <flowlib/source/memory.hpp>
#include <flowlib/stream.hpp>

#include "support/fixture_slot.hpp"
#include "support/pipeline_rig.hpp"
#include "support/smoke.hpp"

#include <benchmark/benchmark.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fl = flowlib;
namespace fb = flowlib_bench;

namespace bench {

// The runtime's cost on one thread (a pipeline of one flow otherwise spreads
// large batches over the cores: benchmarks/parallel.cpp measures that).
fl::PipelineOptions one_thread() {
  fl::PipelineOptions o;
  o.threads = 1;
  return o;
}

// --- Part 1: overhead of update() over apply() ----------------------------------

struct Row {
  std::int64_t id;
  std::int64_t seq;
  std::int64_t ts;  // event time for the dedup: the same as seq
  std::int64_t a;
  std::int64_t b;
  std::string tag;  // short: fits the small-string buffer
  friend bool operator==(const Row&, const Row&) = default;
};
FLOWLIB_SCHEMA(Row, id, seq, ts, a, b, tag);

using Replace = fl::ReplaceUsing<fl::Key<&Row::id>, fl::Seq<&Row::seq>>;
using RowDedup = fl::DedupWithinWatermark<fl::Key<&Row::id, &Row::seq>, fl::EventTime<&Row::ts>>;

struct overhead_config {
  std::int64_t batch;
  bool dedup;
  friend bool operator==(const overhead_config&, const overhead_config&) = default;
};

std::string label(const overhead_config& c) {
  return std::string(c.dedup ? "dedup+replace_using" : "replace_using") +
         "/batch:" + std::to_string(c.batch);
}

std::int64_t key_space() { return fb::smoke_mode() ? 1000 : 100000; }
// The dedup keeps the identities of the last 2 * delay rows (event time
// advances by one per row): about the key space.
std::int64_t row_dedup_delay() { return key_space() / 2; }
constexpr double redelivered_fraction = 0.05;
constexpr std::int64_t redelivery_window = 1000;  // a redelivered row is one of the last 1000

/// The batches of one configuration (epoch 0), shared by both ways of
/// running it, and the rows that fill the target first (every key, seq 0).
/// Epoch e's batches are epoch 0's with seq and ts raised by e * rows():
/// sequences rise from batch to batch forever.
struct row_pool {
  overhead_config cfg;
  std::uint64_t id;
  std::vector<Row> initial;
  std::vector<std::vector<Row>> batches;

  row_pool(const overhead_config& c, std::uint64_t pool_id) : cfg(c), id(pool_id) {
    static constexpr std::array<const char*, 5> tags = {"ios", "android", "web", "tv", "desktop"};
    std::mt19937_64 g(0x9195eedu + static_cast<std::uint64_t>(c.batch) * 3 + (c.dedup ? 1 : 0));
    const std::int64_t keys = key_space();
    auto make = [&](std::int64_t id_, std::int64_t seq) {
      return Row{id_, seq, seq, static_cast<std::int64_t>(g() >> 1), static_cast<std::int64_t>(g() % 1000),
                 tags[g() % tags.size()]};
    };
    initial.reserve(static_cast<std::size_t>(keys));
    for (std::int64_t k = 0; k < keys; ++k) initial.push_back(make(k, 0));
    const std::size_t n = pool_batches(c);
    std::uniform_int_distribution<std::int64_t> key(0, keys - 1);
    std::bernoulli_distribution redeliver(c.dedup ? redelivered_fraction : 0.0);
    std::vector<const Row*> recent;  // rows of this epoch, in order
    batches.resize(n);
    std::int64_t next = 1;
    for (auto& batch : batches) batch.reserve(static_cast<std::size_t>(c.batch));
    for (auto& batch : batches) {
      for (std::int64_t i = 0; i < c.batch; ++i) {
        if (!recent.empty() && redeliver(g)) {
          const auto back = std::min<std::int64_t>(redelivery_window, static_cast<std::int64_t>(recent.size()));
          const auto pick = recent.size() - 1 - static_cast<std::size_t>(g() % static_cast<std::uint64_t>(back));
          batch.push_back(*recent[pick]);
        } else {
          batch.push_back(make(key(g), next++));
        }
        recent.push_back(&batch.back());  // batch is reserved: no reallocation
      }
    }
  }

  static std::size_t pool_batches(const overhead_config& c) {
    if (fb::smoke_mode()) return 3;
    // At least 8 batches and 1e6 rows, so the input is not cache-hot.
    return std::max<std::size_t>(8, static_cast<std::size_t>((1'000'000 + c.batch - 1) / c.batch));
  }
  std::int64_t rows() const { return static_cast<std::int64_t>(batches.size()) * cfg.batch; }

  /// Raises `r` from epoch `from` to epoch `to`.
  void shift(Row& r, std::int64_t from, std::int64_t to) const {
    if (r.seq == 0) return;  // the initial rows only
    r.seq += (to - from) * rows();
    r.ts += (to - from) * rows();
  }
};

row_pool& row_pool_for(const overhead_config& c) {
  static std::unique_ptr<row_pool> pool;
  static std::uint64_t next_id = 0x1000;
  if (!pool || !(pool->cfg == c)) {
    pool.reset();
    pool = std::make_unique<row_pool>(c, next_id++);
  }
  return *pool;
}

/// How much of the pipeline's work a by-hand rig does besides apply().
enum class hand_mode {
  plain,    ///< apply() on the pre-built batch (grouped by pointer: only survivors copied)
  journal,  ///< inside the table's change journal, as the pipeline does
  runner,   ///< also as the flow runner does: the batch copied into a vector
            ///< (as read() out of the source), then handed on as moved rows
};

/// By hand: apply() (after process_into() with a dedup) on the pool's
/// batches, raised to the next epoch in place at each wrap.
template <hand_mode M>
struct by_hand_rig {
  static constexpr const char* name = M == hand_mode::plain     ? "by_hand"
                                      : M == hand_mode::journal ? "by_hand+journal"
                                                                : "by_hand+journal+copy";
  explicit by_hand_rig(row_pool& p) : pool(&p), batches(p.batches) {
    if (p.cfg.dedup) dedup.emplace(row_dedup_delay(), "dedup");
    run(pool->initial);
  }
  bool needs_refill() const { return cursor == batches.size(); }
  void refill() {
    for (auto& b : batches)
      for (auto& r : b) pool->shift(r, epoch, epoch + 1);
    ++epoch;
    cursor = 0;
  }
  void step() { run(batches[cursor++]); }
  void run(const std::vector<Row>& batch) {
    if constexpr (M != hand_mode::plain) table.store().begin_journal();
    if constexpr (M == hand_mode::runner) {
      rows.clear();
      rows.insert(rows.end(), batch.begin(), batch.end());
      if (dedup) {
        fresh.clear();
        dedup->process_into(moved(rows), fresh);
        rows.swap(fresh);
      }
      stats = flow.apply(table, moved(rows));
    } else if (dedup) {
      fresh.clear();
      dedup->process_into(batch, fresh);
      stats = flow.apply(table, fresh);
    } else {
      stats = flow.apply(table, batch);
    }
    if constexpr (M != hand_mode::plain) table.store().commit_journal();
    benchmark::DoNotOptimize(stats.applied_rows);
  }
  static auto moved(std::vector<Row>& v) {
    return std::ranges::subrange(std::make_move_iterator(v.begin()), std::make_move_iterator(v.end()));
  }

  row_pool* pool;
  std::vector<std::vector<Row>> batches;  // this rig's copy, raised epoch by epoch
  std::size_t cursor = 0;
  std::int64_t epoch = 0;
  fl::StreamingTable<Row> table{"target"};
  Replace flow{"target"};
  std::optional<RowDedup> dedup;
  std::vector<Row> rows;
  std::vector<Row> fresh;
  fl::BatchStats stats;
};

/// The pipeline: the same rows in a MemorySource behind a gate, one flow
/// (optionally through a dedup) into the table, a MemoryCheckpoint, one
/// update() per batch.
struct pipeline_rig {
  static constexpr const char* name = "pipeline";
  explicit pipeline_rig(row_pool& p) : pool(&p) {
    auto flow = pipeline.flow("target").from(gate);
    if (p.cfg.dedup) {
      std::move(flow)
          .through(RowDedup{row_dedup_delay(), "dedup"})
          .max_rows_per_batch(static_cast<std::size_t>(p.cfg.batch))
          .into(table, Replace{"target"});
    } else {
      std::move(flow).max_rows_per_batch(static_cast<std::size_t>(p.cfg.batch)).into(table, Replace{"target"});
    }
    source.append(pool->initial);
    gate.open(pool->initial.size());
    pipeline.update();  // fills the table (in batches of cfg.batch rows)
    refill();
  }
  bool needs_refill() const { return gate.hidden() < static_cast<std::uint64_t>(pool->cfg.batch); }
  /// Drops the rows read so far, appends the next epoch's.
  void refill() {
    source.discard_before(gate.gate());
    for (const auto& b : pool->batches) {
      std::vector<Row> copy = b;
      for (auto& r : copy) pool->shift(r, 0, next_epoch);
      source.append(std::move(copy));
    }
    ++next_epoch;
  }
  void step() {
    gate.open(static_cast<std::uint64_t>(pool->cfg.batch));
    summary = pipeline.update();
    benchmark::DoNotOptimize(summary.flows.data());
  }

  row_pool* pool;
  fl::MemorySource<Row> source{"feed"};
  fb::gated_source<fl::MemorySource<Row>> gate{source};
  fl::StreamingTable<Row> table{"target"};
  fl::MemoryCheckpoint checkpoint;
  fl::Pipeline pipeline{"bench", checkpoint, one_thread()};
  std::int64_t next_epoch = 0;
  fl::UpdateSummary summary;
};

template <class Rig>
Rig& rig_for(row_pool& pool) {
  return fb::fixture_in_slot<Rig>(pool.id, [&] { return std::make_unique<Rig>(pool); });
}

template <class Rig>
void bm_overhead(benchmark::State& state, overhead_config c) {
  row_pool& pool = row_pool_for(c);
  Rig& rig = rig_for<Rig>(pool);
  for (auto _ : state) {
    if (rig.needs_refill()) {
      state.PauseTiming();
      rig.refill();
      state.ResumeTiming();
    }
    rig.step();
  }
  state.SetItemsProcessed(state.iterations() * c.batch);
  state.counters["time_per_row"] = benchmark::Counter(
      static_cast<double>(c.batch), benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

/// Both ways apply the same batches (wrapping into a second epoch) and must
/// end with the same table; every update() must run exactly one batch.
void check_overhead(const overhead_config& c) {
  row_pool& pool = row_pool_for(c);
  auto hand = std::make_unique<by_hand_rig<hand_mode::plain>>(pool);
  auto runner = std::make_unique<by_hand_rig<hand_mode::runner>>(pool);
  auto pipe = std::make_unique<pipeline_rig>(pool);
  const std::string where = " (" + label(c) + ")";
  std::uint64_t replaced = 0;
  std::uint64_t duplicates = 0;
  const std::size_t steps = pool.batches.size() * 2 + 1;
  for (std::size_t s = 0; s < steps; ++s) {
    if (hand->needs_refill()) hand->refill();
    if (runner->needs_refill()) runner->refill();
    if (pipe->needs_refill()) pipe->refill();
    hand->step();
    runner->step();
    pipe->step();
    const auto* f = pipe->summary.flow("target");
    fb::require(f != nullptr && f->batches == 1 && f->input_rows == static_cast<std::uint64_t>(c.batch),
                "each update() runs exactly one batch of the configured size" + where);
    // REPLACE USING's "upserted" in a summary is the rows it applied.
    fb::require(f->upserted_rows == hand->stats.applied_rows,
                "the pipeline's batch writes the rows apply() by hand does" + where);
    replaced += hand->stats.replaced_rows;
    duplicates += f->deduplicated_rows;
  }
  fb::require(replaced > 0, "batches replace rows" + where);
  fb::require(!c.dedup || duplicates > 0, "the dedup drops redelivered rows" + where);
  fb::require(hand->table.sorted_rows() == pipe->table.sorted_rows(),
              "by hand and the pipeline end with the same table" + where);
  fb::require(runner->table.sorted_rows() == pipe->table.sorted_rows(),
              "by hand as the runner does and the pipeline end with the same table" + where);
}

// --- Part 2: commit cost against state size ------------------------------------------

struct Event {
  std::int64_t id;
  std::int64_t ts;
  std::int64_t payload;
  friend bool operator==(const Event&, const Event&) = default;
};
FLOWLIB_SCHEMA(Event, id, ts, payload);

using EventDedup = fl::DedupWithinWatermark<fl::Key<&Event::id>, fl::EventTime<&Event::ts>>;

/// Event g: identity g at event time g. With delay N / 2 the dedup keeps the
/// identities of the last N events (expires at ts + N/2, evicted once the
/// watermark, max ts - N/2, reaches that): the state stays at N.
Event event(std::int64_t g) { return Event{g, g, g * 7}; }

enum class commit_kind { by_hand, memory, file };

const char* name_of(commit_kind k) {
  switch (k) {
    case commit_kind::by_hand: return "by_hand";
    case commit_kind::memory: return "memory";
    case commit_kind::file: return "file";
  }
  return "?";
}

struct commit_config {
  std::int64_t state_keys;
  commit_kind kind;
};

std::int64_t commit_batch_rows() { return fb::smoke_mode() ? 100 : 1000; }
std::int64_t refill_rows() { return fb::smoke_mode() ? 10 * commit_batch_rows() : 1'000'000; }

std::filesystem::path temp_root() {
  static const std::filesystem::path root =
      std::filesystem::temp_directory_path() / ("flowlib_bench_pipeline_" + std::to_string(::getpid()));
  return root;
}

/// One update's measurement.
struct update_sample {
  double seconds;
  fb::batch_writes writes;
};

struct commit_rig {
  commit_rig(std::int64_t state_keys, commit_kind kind) : kind_(kind), n_(state_keys) {
    static std::uint64_t dirs = 0;
    if (kind == commit_kind::by_hand) {
      dedup_.emplace(n_ / 2, "dedup");
    } else {
      if (kind == commit_kind::file) {
        dir_ = temp_root() / ("ckpt-" + std::to_string(dirs++));
        std::filesystem::remove_all(dir_);
        inner_ = std::make_unique<fl::FileCheckpoint>(dir_);
      } else {
        inner_ = std::make_unique<fl::MemoryCheckpoint>();
      }
      counter_ = std::make_unique<fb::counting_checkpoint>(*inner_);
      stream_ = std::make_unique<fl::Stream>("events", *counter_);
      stream_->from(gate_)
          .through(EventDedup{n_ / 2, "dedup"})
          .into(fl::ForeachBatch<Event>{[this](std::uint64_t, std::span<const Event> rows) { deliver(rows); }});
    }
    // Fill the state: N identities in one batch (batch 0, a snapshot).
    append(n_ + refill_rows());
    run(n_);
  }
  ~commit_rig() {
    stream_.reset();
    counter_.reset();
    inner_.reset();
    if (!dir_.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(dir_, ec);
    }
  }

  bool needs_refill() const { return left_ < commit_batch_rows(); }
  void refill() { append(refill_rows()); }

  /// One update of commit_batch_rows() new rows, timed.
  update_sample step() {
    const auto t0 = std::chrono::steady_clock::now();
    run(commit_batch_rows());
    const auto t1 = std::chrono::steady_clock::now();
    update_sample s{std::chrono::duration<double>(t1 - t0).count(), {}};
    if (counter_) s.writes = counter_->last_batch();
    return s;
  }

  const std::vector<Event>& last_delivered() const { return last_; }
  bool keep_delivered = false;

 private:
  void deliver(std::span<const Event> rows) {
    std::int64_t sum = 0;
    for (const Event& e : rows) sum += e.payload;
    benchmark::DoNotOptimize(sum);
    delivered_ += static_cast<std::int64_t>(rows.size());
    if (keep_delivered) last_.assign(rows.begin(), rows.end());
  }

  void append(std::int64_t rows) {
    if (kind_ == commit_kind::by_hand) {
      // Keep what is still to be processed, then the new rows.
      pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(used_));
      used_ = 0;
      for (std::int64_t i = 0; i < rows; ++i) pending_.push_back(event(next_++));
    } else {
      source_.discard_before(gate_.gate());
      std::vector<Event> chunk;
      chunk.reserve(static_cast<std::size_t>(rows));
      for (std::int64_t i = 0; i < rows; ++i) chunk.push_back(event(next_++));
      source_.append(std::move(chunk));
    }
    left_ += rows;
  }

  void run(std::int64_t rows) {
    left_ -= rows;
    if (kind_ == commit_kind::by_hand) {
      const auto first = pending_.begin() + static_cast<std::ptrdiff_t>(used_);
      out_.clear();
      dedup_->process_into(std::ranges::subrange(first, first + rows), out_);
      used_ += static_cast<std::size_t>(rows);
      deliver(out_);
    } else {
      gate_.open(static_cast<std::uint64_t>(rows));
      stream_->run();
    }
  }

  commit_kind kind_;
  std::int64_t n_;
  std::int64_t next_ = 0;       // the next event to generate
  std::int64_t left_ = 0;       // generated, not yet run
  std::int64_t delivered_ = 0;
  std::vector<Event> last_;
  // by_hand
  std::optional<EventDedup> dedup_;
  std::vector<Event> pending_;
  std::size_t used_ = 0;
  std::vector<Event> out_;
  // memory, file
  std::filesystem::path dir_;
  fl::MemorySource<Event> source_{"events"};
  fb::gated_source<fl::MemorySource<Event>> gate_{source_};
  std::unique_ptr<fl::checkpoint_store> inner_;
  std::unique_ptr<fb::counting_checkpoint> counter_;
  std::unique_ptr<fl::Stream> stream_;
};

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t m = v.size() / 2;
  return v.size() % 2 == 1 ? v[m] : (v[m - 1] + v[m]) / 2;
}

void bm_commit(benchmark::State& state, commit_config c) {
  const auto pool_id = static_cast<std::uint64_t>(c.state_keys) * 4 + static_cast<std::uint64_t>(c.kind);
  commit_rig& rig = fb::fixture_in_slot<commit_rig>(
      pool_id, [&] { return std::make_unique<commit_rig>(c.state_keys, c.kind); });
  std::vector<double> delta_s, snapshot_s, delta_bytes, snapshot_bytes;
  std::vector<double> after_snapshot_s, before_snapshot_s;  // the first and the ninth delta of a cycle
  int since_snapshot = -1;  // -1: no snapshot seen yet in this run
  for (auto _ : state) {
    if (rig.needs_refill()) {
      state.PauseTiming();
      rig.refill();
      state.ResumeTiming();
    }
    const update_sample s = rig.step();
    (s.writes.snapshot ? snapshot_s : delta_s).push_back(s.seconds);
    if (s.writes.snapshot) {
      since_snapshot = 0;
    } else if (since_snapshot >= 0) {
      ++since_snapshot;
      if (since_snapshot == 1) after_snapshot_s.push_back(s.seconds);
      if (since_snapshot == 9) before_snapshot_s.push_back(s.seconds);
    }
    if (c.kind != commit_kind::by_hand)
      (s.writes.snapshot ? snapshot_bytes : delta_bytes).push_back(static_cast<double>(s.writes.stored_bytes()));
  }
  state.SetItemsProcessed(state.iterations() * commit_batch_rows());
  state.counters["delta_us"] = median(delta_s) * 1e6;
  state.counters["delta_bytes"] = median(delta_bytes);
  if (c.kind != commit_kind::by_hand) {
    state.counters["snapshot_us"] = median(snapshot_s) * 1e6;
    state.counters["snapshot_bytes"] = median(snapshot_bytes);
    state.counters["snapshots"] = static_cast<double>(snapshot_s.size());
    // Whether a delta update pays for the snapshot before it (a cache the
    // snapshot flushed): the first delta after a snapshot against the ninth.
    state.counters["delta1_us"] = median(after_snapshot_s) * 1e6;
    state.counters["delta9_us"] = median(before_snapshot_s) * 1e6;
  }
}

/// Part 2's stream delivers, batch by batch, what the dedup by hand emits;
/// a delta's size does not depend on the state's; a snapshot's does; the
/// file checkpoint stores the same bytes as the memory one (fewer batches
/// there: each costs several fsyncs).
void check_commit() {
  const std::int64_t n = 2000;
  std::uint64_t memory_delta = 0;
  for (commit_kind kind : {commit_kind::memory, commit_kind::file}) {
    const std::string where = std::string(" (") + name_of(kind) + ")";
    const bool file = kind == commit_kind::file;
    commit_rig hand(n, commit_kind::by_hand);
    commit_rig pipe(n, kind);
    std::optional<commit_rig> small;
    if (!file) small.emplace(n / 2, kind);
    hand.keep_delivered = pipe.keep_delivered = true;
    std::uint64_t delta = 0;
    std::uint64_t snapshot = 0;
    std::uint64_t small_delta = 0;
    for (int i = 0; i < (file ? 2 : 12); ++i) {
      if (hand.needs_refill()) hand.refill();
      if (pipe.needs_refill()) pipe.refill();
      hand.step();
      const update_sample s = pipe.step();
      fb::require(hand.last_delivered() == pipe.last_delivered() &&
                      pipe.last_delivered().size() == static_cast<std::size_t>(commit_batch_rows()),
                  "the stream delivers what the dedup by hand emits" + where);
      // The fill (batch 0) wrote a snapshot; the next waits for at least ten
      // deltas (PipelineOptions::snapshot_interval).
      fb::require(!s.writes.snapshot || i >= 10, "no snapshot before ten deltas" + where);
      (s.writes.snapshot ? snapshot : delta) = s.writes.stored_bytes();
      if (small) {
        if (small->needs_refill()) small->refill();
        const update_sample t = small->step();
        if (!t.writes.snapshot) small_delta = t.writes.stored_bytes();
      }
    }
    if (file) {
      fb::require(delta == memory_delta, "both checkpoints store the same bytes per delta" + where);
    } else {
      memory_delta = delta;
      fb::require(delta == small_delta, "a delta's size does not depend on the state's" + where);
      fb::require(snapshot == 0 || snapshot > static_cast<std::uint64_t>(n) * 8,
                  "a snapshot holds the whole state" + where);
    }
  }
}

// --- Part 3: transform stages against the same lambdas by hand --------------------

/// A record as it arrives, before parsing and cleaning: an amount in cents,
/// a quantity (0 on an empty order line, which the filter removes), the
/// channel as sent.
struct RawEvent {
  std::int64_t id;
  std::int64_t seq;
  std::int64_t amount_cents;
  std::int32_t qty;
  std::string channel;  // short: fits the small-string buffer
};

// The same two lambdas for both ways: `.map(parse_event).filter(keep_event)`
// in the pipeline, a loop calling them by hand.
inline constexpr auto parse_event = [](const RawEvent& r) {
  return Row{r.id, r.seq, r.seq, r.amount_cents * r.qty, r.amount_cents / 100, r.channel};
};
inline constexpr auto keep_event = [](const Row& r) { return r.a > 0; };

/// The raw batches of one batch size (epoch 0; ids uniform over the key
/// space, sequences rising, 10% of the rows with qty 0), shared by both
/// ways, and the raw rows that fill the target first (every key, seq 0,
/// none filtered). Epoch e's batches are epoch 0's with seq raised by
/// e * rows().
struct raw_pool {
  std::int64_t batch;
  std::uint64_t id;
  std::vector<RawEvent> initial;
  std::vector<std::vector<RawEvent>> batches;

  raw_pool(std::int64_t b, std::uint64_t pool_id) : batch(b), id(pool_id) {
    static constexpr std::array<const char*, 5> channels = {"ios", "android", "web", "tv", "desktop"};
    std::mt19937_64 g(0x5a9e5u + static_cast<std::uint64_t>(b));
    const std::int64_t keys = key_space();
    auto make = [&](std::int64_t id_, std::int64_t seq, std::int32_t qty) {
      return RawEvent{id_, seq, 1 + static_cast<std::int64_t>(g() % 100000), qty, channels[g() % channels.size()]};
    };
    initial.reserve(static_cast<std::size_t>(keys));
    for (std::int64_t k = 0; k < keys; ++k) initial.push_back(make(k, 0, 1));
    std::uniform_int_distribution<std::int64_t> key(0, keys - 1);
    batches.resize(pool_batches());
    std::int64_t next = 1;
    for (auto& rows : batches) {
      rows.reserve(static_cast<std::size_t>(b));
      for (std::int64_t i = 0; i < b; ++i) rows.push_back(make(key(g), next++, static_cast<std::int32_t>(g() % 10)));
    }
  }
  std::size_t pool_batches() const {
    if (fb::smoke_mode()) return 3;
    // At least 8 batches and 1e6 rows, so the input is not cache-hot.
    return std::max<std::size_t>(8, static_cast<std::size_t>((1'000'000 + batch - 1) / batch));
  }
  std::int64_t rows() const { return static_cast<std::int64_t>(batches.size()) * batch; }
};

raw_pool& raw_pool_for(std::int64_t batch) {
  static std::unique_ptr<raw_pool> pool;
  static std::uint64_t next_id = 0x2000;
  if (!pool || pool->batch != batch) {
    pool.reset();
    pool = std::make_unique<raw_pool>(batch, next_id++);
  }
  return *pool;
}

/// What both ways share: this rig's copy of the raw batches (raised epoch by
/// epoch in place), a MemorySource of `SourceRow`, a REPLACE USING flow into
/// a table that already holds every key, a MemoryCheckpoint. Each step
/// appends one raw batch's rows to the source and runs one update(); between
/// steps (timer stopped) the rows read are discarded, so the source holds
/// one batch at a time. (Discarding rarely, in bulk, made MemorySource's
/// discard_before() fault in fresh memory for the rows it moves out, on one
/// row type and not the other: a difference between the rigs that was not
/// the stages'.)
template <class SourceRow>
struct map_filter_rig_base {
  explicit map_filter_rig_base(raw_pool& p) : pool(&p), batches(p.batches) {}

  /// Drops the rows read so far; at the end of the batches, raises them to
  /// the next epoch.
  void between_batches() {
    source.discard_before(source.latest());
    if (cursor < batches.size()) return;
    for (auto& b : batches)
      for (auto& r : b) r.seq += pool->rows();
    cursor = 0;
  }

  raw_pool* pool;
  std::vector<std::vector<RawEvent>> batches;
  std::size_t cursor = 0;
  fl::MemorySource<SourceRow> source{"feed", {.change_history_rows = 0}};
  fl::StreamingTable<Row> table{"target"};
  fl::MemoryCheckpoint checkpoint;
  fl::Pipeline pipeline{"bench", checkpoint, one_thread()};
  fl::UpdateSummary summary;
};

/// The stages: the raw rows appended to the source as they are, the flow
/// `.map(parse_event).filter(keep_event)`.
struct stages_rig : map_filter_rig_base<RawEvent> {
  static constexpr const char* name = "stages";
  explicit stages_rig(raw_pool& p) : map_filter_rig_base(p) {
    pipeline.flow("target")
        .from(source)
        .map(parse_event)
        .filter(keep_event)
        .max_rows_per_batch(static_cast<std::size_t>(p.batch))
        .into(table, Replace{"target"});
    source.append(p.initial);
    pipeline.update();  // fills the table
    between_batches();
  }
  void step() {
    source.append(batches[cursor++]);
    summary = pipeline.update();
    benchmark::DoNotOptimize(summary.flows.data());
  }
};

/// How the loop by hand applies the lambdas.
enum class hand_loop {
  fused,     ///< one pass: each row parsed into a local, moved into the vector if kept
  two_pass,  ///< as the stages do: every row parsed into the vector, then std::erase_if
};

/// By hand: the same lambdas applied to the raw batch by a loop (see
/// hand_loop), the kept rows moved into the source, the same flow without
/// stages.
template <hand_loop L>
struct map_filter_by_hand_rig : map_filter_rig_base<Row> {
  static constexpr const char* name = L == hand_loop::fused ? "by_hand" : "by_hand_two_pass";
  explicit map_filter_by_hand_rig(raw_pool& p) : map_filter_rig_base(p) {
    pipeline.flow("target")
        .from(source)
        .max_rows_per_batch(static_cast<std::size_t>(p.batch))
        .into(table, Replace{"target"});
    map_by_hand(p.initial);
    pipeline.update();
    between_batches();
  }
  void map_by_hand(const std::vector<RawEvent>& raw) {
    typed.clear();
    if constexpr (L == hand_loop::fused) {
      for (const RawEvent& r : raw) {
        Row row = parse_event(r);
        if (keep_event(row)) typed.push_back(std::move(row));
      }
    } else {
      for (const RawEvent& r : raw) typed.push_back(parse_event(r));
      std::erase_if(typed, [](const Row& r) { return !keep_event(r); });
    }
    source.append(std::ranges::subrange(std::make_move_iterator(typed.begin()), std::make_move_iterator(typed.end())));
  }
  void step() {
    map_by_hand(batches[cursor++]);
    summary = pipeline.update();
    benchmark::DoNotOptimize(summary.flows.data());
  }
  std::vector<Row> typed;
};

template <class Rig>
void bm_map_filter(benchmark::State& state, std::int64_t batch) {
  raw_pool& pool = raw_pool_for(batch);
  Rig& rig = fb::fixture_in_slot<Rig>(pool.id, [&] { return std::make_unique<Rig>(pool); });
  for (auto _ : state) {
    rig.step();
    state.PauseTiming();
    rig.between_batches();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(state.iterations() * batch);
  state.counters["time_per_row"] = benchmark::Counter(
      static_cast<double>(batch), benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

/// The three ways side by side, for paired timing: on a shared, noisy
/// machine the separate rows above move by 10-30% from run to run, more
/// than the difference asked about. Here each iteration runs one batch
/// through each way, in a rotating order, and times each update on the
/// thread's CPU clock, so that the three share the same moments of the
/// machine's load.
struct map_filter_trio {
  explicit map_filter_trio(raw_pool& p) : hand(p), two_pass(p), stages(p) {}
  map_filter_by_hand_rig<hand_loop::fused> hand;
  map_filter_by_hand_rig<hand_loop::two_pass> two_pass;
  stages_rig stages;
};

double thread_cpu_seconds() {
  timespec ts{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

void bm_map_filter_paired(benchmark::State& state, std::int64_t batch) {
  raw_pool& pool = raw_pool_for(batch);
  map_filter_trio& trio =
      fb::fixture_in_slot<map_filter_trio>(pool.id, [&] { return std::make_unique<map_filter_trio>(pool); });
  std::array<double, 3> spent{};  // hand, two_pass, stages
  std::size_t turn = 0;
  auto timed = [](auto& rig) {
    const double t0 = thread_cpu_seconds();
    rig.step();
    return thread_cpu_seconds() - t0;
  };
  for (auto _ : state) {
    for (std::size_t k = 0; k < 3; ++k) {
      switch ((turn + k) % 3) {
        case 0: spent[0] += timed(trio.hand); break;
        case 1: spent[1] += timed(trio.two_pass); break;
        default: spent[2] += timed(trio.stages); break;
      }
    }
    ++turn;
    state.PauseTiming();
    trio.hand.between_batches();
    trio.two_pass.between_batches();
    trio.stages.between_batches();
    state.ResumeTiming();
  }
  // items: the raw rows of all three ways (each iteration runs the batch three times).
  state.SetItemsProcessed(state.iterations() * batch * 3);
  const double rows = static_cast<double>(state.iterations()) * static_cast<double>(batch);
  state.counters["hand_ns_per_row"] = spent[0] / rows * 1e9;
  state.counters["two_pass_ns_per_row"] = spent[1] / rows * 1e9;
  state.counters["stages_ns_per_row"] = spent[2] / rows * 1e9;
  state.counters["stages_over_hand"] = spent[0] > 0 ? spent[2] / spent[0] : 0;
  state.counters["two_pass_over_hand"] = spent[0] > 0 ? spent[1] / spent[0] : 0;
}

/// Both ways run the same raw batches (wrapping into a second epoch, and
/// discarding rows read) and must end with the same table; every update()
/// must run exactly one batch, the stages removing what the loop by hand
/// leaves out.
void check_map_filter(std::int64_t batch) {
  raw_pool& pool = raw_pool_for(batch);
  auto hand = std::make_unique<map_filter_by_hand_rig<hand_loop::fused>>(pool);
  auto two_pass = std::make_unique<map_filter_by_hand_rig<hand_loop::two_pass>>(pool);
  auto stages = std::make_unique<stages_rig>(pool);
  const std::string where = " (map_filter/batch:" + std::to_string(batch) + ")";
  std::uint64_t filtered = 0;
  const std::size_t steps = pool.batches.size() * 2 + 1;
  for (std::size_t s = 0; s < steps; ++s) {
    hand->step();
    two_pass->step();
    stages->step();
    const auto* h = hand->summary.flow("target");
    const auto* f = stages->summary.flow("target");
    fb::require(f != nullptr && f->batches == 1 && f->input_rows == static_cast<std::uint64_t>(batch),
                "each update() runs exactly one raw batch" + where);
    fb::require(h != nullptr && h->batches == 1 && h->input_rows == hand->typed.size(),
                "each update() by hand runs exactly the rows mapped by hand" + where);
    fb::require(f->filtered_rows + h->input_rows == static_cast<std::uint64_t>(batch) &&
                    f->upserted_rows == h->upserted_rows,
                "the filter stage removes the rows the loop by hand leaves out" + where);
    filtered += f->filtered_rows;
    hand->between_batches();
    two_pass->between_batches();
    stages->between_batches();
  }
  fb::require(filtered > 0, "the filter removes rows" + where);
  fb::require(hand->table.sorted_rows() == stages->table.sorted_rows(),
              "by hand and the stages end with the same table" + where);
  fb::require(two_pass->table.sorted_rows() == stages->table.sorted_rows(),
              "by hand in two passes and the stages end with the same table" + where);
}

// --- Registration ------------------------------------------------------------------

constexpr double default_min_time = 0.3;
constexpr benchmark::IterationCount file_updates = 40;

std::vector<overhead_config> overhead_configs() {
  const std::vector<std::int64_t> batches =
      fb::smoke_mode() ? std::vector<std::int64_t>{100, 1000} : std::vector<std::int64_t>{1000, 10000, 100000};
  std::vector<overhead_config> out;
  for (bool dedup : {false, true})
    for (std::int64_t b : batches) out.push_back({b, dedup});
  return out;
}

std::vector<std::int64_t> state_sizes() {
  return fb::smoke_mode() ? std::vector<std::int64_t>{1000, 10000}
                          : std::vector<std::int64_t>{1000, 10000, 100000, 1000000};
}

template <class Rig>
void register_overhead(const overhead_config& c, bool min_time_given) {
  auto* b = benchmark::RegisterBenchmark(("overhead/" + label(c) + "/" + Rig::name).c_str(),
                                         bm_overhead<Rig>, c);
  b->Unit(benchmark::kMicrosecond);
  if (!min_time_given) b->MinTime(fb::smoke_mode() ? 0.001 : default_min_time);
}

std::vector<std::int64_t> map_filter_batches() {
  return fb::smoke_mode() ? std::vector<std::int64_t>{100, 1000} : std::vector<std::int64_t>{1000, 10000, 100000};
}

template <class Rig>
void register_map_filter(std::int64_t batch, bool min_time_given) {
  auto* b = benchmark::RegisterBenchmark(
      ("map_filter/replace_using/batch:" + std::to_string(batch) + "/" + Rig::name).c_str(), bm_map_filter<Rig>,
      batch);
  b->Unit(benchmark::kMicrosecond);
  if (!min_time_given) b->MinTime(fb::smoke_mode() ? 0.001 : default_min_time);
}

void register_commit(const commit_config& c, bool min_time_given) {
  auto* b = benchmark::RegisterBenchmark(
      ("commit/state:" + std::to_string(c.state_keys) + "/" + name_of(c.kind)).c_str(), bm_commit, c);
  b->Unit(benchmark::kMicrosecond)->UseRealTime();
  if (c.kind == commit_kind::file && !fb::smoke_mode()) {
    // Updates take milliseconds (fsyncs): a fixed count, so that every
    // repetition holds several snapshot updates.
    b->Iterations(file_updates);
  } else if (!min_time_given) {
    b->MinTime(fb::smoke_mode() ? 0.001 : default_min_time);
  }
}

}  // namespace bench

int main(int argc, char** argv) {
  bool min_time_given = false;
  for (int i = 1; i < argc; ++i) {
    min_time_given = min_time_given || std::string_view(argv[i]).starts_with("--benchmark_min_time");
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  if (fb::smoke_mode()) {
    for (const auto& c : bench::overhead_configs()) bench::check_overhead(c);
    bench::check_commit();
    for (std::int64_t b : bench::map_filter_batches()) bench::check_map_filter(b);
    std::printf("smoke checks passed: the pipeline and the flows by hand agree\n");
  }
  // Both ways of one configuration back to back, on the same pool.
  for (const auto& c : bench::overhead_configs()) {
    bench::register_overhead<bench::by_hand_rig<bench::hand_mode::plain>>(c, min_time_given);
    bench::register_overhead<bench::by_hand_rig<bench::hand_mode::journal>>(c, min_time_given);
    bench::register_overhead<bench::by_hand_rig<bench::hand_mode::runner>>(c, min_time_given);
    bench::register_overhead<bench::pipeline_rig>(c, min_time_given);
  }
  for (std::int64_t b : bench::map_filter_batches()) {
    bench::register_map_filter<bench::map_filter_by_hand_rig<bench::hand_loop::fused>>(b, min_time_given);
    bench::register_map_filter<bench::map_filter_by_hand_rig<bench::hand_loop::two_pass>>(b, min_time_given);
    bench::register_map_filter<bench::stages_rig>(b, min_time_given);
  }
  for (std::int64_t b : bench::map_filter_batches()) {
    auto* p = benchmark::RegisterBenchmark(("map_filter/replace_using/batch:" + std::to_string(b) + "/paired").c_str(),
                                           bench::bm_map_filter_paired, b);
    p->Unit(benchmark::kMicrosecond);
    if (!min_time_given) p->MinTime(fb::smoke_mode() ? 0.001 : 3 * bench::default_min_time);
  }
  for (std::int64_t n : bench::state_sizes())
    for (auto k : {bench::commit_kind::by_hand, bench::commit_kind::memory, bench::commit_kind::file})
      bench::register_commit({n, k}, min_time_given);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  fb::detail::the_fixture_slot.fx.reset();  // the last rig's checkpoint directory goes first
  std::error_code ec;
  std::filesystem::remove_all(bench::temp_root(), ec);
  return 0;
}
