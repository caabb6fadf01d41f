// AutoCdc's state in a checkpoint (write_checkpoint / read_checkpoint), for
// SCD1 and SCD2 and both engines of each: a flow restored from the deltas and
// snapshots another flow wrote behaves exactly as that flow, batch after
// batch (same tables, same metrics, same errors) — with truncates (R-CDC-3),
// tombstones and their GC on an injected clock (R-CDC-2), ignore_null_updates
// (R-CDC-6), strict_sequence (R-CDC-5), tracked and untracked columns and
// late changes (R-CDC-4), full refreshes (R-EXACT-5) and ONCE (R-TABLE-2).
// Also: a restore on a live flow discards an unwritten batch; damaged blobs
// throw checkpoint_corrupt and change nothing; a delta's size depends on the
// batch, not on the state.
#include <support/auto_cdc_model.hpp>
#include <support/errors.hpp>

#include <flowlib/checkpoint/store.hpp>
#include <flowlib/detail/byte_codec.hpp>
#include <flowlib/once.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace flows_auto_cdc_random_checkpoint {

namespace {

using namespace model;
using onepass::input_only;
using fl::checkpoint_scope;

struct StrictScd1Tag {};
using Scd1Strict = fl::AutoCdc<K, S, fl::Scd1, fl::apply_as_deletes<IsDelete>,
                               fl::apply_as_truncates<IsTruncate>, Cols, fl::strict_sequence>;
using Scd2Strict = fl::AutoCdc<K, S, fl::Scd2<>, fl::apply_as_deletes<IsDelete>, Cols,
                               fl::strict_sequence>;
using Scd1Once = fl::AutoCdc<K, S, fl::Scd1, fl::apply_as_deletes<IsDelete>, Cols, fl::Once>;

#if defined(__SANITIZE_ADDRESS__)
constexpr int kSeeds = 60;
#else
constexpr int kSeeds = 300;
#endif

/// One batch of a run, and what happens around it.
struct Step {
  std::vector<Change> batch;
  int mode = 0;           // 0: a vector (one pass where the flow can), 1: input-only (planned),
                          // 2: a std::deque
  bool poison = false;    // a copy with a null sequence is tried first (it must fail)
  bool refresh = false;   // the table is fully refreshed first
  std::int64_t time = 0;  // the clock during the batch
};

/// The result of one step: the metrics, or the error's code.
struct Outcome {
  std::optional<fl::BatchStats> stats;
  std::optional<fl::errc> error;
  bool operator==(const Outcome&) const = default;
};

std::vector<Step> random_steps(std::mt19937& rng, bool truncates) {
  std::uniform_int_distribution<int> pct(0, 99);
  const int n = std::uniform_int_distribution<int>(4, 16)(rng);
  std::vector<Step> out;
  std::int64_t t = 0;
  for (int i = 0; i < n; ++i) {
    Step s;
    // A base that rises: most changes follow their key's, some are late.
    const std::int64_t base = i * 12 - std::uniform_int_distribution<std::int64_t>(0, 20)(rng);
    s.batch = onepass::random_batch(rng, truncates, base < 0 ? 0 : base);
    s.mode = pct(rng) % 3;
    s.poison = pct(rng) < 10;
    s.refresh = pct(rng) < 6;
    t += std::uniform_int_distribution<std::int64_t>(0, 4)(rng);
    s.time = t;
    out.push_back(std::move(s));
  }
  return out;
}

template <class Flow, class Table>
Outcome run_step(Flow& flow, Table& table, const Step& s, std::int64_t& now, std::mt19937& rng) {
  now = s.time;
  if (s.refresh) table.full_refresh();
  if (s.poison) {
    const auto before = table.sorted_rows();
    CHECK_THROWS_AS(flow.apply(table, onepass::with_null_sequence(rng, s.batch)), fl::error);
    REQUIRE(table.sorted_rows() == before);
  }
  Outcome o;
  try {
    if (s.mode == 1) {
      o.stats = flow.apply(table, input_only{&s.batch});
    } else if (s.mode == 2) {
      const std::deque<Change> rows(s.batch.begin(), s.batch.end());
      o.stats = flow.apply(table, rows);
    } else {
      o.stats = flow.apply(table, s.batch);
    }
  } catch (const fl::error& e) {
    o.error = e.code();
  }
  return o;
}

/// The blobs a flow wrote, and those a restore after the last one reads.
struct Written {
  std::vector<std::pair<checkpoint_scope, std::string>> blobs;
  int successes = 0;
  int every = 1;  // a snapshot every `every` batches, else a delta

