// DEDUP WITHIN WATERMARK: flowlib::DedupWithinWatermark::process_into against
// hand-written baselines (docs/benchmarks/dedup.md has the results).
//
// What is measured: rows per second (`items_per_second`) of processing one
// pre-generated batch of 10,000 rows, in steady state (the state already
// holds what the delay keeps), for
//   identities in {1e5, 1e6}: distinct identities in the pool of input rows
//                             (the pool is replayed with shifted identities
//                             and event times, so every pass is fresh data),
//   duplicates in {0%, 10%, 50%} of the rows (redeliveries of a recent row,
//                             with that row's event time: within the delay),
//   5% late rows (event time at or below the watermark),
//   delay covering 1e4 or 1e6 identities (event time advances one tick per
//                             new identity; the delay is that many ticks, so
//                             the state holds up to twice that many).
// Times are CPU time (the machine is shared; CPU time is what the code
// costs). One implementation's state is alive at a time, and what the
// previous one freed is given back to the system before the next is built
// and warmed up (support/fixture_slot.hpp). Each benchmark also reports the
// state's memory per held identity (`state_bytes_per_key`: container
// capacities in bytes / identities held) and the identities held
// (`state_keys`) at the end of the run.
//
// Implementations, all applying R-DEDUP-1..4 to the same data:
//   flowlib     fl::DedupWithinWatermark<Key<&Click::id>, EventTime<&Click::ts>>
//   absl        hand-written on absl::flat_hash_map<id, expires_at>, with the
//               same bucketed eviction (ids filed in expiry buckets of width
//               delay/32, recycled vectors): "the limit"
//   absl_scan   absl::flat_hash_map<id, expires_at> with absl::erase_if over
//               the whole map at the end of every batch (what Spark's state
//               store does); the least memory, but each batch costs O(state)
//
// FLOWLIB_BENCH_SMOKE=1: tiny sizes; before the benchmarks run, every
// implementation processes the same batches and must emit the same rows and
// end with the same state and counters; the program exits 1 otherwise.
#include <flowlib/columns.hpp>
#include <flowlib/ops/dedup_within_watermark.hpp>
#include <flowlib/ops/watermark.hpp>

#include "support/fixture_slot.hpp"
#include "support/smoke.hpp"

#include <absl/container/flat_hash_map.h>
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace fl = flowlib;
namespace fb = flowlib_bench;

namespace bench {

struct Click {
  std::int64_t id;
  std::int64_t ts;
  std::int64_t payload;
  friend bool operator==(const Click&, const Click&) = default;
};
FLOWLIB_SCHEMA(Click, id, ts, payload);

struct config {
  std::int64_t identities;  // distinct identities in the pool
  int dup_percent;          // duplicate rows, percent of all rows
  std::int64_t delay_keys;  // identities (= ticks) covered by the delay
  std::int64_t batch;       // rows per batch
  friend bool operator==(const config&, const config&) = default;
};

std::string label(const config& c) {
  return "ids:" + std::to_string(c.identities) + "/dup:" + std::to_string(c.dup_percent) +
         "%/late:5%/delay:" + std::to_string(c.delay_keys);
}

constexpr double late_fraction = 0.05;

/// The input of one configuration: every row of a pass over `identities`
/// fresh identities, cut into batches. Shared by all implementations.
struct batch_pool {
  config cfg;
  std::uint64_t id;
  std::vector<std::vector<Click>> batches;
  std::int64_t shift = 0;  // identities and ticks per pass
  std::int64_t epoch = 0;

