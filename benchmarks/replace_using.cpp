// REPLACE USING: flowlib::ReplaceUsing::apply against hand-written baselines.
//
// What is measured (docs/benchmarks/replace_using.md has the results): rows
// per second (`items_per_second`) of applying one pre-generated batch to a
// target that already holds `keys` keys, for
//   keys  in {1e3, 1e5, 1e6},
//   batch in {1e4, 1e5} rows,
//   key distribution uniform or Zipf(0.99) over the keys,
// with 10% late rows (sequence below every stored one: ignored, or superseded
// inside the batch). Every other row has a sequence above everything the
// target holds, so batches do real work: replacements, not late ignores.
//
// Implementations, all doing the same semantic work (R-USING-1/2: per key
// only the batch's max-sequence rows; replace if higher than the target's,
// append if equal, ignore if lower), on the same data, in the same binary:
//   flowlib        fl::ReplaceUsing<Key<&Row::key>, Seq<&Row::seq>>::apply
//   absl           hand-written on absl::flat_hash_map: "the limit"
//   unordered_map  the same code on std::unordered_map
//   sqlite         SQLite :memory:, INSERT ... ON CONFLICT(k) DO UPDATE ...
//                  WHERE excluded.seq > seq, one transaction per batch
// and, at 1e5 and 1e6 keys with batches of 1e5 uniform rows, the flow's
// apply_batch() on threads:
//   flowlib_threads:1  apply_batch() without a pool (the serial path)
//   flowlib_threads:2  apply_batch() with a task_pool of 2 threads (the
//                      batch sharded by key hash over both)
// These two are timed in wall time (a threaded apply's CPU time is the sum
// over its threads), so compare them with each other, not with the rows
// above, and on an otherwise idle machine.
// The data has one row per key and sequence (sequences are distinct within a
// batch), which SQLite's keyed upsert represents exactly; equal-sequence
// appends are exercised by the smoke check of the other three only.
//
// Timing: CPU time of the process (the default), not wall time, so that a
// shared machine's other work does not count; rows per second are computed
// from it. Batches are generated before timing; the target is pre-populated
// before timing and kept across repetitions of one configuration; each
// iteration applies the next batch of a pool. When the pool wraps, its
// sequences are raised above every earlier one with the timer paused. One
// implementation's target is alive at a time, and what the previous one
// freed is given back to the system before the next is built
// (support/fixture_slot.hpp).
//
// FLOWLIB_BENCH_SMOKE=1: tiny sizes, and before the benchmarks run every
// implementation applies the same batches and must end with the same target
// (and the target R-USING-4 predicts); the program exits 1 otherwise. The
// threaded flow is checked against the serial one on batches large enough
// to be sharded (same rows, same stats).
#include <flowlib/detail/task_pool.hpp>
#include <flowlib/flowlib.hpp>

#include "support/fixture_slot.hpp"
#include "support/smoke.hpp"
#include "support/zipf.hpp"

#include <absl/container/flat_hash_map.h>
#include <benchmark/benchmark.h>
#include <sqlite3.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

namespace fl = flowlib;
namespace fb = flowlib_bench;

