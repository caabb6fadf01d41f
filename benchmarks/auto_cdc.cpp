// AUTO CDC: flowlib::AutoCdc (SCD type 1 and type 2) against hand-written
// baselines.
//
// What is measured (docs/benchmarks/auto_cdc.md has the results): rows per
// second (`items_per_second`) of applying one pre-generated batch of changes
// to a target that already holds `keys` keys, for
//   SCD type 1 and SCD type 2 (history tracked on every column),
//   keys  in {1e3, 1e5, 1e6},
//   batch in {1e4, 1e5} changes,
//   key distribution uniform or Zipf(0.99) over the keys,
// with 80% updates, 10% inserts, 10% deletes, of which 5% are late (below
// their key's current sequence): support/cdc_data.hpp describes the data.
//
// Implementations, all doing the same semantic work on the same data, in the
// same binary:
//   flowlib        fl::AutoCdc<Key, Seq, Scd1 | Scd2<>, apply_as_deletes<...>,
//                  except_column_list<"operation", "seq">>::apply
//   absl           hand-written on absl::flat_hash_map: "the limit"
//   unordered_map  the same code on std::unordered_map
//   sqlite         SQLite :memory:, prepared statements, one transaction per
//                  batch (SCD1: keyed upsert with a tombstone column; SCD2: a
//                  versions table keyed by (k, start_at)); batches of 1e4
//                  only, three repetitions (it is 30-100x slower)
//   flowlib_one_pass, flowlib_planned
//                  SCD2 flowlib with the one pass forced on or off, only with
//                  FLOWLIB_BENCH_CDC_SCD2_PATHS=1 (to place
//                  CdcEngineOptions::scd2_one_pass_min_keys)
// and, for SCD2, two floors that are not implementations:
//   growth_floor   only writes the new versions (a row per change that is
//                  not a delete) into flowlib's memory store, as the SCD2
//                  pass does: what no index or loop can save
//   access_floor   the growth floor plus, per change, the key's open version
//                  found in an array indexed by the key and closed in place:
//                  the memory work of SCD2's table layout with none of its
//                  logic (every change taken as in order and as new values)
// FLOWLIB_BENCH_CDC_KEYS=n1,n2,... runs those key counts instead of 1e3, 1e5, 1e6.
// FLOWLIB_BENCH_CDC_AGE=n feeds every target n whole epochs of its pool's
// batches after pre-population and before timing (benchmark names gain
// "/age:n"), so that SCD2 keys enter timing with several versions each, as
// in a table maintained for a while (the counter rows_per_key tells how
// many, where an implementation reports its rows).
//
// Also, SCD2 only (auto_cdc/scd2_late/...): late changes into long
// histories. Each key first gets `versions` versions in order (before
// timing); each timed batch then holds 1000 late upserts, each with new
// values at a random depth of a random key's history, so that each splits a
// version. flowlib against absl (which places a late change by binary search
// and inserts it into the key's vector of versions).
//
// Timing: batches are generated before timing; the target is pre-populated
// (in batches of the configured size) before timing and kept across the
// repetitions of one configuration; each iteration applies the next batch of
// a pool. When the pool wraps, its sequences are raised above every earlier
// one with the timer paused. SCD2 targets grow by about one version per
// change while they are measured. One implementation's target is alive at a
// time, and what the previous one freed is given back to the system before
// the next is built (see fixture_for). Times are CPU times (every implementation
// is single-threaded; on a shared machine the wall clock also counts the
// time other processes hold the core).
//
// Memory: the counter `bytes_per_key` is the memory the implementation holds
// right after pre-population, divided by the number of keys. For flowlib and
// the hand-written baselines it is measured by a counting global operator new
// (usable bytes of live allocations, after minus before); for SQLite by
// sqlite3_memory_used(). It includes whatever per-batch scratch space the
// implementation keeps, sized for one batch.
//
// FLOWLIB_BENCH_SMOKE=1: tiny sizes, and before the benchmarks run every
// implementation applies the same batches and must end with the same final
// table (current rows for SCD1, every version for SCD2), equal to the one the
// contract predicts (support/cdc_data.hpp); the contract's own example is
// checked as well. The program exits 1 otherwise.
#include <flowlib/flowlib.hpp>
#include <flowlib/flows/auto_cdc.hpp>

#include "support/cdc_data.hpp"
#include "support/fixture_slot.hpp"
#include "support/smoke.hpp"

#include <absl/container/flat_hash_map.h>
#include <absl/container/inlined_vector.h>
#include <benchmark/benchmark.h>
#include <malloc.h>
#include <sqlite3.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <memory>
#include <new>
#include <optional>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

// --- Counting operator new (memory per key) ------------------------------------
//
// Every allocation through operator new adds its usable size to a counter
// and every deallocation subtracts it; the difference around pre-population
// is the memory the target (and the flow's state and scratch) holds.

namespace {
std::atomic<std::int64_t> g_live_bytes{0};

void* counted_alloc(std::size_t n, std::size_t align) {
  void* p = nullptr;
  if (align <= alignof(std::max_align_t)) {
    p = std::malloc(n == 0 ? 1 : n);
  } else if (posix_memalign(&p, align, n == 0 ? 1 : n) != 0) {
    p = nullptr;
  }
  if (p == nullptr) throw std::bad_alloc();
  g_live_bytes.fetch_add(static_cast<std::int64_t>(malloc_usable_size(p)), std::memory_order_relaxed);
  return p;
}
void counted_free(void* p) noexcept {
  if (p == nullptr) return;
  g_live_bytes.fetch_sub(static_cast<std::int64_t>(malloc_usable_size(p)), std::memory_order_relaxed);
  std::free(p);
}
std::int64_t live_bytes() { return g_live_bytes.load(std::memory_order_relaxed); }
}  // namespace