  batch_pool(const config& c, std::uint64_t pool_id) : cfg(c), id(pool_id) {
    std::mt19937_64 g(0xd3d0000u + static_cast<std::uint64_t>(c.identities) * 7 +
                      static_cast<std::uint64_t>(c.dup_percent) * 131 +
                      static_cast<std::uint64_t>(c.delay_keys));
    std::uniform_real_distribution<double> u(0, 1);
    const double dup = c.dup_percent / 100.0;
    // Duplicates redeliver one of the last `window` new identities, well
    // within the delay; late rows are older than any watermark can be.
    const std::int64_t window = std::max<std::int64_t>(1, std::min<std::int64_t>(c.delay_keys / 2, 1000));
    std::int64_t next = 0;  // next new identity == its event time
    std::int64_t late_id = -1;
    std::int64_t payload = 0;
    std::vector<Click> all;
    while (next < c.identities) {
      const double x = u(g);
      if (x < late_fraction) {
        const std::int64_t ts = next - c.delay_keys - 2 * c.batch - static_cast<std::int64_t>(g() % 1000);
        all.push_back({late_id--, ts, payload++});
      } else if (x < late_fraction + dup && next > 0) {
        const std::int64_t back = 1 + static_cast<std::int64_t>(g() % static_cast<std::uint64_t>(std::min(next, window)));
        all.push_back({next - back, next - back, payload++});
      } else {
        all.push_back({next, next, payload++});
        ++next;
      }
    }
    shift = next;
    for (std::size_t i = 0; i < all.size(); i += static_cast<std::size_t>(c.batch)) {
      const std::size_t end = std::min(all.size(), i + static_cast<std::size_t>(c.batch));
      batches.emplace_back(all.begin() + static_cast<std::ptrdiff_t>(i), all.begin() + static_cast<std::ptrdiff_t>(end));
    }
  }

  /// Moves every identity and event time one pass forward (late rows keep
  /// their own, negative, identities).
  void rebase() {
    for (auto& b : batches)
      for (auto& r : b) {
        if (r.id >= 0) r.id += shift;
        r.ts += shift;
      }
    ++epoch;
  }
};

batch_pool& pool_for(const config& c) {
  static std::unique_ptr<batch_pool> pool;
  static std::uint64_t next_id = 0;
  if (!pool || !(pool->cfg == c)) {
    pool.reset();
    pool = std::make_unique<batch_pool>(c, next_id++);
  }
  return *pool;
}

struct counters {
  std::uint64_t emitted = 0, late = 0, duplicates = 0, evicted = 0;
  friend bool operator==(const counters&, const counters&) = default;
};

// --- flowlib -------------------------------------------------------------------

class flowlib_impl {
 public:
  static constexpr const char* name = "flowlib";
  explicit flowlib_impl(std::int64_t delay) : d_(delay, "dedup_bench") {}

  void process(const std::vector<Click>& batch, std::vector<Click>& out) {
    d_.process_into(batch, out);
  }
  std::size_t state_keys() const { return d_.state_size(); }
  std::size_t state_bytes() const { return d_.state_memory_bytes(); }
  std::vector<std::int64_t> sorted_keys() const { return d_.state_keys(); }
  counters totals() const {
    const auto& t = d_.total_stats();
    return {t.emitted_rows, t.late_rows, t.duplicate_rows, t.evicted_keys};
  }
  std::optional<std::int64_t> watermark() const { return d_.watermark(); }

 private:
  fl::DedupWithinWatermark<fl::Key<&Click::id>, fl::EventTime<&Click::ts>> d_;
};

// --- Hand-written: absl::flat_hash_map + expiry buckets -------------------------------
//
// What an expert writes for R-DEDUP-1..4 on int64 identities: one map from
// identity to expires_at (one probe per row: try_emplace), the new identity
// filed in the vector of its expiry bucket (width delay/32, the last bucket
// cached), and at the end of the batch the buckets the watermark passed are
// erased key by key (the boundary bucket is filtered), their vectors
// recycled. No allocation per row in steady state, no prefetching.

class absl_impl {
 public:
  static constexpr const char* name = "absl";
  explicit absl_impl(std::int64_t delay) : delay_(delay), granule_(std::max<std::int64_t>(1, delay / 32)) {}