namespace bench {

// --- Rows and data ------------------------------------------------------------

struct Row {
  std::int64_t key;
  std::int64_t value;
  std::string tag;  // short: fits the small-string buffer
  double amount;
  std::int64_t seq;
  friend bool operator==(const Row&, const Row&) = default;
};
FLOWLIB_SCHEMA(Row, key, value, tag, amount, seq);

bool row_less(const Row& a, const Row& b) {
  return std::tie(a.key, a.seq, a.value, a.tag, a.amount) <
         std::tie(b.key, b.seq, b.value, b.tag, b.amount);
}

std::vector<Row> sorted(std::vector<Row> rows) {
  std::sort(rows.begin(), rows.end(), row_less);
  return rows;
}

enum class dist { uniform, zipf };

struct config {
  std::int64_t keys;
  std::int64_t batch;
  dist keys_dist;
  friend bool operator==(const config&, const config&) = default;
};

std::string label(const config& c) {
  return "keys:" + std::to_string(c.keys) + "/batch:" + std::to_string(c.batch) +
         (c.keys_dist == dist::uniform ? "/uniform" : "/zipf0.99");
}

constexpr double late_fraction = 0.10;
constexpr double zipf_exponent = 0.99;
// Sequences: pre-populated rows carry 1, late rows 0, and the row at
// position i of pool batch p in pool epoch e carries
// first_seq + (e * pool_size + p) * batch + i: distinct, rising within a
// batch, from batch to batch and from epoch to epoch.
constexpr std::int64_t late_seq = 0;
constexpr std::int64_t initial_seq = 1;
constexpr std::int64_t first_seq = 2;

Row make_row(std::int64_t key, std::int64_t seq, std::mt19937_64& g) {
  static constexpr std::array<const char*, 6> tags = {"ios",     "android",  "desktop",
                                                      "web",     "smart-tv", "console-x"};
  return Row{key, static_cast<std::int64_t>(g() >> 1), tags[g() % tags.size()],
             static_cast<double>(g() % 100000) / 100.0, seq};
}

/// The batches of one configuration, shared by every implementation (so all
/// apply the same data), and the rows that pre-populate the target.
struct batch_pool {
  config cfg;
  std::uint64_t id;  // unique per pool: fixtures built on another pool are rebuilt
  std::vector<Row> initial;
  std::vector<std::vector<Row>> batches;
  std::int64_t epoch = 0;

  batch_pool(const config& c, std::size_t pool_size, std::uint64_t pool_id) : cfg(c), id(pool_id) {
    std::mt19937_64 g(0x5eed0000u + static_cast<std::uint64_t>(c.keys) * 31 +
                      static_cast<std::uint64_t>(c.batch) * 7 + static_cast<unsigned>(c.keys_dist));
    initial.reserve(static_cast<std::size_t>(c.keys));
    for (std::int64_t k = 0; k < c.keys; ++k) initial.push_back(make_row(k, initial_seq, g));
    std::uniform_int_distribution<std::int64_t> uniform(0, c.keys - 1);
    fb::permuted_zipf zipf(static_cast<std::uint64_t>(c.keys), zipf_exponent, g());
    std::bernoulli_distribution late(late_fraction);
    batches.resize(pool_size);
    for (std::size_t p = 0; p < pool_size; ++p) {
      auto& b = batches[p];
      b.reserve(static_cast<std::size_t>(c.batch));
      for (std::int64_t i = 0; i < c.batch; ++i) {
        const std::int64_t key = c.keys_dist == dist::uniform
                                     ? uniform(g)
                                     : static_cast<std::int64_t>(zipf(g));
        const std::int64_t seq =
            late(g) ? late_seq : first_seq + static_cast<std::int64_t>(p) * c.batch + i;
        b.push_back(make_row(key, seq, g));
      }
    }
  }

  /// Raises every non-late sequence to epoch `e` (>= the current epoch).
  void rebase(std::int64_t e) {
    const std::int64_t delta = (e - epoch) * static_cast<std::int64_t>(batches.size()) * cfg.batch;
    for (auto& b : batches)
      for (auto& r : b)
        if (r.seq >= first_seq) r.seq += delta;
    epoch = e;
  }
};

std::size_t pool_size_for(const config& c) {
  if (fb::smoke_mode()) return 3;
  // At least 8 batches and 1e6 rows (64 MB), so the input is not cache-hot.
  const auto by_rows = static_cast<std::size_t>((1'000'000 + c.batch - 1) / c.batch);
  return std::max<std::size_t>(8, by_rows);
}

/// The pool of the configuration being measured (one at a time).
batch_pool& pool_for(const config& c) {
  static std::unique_ptr<batch_pool> pool;
  static std::uint64_t next_id = 0;
  if (!pool || !(pool->cfg == c)) {
    pool.reset();
    pool = std::make_unique<batch_pool>(c, pool_size_for(c), next_id++);
  }
  return *pool;
}

// --- flowlib ------------------------------------------------------------------

class flowlib_impl {
 public:
  static constexpr const char* name = "flowlib";
  using flow_type = fl::ReplaceUsing<fl::Key<&Row::key>, fl::Seq<&Row::seq>>;