void* operator new(std::size_t n) { return counted_alloc(n, 0); }
void* operator new[](std::size_t n) { return counted_alloc(n, 0); }
void* operator new(std::size_t n, std::align_val_t a) { return counted_alloc(n, static_cast<std::size_t>(a)); }
void* operator new[](std::size_t n, std::align_val_t a) { return counted_alloc(n, static_cast<std::size_t>(a)); }
void operator delete(void* p) noexcept { counted_free(p); }
void operator delete[](void* p) noexcept { counted_free(p); }
void operator delete(void* p, std::size_t) noexcept { counted_free(p); }
void operator delete[](void* p, std::size_t) noexcept { counted_free(p); }
void operator delete(void* p, std::align_val_t) noexcept { counted_free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { counted_free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { counted_free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { counted_free(p); }

namespace fl = flowlib;
namespace fb = flowlib_bench;

namespace flowlib_bench::cdc {
FLOWLIB_SCHEMA(Change, key, name, city, amount, operation, seq);
FLOWLIB_SCHEMA(current_row, key, name, city, amount);
FLOWLIB_SCHEMA(version_row, key, name, city, amount, (start_at, "__START_AT"), (end_at, "__END_AT"));
}  // namespace flowlib_bench::cdc

namespace bench {

using fb::cdc::Change;
using fb::cdc::config;
using fb::cdc::current_row;
using fb::cdc::dist;
using fb::cdc::op;
using fb::cdc::version_row;
using batch_view = std::span<const Change>;

template <class R>
std::vector<R> sorted(std::vector<R> rows) {
  std::sort(rows.begin(), rows.end());
  return rows;
}

// --- flowlib ------------------------------------------------------------------

struct IsDelete {
  bool operator()(const Change& c) const noexcept { return c.operation == op::del; }
};

/// Which SCD2 apply path a flowlib implementation takes: by the flow's
/// default rule (CdcEngineOptions::scd2_one_pass_min_keys), or forced either way
/// so that the two can be compared to place that threshold.
enum class scd2_path { by_size, one_pass, planned };

template <class Scd, class Row, scd2_path Path = scd2_path::by_size>
class flowlib_impl {
 public:
  static constexpr const char* name = Path == scd2_path::one_pass  ? "flowlib_one_pass"
                                      : Path == scd2_path::planned ? "flowlib_planned"
                                                                   : "flowlib";
  using row_type = Row;
  using flow_type = fl::AutoCdc<fl::Key<&Change::key>, fl::Seq<&Change::seq>, Scd,
                                fl::apply_as_deletes<IsDelete>,
                                fl::except_column_list<"operation", "seq">>;

  void apply(batch_view batch) {
    last_ = flow_.apply(table_, batch);
    benchmark::DoNotOptimize(last_.upserted_rows);
  }
  std::vector<Row> snapshot() const {
    std::vector<Row> out;
    for (const Row& r : table_.rows()) out.push_back(r);
    return sorted(std::move(out));
  }
  const fl::BatchStats& last_stats() const noexcept { return last_; }
  std::size_t rows() const { return table_.size(); }

 private:
  static fl::CdcOptions settings() {
    fl::CdcOptions s;
    if constexpr (Path == scd2_path::one_pass) s.tuning.scd2_one_pass_min_keys = 0;
    if constexpr (Path == scd2_path::planned) {
      s.tuning.scd2_one_pass_min_keys = std::numeric_limits<std::size_t>::max();
    }
    return s;
  }

  fl::StreamingTable<Row> table_{"target"};
  flow_type flow_{"auto_cdc_bench", settings()};
  fl::BatchStats last_;
};

using flowlib_scd1 = flowlib_impl<fl::Scd1, current_row>;
using flowlib_scd2 = flowlib_impl<fl::Scd2<>, version_row>;
using flowlib_scd2_one_pass = flowlib_impl<fl::Scd2<>, version_row, scd2_path::one_pass>;
using flowlib_scd2_planned = flowlib_impl<fl::Scd2<>, version_row, scd2_path::planned>;

// --- Hand-written baselines: SCD type 1 ---------------------------------------
//
// What an expert writes for R-CDC-2 on int64 keys: one map from key to
// {sequence, tombstone flag, row}, one probe per change. A change below the
// stored sequence is ignored; an upsert overwrites (short strings: no
// allocation); a delete sets the tombstone, so a late, older upsert cannot
// resurrect the key. No allocation per key in steady state. Pre-aggregating
// the batch per key would not save target probes here (uniform keys are
// nearly all distinct within a batch, and the repeated keys of a Zipf batch
// are the hot, cached ones), so changes are applied directly. No software
// prefetching (that is one of the things flowlib adds).

template <template <class...> class Map>
class scd1_hand_written {
 public:
  using row_type = current_row;

  void apply(batch_view batch) {
    for (const Change& c : batch) {
      auto [it, fresh] = target_.try_emplace(c.key);
      entry& e = it->second;
      if (!fresh && c.seq < e.seq) continue;  // late: ignored (a tie: the later change wins)
      e.seq = c.seq;
      if (c.operation == op::del) {
        e.deleted = true;
      } else {
        e.deleted = false;
        e.amount = c.amount;
        e.name = c.name;
        e.city = c.city;
      }
    }
  }

  std::vector<current_row> snapshot() const {
    std::vector<current_row> out;
    for (const auto& [k, e] : target_)
      if (!e.deleted) out.push_back({k, e.name, e.city, e.amount});
    return sorted(std::move(out));
  }

 private:
  struct entry {
    std::int64_t seq = 0;
    std::int64_t amount = 0;
    std::string name;
    std::string city;
    bool deleted = false;  // a tombstone: the key's latest change is a delete at `seq`
  };
  Map<std::int64_t, entry> target_;
};

struct absl_scd1 : scd1_hand_written<absl::flat_hash_map> {
  static constexpr const char* name = "absl";
};
struct unordered_scd1 : scd1_hand_written<std::unordered_map> {
  static constexpr const char* name = "unordered_map";
};

// --- Hand-written baselines: SCD type 2 ---------------------------------------
//
// Per key a small vector of versions {values, start, end} in start order
// (the first inline: no allocation for a key with one version). A batch is
// pre-aggregated per key in a scratch map reserved for the batch (chains of
// batch positions through an index array, so a key costs nothing beyond its
// group), then the target is probed once per distinct key and the key's
// changes are applied in sequence order (sorted only when the batch has them
// out of order). A change above the key's latest sequence closes and opens
// at the end (the common case); an older one is placed by binary search
// (R-CDC-4: it splits the version it falls in, or fills a gap left by a
// delete up to the next version's start).

template <template <class...> class Map>
class scd2_hand_written {
 public:
  using row_type = version_row;

  void apply(batch_view batch) {
    // 1. Pre-aggregate: group the batch's changes per key.
    const std::size_t n = batch.size();
    index_.clear();
    index_.reserve(n);  // clear() frees large arrays: reserve for every batch
    groups_.clear();
    if (next_.size() < n) next_.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
      const Change& c = batch[i];
      const auto pos = static_cast<std::uint32_t>(i);
      next_[i] = npos;
      auto [it, fresh] = index_.try_emplace(c.key, static_cast<std::uint32_t>(groups_.size()));
      if (fresh) {
        groups_.push_back({c.key, c.seq, pos, pos, true});
        continue;
      }
      group& g = groups_[it->second];
      next_[g.tail] = pos;
      g.tail = pos;
      if (c.seq < g.max_seq) g.in_order = false;
      else g.max_seq = c.seq;
    }
    // 2. One target probe per distinct key; its changes in sequence order.
    for (const group& g : groups_) {
      versions& v = target_[g.key];
      if (g.in_order) {
        for (std::uint32_t i = g.head; i != npos; i = next_[i]) apply_one(v, batch[i]);
        continue;
      }
      order_.clear();
      for (std::uint32_t i = g.head; i != npos; i = next_[i]) order_.push_back(i);
      std::stable_sort(order_.begin(), order_.end(),
                       [&](std::uint32_t a, std::uint32_t b) { return batch[a].seq < batch[b].seq; });
      for (std::uint32_t i : order_) apply_one(v, batch[i]);
    }
  }

  std::vector<version_row> snapshot() const {
    std::vector<version_row> out;
    for (const auto& [k, v] : target_) {
      for (const version& x : v) {
        out.push_back({k, x.name, x.city, x.amount, x.start,
                       x.end == open ? std::nullopt : std::optional<std::int64_t>(x.end)});
      }
    }
    return sorted(std::move(out));
  }

 private:
  static constexpr std::uint32_t npos = 0xffffffffu;
  static constexpr std::int64_t open = std::numeric_limits<std::int64_t>::max();

  struct version {
    std::int64_t start;
    std::int64_t end;  // `open` for the current version
    std::int64_t amount;
    std::string name;
    std::string city;
  };
  using versions = absl::InlinedVector<version, 1>;

  struct group {
    std::int64_t key;
    std::int64_t max_seq;
    std::uint32_t head;  // batch positions, chained through next_
    std::uint32_t tail;
    bool in_order;       // the chain is in sequence order
  };

  static bool same_tracked(const version& x, const Change& c) noexcept {
    return x.amount == c.amount && x.name == c.name && x.city == c.city;
  }
  static version make(const Change& c, std::int64_t end) { return {c.seq, end, c.amount, c.name, c.city}; }

  static void apply_one(versions& v, const Change& c) {
    const bool is_delete = c.operation == op::del;
    if (!v.empty()) {
      const version& last = v.back();
      const std::int64_t latest = last.end == open ? last.start : last.end;
      if (c.seq <= latest) {
        apply_late(v, c, is_delete);
        return;
      }
    }
    // Above everything the key holds.
    if (is_delete) {
      if (!v.empty() && v.back().end == open) v.back().end = c.seq;  // close the current version
      return;
    }
    if (!v.empty() && v.back().end == open) {
      if (same_tracked(v.back(), c)) return;  // identical values: no new version
      v.back().end = c.seq;
    }
    v.push_back(make(c, open));
  }

  static void apply_late(versions& v, const Change& c, bool is_delete) {
    // The first version starting after c.seq; the one before it may contain c.seq.
    auto after = std::upper_bound(v.begin(), v.end(), c.seq,
                                  [](std::int64_t s, const version& x) { return s < x.start; });
    if (after != v.begin()) {
      version& p = *(after - 1);
      if (p.end == open || p.end > c.seq) {  // c.seq falls inside p
        if (p.start == c.seq) {              // a tie: the later change wins
          if (is_delete) {
            v.erase(after - 1);
          } else {
            p.amount = c.amount;
            p.name = c.name;
            p.city = c.city;
          }
          return;
        }
        if (is_delete) {
          p.end = c.seq;  // closes p early: a gap until the next version
          return;
        }
        if (same_tracked(p, c)) return;
        const std::int64_t end = p.end;
        p.end = c.seq;
        v.insert(after, make(c, end));  // splits p
        return;
      }
    }
    if (is_delete) return;  // in a gap: nothing to close
    const std::int64_t end = after == v.end() ? open : after->start;
    v.insert(after, make(c, end));  // fills the gap up to the next version
  }

  Map<std::int64_t, versions> target_;
  Map<std::int64_t, std::uint32_t> index_;
  std::vector<group> groups_;
  std::vector<std::uint32_t> next_;
  std::vector<std::uint32_t> order_;
};

struct absl_scd2 : scd2_hand_written<absl::flat_hash_map> {
  static constexpr const char* name = "absl";
};
struct unordered_scd2 : scd2_hand_written<std::unordered_map> {
  static constexpr const char* name = "unordered_map";
};

// --- SCD2's floor: writing the new versions, nothing else ---------------------------

/// Not an implementation: the part of SCD2's work that no index or loop can
/// save, in the same run. It writes one version row per change that is not
/// a delete (what an in-order SCD2 feed adds to its target; late and
/// same-value changes are ignored) into flowlib's own memory store, as the
/// SCD2 pass does: room mapped in 4096 rows at a time (reserve_rows), each row
/// built in its slot (insert_made). It reads no state and looks nothing up.
/// Where writing fresh memory is slow (docs/benchmarks/auto_cdc.md,
/// "Thirteenth pass"), this bounds SCD2's rate whatever the design of its
/// index.
class scd2_growth_floor {
 public:
  static constexpr const char* name = "growth_floor";
  void apply(batch_view batch) {
    for (const Change& c : batch) {
      if (c.operation == op::del) continue;
      if (room_ == 0) {
        room_ = 4096;
        fl::detail::reserve_rows(store_, room_);
      }
      fl::detail::insert_made(store_, [&]() -> version_row {
        return {c.key, c.name, c.city, c.amount, c.seq, std::nullopt};
      });
      --room_;
    }
  }
  /// Rows written (smoke mode checks the count).
  std::size_t rows() const { return store_.size(); }

 private:
  fl::detail::memory_row_store<version_row> store_;
  std::size_t room_ = 0;  // rows reserved and not yet written
};

// --- SCD2's access floor: the layout's memory work, none of the logic -------------

/// Not an implementation either: the growth floor plus the random accesses
/// SCD2's table layout needs per change (versions stored in arrival order,
/// the key's open version closed in place), and none of the flow's logic.
/// A key's open version is found in a dense array indexed by the key itself
/// (the benchmark's keys are 0, 1, 2, ...: no hashing, no probing, the
/// cheapest index there is); a change writes the `__END_AT` of that version's
/// row, and an upsert then writes its new version as the growth floor does.
/// Every change is taken as in order and as changing the values: nothing is
/// compared, set aside or kept for later. The read-ahead is flowlib's, simpler:
/// the array entry 16 changes ahead, the open row 4 ahead. What flowlib spends
/// above this floor is its own work; what this floor spends above the growth
/// floor is what any index must pay to reach the open rows.
class scd2_access_floor {
 public:
  static constexpr const char* name = "access_floor";
  void apply(batch_view batch) {
    constexpr std::size_t ahead_entry = 16, ahead_row = 4;
    const std::size_t n = batch.size();
    // An entry for every key of the batch first (new keys have none open).
    std::int64_t top = -1;
    for (const Change& c : batch) top = std::max(top, c.key);
    if (top >= 0 && static_cast<std::size_t>(top) >= open_.size()) {
      open_.resize(std::max(open_.size() * 2, static_cast<std::size_t>(top) + 1), no_row);
    }
    for (std::size_t i = 0; i < n; ++i) {
      if (i + ahead_entry < n) __builtin_prefetch(&open_[slot(batch[i + ahead_entry])], 1);
      if (i + ahead_row < n) {
        if (const fl::row_id a = open_[slot(batch[i + ahead_row])]; a != no_row) {
          fl::detail::prefetch_row(store_, a);
        }
      }
      const Change& c = batch[i];
      fl::row_id& open = open_[slot(c)];
      if (open != no_row) store_.get(open).end_at = c.seq;  // the close
      if (c.operation == op::del) {
        open = no_row;
        continue;
      }
      if (room_ == 0) {
        room_ = 4096;
        fl::detail::reserve_rows(store_, room_);
      }
      open = fl::detail::insert_made(store_, [&]() -> version_row {
        return {c.key, c.name, c.city, c.amount, c.seq, std::nullopt};
      });
      --room_;
    }
  }
  /// Rows written, and those left open (smoke mode checks both counts).
  std::size_t rows() const { return store_.size(); }
  std::size_t open_rows() const {
    return static_cast<std::size_t>(std::ranges::count_if(
        store_.rows(), [](const version_row& r) { return !r.end_at.has_value(); }));
  }

 private:
  static constexpr fl::row_id no_row = std::numeric_limits<fl::row_id>::max();
  static std::size_t slot(const Change& c) { return static_cast<std::size_t>(c.key); }
  fl::detail::memory_row_store<version_row> store_;
  std::vector<fl::row_id> open_;  // per key: its open version, or no_row
  std::size_t room_ = 0;          // rows reserved and not yet written
};

// --- SQLite -------------------------------------------------------------------------

class sqlite_base {
 public:
  sqlite_base() { check(sqlite3_open(":memory:", &db_), "open"); }
  sqlite_base(const sqlite_base&) = delete;
  sqlite_base& operator=(const sqlite_base&) = delete;
  ~sqlite_base() {
    for (sqlite3_stmt* s : statements_) sqlite3_finalize(s);
    sqlite3_close(db_);
  }

 protected:
  void check(int rc, const char* what) const {
    if (rc != SQLITE_OK && rc != SQLITE_DONE && rc != SQLITE_ROW)
      fb::require(false, std::string("sqlite ") + what + ": " + sqlite3_errmsg(db_));
  }
  void exec(const char* sql) { check(sqlite3_exec(db_, sql, nullptr, nullptr, nullptr), sql); }
  sqlite3_stmt* prepare(const char* sql) {
    sqlite3_stmt* s = nullptr;
    check(sqlite3_prepare_v3(db_, sql, -1, SQLITE_PREPARE_PERSISTENT, &s, nullptr), sql);
    statements_.push_back(s);
    return s;
  }
  /// Steps `s` once; true when it produced a row (then the caller resets it).
  bool step(sqlite3_stmt* s) {
    const int rc = sqlite3_step(s);
    check(rc, "step");
    return rc == SQLITE_ROW;
  }
  void run(sqlite3_stmt* s) {
    step(s);
    sqlite3_reset(s);
  }
  static void bind_text(sqlite3_stmt* s, int i, const std::string& v) {
    sqlite3_bind_text(s, i, v.data(), static_cast<int>(v.size()), SQLITE_STATIC);
  }
  static std::string column_text(sqlite3_stmt* s, int i) {
    const auto* t = reinterpret_cast<const char*>(sqlite3_column_text(s, i));
    return t == nullptr ? std::string() : std::string(t, static_cast<std::size_t>(sqlite3_column_bytes(s, i)));
  }

  sqlite3* db_ = nullptr;

 private:
  std::vector<sqlite3_stmt*> statements_;
};

// SCD1: a keyed table with a tombstone column. Every change is one upsert
// whose DO UPDATE applies only when the change is not older than the stored
// row (a tie: the later change wins, R-CDC-5), so late changes are ignored
// whatever the order and a tombstone stops an older upsert.
class sqlite_scd1 : sqlite_base {
 public:
  static constexpr const char* name = "sqlite";
  using row_type = current_row;

  sqlite_scd1() {
    exec("CREATE TABLE t(k INTEGER PRIMARY KEY, name TEXT, city TEXT, amount INTEGER, "
         "seq INTEGER NOT NULL, deleted INTEGER NOT NULL)");
    upsert_ = prepare(
        "INSERT INTO t(k, name, city, amount, seq, deleted) VALUES(?1, ?2, ?3, ?4, ?5, 0) "
        "ON CONFLICT(k) DO UPDATE SET name = excluded.name, city = excluded.city, "
        "amount = excluded.amount, seq = excluded.seq, deleted = 0 WHERE excluded.seq >= t.seq");
    delete_ = prepare(
        "INSERT INTO t(k, seq, deleted) VALUES(?1, ?2, 1) "
        "ON CONFLICT(k) DO UPDATE SET name = NULL, city = NULL, amount = NULL, "
        "seq = excluded.seq, deleted = 1 WHERE excluded.seq >= t.seq");
    begin_ = prepare("BEGIN");
    commit_ = prepare("COMMIT");
  }

  void apply(batch_view batch) {
    run(begin_);
    for (const Change& c : batch) {
      if (c.operation == op::del) {
        sqlite3_bind_int64(delete_, 1, c.key);
        sqlite3_bind_int64(delete_, 2, c.seq);
        run(delete_);
      } else {
        sqlite3_bind_int64(upsert_, 1, c.key);
        bind_text(upsert_, 2, c.name);
        bind_text(upsert_, 3, c.city);
        sqlite3_bind_int64(upsert_, 4, c.amount);
        sqlite3_bind_int64(upsert_, 5, c.seq);
        run(upsert_);
      }
    }
    run(commit_);
  }

  std::vector<current_row> snapshot() {
    std::vector<current_row> out;
    sqlite3_stmt* q = prepare("SELECT k, name, city, amount FROM t WHERE deleted = 0");
    while (step(q)) {
      out.push_back({sqlite3_column_int64(q, 0), column_text(q, 1), column_text(q, 2),
                     sqlite3_column_int64(q, 3)});
    }
    sqlite3_reset(q);
    return sorted(std::move(out));
  }

 private:
  sqlite3_stmt* upsert_ = nullptr;
  sqlite3_stmt* delete_ = nullptr;
  sqlite3_stmt* begin_ = nullptr;
  sqlite3_stmt* commit_ = nullptr;
};

// SCD2: a versions table keyed (and clustered) by (k, start_at). Per change:
// find the version that starts at or before the change's sequence; if the
// change falls inside it, close it there (UPDATE) and, for an upsert with
// other values, open the new version up to where it ended (INSERT); an
// upsert in a gap (a new key, a deleted key, or before the first version)
// opens a version up to the next version's start (SELECT + INSERT).
class sqlite_scd2 : sqlite_base {
 public:
  static constexpr const char* name = "sqlite";
  using row_type = version_row;

  sqlite_scd2() {
    exec("CREATE TABLE v(k INTEGER NOT NULL, start_at INTEGER NOT NULL, end_at INTEGER, "
         "name TEXT, city TEXT, amount INTEGER, PRIMARY KEY(k, start_at)) WITHOUT ROWID");
    find_ = prepare(
        "SELECT start_at, end_at, name, city, amount FROM v WHERE k = ?1 AND start_at <= ?2 "
        "ORDER BY start_at DESC LIMIT 1");
    next_ = prepare("SELECT start_at FROM v WHERE k = ?1 AND start_at > ?2 ORDER BY start_at LIMIT 1");
    close_ = prepare("UPDATE v SET end_at = ?3 WHERE k = ?1 AND start_at = ?2");
    insert_ = prepare(
        "INSERT INTO v(k, start_at, end_at, name, city, amount) VALUES(?1, ?2, ?3, ?4, ?5, ?6)");
    overwrite_ = prepare("UPDATE v SET name = ?3, city = ?4, amount = ?5 WHERE k = ?1 AND start_at = ?2");
    erase_ = prepare("DELETE FROM v WHERE k = ?1 AND start_at = ?2");
    begin_ = prepare("BEGIN");
    commit_ = prepare("COMMIT");
  }

  void apply(batch_view batch) {
    run(begin_);
    for (const Change& c : batch) apply_one(c);
    run(commit_);
  }

  std::vector<version_row> snapshot() {
    std::vector<version_row> out;
    sqlite3_stmt* q = prepare("SELECT k, name, city, amount, start_at, end_at FROM v");
    while (step(q)) {
      std::optional<std::int64_t> end;
      if (sqlite3_column_type(q, 5) != SQLITE_NULL) end = sqlite3_column_int64(q, 5);
      out.push_back({sqlite3_column_int64(q, 0), column_text(q, 1), column_text(q, 2),
                     sqlite3_column_int64(q, 3), sqlite3_column_int64(q, 4), end});
    }
    sqlite3_reset(q);
    return sorted(std::move(out));
  }

 private:
  void apply_one(const Change& c) {
    const bool is_delete = c.operation == op::del;
    sqlite3_bind_int64(find_, 1, c.key);
    sqlite3_bind_int64(find_, 2, c.seq);
    if (step(find_)) {
      const std::int64_t start = sqlite3_column_int64(find_, 0);
      const bool is_open = sqlite3_column_type(find_, 1) == SQLITE_NULL;
      const std::int64_t end = is_open ? 0 : sqlite3_column_int64(find_, 1);
      if (is_open || end > c.seq) {  // c.seq falls inside this version
        const bool same = !is_delete && column_text(find_, 2) == c.name &&
                          column_text(find_, 3) == c.city && sqlite3_column_int64(find_, 4) == c.amount;
        sqlite3_reset(find_);
        if (start == c.seq) {  // a tie: the later change wins
          if (is_delete) {
            bind_key(erase_, c.key, start);
            run(erase_);
          } else {
            bind_key(overwrite_, c.key, start);
            bind_text(overwrite_, 3, c.name);
            bind_text(overwrite_, 4, c.city);
            sqlite3_bind_int64(overwrite_, 5, c.amount);
            run(overwrite_);
          }
          return;
        }
        if (same) return;  // identical values: no new version
        bind_key(close_, c.key, start);
        sqlite3_bind_int64(close_, 3, c.seq);
        run(close_);
        if (is_delete) return;
        insert(c, is_open ? std::nullopt : std::optional<std::int64_t>(end));
        return;
      }
    }
    sqlite3_reset(find_);
    if (is_delete) return;  // in a gap: nothing to close
    bind_key(next_, c.key, c.seq);
    std::optional<std::int64_t> end;
    if (step(next_)) end = sqlite3_column_int64(next_, 0);
    sqlite3_reset(next_);
    insert(c, end);
  }

  void insert(const Change& c, std::optional<std::int64_t> end) {
    bind_key(insert_, c.key, c.seq);
    if (end) {
      sqlite3_bind_int64(insert_, 3, *end);
    } else {
      sqlite3_bind_null(insert_, 3);
    }
    bind_text(insert_, 4, c.name);
    bind_text(insert_, 5, c.city);
    sqlite3_bind_int64(insert_, 6, c.amount);
    run(insert_);
  }
  static void bind_key(sqlite3_stmt* s, std::int64_t k, std::int64_t start) {
    sqlite3_bind_int64(s, 1, k);
    sqlite3_bind_int64(s, 2, start);
  }

  sqlite3_stmt* find_ = nullptr;
  sqlite3_stmt* next_ = nullptr;
  sqlite3_stmt* close_ = nullptr;
  sqlite3_stmt* insert_ = nullptr;
  sqlite3_stmt* overwrite_ = nullptr;
  sqlite3_stmt* erase_ = nullptr;
  sqlite3_stmt* begin_ = nullptr;
  sqlite3_stmt* commit_ = nullptr;
};

// --- Pools, fixtures and the benchmark loop --------------------------------------------

std::size_t pool_size_for(const config& c) {
  if (fb::smoke_mode()) return 3;
  // At least 8 batches and 1e6 changes (about 100 MB), so the input is not cache-hot.
  const auto by_rows = static_cast<std::size_t>((1'000'000 + c.batch - 1) / c.batch);
  return std::max<std::size_t>(8, by_rows);
}

/// `s` as an integer, if it is one and nothing else (for the settings read
/// from the environment).
std::optional<long long> whole_number(const std::string& s) {
  std::size_t used = 0;
  long long n = 0;
  try {
    n = std::stoll(s, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  if (used != s.size()) return std::nullopt;
  return n;
}

/// FLOWLIB_BENCH_CDC_AGE: whole epochs of the pool each target is fed
/// before timing (0 when unset; see the top of this file).
std::int64_t age_from_env() {
  static const std::int64_t age = [] {
    const char* v = std::getenv("FLOWLIB_BENCH_CDC_AGE");
    if (v == nullptr || *v == '\0') return std::int64_t{0};
    const std::string item = v;
    const std::optional<long long> n = whole_number(item);
    fb::require(n && *n >= 0, "FLOWLIB_BENCH_CDC_AGE: \"" + item + "\" is not a non-negative integer");
    return static_cast<std::int64_t>(*n);
  }();
  return age;
}

/// The pool of the configuration being measured (one at a time).
fb::cdc::cdc_pool& pool_for(const config& c) {
  static std::unique_ptr<fb::cdc::cdc_pool> pool;
  static std::uint64_t next_id = 0;
  if (!pool || !(pool->cfg == c)) {
    pool.reset();
    pool = std::make_unique<fb::cdc::cdc_pool>(c, pool_size_for(c), next_id++);
  }
  return *pool;
}

template <class Impl>
constexpr bool is_sqlite = std::is_same_v<Impl, sqlite_scd1> || std::is_same_v<Impl, sqlite_scd2>;

/// Pre-populates `impl` with `initial`, in batches of `chunk` changes.
template <class Impl>
void prepopulate(Impl& impl, const std::vector<Change>& initial, std::size_t chunk) {
  for (std::size_t i = 0; i < initial.size(); i += chunk) {
    impl.apply(batch_view(initial).subspan(i, std::min(chunk, initial.size() - i)));
  }
}

/// An implementation's target for one pool: pre-populated at construction
/// (its memory measured), aged by FLOWLIB_BENCH_CDC_AGE whole epochs, then
/// fed the pool's batches in order, wrapping into higher epochs.
template <class Impl>
struct fixture {
  std::unique_ptr<Impl> impl;
  double bytes_per_key = 0;
  std::size_t cursor = 0;
  std::int64_t epoch;

  explicit fixture(fb::cdc::cdc_pool& pool) : epoch(pool.epoch) {
    const std::int64_t before = is_sqlite<Impl> ? sqlite3_memory_used() : live_bytes();
    impl = std::make_unique<Impl>();
    prepopulate(*impl, pool.initial, static_cast<std::size_t>(pool.cfg.batch));
    const std::int64_t after = is_sqlite<Impl> ? sqlite3_memory_used() : live_bytes();
    bytes_per_key = static_cast<double>(after - before) / static_cast<double>(pool.cfg.keys);
    for (std::int64_t a = 0; a < age_from_env(); ++a) {
      while (!at_wrap(pool)) impl->apply(next(pool));
      wrap(pool);
    }
  }
  bool at_wrap(const fb::cdc::cdc_pool& pool) const { return cursor == pool.batches.size(); }
  /// Moves to the start of the next epoch; the pool is rebased if no other
  /// fixture got it there first (a pool's sequences only rise, so this
  /// target's next batch is above everything it holds).
  void wrap(fb::cdc::cdc_pool& pool) {
    if (pool.epoch <= epoch) pool.rebase(epoch + 1);
    epoch = pool.epoch;
    cursor = 0;
  }
  batch_view next(fb::cdc::cdc_pool& pool) {
    if (pool.epoch > epoch) epoch = pool.epoch;
    return pool.batches[cursor++];
  }
};

/// The one fixture alive, whatever its implementation (SCD2 targets grow
/// large): see support/fixture_slot.hpp.
template <class Impl>
fixture<Impl>& fixture_for(fb::cdc::cdc_pool& pool) {
  return fb::fixture_in_slot<fixture<Impl>>(
      pool.id, [&] { return std::make_unique<fixture<Impl>>(pool); });
}

template <class Impl>
void bm_apply(benchmark::State& state, config c) {
  fb::cdc::cdc_pool& pool = pool_for(c);
  fixture<Impl>& fx = fixture_for<Impl>(pool);
  // Rows per key as this run's timing starts (for SCD2, about the versions
  // per key; the fixture carries over from the library's earlier, shorter
  // runs of the same benchmark).
  constexpr bool counts_rows = requires { fx.impl->rows(); };
  double rows_per_key = 0;
  if constexpr (counts_rows) {
    rows_per_key = static_cast<double>(fx.impl->rows()) / static_cast<double>(c.keys);
  }
  for (auto _ : state) {
    if (fx.at_wrap(pool)) {
      state.PauseTiming();
      fx.wrap(pool);
      state.ResumeTiming();
    }
    fx.impl->apply(fx.next(pool));
  }
  state.SetItemsProcessed(state.iterations() * c.batch);
  state.counters["bytes_per_key"] = fx.bytes_per_key;
  if constexpr (counts_rows) state.counters["rows_per_key"] = rows_per_key;
}

// --- Smoke checks ---------------------------------------------------------------------

/// The contract's example (docs/semantics.md#auto-cdc), as one batch.
std::vector<Change> contract_example() {
  return {
      {124, "Raul", "Oaxaca", 0, op::insert, 1},        {123, "Isabel", "Monterrey", 0, op::insert, 1},
      {125, "Mercedes", "Tijuana", 0, op::insert, 2},   {126, "Lily", "Cancun", 0, op::insert, 2},
      {123, "", "", 0, op::del, 6},                     {125, "Mercedes", "Guadalajara", 0, op::update, 6},
      {125, "Mercedes", "Mexicali", 0, op::update, 5},  {123, "Isabel", "Chihuahua", 0, op::update, 5},
  };
}

template <class Impl>
void check_example(const std::vector<current_row>& want1, const std::vector<version_row>& want2) {
  const std::vector<Change> changes = contract_example();
  Impl impl;
  impl.apply(changes);
  const std::string what = std::string(Impl::name) + ": the contract's example";
  if constexpr (std::is_same_v<typename Impl::row_type, current_row>) {
    fb::require(impl.snapshot() == want1, what + " (SCD1)");
    // R-CDC-1: one change per batch, in reverse order, gives the same table.
    Impl reversed;
    for (auto it = changes.rbegin(); it != changes.rend(); ++it) reversed.apply(batch_view(&*it, 1));
    fb::require(reversed.snapshot() == want1, what + " (SCD1, one change per batch, reversed)");
  } else {
    fb::require(impl.snapshot() == want2, what + " (SCD2)");
  }
}

void check_examples() {
  const std::vector<current_row> want1 = {
      {124, "Raul", "Oaxaca", 0}, {125, "Mercedes", "Guadalajara", 0}, {126, "Lily", "Cancun", 0}};
  const std::vector<version_row> want2 = {
      {123, "Isabel", "Chihuahua", 0, 5, 6},         {123, "Isabel", "Monterrey", 0, 1, 5},
      {124, "Raul", "Oaxaca", 0, 1, std::nullopt},   {125, "Mercedes", "Guadalajara", 0, 6, std::nullopt},
      {125, "Mercedes", "Mexicali", 0, 5, 6},        {125, "Mercedes", "Tijuana", 0, 2, 5},
      {126, "Lily", "Cancun", 0, 2, std::nullopt}};
  const std::vector<Change> changes = contract_example();
  const fb::cdc::change_log log{&changes};
  fb::require(fb::cdc::expected_scd1(log) == want1, "expected_scd1: the contract's example");
  fb::require(fb::cdc::expected_scd2(log) == want2, "expected_scd2: the contract's example");
  check_example<flowlib_scd1>(want1, want2);
  check_example<absl_scd1>(want1, want2);
  check_example<unordered_scd1>(want1, want2);
  check_example<sqlite_scd1>(want1, want2);
  check_example<flowlib_scd2>(want1, want2);
  check_example<absl_scd2>(want1, want2);
  check_example<unordered_scd2>(want1, want2);
  check_example<sqlite_scd2>(want1, want2);
}

/// Replays `applied` (pre-population chunks, then pool batches) into a fresh
/// `Impl` and compares its final table with `expected`.
template <class Impl, class Row>
void check_impl(const std::vector<std::vector<Change>>& applied, const std::vector<Row>& expected,
                const std::string& where) {
  Impl impl;
  for (const auto& b : applied) impl.apply(b);
  const std::vector<Row> got = impl.snapshot();
  if (got != expected) {
    std::fprintf(stderr, "%s: %zu rows, expected %zu\n", Impl::name, got.size(), expected.size());
    for (std::size_t i = 0; i < std::max(got.size(), expected.size()); ++i) {
      if (i < got.size() && i < expected.size() && got[i] == expected[i]) continue;
      const auto show = [](const char* what, const std::vector<Row>& rows, std::size_t j) {
        if (j >= rows.size()) return;
        const Row& r = rows[j];
        std::fprintf(stderr, "  %s key %lld: %s %s %lld", what, static_cast<long long>(r.key), r.name.c_str(),
                     r.city.c_str(), static_cast<long long>(r.amount));
        if constexpr (std::is_same_v<Row, version_row>) {
          std::fprintf(stderr, " [%lld, %lld]", static_cast<long long>(r.start_at),
                       r.end_at ? static_cast<long long>(*r.end_at) : -1LL);
        }
        std::fprintf(stderr, "\n");
      };
      show("got     ", got, i);
      show("expected", expected, i);
      break;
    }
  }
  fb::require(got == expected, std::string(Impl::name) + " ends with the expected table" + where);
}

/// Every implementation applies the same batches of `c`'s pool (wrapping
/// twice) and must end with the table the contract predicts.
void check_config(const config& c) {
  fb::cdc::cdc_pool pool(c, pool_size_for(c), 1'000'000);
  const std::string where = " (" + fb::cdc::label(c) + ")";
  fb::require(pool.late > 0 && pool.deletes > 0 && pool.inserts > 0 && pool.updates > 0,
              "the data has late changes, deletes, inserts and updates" + where);
  std::vector<std::vector<Change>> applied;
  const auto chunk = static_cast<std::size_t>(c.batch);
  for (std::size_t i = 0; i < pool.initial.size(); i += chunk) {
    const auto first = pool.initial.begin() + static_cast<std::ptrdiff_t>(i);
    applied.emplace_back(first, first + static_cast<std::ptrdiff_t>(std::min(chunk, pool.initial.size() - i)));
  }
  for (std::int64_t e = 0; e < 3; ++e) {
    if (e > 0) pool.rebase(e);
    for (const auto& b : pool.batches) applied.push_back(b);
  }
  fb::cdc::change_log log;
  for (const auto& b : applied) log.push_back(&b);
  const std::vector<current_row> want1 = fb::cdc::expected_scd1(log);
  const std::vector<version_row> want2 = fb::cdc::expected_scd2(log);
  fb::require(want2.size() > want1.size() + pool.updates, "SCD2 keeps history" + where);
  check_impl<flowlib_scd1>(applied, want1, " (SCD1)" + where);
  check_impl<absl_scd1>(applied, want1, " (SCD1)" + where);
  check_impl<unordered_scd1>(applied, want1, " (SCD1)" + where);
  check_impl<sqlite_scd1>(applied, want1, " (SCD1)" + where);
  check_impl<flowlib_scd2>(applied, want2, " (SCD2)" + where);
  check_impl<flowlib_scd2_one_pass>(applied, want2, " (SCD2)" + where);
  check_impl<flowlib_scd2_planned>(applied, want2, " (SCD2)" + where);
  check_impl<absl_scd2>(applied, want2, " (SCD2)" + where);
  check_impl<unordered_scd2>(applied, want2, " (SCD2)" + where);
  check_impl<sqlite_scd2>(applied, want2, " (SCD2)" + where);

  // Both floors write one row per change that is not a delete. The access
  // floor also closes each change's key's open version, so a key's last
  // change in arrival order leaves one open if it is an upsert.
  scd2_growth_floor floor;
  scd2_access_floor access;
  std::size_t upserts = 0;
  std::unordered_map<std::int64_t, bool> open_after;
  for (const auto& b : applied) {
    floor.apply(b);
    access.apply(b);
    for (const Change& ch : b) {
      upserts += ch.operation != op::del;
      open_after[ch.key] = ch.operation != op::del;
    }
  }
  fb::require(floor.rows() == upserts, "the SCD2 growth floor writes a row per upsert" + where);
  fb::require(access.rows() == upserts, "the SCD2 access floor writes a row per upsert" + where);
  const auto still_open = static_cast<std::size_t>(
      std::ranges::count_if(open_after, [](const auto& kv) { return kv.second; }));
  fb::require(access.open_rows() == still_open,
              "the SCD2 access floor leaves one version open per key whose last change is an "
              "upsert" + where);
}

/// FLOWLIB_BENCH_CDC_KEYS: target sizes to run instead of 1e3, 1e5 and 1e6
/// keys, as a comma-separated list of positive integers ("200000,500000").
std::optional<std::vector<std::int64_t>> keys_from_env() {
  const char* v = std::getenv("FLOWLIB_BENCH_CDC_KEYS");
  if (v == nullptr || *v == '\0') return std::nullopt;
  std::vector<std::int64_t> out;
  const std::string list = v;
  std::size_t pos = 0;
  while (pos <= list.size()) {
    const std::size_t end = std::min(list.find(',', pos), list.size());
    const std::string item = list.substr(pos, end - pos);
    const std::optional<long long> k = whole_number(item);
    fb::require(k && *k > 0, "FLOWLIB_BENCH_CDC_KEYS: \"" + item +
                                 "\" is not a positive integer (expected a list such as 200000,500000)");
    out.push_back(*k);
    pos = end + 1;
  }
  return out;
}

// --- SCD2: late changes into long histories ---------------------------------------

struct late_config {
  std::int64_t keys, versions;
};
std::string label(const late_config& c) {
  return "keys:" + std::to_string(c.keys) + "/versions:" + std::to_string(c.versions);
}
late_config late_configs_for_smoke() { return {20, 30}; }
std::vector<late_config> late_configs() {
  if (fb::smoke_mode()) return {late_configs_for_smoke()};
  return {{10000, 100}, {1000, 1000}};
}
/// Late changes per timed batch (fewer in smoke mode).
std::size_t late_batch() { return fb::smoke_mode() ? 50 : 1000; }
constexpr std::int64_t late_gap = std::int64_t{1} << 32;  // between two in-order versions

/// The in-order batches that give every key `c.versions` versions.
std::vector<std::vector<Change>> late_setup(const late_config& c) {
  std::vector<std::vector<Change>> out;
  for (std::int64_t v = 0; v < c.versions; ++v) {
    auto& b = out.emplace_back();
    for (std::int64_t k = 0; k < c.keys; ++k) b.push_back({k, "n", "c", v, op::update, (v + 1) * late_gap});
  }
  return out;
}
/// A batch of late upserts at random depths. `next` numbers them: each
/// sequence falls between two in-order versions and is distinct from every
/// other, and each change's values are new.
void late_batch_into(std::vector<Change>& b, const late_config& c, std::mt19937_64& rng,
                     std::int64_t& next, std::size_t n) {
  b.clear();
  for (std::size_t i = 0; i < n; ++i) {
    const auto k = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(c.keys));
    const auto v = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(c.versions));
    ++next;
    b.push_back({k, "late", "c", -next, op::update, (v + 1) * late_gap + next});
  }
}

/// The target of one run of bm_late, given every key's versions in order.
template <class Impl>
struct late_fixture {
  Impl impl;
  explicit late_fixture(const late_config& c) {
    for (const auto& b : late_setup(c)) impl.apply(b);
  }
};

/// Builds the target again for every run (it grows by a version per late
/// change), in the one fixture slot: whatever fixture was alive before, from
/// this family or the others, is released and its memory given back first
/// (support/fixture_slot.hpp). Then times batches of late changes.
template <class Impl>
void bm_late(benchmark::State& state, late_config c) {
  static std::uint64_t runs = 0;  // a new slot id per run: a fresh target
  Impl& impl = fb::fixture_in_slot<late_fixture<Impl>>(++runs, [&] {
                 return std::make_unique<late_fixture<Impl>>(c);
               }).impl;
  std::mt19937_64 rng(42);
  std::int64_t next = 0;
  std::vector<Change> b;
  for (auto _ : state) {
    state.PauseTiming();
    late_batch_into(b, c, rng, next, late_batch());
    state.ResumeTiming();
    impl.apply(b);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(late_batch()));
}

/// Smoke mode: flowlib and absl end with the table the contract predicts.
void check_late() {
  const late_config c = late_configs_for_smoke();
  std::vector<std::vector<Change>> applied = late_setup(c);
  std::mt19937_64 rng(7);
  std::int64_t next = 0;
  for (int i = 0; i < 5; ++i) late_batch_into(applied.emplace_back(), c, rng, next, 40);
  fb::cdc::change_log log;
  for (const auto& b : applied) log.push_back(&b);
  const std::vector<version_row> want = fb::cdc::expected_scd2(log);
  const std::string where = " (late changes into long histories, " + label(c) + ")";
  fb::require(want.size() == static_cast<std::size_t>(c.keys * c.versions + 5 * 40),
              "every late change splits a version" + where);
  check_impl<flowlib_scd2>(applied, want, where);
  check_impl<flowlib_scd2_one_pass>(applied, want, where);
  check_impl<absl_scd2>(applied, want, where);
}

template <class Impl>
void register_late(const late_config& c) {
  auto* b = benchmark::RegisterBenchmark(
      ("auto_cdc/scd2_late/" + std::string(Impl::name) + "/" + label(c)).c_str(), bm_late<Impl>, c);
  b->Unit(benchmark::kMillisecond);
  if (fb::smoke_mode()) return;
  b->MinTime(0.2);
}

/// FLOWLIB_BENCH_CDC_SCD2_PATHS=1: SCD2 also runs flowlib with the one pass
/// forced on (flowlib_one_pass) and off (flowlib_planned), to place
/// CdcEngineOptions::scd2_one_pass_min_keys on this machine.
bool scd2_paths_from_env() { return fb::env_flag("FLOWLIB_BENCH_CDC_SCD2_PATHS"); }

std::vector<config> configs() {
  std::vector<config> out;
  const bool smoke = fb::smoke_mode();
  const std::vector<std::int64_t> keys =
      smoke ? std::vector<std::int64_t>{50, 1000}
            : keys_from_env().value_or(std::vector<std::int64_t>{1000, 100000, 1000000});
  const std::vector<std::int64_t> batches =
      smoke ? std::vector<std::int64_t>{100, 1000} : std::vector<std::int64_t>{10000, 100000};
  for (std::int64_t k : keys)
    for (std::int64_t b : batches)
      for (dist d : {dist::uniform, dist::zipf}) out.push_back({k, b, d});
  return out;
}

template <class Impl>
void register_one(const char* scd, const config& c) {
  const std::int64_t age = age_from_env();
  const std::string aged = age > 0 ? std::string("/age:").append(std::to_string(age)) : std::string();
  auto* b = benchmark::RegisterBenchmark(
      ("auto_cdc/" + std::string(scd) + "/" + Impl::name + "/" + fb::cdc::label(c) + aged).c_str(),
      bm_apply<Impl>, c);
  // CPU time: the benchmarks are single-threaded, and on a shared machine the
  // wall clock also counts the time other processes hold the core.
  b->Unit(benchmark::kMillisecond);
  if (fb::smoke_mode()) return;
  b->MinTime(0.2);
  // SQLite takes 30-100x longer per change: three repetitions keep the full
  // run within minutes.
  if constexpr (is_sqlite<Impl>) b->Repetitions(3);
}

/// SQLite runs the batches of 1e4 changes only (every key count and
/// distribution), except in smoke mode.
bool runs(const char* impl, const config& c) {
  return fb::smoke_mode() || std::string(impl) != "sqlite" || c.batch <= 10000;
}

}  // namespace bench

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  if (fb::smoke_mode()) {
    bench::check_examples();
    for (const auto& c : bench::configs()) bench::check_config(c);
    bench::check_late();
    std::printf("smoke checks passed: flowlib, absl, unordered_map and sqlite agree (SCD1, SCD2)\n");
  }
  // Grouped by configuration so that the implementations of one configuration
  // run back to back on the same pool of batches.
  for (const char* scd : {"scd1", "scd2"}) {
    const bool type1 = std::string(scd) == "scd1";
    for (const auto& c : bench::configs()) {
      if (type1) {
        bench::register_one<bench::flowlib_scd1>(scd, c);
        bench::register_one<bench::absl_scd1>(scd, c);
        bench::register_one<bench::unordered_scd1>(scd, c);
        if (bench::runs("sqlite", c)) bench::register_one<bench::sqlite_scd1>(scd, c);
      } else {
        bench::register_one<bench::flowlib_scd2>(scd, c);
        if (bench::scd2_paths_from_env()) {
          bench::register_one<bench::flowlib_scd2_one_pass>(scd, c);
          bench::register_one<bench::flowlib_scd2_planned>(scd, c);
        }
        bench::register_one<bench::absl_scd2>(scd, c);
        bench::register_one<bench::unordered_scd2>(scd, c);
        if (bench::runs("sqlite", c)) bench::register_one<bench::sqlite_scd2>(scd, c);
        bench::register_one<bench::scd2_growth_floor>(scd, c);
        bench::register_one<bench::scd2_access_floor>(scd, c);
      }
    }
  }
  for (const auto& c : bench::late_configs()) {
    bench::register_late<bench::flowlib_scd2>(c);
    bench::register_late<bench::absl_scd2>(c);
  }
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