  void process(const std::vector<Click>& batch, std::vector<Click>& out) {
    std::int64_t max_et = std::numeric_limits<std::int64_t>::min();
    for (const Click& r : batch) {
      max_et = std::max(max_et, r.ts);
      if (has_wm_ && r.ts <= wm_) {
        ++totals_.late;
        continue;
      }
      const std::int64_t expires = r.ts + delay_;
      auto [it, fresh] = state_.try_emplace(r.id, expires);
      if (!fresh) {
        ++totals_.duplicates;
        continue;
      }
      bucket(expires).push_back(r.id);
      out.push_back(r);
      ++totals_.emitted;
    }
    if (!batch.empty() && (!has_wm_ || wm_ < max_et - delay_)) {
      wm_ = max_et - delay_;
      has_wm_ = true;
    }
    if (has_wm_) evict();
  }

  std::size_t state_keys() const { return state_.size(); }
  std::size_t state_bytes() const {
    std::size_t b = state_.capacity() * (sizeof(std::pair<const std::int64_t, std::int64_t>) + 1) + 16;
    for (const auto& [k, v] : buckets_) b += v.capacity() * sizeof(std::int64_t) + 64;
    for (const auto& v : spares_) b += v.capacity() * sizeof(std::int64_t) + sizeof(v);
    return b;
  }
  std::vector<std::int64_t> sorted_keys() const {
    std::vector<std::int64_t> out;
    for (const auto& [k, v] : state_) out.push_back(k);
    std::sort(out.begin(), out.end());
    return out;
  }
  counters totals() const { return totals_; }
  std::optional<std::int64_t> watermark() const {
    return has_wm_ ? std::optional<std::int64_t>(wm_) : std::nullopt;
  }

 private:
  std::int64_t bucket_id(std::int64_t e) const {
    return e / granule_ - (e % granule_ != 0 && e < 0 ? 1 : 0);
  }
  std::vector<std::int64_t>& bucket(std::int64_t expires) {
    const std::int64_t id = bucket_id(expires);
    if (cached_ != nullptr && cached_id_ == id) return *cached_;
    auto it = buckets_.find(id);
    if (it == buckets_.end()) {
      std::vector<std::int64_t> v;
      if (!spares_.empty()) {
        v = std::move(spares_.back());
        spares_.pop_back();
      }
      it = buckets_.emplace(id, std::move(v)).first;
    }
    cached_id_ = id;
    cached_ = &it->second;
    return it->second;
  }
  void evict() {
    const std::int64_t bw = bucket_id(wm_);
    for (auto it = buckets_.begin(); it != buckets_.end() && it->first <= bw;) {
      auto& v = it->second;
      if (it->first < bw) {
        for (std::int64_t id : v) state_.erase(id);
        totals_.evicted += v.size();
      } else {
        std::size_t kept = 0;
        for (std::int64_t id : v) {
          auto s = state_.find(id);
          if (s->second <= wm_) {
            state_.erase(s);
            ++totals_.evicted;
          } else {
            v[kept++] = id;
          }
        }
        v.resize(kept);
        if (kept != 0) break;
      }
      v.clear();
      if (cached_ == &v) cached_ = nullptr;
      spares_.push_back(std::move(v));
      it = buckets_.erase(it);
    }
  }

  std::int64_t delay_;
  std::int64_t granule_;
  bool has_wm_ = false;
  std::int64_t wm_ = 0;
  absl::flat_hash_map<std::int64_t, std::int64_t> state_;
  std::map<std::int64_t, std::vector<std::int64_t>> buckets_;
  std::vector<std::vector<std::int64_t>> spares_;
  std::int64_t cached_id_ = 0;
  std::vector<std::int64_t>* cached_ = nullptr;
  counters totals_;
};

// --- Hand-written: absl::flat_hash_map, eviction by scanning -----------------------------

class absl_scan_impl {
 public:
  static constexpr const char* name = "absl_scan";
  explicit absl_scan_impl(std::int64_t delay) : delay_(delay) {}

