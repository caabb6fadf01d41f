// Reopen semantics of AUTO CDC (SCD1 with deletes, tombstones and
// truncates; SCD2) and AUTO CDC FROM SNAPSHOT (SCD1, SCD2) on each durable
// configuration: every run of suite.hpp (memory; durable; durable reopened
// between every two batches) gives the rows the rules say (R-CDC-1..4,
// R-CDC-8), equal to the memory run's. Randomised over seeds and batch
// splits.
#include <doctest/doctest.h>

#include <flowlib/flowlib.hpp>
#include <flowlib/pipeline.hpp>
#include <flowlib/source/memory.hpp>
#include <flowlib/source/snapshot.hpp>

#include <storage/durable/suite.hpp>
#include <support/auto_cdc_model.hpp>
#include <support/durable_configs.hpp>
#include <support/rows.hpp>

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace storage_durable_cdc {

using namespace storage_durable_suite;
using flowtest::Item;
using flowtest::ItemHistory;

using Snap = fl::Snapshot<Item, std::int64_t>;
using SnapScd1 = fl::AutoCdcFromSnapshot<fl::Key<&Item::k>, fl::Scd1>;
using SnapScd2 = fl::AutoCdcFromSnapshot<fl::Key<&Item::k>, fl::Scd2<>>;

template <class S>
struct cdc_tables {
  fl::StreamingTable<model::Row, S> scd1{"users_scd1"};
  fl::StreamingTable<model::Version, S> scd2{"users_scd2"};
};

template <class S>
struct snapshot_tables {
  fl::StreamingTable<Item, S> scd1{"items"};
  fl::StreamingTable<ItemHistory, S> scd2{"items_history"};
};

/// `changes` out of order, then all of them again in another order: late
/// changes and identical redeliveries (R-CDC-1).
std::vector<model::Change> twice_shuffled(const std::vector<model::Change>& changes, std::mt19937& rng) {
  std::vector<model::Change> feed = changes, again = changes;
  std::shuffle(feed.begin(), feed.end(), rng);
  std::shuffle(again.begin(), again.end(), rng);
  feed.insert(feed.end(), again.begin(), again.end());
  return feed;
}

TEST_CASE_TEMPLATE("R-DURABLE-1, R-DURABLE-6 (FileStorage), R-CDC-1, R-CDC-2, R-CDC-3, R-CDC-4: AUTO CDC SCD1 (deletes, tombstones, truncates) and SCD2 (history) on a durable configuration, with and without reopening, equal to the memory run",
                   Config, FLOWTEST_DURABLE_CONFIGS) {
  for (unsigned seed = 1; seed <= 3 * seeds; ++seed) {
    std::mt19937 rng(200 + seed);
    const std::vector<model::Change> scd1_changes = model::random_feed(rng, true);
    const std::vector<model::Change> scd2_changes = model::random_feed(rng, false);
    const auto feed1 = twice_shuffled(scd1_changes, rng);
    const auto feed2 = twice_shuffled(scd2_changes, rng);
    const auto b1 = split(feed1, rng, 10);
    const auto b2 = split(feed2, rng, b1.size());
    const auto want1 = model::reference_scd1(scd1_changes, false);
    const auto want2 = model::reference_scd2(scd2_changes, true, false);
    struct sources {
      fl::MemorySource<model::Change> scd1{"changes1"};
      fl::MemorySource<model::Change> scd2{"changes2"};
    };
    INFO("SCD1 changes: " << scd1_changes);
    INFO("SCD2 changes: " << scd2_changes);
    all_runs<Config, cdc_tables, sources>(
        seed, b1.size(),
        [](fl::Pipeline& p, auto& t, sources& s) {
          p.flow("scd1").from(s.scd1).into(t.scd1, model::Scd1{"scd1"});
          p.flow("scd2").from(s.scd2).into(t.scd2, model::Scd2{"scd2"});
        },
        [&](std::size_t i, sources& s) {
          s.scd1.append(b1[i]);
          for (std::size_t j = i; j < b2.size() && (j == i || i + 1 == b1.size()); ++j) s.scd2.append(b2[j]);
        },
        [](auto& t) { return std::pair(sorted(t.scd1.sorted_rows()), sorted(t.scd2.sorted_rows())); },
        [&](const auto& got) {
          CHECK(got.first == want1);
          CHECK(got.second == want2);
        });
  }
}

/// AUTO CDC FROM SNAPSHOT's model: SCD1 is the last snapshot; SCD2 walks the
/// snapshots in version order, opening a version when a key appears or
/// changes and closing it at the version where it changes or disappears.
std::pair<std::vector<Item>, std::vector<ItemHistory>> snapshot_model(const std::vector<Snap>& snaps) {
  std::vector<ItemHistory> scd2;
  std::map<std::int64_t, std::size_t> open;  // key -> index into scd2
  for (const Snap& s : snaps) {
    std::set<std::int64_t> seen;
    for (const Item& it : s.rows) {
      seen.insert(it.k);
      auto o = open.find(it.k);
      if (o != open.end() && scd2[o->second].v == it.v) continue;
      if (o != open.end()) scd2[o->second].end_at = s.version;
      scd2.push_back({it.k, it.v, s.version, std::nullopt});
      open[it.k] = scd2.size() - 1;
    }
    for (auto o = open.begin(); o != open.end();) {
      if (seen.contains(o->first)) {
        ++o;
      } else {
        scd2[o->second].end_at = s.version;
        o = open.erase(o);
      }
    }
  }
  return {sorted(snaps.back().rows), sorted(scd2)};
}

TEST_CASE_TEMPLATE("R-DURABLE-1, R-DURABLE-6 (FileStorage), R-CDC-8: AUTO CDC FROM SNAPSHOT, SCD1 and SCD2, on a durable configuration, with and without reopening, equal to the memory run",
                   Config, FLOWTEST_DURABLE_CONFIGS) {
  for (unsigned seed = 1; seed <= seeds; ++seed) {
    std::mt19937 rng(300 + seed);
    std::uniform_int_distribution<int> pct(0, 99);
    std::vector<Snap> snaps;
    std::int64_t version = 0;
    const int n = 2 + pct(rng) % 8;
    for (int s = 0; s < n; ++s) {
      Snap snap;
      version += 1 + pct(rng) % 5;
      snap.version = version;
      for (std::int64_t k = 0; k < 6; ++k)
        if (pct(rng) < 70) snap.rows.push_back({k, "v" + std::to_string(pct(rng) % 3)});
      snaps.push_back(std::move(snap));
    }
    const auto want = snapshot_model(snaps);
    const auto batches = split(snaps, rng);
    all_runs<Config, snapshot_tables, fl::MemorySource<Snap>>(
        seed, batches.size(),
        [](fl::Pipeline& p, auto& t, fl::MemorySource<Snap>& src) {
          p.flow("items").from(src).into(t.scd1, SnapScd1{"items"});
          p.flow("items_history").from(src).into(t.scd2, SnapScd2{"items_history"});
        },
        [&](std::size_t i, fl::MemorySource<Snap>& src) { src.append(batches[i]); },
        [](auto& t) { return std::pair(sorted(t.scd1.sorted_rows()), sorted(t.scd2.sorted_rows())); },
        [&](const auto& got) { CHECK(got == want); });
  }
}

}  // namespace storage_durable_cdc
