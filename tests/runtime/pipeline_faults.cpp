// Faults at every step of a micro-batch (R-EXACT-1): a hook throws at the
// steps of the protocol, expectation predicates and a foreach-batch sink
// throw inside the batch; after each fault a new Pipeline over the same
// checkpoint, sources and tables updates again. The final tables must equal
// a reference computed without faults: nothing lost, nothing twice. Every
// flow type, dedup of an at-least-once source, quarantine, multi-hop, a ONCE
// backfill and a foreach-batch sink run in one pipeline.
#include <doctest/doctest.h>

#include <flowlib/checkpoint/memory.hpp>
#include <flowlib/flowlib.hpp>
#include <flowlib/pipeline.hpp>
#include <flowlib/source/memory.hpp>
#include <flowlib/source/table.hpp>

#include <support/batches.hpp>
#include <support/rows.hpp>

#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace runtime_pipeline_faults {

namespace fl = flowlib;

using ms_time = std::chrono::sys_time<std::chrono::milliseconds>;

struct Ev {
  std::int64_t id = 0;
  std::int64_t seq = 0;
  ms_time ts{};
  std::string op;
  std::optional<std::string> name;
  std::int64_t amount = 0;
  friend bool operator==(const Ev&, const Ev&) = default;
};
FLOWLIB_SCHEMA(Ev, id, seq, ts, op, name, amount);

struct User1 {
  std::int64_t id = 0;
  std::optional<std::string> name;
  std::int64_t amount = 0;
  friend bool operator==(const User1&, const User1&) = default;
};
FLOWLIB_SCHEMA(User1, id, name, amount);

struct User2 {
  std::int64_t id = 0;
  std::optional<std::string> name;
  std::int64_t amount = 0;
  std::int64_t start_at = 0;
  std::optional<std::int64_t> end_at;
  friend bool operator==(const User2&, const User2&) = default;
};
FLOWLIB_SCHEMA(User2, id, name, amount, (start_at, "__START_AT"), (end_at, "__END_AT"));

using flowtest::Item;

struct IsDelete {
  bool operator()(const Ev& e) const { return e.op == "DELETE"; }
};

using Dedup = fl::DedupWithinWatermark<fl::Key<&Ev::id, &Ev::seq>, fl::EventTime<&Ev::ts>>;
using Current = fl::ReplaceUsing<fl::Key<&Ev::id>, fl::Seq<&Ev::seq>>;
using Scd1 = fl::AutoCdc<fl::Key<&Ev::id>, fl::Seq<&Ev::seq>, fl::Scd1, fl::apply_as_deletes<IsDelete>,
                         fl::except_column_list<"seq", "ts", "op">>;
using Scd2 = fl::AutoCdc<fl::Key<&Ev::id>, fl::Seq<&Ev::seq>, fl::Scd2<>, fl::apply_as_deletes<IsDelete>,
                         fl::except_column_list<"seq", "ts", "op">>;
using Items = fl::AutoCdcFromSnapshot<fl::Key<&Item::k>, fl::Scd1>;
using Snap = fl::Snapshot<Item, std::int64_t>;

struct injected {
  const char* where;
};

// What outlives a Pipeline: sources, tables, the checkpoint, the sink's
// external store.
struct world {
  fl::MemorySource<Ev> feed{"feed", {.partitions = 2, .guarantee = fl::delivery::at_least_once}};
  fl::MemorySource<Snap> snapshots{"snapshots"};
  fl::StreamingTable<Ev> bronze{"bronze"};
  fl::StreamingTable<fl::Quarantined<Ev>> rejected{"rejected"};
  fl::StreamingTable<Ev> current{"current"};
  fl::StreamingTable<User1> users1{"users1"};
  fl::StreamingTable<User2> users2{"users2"};
  fl::StreamingTable<Item> items{"items"};
  fl::ManagedTable<Ev> backfill{"backfill"};
  fl::MemoryCheckpoint checkpoint;
  std::map<std::uint64_t, std::vector<Ev>> exported;  // the sink's external store, by batch id
  std::size_t redelivered_batches = 0;
};