  template <class Flow>
  void after_apply(const Flow& flow) {
    ++successes;
    const auto scope = successes % every == 0 ? checkpoint_scope::snapshot : checkpoint_scope::delta;
    std::string out;
    fl::detail::byte_writer w{out};
    flow.write_checkpoint(w, scope);
    blobs.emplace_back(scope, std::move(out));
  }
  /// One that writes deltas only (a snapshot every 100 batches).
  static Written deltas() {
    Written w;
    w.every = 100;
    return w;
  }
  /// `flow` applies `batch` to `table`, then its blob is written.
  template <class Flow, class Table, class Batch>
  fl::BatchStats apply(Flow& flow, Table& table, const Batch& batch) {
    const fl::BatchStats s = flow.apply(table, batch);
    after_apply(flow);
    return s;
  }
  fl::checkpoint_blobs restore_set() const {
    fl::checkpoint_blobs b;
    std::size_t from = 0;
    for (std::size_t i = 0; i < blobs.size(); ++i) {
      if (blobs[i].first == checkpoint_scope::snapshot) from = i;
    }
    if (!blobs.empty() && blobs[from].first == checkpoint_scope::snapshot) {
      b.snapshot = blobs[from].second;
      ++from;
    }
    for (std::size_t i = from; i < blobs.size(); ++i) b.deltas.push_back(blobs[i].second);
    return b;
  }
};

template <class Flow>
void check_same_state(const Flow& a, const Flow& b) {
  REQUIRE(a.key_count() == b.key_count());
  REQUIRE(a.tombstone_count() == b.tombstone_count());
  REQUIRE(a.truncate_floor() == b.truncate_floor());
  REQUIRE(a.done() == b.done());
}

/// Flow A runs every step, writing after every successful one; flow B is
/// restored from A's blobs after step k over a table holding A's rows (made
/// by a twin of A, whose table's rows are moved into a new table), and
/// then both run the rest and must agree after every step.
template <class Flow, class Row>
void equivalence(unsigned seed, bool truncates, bool gc, std::size_t one_pass_min_keys) {
  std::mt19937 rng(seed);
  auto now = std::make_shared<std::int64_t>(0);
  fl::CdcOptions settings;
  if (gc) {
    settings.tombstone_gc_threshold =
        fl::cdc_clock::duration(std::uniform_int_distribution<int>(0, 6)(rng));
  }
  settings.clock = [now] { return fl::cdc_clock::time_point(fl::cdc_clock::duration(*now)); };
  settings.tuning.scd2_one_pass_min_keys = one_pass_min_keys;
  const std::vector<Step> steps = random_steps(rng, truncates);
  const std::size_t k0 = std::uniform_int_distribution<std::size_t>(0, steps.size())(rng);
  Written wa;
  wa.every = std::uniform_int_distribution<int>(1, 5)(rng);
  INFO("seed " << seed << ", restored after step " << k0 << "+ of " << steps.size()
               << ", snapshot every " << wa.every);

  std::mt19937 rng_a(seed + 1), rng_x(seed + 1);  // the poisoned copies, alike
  Flow a{"cdc", settings};
  fl::StreamingTable<Row> ta{"target"};
  // Whether the state is as last written: not after an apply that failed
  // once a refresh had emptied the table (the flow reset its state; a
  // pipeline would not commit that batch).
  bool written = true;
  const auto track = [&](const Step& s, const Outcome& o) {
    written = o.stats.has_value() || (written && !s.refresh);
  };
  std::size_t k = k0;
  for (std::size_t i = 0; i < k || (!written && i < steps.size()); ++i) {
    const Outcome o = run_step(a, ta, steps[i], *now, rng_a);
    if (o.stats) wa.after_apply(a);
    track(steps[i], o);
    k = std::max(k, i + 1);
  }
  if (!written) return;
  fl::StreamingTable<Row> tb{"target"};
  {
    Flow twin{"cdc", settings};
    fl::StreamingTable<Row> tx{"target"};
    for (std::size_t i = 0; i < k; ++i) (void)run_step(twin, tx, steps[i], *now, rng_x);
    tb.store() = std::move(tx.store());  // the rows under the same ids, no claim
  }
  REQUIRE(tb.sorted_rows() == ta.sorted_rows());
  Flow b{"cdc", settings};
  b.read_checkpoint(tb, wa.restore_set());
  check_same_state(a, b);
  Written wb = wa;  // B's blobs follow those it was restored from
  wb.every = 3;
  std::mt19937 rng_b = rng_a;
  for (std::size_t i = k; i < steps.size(); ++i) {
    INFO("step " << i << ": " << steps[i].batch);
    const Outcome oa = run_step(a, ta, steps[i], *now, rng_a);
    const Outcome ob = run_step(b, tb, steps[i], *now, rng_b);
    REQUIRE(oa == ob);
    REQUIRE(ta.sorted_rows() == tb.sorted_rows());
    check_same_state(a, b);
    if (oa.stats) {
      wa.after_apply(a);
      wb.after_apply(b);
    }
    track(steps[i], oa);
  }
  // B's own blobs restore B's state too (tracking continues after a restore).
  if (written) {
    fl::StreamingTable<Row> tc{"target"};
    tc.store() = std::move(tb.store());
    Flow c{"cdc", settings};
    c.read_checkpoint(tc, wb.restore_set());
    check_same_state(a, c);
  }
}

template <class Flow, class Row>
void many_seeds(unsigned seed0, bool truncates, bool gc, std::size_t one_pass_min_keys) {
  for (int n = 0; n < kSeeds; ++n) {
    equivalence<Flow, Row>(seed0 + static_cast<unsigned>(n), truncates, gc && n % 3 != 0,
                           one_pass_min_keys);
  }
}

constexpr std::size_t kAlwaysOnePass = 0;
constexpr std::size_t kPlanned = std::size_t{1} << 30;

}  // namespace