  void process(const std::vector<Click>& batch, std::vector<Click>& out) {
    std::int64_t max_et = std::numeric_limits<std::int64_t>::min();
    for (const Click& r : batch) {
      max_et = std::max(max_et, r.ts);
      if (has_wm_ && r.ts <= wm_) {
        ++totals_.late;
        continue;
      }
      const std::int64_t expires = r.ts + delay_;
      auto [it, fresh] = state_.try_emplace(r.id, expires);
      if (!fresh) {
        ++totals_.duplicates;
        continue;
      }
      min_expires_ = std::min(min_expires_, expires);
      out.push_back(r);
      ++totals_.emitted;
    }
    if (!batch.empty() && (!has_wm_ || wm_ < max_et - delay_)) {
      wm_ = max_et - delay_;
      has_wm_ = true;
    }
    if (has_wm_ && min_expires_ <= wm_) {  // skip the scan when nothing can expire
      std::int64_t next_min = std::numeric_limits<std::int64_t>::max();
      totals_.evicted += absl::erase_if(state_, [&](const auto& kv) {
        if (kv.second <= wm_) return true;
        next_min = std::min(next_min, kv.second);
        return false;
      });
      min_expires_ = next_min;
    }
  }

  std::size_t state_keys() const { return state_.size(); }
  std::size_t state_bytes() const {
    return state_.capacity() * (sizeof(std::pair<const std::int64_t, std::int64_t>) + 1) + 16;
  }
  std::vector<std::int64_t> sorted_keys() const {
    std::vector<std::int64_t> out;
    for (const auto& [k, v] : state_) out.push_back(k);
    std::sort(out.begin(), out.end());
    return out;
  }
  counters totals() const { return totals_; }
  std::optional<std::int64_t> watermark() const {
    return has_wm_ ? std::optional<std::int64_t>(wm_) : std::nullopt;
  }

 private:
  std::int64_t delay_;
  bool has_wm_ = false;
  std::int64_t wm_ = 0;
  std::int64_t min_expires_ = std::numeric_limits<std::int64_t>::max();
  absl::flat_hash_map<std::int64_t, std::int64_t> state_;
  counters totals_;
};

// --- Driving an implementation through a pool --------------------------------------------

template <class Impl>
struct fixture {
  Impl impl;
  std::size_t cursor = 0;
  std::int64_t epoch;
  std::vector<Click> out;