// The fault policy: each hook call throws with probability p; expectation
// predicates and the sink throw with probability q per call.
struct faults {
  std::mt19937_64 rng;
  double p = 0;
  double q = 0;
  std::map<std::string, std::size_t> counts;  // by step (and flow for the hook)
  std::size_t total = 0;
  bool roll(double prob) { return prob > 0 && std::uniform_real_distribution<double>(0, 1)(rng) < prob; }
  void maybe(const std::string& where) {
    if (roll(where.rfind("inside the table", 0) == 0 ? q : p)) {
      ++counts[where];
      ++total;
      throw injected{"fault"};
    }
  }
};

std::unique_ptr<fl::Pipeline> make_pipeline(world& w, faults* f) {
  fl::PipelineOptions opt;
  opt.snapshot_interval = 3;
  opt.retain_batches = 2;
  // One thread: the fault policy's one random sequence, drawn by the hook,
  // an expectation and the sink, then decides the same faults for a seed on
  // every run (the coverage check below relies on it). tests/threads
  // injects faults into updates that run flows at the same time.
  opt.threads = 1;
  if (f != nullptr) {
    opt.fault_hook = [f](fl::fault_point at, std::string_view flow, std::uint64_t) {
      f->maybe(std::string(fl::to_string(at)) + " / " + std::string(flow));
    };
  }
  auto p = std::make_unique<fl::Pipeline>("faults", w.checkpoint, std::move(opt));
  p->flow("ingest")
      .from(w.feed)
      .through(Dedup{std::chrono::seconds(30), "dedup"})
      .quarantine(w.rejected, fl::expectations(fl::expect_or_quarantine(
                                  "non_negative", [](const Ev& e) { return e.amount >= 0; })))
      .expect(fl::expectations(
          fl::expect_or_drop("has_name", [](const Ev& e) { return e.op == "DELETE" || e.name.has_value(); }),
          fl::expect("inside_expectation", [f](const Ev&) {
            if (f != nullptr) f->maybe("inside the table write (an expectation throws)");
            return true;
          })))
      .max_rows_per_batch(13)
      .into(w.bronze, fl::Append{"ingest"});
  p->flow("current").from(fl::TableSource{w.bronze}).max_rows_per_batch(9).into(w.current, Current{"current"});
  p->flow("users1").from(fl::TableSource{w.bronze}).max_rows_per_batch(11).into(w.users1, Scd1{"users1"});
  p->flow("users2").from(fl::TableSource{w.bronze}).max_rows_per_batch(17).into(w.users2, Scd2{"users2"});
  p->flow("items").from(w.snapshots).max_rows_per_batch(2).into(w.items, Items{"items"});
  p->flow("backfill").from(w.feed).into(w.backfill, fl::Append<fl::Once>{"backfill"});
  p->flow("export")
      .from(w.feed)
      .max_rows_per_batch(20)
      .into(fl::ForeachBatch<Ev>{[&w, f](std::uint64_t id, std::span<const Ev> rows) {
        if (f != nullptr) f->maybe("inside the sink (the callback throws)");
        if (flowtest::record_batch(w.exported, id, rows)) ++w.redelivered_batches;
      }});
  return p;
}

// The feed: chunks of changes with redeliveries, invalid rows and deletes.
struct chunk {
  std::vector<std::pair<std::uint32_t, Ev>> events;  // (partition, event)
  std::vector<Snap> snapshots;
};

std::vector<chunk> make_feed(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<std::uint64_t>(n)); };
  std::vector<chunk> out(6);
  std::int64_t seq = 0;
  std::int64_t version = 0;
  ms_time t{std::chrono::milliseconds(1'700'000'000'000)};
  std::vector<Ev> sent;
  for (auto& c : out) {
    const int n = 10 + pick(30);
    for (int i = 0; i < n; ++i) {
      Ev e;
      if (!sent.empty() && pick(7) == 0) {
        e = sent[sent.size() - 1 - static_cast<std::size_t>(pick(static_cast<int>(std::min<std::size_t>(sent.size(), 8))))];
      } else {
        e.id = pick(12);
        e.seq = ++seq;
        t += std::chrono::milliseconds(500 + pick(4000));
        e.ts = t - std::chrono::milliseconds(pick(3000));
        e.op = pick(8) == 0 ? "DELETE" : "UPSERT";
        if (pick(15) != 0) e.name = "n" + std::to_string(pick(5));
        e.amount = pick(20) == 0 ? -1 : pick(100);
        sent.push_back(e);
      }
      c.events.emplace_back(static_cast<std::uint32_t>(e.id % 2), e);
    }
    for (int s = pick(3); s > 0; --s) {
      Snap snap;
      snap.version = ++version;
      for (int k = 0; k < 6; ++k)
        if (pick(3) != 0) snap.rows.push_back({k, "v" + std::to_string(pick(4))});
      c.snapshots.push_back(std::move(snap));
    }
  }
  return out;
}