  void apply(const std::vector<Row>& batch) {
    last_ = flow_.apply(table_, batch);
    benchmark::DoNotOptimize(last_.applied_rows);
  }
  std::vector<Row> snapshot() const {
    std::vector<Row> out;
    for (const Row& r : table_.rows()) out.push_back(r);
    return sorted(std::move(out));
  }
  const fl::BatchStats& last_stats() const noexcept { return last_; }

 private:
  fl::StreamingTable<Row> table_{"target"};
  flow_type flow_{"replace_using_bench"};
  fl::BatchStats last_;
};

/// The flow through apply_batch(), as the pipeline calls it: with a pool
/// of `Threads` threads (sharded by key hash), or without one (Threads 1).
template <std::size_t Threads>
class flowlib_threads_impl {
 public:
  static constexpr const char* name = Threads == 1 ? "flowlib_threads:1" : "flowlib_threads:2";
  using flow_type = fl::ReplaceUsing<fl::Key<&Row::key>, fl::Seq<&Row::seq>>;

  void apply(const std::vector<Row>& batch) {
    // apply_batch() takes the runner's vector by reference and only reads
    // it; the pool's batches are not const objects.
    auto& rows = const_cast<std::vector<Row>&>(batch);
    last_ = flow_.apply_batch(table_, rows, fl::NoExpectations{},
                              fl::batch_info{"replace_using_bench", 0, pool_.get()});
    benchmark::DoNotOptimize(last_.applied_rows);
  }
  std::vector<Row> snapshot() const {
    std::vector<Row> out;
    for (const Row& r : table_.rows()) out.push_back(r);
    return sorted(std::move(out));
  }
  const fl::BatchStats& last_stats() const noexcept { return last_; }

 private:
  std::unique_ptr<fl::detail::task_pool> pool_ =
      Threads == 1 ? nullptr : std::make_unique<fl::detail::task_pool>(Threads);
  fl::StreamingTable<Row> table_{"target"};
  flow_type flow_{"replace_using_bench"};
  fl::BatchStats last_;
};
using flowlib_serial_batch = flowlib_threads_impl<1>;
using flowlib_two_threads = flowlib_threads_impl<2>;

// --- Hand-written baselines (absl::flat_hash_map, std::unordered_map) ---------
//
// What an expert writes for R-USING-1/2 on int64 keys:
//  1. pre-aggregate the batch per key in a scratch map (key -> group index),
//     reserved for the batch every time (absl's clear() frees arrays above
//     127 slots); a group keeps the batch's max sequence and the positions
//     of its rows in the batch (head/tail of a chain through `next_`, so a
//     one-row group needs nothing beyond its inline fields): no allocation
//     per key in steady state, no copy of a row before it is kept;
//  2. probe the target once per distinct key: the target maps key -> group
//     {seq, first row inline, further equal-sequence rows in a vector that
//     stays empty (unallocated) for one-row keys}.
// No software prefetching (that is one of the things flowlib adds).

template <template <class...> class Map>
class hand_written {
 public:
  void apply(const std::vector<Row>& batch) {
    // 1. Pre-aggregate.
    const std::size_t n = batch.size();
    index_.clear();
    index_.reserve(n);
    groups_.clear();
    if (next_.size() < n) next_.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
      const Row& r = batch[i];
      const auto pos = static_cast<std::uint32_t>(i);
      auto [it, fresh] = index_.try_emplace(r.key, static_cast<std::uint32_t>(groups_.size()));
      if (fresh) {
        groups_.push_back({r.key, r.seq, pos, pos});
        next_[i] = npos;
        continue;
      }
      group& g = groups_[it->second];
      if (g.seq < r.seq) {  // a higher sequence restarts the group
        g.seq = r.seq;
        g.head = g.tail = pos;
        next_[i] = npos;
      } else if (g.seq == r.seq) {  // a tie joins it
        next_[g.tail] = pos;
        g.tail = pos;
        next_[i] = npos;
      }  // lower: superseded within the batch
    }
    // 2. One target probe per distinct key.
    for (const group& g : groups_) {
      auto [it, fresh] = target_.try_emplace(g.key);
      stored& s = it->second;
      if (fresh || s.seq < g.seq) {  // insert, or replace the key's rows
        s.seq = g.seq;
        s.first = batch[g.head];
        s.more.clear();
        for (std::uint32_t c = next_[g.head]; c != npos; c = next_[c]) s.more.push_back(batch[c]);
      } else if (s.seq == g.seq) {  // append beside the stored rows
        for (std::uint32_t c = g.head; c != npos; c = next_[c]) s.more.push_back(batch[c]);
      }  // lower: late, ignored
    }
  }