  explicit fixture(batch_pool& pool)
      : impl(pool.cfg.delay_keys), epoch(pool.epoch) {
    out.reserve(static_cast<std::size_t>(pool.cfg.batch));
  }
  /// The next batch; at the end of the pool, the pool moves one pass forward
  /// (once for all implementations: a fixture behind it just follows).
  const std::vector<Click>& next(batch_pool& pool) {
    if (cursor == pool.batches.size()) {
      if (pool.epoch <= epoch) pool.rebase();
      epoch = pool.epoch;
      cursor = 0;
    }
    return pool.batches[cursor++];
  }
  void step(batch_pool& pool) {
    out.clear();
    impl.process(next(pool), out);
    benchmark::DoNotOptimize(out.data());
  }
  /// Runs until the state is in steady state: new identities worth two
  /// delays and four batches (new identities are 95% - dup% of the rows),
  /// with a 10% margin.
  void warm_up(batch_pool& pool) {
    const std::int64_t fresh = 2 * pool.cfg.delay_keys + 4 * pool.cfg.batch;
    const std::int64_t rows = fresh * 110 / (95 - pool.cfg.dup_percent);
    for (std::int64_t done = 0; done < rows; done += pool.cfg.batch) step(pool);
  }
};

/// The one fixture alive, whatever its implementation, warmed up to steady
/// state: see support/fixture_slot.hpp.
template <class Impl>
fixture<Impl>& fixture_for(batch_pool& pool) {
  return fb::fixture_in_slot<fixture<Impl>>(pool.id, [&] {
    auto fx = std::make_unique<fixture<Impl>>(pool);
    fx->warm_up(pool);
    return fx;
  });
}

template <class Impl>
void bm_process(benchmark::State& state, config c) {
  batch_pool& pool = pool_for(c);
  fixture<Impl>& fx = fixture_for<Impl>(pool);
  std::int64_t rows = 0;
  for (auto _ : state) {
    if (fx.cursor == pool.batches.size()) {
      state.PauseTiming();
      fx.next(pool);  // rebase outside the timed region
      --fx.cursor;
      state.ResumeTiming();
    }
    rows += static_cast<std::int64_t>(pool.batches[fx.cursor].size());
    fx.step(pool);
  }
  state.SetItemsProcessed(rows);
  const auto keys = static_cast<double>(fx.impl.state_keys());
  state.counters["state_keys"] = keys;
  state.counters["state_bytes_per_key"] =
      keys > 0 ? static_cast<double>(fx.impl.state_bytes()) / keys : 0.0;
}

// --- Smoke checks -----------------------------------------------------------------------

/// Every implementation processes the same batches (three passes over the
/// pool) and must emit the same rows and end with the same state, watermark
/// and counters; the data must exercise late rows, duplicates and eviction.
void check_config(const config& c) {
  batch_pool pool(c, 1'000'000);  // a private pool: the shared one is not disturbed
  flowlib_impl f(c.delay_keys);
  absl_impl a(c.delay_keys);
  absl_scan_impl s(c.delay_keys);
  std::vector<Click> of, oa, os;
  const std::string where = " (" + label(c) + ")";
  for (int pass = 0; pass < 3; ++pass) {
    for (const auto& b : pool.batches) {
      of.clear();
      oa.clear();
      os.clear();
      f.process(b, of);
      a.process(b, oa);
      s.process(b, os);
      fb::require(of == oa, "flowlib and absl emit the same rows" + where);
      fb::require(of == os, "flowlib and absl_scan emit the same rows" + where);
      fb::require(f.watermark() == a.watermark() && f.watermark() == s.watermark(),
                  "same watermark" + where);
      fb::require(f.state_keys() == a.state_keys() && f.state_keys() == s.state_keys(),
                  "same state size" + where);
    }
    pool.rebase();
  }
  fb::require(f.sorted_keys() == a.sorted_keys() && f.sorted_keys() == s.sorted_keys(),
              "same state" + where);
  fb::require(f.totals() == a.totals() && f.totals() == s.totals(), "same counters" + where);
  const counters t = f.totals();
  fb::require(t.late > 0, "the data has late rows" + where);
  fb::require(c.dup_percent == 0 || t.duplicates > 0, "the data has duplicates" + where);
  fb::require(c.dup_percent != 0 || t.duplicates == 0, "the data has no duplicates" + where);
  fb::require(t.evicted > 0, "the state is evicted" + where);
  fb::require(f.state_keys() <= static_cast<std::size_t>(2 * c.delay_keys + c.batch),
              "the state is bounded by the delay" + where);
}

std::vector<config> configs() {
  std::vector<config> out;
  const bool smoke = fb::smoke_mode();
  const std::vector<std::int64_t> ids = smoke ? std::vector<std::int64_t>{2000, 20000}
                                              : std::vector<std::int64_t>{100'000, 1'000'000};
  const std::vector<std::int64_t> delays = smoke ? std::vector<std::int64_t>{100, 3000}
                                                 : std::vector<std::int64_t>{10'000, 1'000'000};
  const std::int64_t batch = smoke ? 500 : 10'000;
  for (std::int64_t i : ids)
    for (int d : {0, 10, 50})
      for (std::int64_t k : delays) out.push_back({i, d, k, batch});
  return out;
}

template <class Impl>
void register_one(const config& c) {
  benchmark::RegisterBenchmark(("dedup/" + std::string(Impl::name) + "/" + label(c)).c_str(),
                               bm_process<Impl>, c)
      ->Unit(benchmark::kMicrosecond);
}

}  // namespace bench

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  if (fb::smoke_mode()) {
    for (const auto& c : bench::configs()) bench::check_config(c);
    std::printf("smoke checks passed: flowlib, absl and absl_scan agree\n");
  }
  for (const auto& c : bench::configs()) {
    bench::register_one<bench::flowlib_impl>(c);
    bench::register_one<bench::absl_impl>(c);
    bench::register_one<bench::absl_scan_impl>(c);
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
