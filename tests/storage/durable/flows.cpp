// Reopen semantics of append (fan-in, ONCE), REPLACE USING (from a source and
// through a TableSource), dedup within a watermark and expectations
// (quarantine, drop) on each durable configuration: every run of suite.hpp
// (memory; durable; durable reopened between every two batches) gives the
// rows the rules say (R-TABLE-2, R-USING-4, R-DEDUP-3, R-EXPECT-1,
// R-EXPECT-2), equal to the memory run's. Randomised over seeds and batch
// splits.
#include <doctest/doctest.h>

#include <flowlib/flowlib.hpp>
#include <flowlib/pipeline.hpp>
#include <flowlib/source/memory.hpp>
#include <flowlib/source/table.hpp>

#include <storage/durable/suite.hpp>
#include <support/durable_configs.hpp>
#include <support/reference_model.hpp>
#include <support/rows.hpp>

#include <chrono>
#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace storage_durable_flows {

using namespace storage_durable_suite;

using Replace = fl::ReplaceUsing<fl::Key<&Rec::k>, fl::Seq<&Rec::seq>>;
using Dedup = fl::DedupWithinWatermark<fl::Key<&Rec::k, &Rec::seq>, fl::EventTime<&Rec::at>>;

template <class S>
struct append_tables {
  fl::StreamingTable<Rec, S> events{"events"};
  fl::ManagedTable<Rec, S> backfill{"backfill"};
};

template <class S>
struct replace_tables {
  fl::StreamingTable<Rec, S> current{"current"};
  fl::StreamingTable<Rec, S> bronze{"bronze"};
  fl::StreamingTable<Rec, S> silver{"silver"};
};

template <class S>
struct dedup_tables {
  fl::StreamingTable<Rec, S> events{"events"};
};

template <class S>
struct expect_tables {
  fl::StreamingTable<Rec, S> measured{"measured"};
  fl::StreamingTable<fl::Quarantined<Rec>, S> rejected{"rejected"};
  fl::StreamingTable<Rec, S> flagged{"flagged"};
};

TEST_CASE_TEMPLATE("R-DURABLE-1, R-DURABLE-6 (FileStorage), R-TABLE-2: append, fan-in of two sources and ONCE give the same rows on a durable configuration, with and without reopening, equal to the memory run",
                   Config, FLOWTEST_DURABLE_CONFIGS) {
  struct sources {
    fl::MemorySource<Rec> a{"a"};
    fl::MemorySource<Rec> b{"b"};
  };
  for (unsigned seed = 1; seed <= seeds; ++seed) {
    std::mt19937 rng(seed);
    const auto a = split(random_recs(rng, 30), rng);
    const auto b = split(random_recs(rng, 20), rng, a.size());
    std::vector<Rec> all;
    for (const auto& c : a) all.insert(all.end(), c.begin(), c.end());
    for (const auto& c : b) all.insert(all.end(), c.begin(), c.end());
    all_runs<Config, append_tables, sources>(
        seed, a.size(),
        [](fl::Pipeline& p, auto& t, sources& s) {
          p.flow("from_a").from(s.a).into(t.events, fl::Append{"from_a"});
          p.flow("from_b").from(s.b).into(t.events, fl::Append{"from_b"});
          p.flow("backfill").from(s.a).into(t.backfill, fl::AppendOnce<>{"backfill"});
        },
        [&](std::size_t i, sources& s) {
          s.a.append(a[i]);
          for (std::size_t j = i; j < b.size() && (j == i || i + 1 == a.size()); ++j) s.b.append(b[j]);
        },
        [](auto& t) { return std::pair(sorted(t.events.sorted_rows()), sorted(t.backfill.sorted_rows())); },
        [&](const auto& got) {
          CHECK(got.first == sorted(all));    // every row of both sources, once
          CHECK(got.second == sorted(a[0]));  // ONCE: what the first update saw, never again
        });
  }
}

TEST_CASE_TEMPLATE("R-DURABLE-1, R-DURABLE-6 (FileStorage), R-USING-4: REPLACE USING from a source and through a TableSource (multi-hop) on a durable configuration, with and without reopening, equal to the memory run",
                   Config, FLOWTEST_DURABLE_CONFIGS) {
  for (unsigned seed = 1; seed <= seeds; ++seed) {
    std::mt19937 rng(100 + seed);
    const random_input in(rng, 40);
    const std::vector<Rec> want = flowtest::final_state<fl::Key<&Rec::k>, fl::Seq<&Rec::seq>>(in.rows);  // R-USING-4
    all_runs<Config, replace_tables, fl::MemorySource<Rec>>(
        seed, in.batches.size(),
        [](fl::Pipeline& p, auto& t, fl::MemorySource<Rec>& src) {
          p.flow("current").from(src).into(t.current, Replace{"current"});
          p.flow("bronze").from(src).into(t.bronze, fl::Append{"bronze"});
          p.flow("silver").from(fl::TableSource{t.bronze}).into(t.silver, Replace{"silver"});
        },
        [&](std::size_t i, fl::MemorySource<Rec>& src) { src.append(in.batches[i]); },
        [](auto& t) {
          return std::tuple(sorted(t.current.sorted_rows()), sorted(t.silver.sorted_rows()),
                            sorted(t.bronze.sorted_rows()));
        },
        [&](const auto& got) {
          CHECK(std::get<0>(got) == want);
          CHECK(std::get<1>(got) == want);  // the append log survived every reopen
          CHECK(std::get<2>(got) == sorted(in.rows));
        });
  }
}