  std::vector<Row> snapshot() const {
    std::vector<Row> out;
    for (const auto& [k, s] : target_) {
      out.push_back(s.first);
      out.insert(out.end(), s.more.begin(), s.more.end());
    }
    return sorted(std::move(out));
  }

 private:
  static constexpr std::uint32_t npos = 0xffffffffu;
  struct group {
    std::int64_t key;
    std::int64_t seq;
    std::uint32_t head;  // batch positions
    std::uint32_t tail;
  };
  struct stored {
    std::int64_t seq = 0;
    Row first{};
    std::vector<Row> more;
  };

  Map<std::int64_t, std::uint32_t> index_;
  std::vector<group> groups_;
  std::vector<std::uint32_t> next_;
  Map<std::int64_t, stored> target_;
};

struct absl_impl : hand_written<absl::flat_hash_map> {
  static constexpr const char* name = "absl";
};
struct unordered_impl : hand_written<std::unordered_map> {
  static constexpr const char* name = "unordered_map";
};

// --- SQLite ---------------------------------------------------------------------
//
// A keyed table (k INTEGER PRIMARY KEY: the rowid, SQLite's fastest key) and
// one upsert per input row, in one transaction per batch, with prepared
// statements reused. `WHERE excluded.seq > t.seq` keeps the highest
// sequence whatever the row order, which is R-USING-1/2 for data with one row
// per key and sequence. An equal-sequence row is ignored rather than
// appended: SQLite's keyed upsert cannot hold two rows of a key (the
// benchmark data has no ties, so the results are the same).

class sqlite_impl {
 public:
  static constexpr const char* name = "sqlite";

  sqlite_impl() {
    check(sqlite3_open(":memory:", &db_), "open");
    exec("CREATE TABLE t(k INTEGER PRIMARY KEY, v INTEGER NOT NULL, tag TEXT NOT NULL, "
         "amount REAL NOT NULL, seq INTEGER NOT NULL)");
    upsert_ = prepare(
        "INSERT INTO t(k, v, tag, amount, seq) VALUES(?1, ?2, ?3, ?4, ?5) "
        "ON CONFLICT(k) DO UPDATE SET v = excluded.v, tag = excluded.tag, "
        "amount = excluded.amount, seq = excluded.seq WHERE excluded.seq > t.seq");
    begin_ = prepare("BEGIN");
    commit_ = prepare("COMMIT");
  }
  sqlite_impl(const sqlite_impl&) = delete;
  sqlite_impl& operator=(const sqlite_impl&) = delete;
  ~sqlite_impl() {
    for (sqlite3_stmt* s : {upsert_, begin_, commit_}) sqlite3_finalize(s);
    sqlite3_close(db_);
  }

  void apply(const std::vector<Row>& batch) {
    run(begin_);
    for (const Row& r : batch) {
      sqlite3_bind_int64(upsert_, 1, r.key);
      sqlite3_bind_int64(upsert_, 2, r.value);
      sqlite3_bind_text(upsert_, 3, r.tag.data(), static_cast<int>(r.tag.size()), SQLITE_STATIC);
      sqlite3_bind_double(upsert_, 4, r.amount);
      sqlite3_bind_int64(upsert_, 5, r.seq);
      run(upsert_);
    }
    run(commit_);
  }