TEST_CASE("SCD1 restored from deltas and snapshots behaves as the flow that wrote them "
          "(R-CDC-2, R-CDC-3: truncates, tombstones, GC; both engines)") {
  many_seeds<Scd1, Row>(1000, /*truncates=*/true, /*gc=*/true, kPlanned);
  many_seeds<Scd1, Row>(5000, /*truncates=*/false, /*gc=*/true, kPlanned);
}

TEST_CASE("SCD1 with ignore_null_updates restored (R-CDC-6 with truncates)") {
  many_seeds<Scd1Ignore, Row>(9000, /*truncates=*/true, /*gc=*/true, kPlanned);
}

TEST_CASE("SCD1 with strict_sequence restored: the same ties fail (R-CDC-5)") {
  many_seeds<Scd1Strict, Row>(13000, /*truncates=*/true, /*gc=*/false, kPlanned);
}

TEST_CASE("SCD2 restored, planned and one-pass engines (R-CDC-4: late changes split history)") {
  many_seeds<Scd2, Version>(17000, false, false, kPlanned);
  many_seeds<Scd2, Version>(21000, false, false, kAlwaysOnePass);
}

TEST_CASE("SCD2 with untracked columns, ignore_null_updates, strict_sequence restored") {
  many_seeds<Scd2NoCity, Version>(25000, false, false, kPlanned);
  many_seeds<Scd2Ignore, Version>(29000, false, false, kPlanned);
  many_seeds<Scd2Strict, Version>(33000, false, false, kPlanned);
}

TEST_CASE("a restore on a live flow discards the batch whose checkpoint was not written") {
  for (unsigned seed = 0; seed < 100; ++seed) {
    std::mt19937 rng(seed);
    std::int64_t now = 0;
    const std::vector<Step> steps = random_steps(rng, true);
    const std::size_t k = std::uniform_int_distribution<std::size_t>(0, steps.size() - 1)(rng);
    std::mt19937 r1(seed), r2(seed), r3(seed);
    Scd1 a{"cdc"};
    fl::StreamingTable<Row> ta{"target"};
    Written w;
    w.every = 2;
    for (std::size_t i = 0; i < k; ++i) {
      if (run_step(a, ta, steps[i], now, r1).stats) w.after_apply(a);
    }
    (void)run_step(a, ta, steps[k], now, r1);  // applied, never written
    // The reference: a twin over the first k steps; and a table with its rows for A.
    Scd1 twin{"cdc"};
    fl::StreamingTable<Row> tx{"target"}, ty{"target"}, tc{"target"};
    for (std::size_t i = 0; i < k; ++i) (void)run_step(twin, tx, steps[i], now, r2);
    {
      Scd1 other{"cdc"};
      for (std::size_t i = 0; i < k; ++i) (void)run_step(other, ty, steps[i], now, r3);
      tc.store() = std::move(ty.store());
    }
    a.read_checkpoint(tc, w.restore_set());
    check_same_state(twin, a);
    for (std::size_t i = k; i < steps.size(); ++i) {
      std::mt19937 ra(seed + 7), rb(seed + 7);
      REQUIRE(run_step(a, tc, steps[i], now, ra) == run_step(twin, tx, steps[i], now, rb));
      REQUIRE(tc.sorted_rows() == tx.sorted_rows());
    }
  }
}