TEST_CASE_TEMPLATE("R-DURABLE-1, R-DURABLE-6 (FileStorage), R-DEDUP-3: dedup within a watermark in front of an append, on a durable configuration, with and without reopening, equal to the memory run (the dedup state survives)",
                   Config, FLOWTEST_DURABLE_CONFIGS) {
  struct sources {
    fl::MemorySource<Rec> src{"src", {.partitions = 1, .guarantee = fl::delivery::at_least_once}};
  };
  for (unsigned seed = 1; seed <= seeds; ++seed) {
    std::mt19937 rng(400 + seed);
    std::uniform_int_distribution<int> pct(0, 99);
    const std::vector<Rec> fresh = random_recs(rng, 40);
    // Each record once, in order, with redeliveries of recent ones (their
    // event times are well within the hour the dedup remembers).
    std::vector<Rec> feed;
    std::set<std::pair<std::int64_t, std::int64_t>> seen;
    std::vector<Rec> want;
    for (const Rec& r : fresh) {
      feed.push_back(r);
      if (seen.insert({r.k, r.seq}).second) want.push_back(r);
      if (pct(rng) < 30) feed.push_back(feed[feed.size() - 1 - static_cast<std::size_t>(pct(rng)) % feed.size()]);
    }
    const auto batches = split(feed, rng, 10);
    all_runs<Config, dedup_tables, sources>(
        seed, batches.size(),
        [](fl::Pipeline& p, auto& t, sources& s) {
          p.flow("events").from(s.src).through(Dedup{std::chrono::hours(1), "dedup"}).into(t.events, fl::Append{"events"});
        },
        [&](std::size_t i, sources& s) { s.src.append(batches[i]); },
        [](auto& t) { return sorted(t.events.sorted_rows()); },
        [&](const auto& got) { CHECK(got == sorted(want)); });  // each identity once: the first delivery
  }
}

TEST_CASE_TEMPLATE("R-DURABLE-1, R-DURABLE-6 (FileStorage), R-EXPECT-1, R-EXPECT-2: expectations on a durable configuration (rows quarantined into a durable table with their flow, expectation and batch; rows dropped), with and without reopening, equal to the memory run",
                   Config, FLOWTEST_DURABLE_CONFIGS) {
  for (unsigned seed = 1; seed <= seeds; ++seed) {
    std::mt19937 rng(500 + seed);
    const random_input in(rng, 40);
    std::vector<Rec> with_x, without_x, flagged;
    for (const Rec& r : in.rows) {
      (r.x ? with_x : without_x).push_back(r);
      if (r.flag) flagged.push_back(r);
    }
    all_runs<Config, expect_tables, fl::MemorySource<Rec>>(
        seed, in.batches.size(),
        [](fl::Pipeline& p, auto& t, fl::MemorySource<Rec>& src) {
          p.flow("measured")
              .from(src)
              .quarantine(t.rejected, fl::expectations(fl::expect_or_quarantine(
                                          "has_x", [](const Rec& r) { return r.x.has_value(); })))
              .into(t.measured, fl::Append{"measured"});
          p.flow("flagged")
              .from(src)
              .expect(fl::expectations(fl::expect_or_drop("flag", [](const Rec& r) { return r.flag; })))
              .into(t.flagged, fl::Append{"flagged"});
        },
        [&](std::size_t i, fl::MemorySource<Rec>& src) { src.append(in.batches[i]); },
        // The quarantined rows with their batch ids: equal in every run.
        [](auto& t) {
          return std::tuple(sorted(t.measured.sorted_rows()), sorted(t.flagged.sorted_rows()),
                            t.rejected.sorted_rows());
        },
        [&](const auto& got) {
          CHECK(std::get<0>(got) == sorted(with_x));
          CHECK(std::get<1>(got) == sorted(flagged));
          std::vector<Rec> quarantined;
          for (const auto& q : std::get<2>(got)) {
            CHECK(q.flow == "measured");
            CHECK(q.expectation == "has_x");
            quarantined.push_back(q.row);
          }
          CHECK(sorted(quarantined) == sorted(without_x));
        });
  }
}

}  // namespace storage_durable_flows