void feed_chunk(world& w, const chunk& c) {
  for (const auto& [part, e] : c.events) w.feed.append_to(part, e);
  for (const auto& s : c.snapshots) w.snapshots.append(s);
}

// Runs the whole feed: a chunk, then updates until one succeeds.
void run(world& w, const std::vector<chunk>& feed, faults* f, std::size_t& restarts,
         std::size_t& retries) {
  auto p = make_pipeline(w, f);
  for (const auto& c : feed) {
    feed_chunk(w, c);
    for (;;) {
      try {
        p->update();
        break;
      } catch (const injected&) {
        // Half the time the same pipeline updates again (it undid the batch
        // and reloaded the flow's state), half the time a new one does, as
        // after a crash.
        if (f->roll(0.5)) {
          ++retries;
        } else {
          ++restarts;
          p.reset();
          p = make_pipeline(w, f);
        }
      }
    }
  }
}

template <class T>
void check_same(const T& a, const T& b, const char* what) {
  INFO(what);
  CHECK(a.sorted_rows() == b.sorted_rows());
}

TEST_CASE("R-EXACT-1: a fault at any step of a micro-batch loses nothing and applies nothing twice") {
  std::size_t total_faults = 0;
  std::size_t total_restarts = 0;
  std::size_t total_retries = 0;
  std::size_t redelivered = 0;
  std::map<std::string, std::size_t> by_step;
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    CAPTURE(seed);
    const auto feed = make_feed(seed);
    world ref;
    std::size_t none = 0;
    std::size_t none_retried = 0;
    run(ref, feed, nullptr, none, none_retried);
    REQUIRE(none + none_retried == 0);
    REQUIRE(ref.bronze.size() > 0);

    world w;
    faults f{std::mt19937_64(seed * 7919), 0.06, 0.01, {}, 0};
    std::size_t restarts = 0;
    std::size_t retries = 0;
    run(w, feed, &f, restarts, retries);

    check_same(w.bronze, ref.bronze, "bronze (append after dedup, quarantine, expectations)");
    check_same(w.rejected, ref.rejected, "quarantine table");
    check_same(w.current, ref.current, "REPLACE USING over a TableSource");
    check_same(w.users1, ref.users1, "AUTO CDC SCD1 over a TableSource");
    check_same(w.users2, ref.users2, "AUTO CDC SCD2 over a TableSource");
    check_same(w.items, ref.items, "AUTO CDC FROM SNAPSHOT");
    check_same(w.backfill, ref.backfill, "ONCE append");
    CHECK(w.exported == ref.exported);

    // R-EXACT-2: an update with no new data changes nothing.
    auto p = make_pipeline(w, nullptr);
    const auto s = p->update();
    CHECK(s.batches() == 0);
    check_same(w.current, ref.current, "after an update with no new data");

    total_faults += f.total;
    total_restarts += restarts;
    total_retries += retries;
    redelivered += w.redelivered_batches;
    for (const auto& [k, v] : f.counts) by_step[k] += v;
  }
  std::printf("pipeline_fault_test: %zu faults injected; after %zu of them a new Pipeline "
              "updated again, after %zu the same one; %zu foreach batches delivered again with "
              "the same id and rows\n",
              total_faults, total_restarts, total_retries, redelivered);
  for (const auto& [k, v] : by_step) std::printf("  %5zu  %s\n", v, k.c_str());
  CHECK(total_faults >= 500);
  // Every step of the protocol was hit for every flow that has it.
  for (const char* step : {"positions_recorded", "before_table_write", "between_table_writes",
                           "after_table_write", "state_saving", "before_commit", "after_commit"}) {
    for (const char* flow : {"ingest", "current", "users1", "users2", "items"}) {
      CAPTURE(step);
      CAPTURE(flow);
      CHECK(by_step[std::string(step) + " / " + flow] > 0);
    }
  }
  CHECK(by_step["inside the table write (an expectation throws)"] > 0);
  CHECK(by_step["inside the sink (the callback throws)"] > 0);
}

}  // namespace runtime_pipeline_faults