TEST_CASE("a delta after a full refresh says so: a restore drops what came before (R-EXACT-5)") {
  const std::vector<Change> first{{1, "a", "x", upsert, 1}, {2, "b", "y", upsert, 2}};
  const std::vector<Change> second{{3, "c", "z", upsert, 1}};
  Scd1 a{"cdc"};
  fl::StreamingTable<Row> ta{"target"};
  Written w = Written::deltas();
  w.apply(a, ta, first);
  CHECK(w.blobs[0].second[7] == 1);  // the first delta holds the whole state
  w.apply(a, ta, first);
  CHECK(w.blobs[1].second[7] == 0);
  ta.full_refresh();
  w.apply(a, ta, second);
  CHECK(w.blobs[2].second[7] == 1);  // the reset flag
  fl::StreamingTable<Row> tb{"target"};
  Scd1 twin{"cdc"};
  twin.apply(tb, second);
  Scd1 b{"cdc"};
  fl::StreamingTable<Row> tc{"target"};
  tc.store() = std::move(tb.store());
  b.read_checkpoint(tc, w.restore_set());
  CHECK(b.key_count() == 1);
  CHECK(tc.sorted_rows() == std::vector<Row>{{3, "c", "z"}});
  // An older change of key 1 inserts it: its state went with the refresh.
  const std::vector<Change> late{{1, "old", "x", upsert, 0}};
  CHECK(b.apply(tc, late) == a.apply(ta, late));
  CHECK(tc.sorted_rows() == ta.sorted_rows());
}

TEST_CASE("ONCE: the marker is in every blob; a restored ONCE flow that ran skips (R-TABLE-2)") {
  const std::vector<Change> batch{{1, "a", "x", upsert, 1}};
  Scd1Once a{"cdc"};
  fl::StreamingTable<Row> ta{"target"};
  Written w = Written::deltas();
  w.apply(a, ta, batch);
  CHECK(w.apply(a, ta, batch).skipped);  // a skipped apply writes too
  fl::StreamingTable<Row> tb{"target"};
  tb.store() = std::move(ta.store());
  Scd1Once b{"cdc"};
  b.read_checkpoint(tb, w.restore_set());
  CHECK(b.done());
  CHECK(b.apply(tb, batch).skipped);
  Scd1Once c{"cdc"};
  fl::StreamingTable<Row> tc{"target"};
  c.read_checkpoint(tc, fl::checkpoint_blobs{});  // empty: a new flow's state
  CHECK_FALSE(c.done());
  CHECK(c.key_count() == 0);
}

namespace {

template <class Flow, class Row>
void corrupt_blobs(unsigned seed) {
  std::mt19937 rng(seed);
  std::int64_t now = 0;
  const std::vector<Step> steps = random_steps(rng, !Flow::is_scd2);
  Flow a{"orders_cdc"};
  fl::StreamingTable<Row> ta{"target"};
  Written w;
  w.every = 3;
  std::mt19937 r1(seed), r2(seed);
  for (const Step& s : steps) {
    if (run_step(a, ta, s, now, r1).stats) w.after_apply(a);
  }
  REQUIRE(!w.blobs.empty());
  fl::StreamingTable<Row> tb{"target"};
  {
    Flow twin{"orders_cdc"};
    fl::StreamingTable<Row> tx{"target"};
    for (const Step& s : steps) (void)run_step(twin, tx, s, now, r2);
    tb.store() = std::move(tx.store());
  }
  Flow b{"orders_cdc"};
  b.read_checkpoint(tb, w.restore_set());
  const auto rows = tb.sorted_rows();
  const auto expect_corrupt = [&](const fl::checkpoint_blobs& bad) {
    fl::StreamingTable<Row> other{"other"};
    const fl::error e = flowtest::error_of([&] { b.read_checkpoint(other, bad); });
    REQUIRE(e.code() == fl::errc::checkpoint_corrupt);
    REQUIRE(flowtest::contains(e.what(), "orders_cdc"));
    REQUIRE(b.key_count() == a.key_count());
    REQUIRE(b.tombstone_count() == a.tombstone_count());
  };
  const std::string& last = w.blobs.back().second;
  const bool is_snapshot = w.blobs.back().first == checkpoint_scope::snapshot;
  const auto as_set = [&](std::string_view blob) {
    fl::checkpoint_blobs bad = w.restore_set();
    if (is_snapshot) {
      bad.snapshot = blob;
    } else {
      bad.deltas.back() = blob;
    }
    return bad;
  };
  for (std::size_t len = 0; len < last.size(); ++len) expect_corrupt(as_set(last.substr(0, len)));
  for (std::size_t at = 0; at < last.size(); ++at) {
    std::string flipped = last;
    flipped[at] = static_cast<char>(flipped[at] ^ (1 << (at % 8)));
    expect_corrupt(as_set(flipped));
  }
  std::string wrong_tag = last;
  wrong_tag[3] = Flow::is_scd2 ? '1' : '2';  // the other SCD type's
  expect_corrupt(as_set(wrong_tag));
  std::string wrong_version = last;
  wrong_version[4] = 9;
  expect_corrupt(as_set(wrong_version));
  // A snapshot where a delta goes (and the reverse) is refused too.
  fl::checkpoint_blobs swapped;
  if (is_snapshot) {
    swapped.deltas.push_back(last);
  } else {
    swapped.snapshot = last;
  }
  expect_corrupt(swapped);
  // B is still bound to its table, with its state: it goes on as A would.
  REQUIRE(tb.sorted_rows() == rows);
  const std::vector<Step> more = random_steps(rng, !Flow::is_scd2);
  for (const Step& s : more) {
    std::mt19937 r3 = r2;
    const Outcome oa = run_step(a, ta, s, now, r2);
    REQUIRE(oa == run_step(b, tb, s, now, r3));
    REQUIRE(ta.sorted_rows() == tb.sorted_rows());
  }
}

}  // namespace