  std::vector<Row> snapshot() const {
    std::vector<Row> out;
    sqlite3_stmt* q = prepare("SELECT k, v, tag, amount, seq FROM t");
    while (sqlite3_step(q) == SQLITE_ROW) {
      out.push_back(Row{sqlite3_column_int64(q, 0), sqlite3_column_int64(q, 1),
                        reinterpret_cast<const char*>(sqlite3_column_text(q, 2)),
                        sqlite3_column_double(q, 3), sqlite3_column_int64(q, 4)});
    }
    sqlite3_finalize(q);
    return sorted(std::move(out));
  }

 private:
  void check(int rc, const char* what) const {
    if (rc != SQLITE_OK && rc != SQLITE_DONE && rc != SQLITE_ROW)
      fb::require(false, std::string("sqlite ") + what + ": " + sqlite3_errmsg(db_));
  }
  void exec(const char* sql) { check(sqlite3_exec(db_, sql, nullptr, nullptr, nullptr), sql); }
  sqlite3_stmt* prepare(const char* sql) const {
    sqlite3_stmt* s = nullptr;
    check(sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &s, nullptr), sql);
    return s;
  }
  void run(sqlite3_stmt* s) {
    check(sqlite3_step(s), "step");
    sqlite3_reset(s);
  }

  sqlite3* db_ = nullptr;
  sqlite3_stmt* upsert_ = nullptr;
  sqlite3_stmt* begin_ = nullptr;
  sqlite3_stmt* commit_ = nullptr;
};

// --- Driving an implementation through a pool -------------------------------------

/// An implementation's target for one pool: pre-populated at construction,
/// then fed the pool's batches in order, wrapping into higher epochs.
template <class Impl>
struct fixture {
  Impl impl;
  std::size_t cursor = 0;
  std::int64_t epoch;

  explicit fixture(batch_pool& pool) : epoch(pool.epoch) {
    impl.apply(pool.initial);
  }
  bool at_wrap(const batch_pool& pool) const { return cursor == pool.batches.size(); }
  /// Moves to the start of the next epoch; the pool is rebased if no other
  /// fixture got it there first (a pool's sequences only ever rise, so this
  /// target's next batch is above everything it holds).
  void wrap(batch_pool& pool) {
    if (pool.epoch <= epoch) pool.rebase(epoch + 1);
    epoch = pool.epoch;
    cursor = 0;
  }
  const std::vector<Row>& next(batch_pool& pool) {
    if (pool.epoch > epoch) epoch = pool.epoch;
    return pool.batches[cursor++];
  }
};

/// The one fixture alive, whatever its implementation: see
/// support/fixture_slot.hpp.
template <class Impl>
fixture<Impl>& fixture_for(batch_pool& pool) {
  return fb::fixture_in_slot<fixture<Impl>>(
      pool.id, [&] { return std::make_unique<fixture<Impl>>(pool); });
}

