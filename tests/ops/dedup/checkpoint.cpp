// DedupWithinWatermark's checkpoints (R-DEDUP-6): write_checkpoint() deltas
// (the identities a batch stored and the watermarks) and snapshots, and
// read_checkpoint() replaying them. Randomised over one and several inputs:
// an operator restored from the blobs written up to batch k emits the same
// rows with the same counters and holds the same state as the one that
// wrote them, batch after batch. Also: a restore on a live operator discards
// an uncommitted batch, corrupt blobs, a mismatched delay, and delta sizes
// that do not grow with the state.
#include <flowlib/ops/dedup_within_watermark.hpp>

#include <support/checkpoint_blobs.hpp>

#include <doctest/doctest.h>

#include "support/errors.hpp"

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace ops_dedup_checkpoint {

namespace fl = flowlib;

struct Click {
  std::int64_t id;
  std::string session;
  std::int64_t ts;
  friend bool operator==(const Click&, const Click&) = default;
};
FLOWLIB_SCHEMA(Click, id, session, ts);

using Dedup = fl::DedupWithinWatermark<fl::Key<&Click::id, &Click::session>, fl::EventTime<&Click::ts>>;

struct batch {
  std::size_t input = 0;
  std::vector<Click> rows;
};

std::vector<batch> random_batches(std::mt19937_64& rng, std::size_t inputs) {
  std::vector<batch> out(5 + rng() % 15);
  std::int64_t now = 0;
  for (auto& b : out) {
    b.input = rng() % inputs;
    now += static_cast<std::int64_t>(rng() % 6);
    const std::size_t n = rng() % 15;
    for (std::size_t i = 0; i < n; ++i) {
      // Mostly recent event times, some late, few keys: duplicates, late
      // rows, evictions and re-admissions all happen.
      const std::int64_t ts = now - static_cast<std::int64_t>(rng() % 20);
      b.rows.push_back({static_cast<std::int64_t>(rng() % 12), rng() % 2 ? "s" : "t", ts});
    }
  }
  return out;
}

using flowtest::write_commit;

// The operator's observable state: identities with expiry, watermarks.
std::string state_of(const Dedup& d) {
  std::string s;
  for (const auto& k : d.state_keys()) {
    s += std::to_string(std::get<0>(k)) + std::get<1>(k) + ":" +
         std::to_string(*d.expires_at(k)) + " ";
  }
  s += "| " + (d.watermark() ? std::to_string(*d.watermark()) : std::string("-"));
  for (std::size_t i = 0; i < d.inputs(); ++i) {
    s += " " + (d.input_watermark(i) ? std::to_string(*d.input_watermark(i)) : std::string("-"));
  }
  return s;
}

void check_equivalence(std::uint64_t seed, std::size_t inputs, fl::watermark_policy policy) {
  std::mt19937_64 rng(seed);
  const auto batches = random_batches(rng, inputs);
  const std::size_t interval = 1 + rng() % 5;
  const bool snapshot_only = rng() % 2 == 0;
  const std::size_t k = rng() % (batches.size() + 1);
  CAPTURE(seed);
  CAPTURE(inputs);
  CAPTURE(interval);
  CAPTURE(snapshot_only);
  CAPTURE(k);
  const fl::DedupOptions options{inputs, policy};
  Dedup a{10, "clicks", options};
  flowtest::written log;
  for (std::size_t i = 0; i < k; ++i) {
    a.process(batches[i].input, batches[i].rows);
    write_commit(a, log, interval, snapshot_only);
  }
  Dedup b{10, "clicks", options};
  b.read_checkpoint(log.upto(k));
  REQUIRE(state_of(a) == state_of(b));
  REQUIRE(b.state_size() == a.state_size());
  if (k < batches.size() && rng() % 2 == 0) {  // an uncommitted batch, discarded
    b.process(batches[k].input, batches[k].rows);
    b.read_checkpoint(log.upto(k));
    REQUIRE(state_of(a) == state_of(b));
  }
  for (std::size_t i = k; i < batches.size(); ++i) {
    CAPTURE(i);
    const auto ra = a.process(batches[i].input, batches[i].rows);
    const auto rb = b.process(batches[i].input, batches[i].rows);
    REQUIRE(ra == rb);
    REQUIRE(a.last_stats() == b.last_stats());
    REQUIRE(state_of(a) == state_of(b));
    write_commit(a, log, interval, snapshot_only);
    const std::string db = flowtest::delta_of(b);
    if (!log.commits.back().delta.empty()) REQUIRE(log.commits.back().delta == db);
  }
}

using flowtest::delta_of;
using flowtest::snapshot_of;

TEST_CASE("R-DEDUP-6: an operator restored from its deltas and snapshots behaves as the one that "
          "wrote them (one input)") {
  for (std::uint64_t seed = 1; seed <= 300; ++seed) {
    check_equivalence(seed, 1, fl::watermark_policy::min);
  }
}

TEST_CASE("R-DEDUP-5, R-DEDUP-6: ... and with several inputs, min and max policies") {
  for (std::uint64_t seed = 1; seed <= 200; ++seed) {
    check_equivalence(seed, 3, seed % 2 ? fl::watermark_policy::min : fl::watermark_policy::max);
  }
}

TEST_CASE("R-DEDUP-4, R-DEDUP-6: a delta replays eviction: identities the batch stored and "
          "expired are not restored") {
  Dedup a{10, "clicks"};
  a.process(std::vector<Click>{{1, "s", 5}, {2, "s", 20}});  // wm 10: 1 (expires 15) stays
  const std::string d1 = delta_of(a);
  a.process(std::vector<Click>{{3, "s", 12}, {4, "s", 40}});  // wm 30: evicts 1, 2, 3
  const std::string d2 = delta_of(a);
  CHECK(a.state_size() == 1);
  Dedup b{10, "clicks"};
  b.read_checkpoint({std::nullopt, {d1, d2}});
  CHECK(state_of(b) == state_of(a));
  CHECK(b.contains({4, "s"}));
  CHECK(!b.contains({3, "s"}));
}

TEST_CASE("R-DEDUP-6: a delta after more than one batch holds the whole state") {
  Dedup a{10, "clicks"};
  a.process(std::vector<Click>{{1, "s", 5}});
  a.process(std::vector<Click>{{2, "s", 7}});  // no checkpoint written after the first
  Dedup b{10, "clicks"};
  b.read_checkpoint({std::nullopt, {delta_of(a)}});
  CHECK(state_of(b) == state_of(a));
  CHECK(b.state_size() == 2);
  // Writing twice after one batch: the second delta holds nothing new.
  a.process(std::vector<Click>{{3, "s", 8}});
  const std::string d = delta_of(a);
  const std::string again = delta_of(a);
  CHECK(again.size() < d.size());
  Dedup c{10, "clicks"};
  c.read_checkpoint({snapshot_of(a), {again}});
  CHECK(state_of(c) == state_of(a));
}

TEST_CASE("R-DEDUP-6: corrupt blobs throw checkpoint_corrupt and leave the state unchanged") {
  Dedup a{10, "clicks"};
  a.process(std::vector<Click>{{1, "s", 5}, {2, "t", 9}});
  const std::string snap = snapshot_of(a);
  const std::string delta = delta_of(a);
  Dedup b{10, "clicks"};
  b.process(std::vector<Click>{{7, "x", 100}});
  const std::string before = state_of(b);
  const auto expect_corrupt = [&](fl::checkpoint_blobs blobs, const char* what) {
    CAPTURE(what);
    const fl::error e = flowtest::error_of([&] { b.read_checkpoint(blobs); });
    CHECK(e.code() == fl::errc::checkpoint_corrupt);
    CHECK(e.flow() == "clicks");
    CHECK(state_of(b) == before);
  };
  for (std::size_t n = 0; n < snap.size(); ++n) {
    expect_corrupt({snap.substr(0, n), {}}, "snapshot truncated");
  }
  for (std::size_t n = 0; n < delta.size(); ++n) {
    expect_corrupt({snap, {delta.substr(0, n)}}, "delta truncated");
  }
  for (std::size_t i = 0; i < 7; ++i) {
    std::string bad = delta;
    bad[i] = static_cast<char>(bad[i] ^ 0x21);
    expect_corrupt({std::nullopt, {bad}}, "header byte flipped");
  }
  std::string tag = snap;
  tag.replace(0, 4, "FLRU");
  expect_corrupt({tag, {}}, "another kind's tag");
  std::string version = delta;
  version[5] = 1;
  expect_corrupt({std::nullopt, {version}}, "unknown version");
  expect_corrupt({delta, {}}, "a delta in the snapshot's place");
  expect_corrupt({std::nullopt, {snap}}, "a snapshot among the deltas");
  expect_corrupt({std::nullopt, {delta + "z"}}, "trailing bytes");
  // Any flipped byte: a corrupt-state error, or a valid state; never a crash.
  for (std::size_t i = 7; i < snap.size(); ++i) {
    std::string bad = snap;
    bad[i] = static_cast<char>(bad[i] ^ 0xff);
    Dedup c{10, "clicks"};
    try {
      c.read_checkpoint({bad, {}});
    } catch (const fl::error& e) {
      CHECK((e.code() == fl::errc::checkpoint_corrupt || e.code() == fl::errc::checkpoint_mismatch));
    }
  }
}

TEST_CASE("R-DEDUP-6: a checkpoint of another delay is a mismatch") {
  Dedup a{10, "clicks"};
  a.process(std::vector<Click>{{1, "s", 5}});
  Dedup b{20, "clicks"};
  const fl::error e = flowtest::error_of([&] { b.read_checkpoint({snapshot_of(a), {}}); });
  CHECK(e.code() == fl::errc::checkpoint_mismatch);
  CHECK(e.flow() == "clicks");
  CHECK(b.state_size() == 0);
}

TEST_CASE("R-DEDUP-6: a delta's size does not depend on the state's size") {
  std::vector<std::size_t> sizes;
  for (std::int64_t keys : {10, 100000}) {
    Dedup d{1000000, "clicks"};
    std::vector<Click> big;
    for (std::int64_t i = 0; i < keys; ++i) big.push_back({1000000 + i, "s", 100});
    d.process(big);
    (void)delta_of(d);
    std::vector<Click> ten;
    for (std::int64_t i = 0; i < 10; ++i) ten.push_back({i, "s", 200});
    d.process(ten);
    CHECK(d.state_size() == static_cast<std::size_t>(keys + 10));
    sizes.push_back(delta_of(d).size());
  }
  CHECK(sizes[0] == sizes[1]);
}

TEST_CASE("R-DEDUP-6: a snapshot taken by hand restores, and deltas continue from it") {
  Dedup a{10, "clicks"};
  a.process(std::vector<Click>{{1, "s", 5}, {2, "t", 9}});
  const std::string snapshot = fl::checkpoint_snapshot(a);
  CHECK(snapshot == flowtest::snapshot_of(a));
  Dedup b{10, "clicks"};
  b.read_checkpoint(fl::checkpoint_blobs::of_snapshot(snapshot));
  CHECK(state_of(b) == state_of(a));
  const std::vector<Click> next{{3, "u", 12}, {1, "s", 13}, {2, "t", 2}};
  CHECK(b.process(next) == a.process(next));
  Dedup c{10, "clicks"};
  c.read_checkpoint({snapshot, {delta_of(b)}});
  CHECK(state_of(c) == state_of(a));
}

}  // namespace ops_dedup_checkpoint