TEST_CASE("damaged blobs: every truncation, flipped bytes, wrong tag or version -> "
          "checkpoint_corrupt naming the flow, the state unchanged") {
  for (unsigned seed = 0; seed < 8; ++seed) {
    corrupt_blobs<Scd1Ignore, Row>(seed);
    corrupt_blobs<Scd2NoCity, Version>(seed + 100);
    corrupt_blobs<Scd2, Version>(seed + 200);
  }
}

TEST_CASE("a restore over a table without the flow's rows is a checkpoint_mismatch") {
  const std::vector<Change> batch{{1, "a", "x", upsert, 1}, {2, "b", "y", upsert, 2}};
  Scd2 a{"cdc"};
  fl::StreamingTable<Version> ta{"target"};
  Written w;
  w.apply(a, ta, batch);
  Scd2 b{"cdc"};
  fl::StreamingTable<Version> empty{"empty"};
  const fl::error e = flowtest::error_of([&] { b.read_checkpoint(empty, w.restore_set()); });
  CHECK(e.code() == fl::errc::checkpoint_mismatch);
  CHECK(flowtest::contains(e.what(), "'empty'"));
  CHECK(b.key_count() == 0);
}

namespace {

template <class Flow, class Row>
std::size_t delta_size(int keys, const std::vector<Change>& batch) {
  fl::CdcOptions settings;
  settings.tombstone_gc_threshold = std::chrono::hours(1);
  Flow f{"cdc", settings};
  fl::StreamingTable<Row> t{"target"};
  std::vector<Change> fill;
  for (int i = 0; i < keys; ++i) fill.push_back({i, "n", "c", upsert, 1});
  f.apply(t, fill);
  f.apply(t, fill);  // a target the flow maintains: the one-pass engines may take the next
  std::string out;
  fl::detail::byte_writer w{out};
  f.write_checkpoint(w, checkpoint_scope::snapshot);
  const std::size_t snapshot = out.size();
  f.apply(t, batch);
  out.clear();
  f.write_checkpoint(w, checkpoint_scope::delta);
  if (keys > 1000) CHECK(snapshot > 100 * out.size());
  return out.size();
}

}  // namespace

TEST_CASE("a delta's size depends on the batch, not on the state") {
  std::vector<Change> batch;
  for (int i = 0; i < 5; ++i) batch.push_back({i, "m", std::nullopt, upsert, 2});  // stored keys
  for (int i = 0; i < 4; ++i) batch.push_back({1000000 + i, "m", "d", upsert, 2});  // new keys
  batch.push_back({7, std::nullopt, std::nullopt, model::remove, 3});
  CHECK(delta_size<Scd1, Row>(10, batch) == delta_size<Scd1, Row>(100000, batch));
  CHECK(delta_size<Scd2, Version>(10, batch) == delta_size<Scd2, Version>(100000, batch));
  CHECK(delta_size<Scd2NoCity, Version>(10, batch) == delta_size<Scd2NoCity, Version>(100000, batch));
  auto truncating = batch;
  truncating.push_back({-1, std::nullopt, std::nullopt, model::truncate, 2});
  CHECK(delta_size<Scd1, Row>(10, truncating) == delta_size<Scd1, Row>(100000, truncating));
}

}  // namespace flows_auto_cdc_random_checkpoint