template <class Impl>
void bm_apply(benchmark::State& state, config c) {
  batch_pool& pool = pool_for(c);
  fixture<Impl>& fx = fixture_for<Impl>(pool);
  for (auto _ : state) {
    if (fx.at_wrap(pool)) {
      state.PauseTiming();
      fx.wrap(pool);
      state.ResumeTiming();
    }
    fx.impl.apply(fx.next(pool));
  }
  state.SetItemsProcessed(state.iterations() * c.batch);
  state.counters["time_per_row"] = benchmark::Counter(
      static_cast<double>(c.batch),
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

// --- Smoke checks ---------------------------------------------------------------------

/// R-USING-4: the target after applying `batches` in order is, per key, all
/// rows carrying the key's maximum sequence over all of them.
std::vector<Row> expected_target(const std::vector<const std::vector<Row>*>& batches) {
  std::map<std::int64_t, std::pair<std::int64_t, std::vector<Row>>> best;
  for (const auto* b : batches) {
    for (const Row& r : *b) {
      auto [it, fresh] = best.try_emplace(r.key, r.seq, std::vector<Row>{});
      auto& [seq, rows] = it->second;
      if (r.seq > seq) {
        seq = r.seq;
        rows.clear();
      }
      if (r.seq == seq) rows.push_back(r);
    }
  }
  std::vector<Row> out;
  for (auto& [k, v] : best) out.insert(out.end(), v.second.begin(), v.second.end());
  return sorted(std::move(out));
}

/// Every implementation applies the same batches of `c`'s pool (wrapping
/// once), and all must end with the target R-USING-4 predicts. Also checks
/// that the data does the work it claims (replacements and late rows after
/// the wrap).
void check_config(const config& c) {
  batch_pool& pool = pool_for(c);
  const std::size_t steps = pool.batches.size() * 2 + 1;
  std::vector<std::vector<Row>> applied{pool.initial};
  fixture<flowlib_impl>& f = fixture_for<flowlib_impl>(pool);
  fl::BatchStats after_wrap;
  for (std::size_t s = 0; s < steps; ++s) {
    if (f.at_wrap(pool)) f.wrap(pool);
    const std::vector<Row>& b = f.next(pool);
    applied.push_back(b);
    f.impl.apply(b);
    if (s >= pool.batches.size()) {
      after_wrap.replaced_rows += f.impl.last_stats().replaced_rows;
      after_wrap.ignored_late_rows += f.impl.last_stats().ignored_late_rows;
      after_wrap.superseded_rows += f.impl.last_stats().superseded_rows;
    }
  }
  std::vector<const std::vector<Row>*> all;
  for (const auto& b : applied) all.push_back(&b);
  const std::vector<Row> expected = expected_target(all);
  const std::string where = " (" + label(c) + ")";
  fb::require(after_wrap.replaced_rows > 0, "batches after a pool wrap replace rows" + where);
  fb::require(after_wrap.ignored_late_rows + after_wrap.superseded_rows > 0,
              "batches contain late rows" + where);
  fb::require(f.impl.snapshot() == expected, "flowlib matches R-USING-4" + where);

  const auto replay = [&](auto& impl, const char* name) {
    for (const auto& b : applied) impl.apply(b);
    fb::require(impl.snapshot() == expected, std::string(name) + " matches flowlib" + where);
  };
  absl_impl a;
  unordered_impl u;
  sqlite_impl q;
  replay(a, absl_impl::name);
  replay(u, unordered_impl::name);
  replay(q, sqlite_impl::name);
}

/// Equal sequences (R-USING-2 appends) and mixed orders, which the benchmark
/// data does not contain: flowlib and the hand-written baselines must agree
/// with R-USING-4. (SQLite's keyed upsert does not model appends.)
void check_ties() {
  std::mt19937_64 g(42);
  std::vector<std::vector<Row>> batches(30);
  for (auto& b : batches) {
    const std::size_t n = 1 + g() % 200;
    for (std::size_t i = 0; i < n; ++i) {
      b.push_back(make_row(static_cast<std::int64_t>(g() % 40), static_cast<std::int64_t>(g() % 12), g));
    }
  }
  std::vector<const std::vector<Row>*> all;
  for (const auto& b : batches) all.push_back(&b);
  const std::vector<Row> expected = expected_target(all);
  fb::require(expected.size() > 40, "the tie data has keys with several rows");
  flowlib_impl f;
  absl_impl a;
  unordered_impl u;
  for (const auto& b : batches) {
    f.apply(b);
    a.apply(b);
    u.apply(b);
  }
  fb::require(f.snapshot() == expected, "flowlib: equal sequences append (R-USING-2, R-USING-4)");
  fb::require(a.snapshot() == expected, "absl baseline: equal sequences append");
  fb::require(u.snapshot() == expected, "unordered_map baseline: equal sequences append");
}

/// The flow on two threads against the same flow on one, on batches large
/// enough to be sharded (ties, late rows, new keys, several batches): the
/// same rows and the same stats after every batch.
void check_threads() {
  std::mt19937_64 g(99);
  flowlib_serial_batch serial;
  flowlib_two_threads threaded;
  const std::size_t n = flowlib_impl::flow_type::sharded_min_rows + 5000;
  for (int b = 0; b < 4; ++b) {
    std::vector<Row> batch;
    batch.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
      const auto key = static_cast<std::int64_t>(g() % (4000 + 1000 * static_cast<std::uint64_t>(b)));
      batch.push_back(make_row(key, static_cast<std::int64_t>(b * 2 + g() % 4), g));
    }
    serial.apply(batch);
    threaded.apply(batch);
    std::string where = " (batch ";
    where += std::to_string(b);
    where += ")";
    fb::require(threaded.last_stats() == serial.last_stats(), "flowlib on 2 threads: the serial stats" + where);
    fb::require(b == 0 || (threaded.last_stats().replaced_rows > 0 && threaded.last_stats().appended_rows > 0),
                "the threaded check's batches replace and append rows" + where);
    fb::require(threaded.snapshot() == serial.snapshot(), "flowlib on 2 threads: the serial rows" + where);
  }
}

/// The Zipf generator's hottest rank has about its exact probability.
void check_zipf() {
  fb::zipf_distribution<std::uint64_t> z(1000, zipf_exponent);
  std::mt19937_64 g(7);
  const int draws = 200000;
  int ones = 0;
  for (int i = 0; i < draws; ++i) {
    const auto k = z(g);
    fb::require(k >= 1 && k <= 1000, "zipf rank in range");
    ones += k == 1;
  }
  const double p = z.probability(1);
  const double sd = std::sqrt(p * (1 - p) / draws);
  fb::require(std::abs(ones / static_cast<double>(draws) - p) < 5 * sd, "zipf: P(rank 1) as expected");
}

std::vector<config> configs() {
  std::vector<config> out;
  const bool smoke = fb::smoke_mode();
  const std::vector<std::int64_t> keys =
      smoke ? std::vector<std::int64_t>{50, 1000} : std::vector<std::int64_t>{1000, 100000, 1000000};
  const std::vector<std::int64_t> batches =
      smoke ? std::vector<std::int64_t>{100, 1000} : std::vector<std::int64_t>{10000, 100000};
  for (std::int64_t k : keys)
    for (std::int64_t b : batches)
      for (dist d : {dist::uniform, dist::zipf}) out.push_back({k, b, d});
  return out;
}

// 0.3 s per repetition unless --benchmark_min_time says otherwise: 48
// benchmarks x 5 repetitions then take a few minutes.
constexpr double default_min_time = 0.3;

template <class Impl>
void register_one(const config& c, bool min_time_given, bool wall_time = false) {
  auto* b = benchmark::RegisterBenchmark(
      ("replace_using/" + std::string(Impl::name) + "/" + label(c)).c_str(), bm_apply<Impl>, c);
  b->Unit(benchmark::kMillisecond);
  if (wall_time) b->UseRealTime();
  if (!min_time_given) b->MinTime(fb::smoke_mode() ? 0.001 : default_min_time);
}

/// The configurations with threaded rows: 1e5 and 1e6 keys, batches of 1e5
/// uniform rows (in smoke mode, the largest uniform one).
bool threaded_config(const config& c) {
  if (c.keys_dist != dist::uniform) return false;
  if (fb::smoke_mode()) return c.keys == 1000 && c.batch == 1000;
  return c.keys >= 100000 && c.batch == 100000;
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
    bench::check_zipf();
    bench::check_ties();
    bench::check_threads();
    for (const auto& c : bench::configs()) bench::check_config(c);
    std::printf("smoke checks passed: flowlib (1 and 2 threads), absl, unordered_map and sqlite agree\n");
  }
  // Grouped by configuration so that the four implementations of one
  // configuration run back to back on the same pool of batches.
  for (const auto& c : bench::configs()) {
    bench::register_one<bench::flowlib_impl>(c, min_time_given);
    bench::register_one<bench::absl_impl>(c, min_time_given);
    bench::register_one<bench::unordered_impl>(c, min_time_given);
    bench::register_one<bench::sqlite_impl>(c, min_time_given);
    if (bench::threaded_config(c)) {
      bench::register_one<bench::flowlib_serial_batch>(c, min_time_given, /*wall_time=*/true);
      bench::register_one<bench::flowlib_two_threads>(c, min_time_given, /*wall_time=*/true);
    }
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
