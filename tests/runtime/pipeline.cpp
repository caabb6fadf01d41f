// Pipeline: declaration checks, updates in micro-batches, restarts over the
// same checkpoint and tables, full refresh, ONCE, operators committing with
// their flows, quarantine, foreach-batch ids (R-EXACT-*, R-TABLE-1/2,
// R-USING-9).
#include <doctest/doctest.h>

#include <flowlib/checkpoint/memory.hpp>
#include <flowlib/flowlib.hpp>
#include <flowlib/pipeline.hpp>
#include <flowlib/source/memory.hpp>
#include <flowlib/source/table.hpp>

#include <support/errors.hpp>

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace runtime_pipeline {

namespace fl = flowlib;
using flowtest::contains;
using flowtest::message_of;

using ms_time = std::chrono::sys_time<std::chrono::milliseconds>;

struct Booking {
  std::int64_t id = 0;
  std::string status;
  std::int64_t amount = 0;
  std::int64_t seq = 0;
  ms_time at{};
  friend bool operator==(const Booking&, const Booking&) = default;
};
FLOWLIB_SCHEMA(Booking, id, status, amount, seq, at);

using Current = fl::ReplaceUsing<fl::Key<&Booking::id>, fl::Seq<&Booking::seq>>;
using Dedup = fl::DedupWithinWatermark<fl::Key<&Booking::id, &Booking::seq>, fl::EventTime<&Booking::at>>;

const ms_time t0{std::chrono::milliseconds(1'700'000'000'000)};

Booking b(std::int64_t id, std::string status, std::int64_t amount, std::int64_t seq, int sec = 0) {
  return Booking{id, std::move(status), amount, seq, t0 + std::chrono::seconds(sec)};
}

std::vector<Booking> rows_of(const fl::StreamingTable<Booking>& t) { return t.sorted_rows(); }

TEST_CASE("Pipeline: an update reads everything available in micro-batches; a second update with no new data changes nothing (R-EXACT-2)") {
  fl::MemorySource<Booking> feed{"feed"};
  fl::StreamingTable<Booking> current{"current"};
  fl::MemoryCheckpoint ckpt;
  fl::Pipeline p{"bookings", ckpt};
  p.flow("current").from(feed).max_rows_per_batch(2).into(current, Current{"current"});

  for (int i = 0; i < 5; ++i) feed.append(b(i % 3, "s" + std::to_string(i), 10, i));
  std::vector<fl::FlowProgress> progress;
  fl::UpdateOptions opt;
  opt.on_progress = [&](const fl::FlowProgress& fp) { progress.push_back(fp); };
  const auto s = p.update(opt);
  REQUIRE(s.flows.size() == 1);
  CHECK(s.flows[0].batches == 3);  // 2 + 2 + 1 rows
  CHECK(s.flows[0].input_rows == 5);
  REQUIRE(progress.size() == 3);
  CHECK(progress.back().rows == 5);
  CHECK(progress.back().rows_planned == 5);
  CHECK(progress[0].batches == 1);
  CHECK(current.sorted_rows() == std::vector<Booking>{b(0, "s3", 10, 3), b(1, "s4", 10, 4), b(2, "s2", 10, 2)});

  const auto records = ckpt.record_count();
  const auto again = p.update();
  CHECK(again.batches() == 0);
  CHECK(ckpt.record_count() == records);  // nothing written
  CHECK(current.sorted_rows() == std::vector<Booking>{b(0, "s3", 10, 3), b(1, "s4", 10, 4), b(2, "s2", 10, 2)});
}

TEST_CASE("Pipeline: a new Pipeline over the same checkpoint and tables resumes after the last commit (R-EXACT-1)") {
  fl::MemorySource<Booking> feed{"feed"};
  fl::StreamingTable<Booking> current{"current"};
  fl::StreamingTable<Booking> log{"log"};
  fl::MemoryCheckpoint ckpt;
  auto declare = [&](fl::Pipeline& p) {
    p.flow("current").from(feed).into(current, Current{"current"});
    p.flow("log").from(feed).into(log, fl::Append{"log"});
  };
  {
    fl::Pipeline p{"bookings", ckpt};
    declare(p);
    feed.append(b(1, "new", 5, 1));
    feed.append(b(2, "new", 7, 1));
    p.update();
  }
  feed.append(b(1, "paid", 5, 2));
  feed.append(b(2, "late", 7, 0));  // older than the stored sequence: ignored (R-USING-2)
  fl::Pipeline p{"bookings", ckpt};
  declare(p);
  const auto s = p.update();
  CHECK(s.flow("current")->input_rows == 2);  // only the new rows
  CHECK(rows_of(current) == std::vector<Booking>{b(1, "paid", 5, 2), b(2, "new", 7, 1)});
  CHECK(log.size() == 4);  // each row appended once
}

TEST_CASE("Pipeline: a restarted source holding fewer records than the checkpoint planned or committed is refused, nothing run (R-EXACT-6)") {
  fl::StreamingTable<Booking> current{"current"};
  fl::MemoryCheckpoint ckpt;
  const auto refused = [](fl::Pipeline& p) {
    try {
      p.update();
      return std::string("accepted");
    } catch (const fl::error& e) {
      CHECK(e.code() == fl::errc::checkpoint_mismatch);
      CHECK(e.flow() == "current");
      return std::string(e.what());
    }
  };
  {  // First run: 3 records committed, 2 more planned, then a fault.
    fl::MemorySource<Booking> feed{"feed"};
    for (int i = 0; i < 5; ++i) feed.append(b(i, "new", 10, 1));
    fl::PipelineOptions po;
    po.fault_hook = [](fl::fault_point at, std::string_view, std::uint64_t batch) {
      if (batch == 1 && at == fl::fault_point::before_table_write) throw std::runtime_error("crash");
    };
    fl::Pipeline p{"bookings", ckpt, po};
    p.flow("current").from(feed).max_rows_per_batch(3).into(current, Current{"current"});
    CHECK_THROWS_AS(p.update(), std::runtime_error);
    CHECK(current.size() == 3);
  }
  const auto records = ckpt.record_count();
  for (int held : {0, 2, 4}) {  // fewer than committed (3), or than planned (5)
    CAPTURE(held);
    fl::MemorySource<Booking> feed{"feed"};
    for (int i = 0; i < held; ++i) feed.append(b(i, "new", 10, 1));
    fl::Pipeline p{"bookings", ckpt};
    p.flow("current").from(feed).max_rows_per_batch(3).into(current, Current{"current"});
    const std::string what = refused(p);
    CHECK(what.find("CHECKPOINT_MISMATCH") != std::string::npos);
    CHECK(what.find("source 'feed' holds " + std::to_string(held) + " records") != std::string::npos);
    CHECK(what.find(held < 3 ? "committed" : "planned") != std::string::npos);
    CHECK(current.size() == 3);
    CHECK(ckpt.record_count() == records);  // no position moved
  }
  // The same five records again: the planned batch replays, then new ones.
  fl::MemorySource<Booking> feed{"feed"};
  for (int i = 0; i < 5; ++i) feed.append(b(i, "new", 10, 1));
  feed.append(b(5, "new", 10, 1));
  fl::Pipeline p{"bookings", ckpt};
  p.flow("current").from(feed).max_rows_per_batch(3).into(current, Current{"current"});
  const auto s = p.update();
  CHECK(s.flow("current")->input_rows == 3);  // 2 planned + 1 new
  CHECK(current.size() == 6);
}

TEST_CASE("Pipeline: declaration errors carry the catalog's codes (R-TABLE-1, R-USING-9)") {
  fl::MemorySource<Booking> feed{"feed"};
  fl::StreamingTable<Booking> current{"current"};
  fl::StreamingTable<Booking> other{"current"};
  fl::ManagedTable<Booking> managed{"current"};
  fl::MemoryCheckpoint ckpt;
  fl::Pipeline p{"bookings", ckpt};
  p.flow("a").from(feed).into(current, Current{"a"});
  const auto message = [](auto&& f) { return std::string(flowtest::error_of(f).what()); };
  CHECK(contains(message([&] { p.flow("a").from(feed).into(current, fl::Append{"a"}); }), "FLOW_ALREADY_EXISTS"));
  CHECK(contains(message([&] { p.flow("b").from(feed).into(other, fl::Append{"b"}); }), "TABLE_ALREADY_EXISTS"));
  CHECK(contains(message([&] { p.flow("c").from(feed).into(current, fl::Append{"c"}); }), "R-USING-9"));
  CHECK(contains(message([&] { p.flow("d").from(feed).into(managed, fl::Append{"d"}); }),
                 "CANNOT_SWITCH_STREAMING_TABLE_TO_MANAGED_TABLE"));
  CHECK(p.catalog().flows_of("current").size() == 1);
}

TEST_CASE("Pipeline: a checkpoint of another pipeline or another flow definition is refused and left as it was (R-EXACT-1)") {
  fl::MemorySource<Booking> feed{"feed"};
  fl::StreamingTable<Booking> current{"current"};
  fl::StreamingTable<Booking> log{"log"};
  fl::MemoryCheckpoint ckpt;
  {
    fl::Pipeline p{"bookings", ckpt};
    p.flow("current").from(feed).into(current, Current{"current"});
    feed.append(b(1, "x", 1, 1));
    p.update();
  }
  const auto before = ckpt.byte_size();
  const auto records = ckpt.record_count();
  {
    fl::Pipeline q{"other", ckpt};
    q.flow("current").from(feed).into(current, Current{"current"});
    CHECK(contains(message_of(fl::errc::checkpoint_mismatch, [&] { q.update(); }), "belongs to pipeline 'bookings'"));
  }
  {
    fl::Pipeline q{"bookings", ckpt};
    q.flow("current").from(feed).into(log, fl::Append{"current"});  // same name, another definition
    CHECK(contains(message_of(fl::errc::checkpoint_mismatch, [&] { q.update(); }), "another definition"));
  }
  CHECK(ckpt.byte_size() == before);
  CHECK(ckpt.record_count() == records);
  CHECK(log.empty());
}

TEST_CASE("Pipeline: an operator's state commits with its flow: a failed batch leaves no dedup trace (R-EXACT-1, R-DEDUP-6)") {
  // A new user's trap: dedup, then an expectation fails the batch. Applied by
  // hand, the dedup state has advanced and the repaired retry emits nothing.
  // In a pipeline the dedup state is rolled back with the batch.
  fl::MemorySource<Booking> feed{"feed"};
  fl::StreamingTable<Booking> current{"current"};
  fl::MemoryCheckpoint ckpt;
  bool strict = true;
  fl::Pipeline p{"bookings", ckpt};
  p.flow("current")
      .from(feed)
      .through(Dedup{std::chrono::minutes(5), "dedup"})
      .expect(fl::expectations(fl::expect("amount_ok", [&](const Booking& x) { return !strict || x.amount > 0; },
                                          fl::on_violation::fail)))
      .into(current, Current{"current"});
  feed.append(b(1, "new", 10, 1));
  feed.append(b(2, "new", -1, 1));
  CHECK_THROWS_AS(p.update(), fl::error);
  CHECK(current.empty());
  strict = false;  // the repair
  const auto s = p.update();
  CHECK(s.flows[0].input_rows == 2);  // the same rows, read again
  CHECK(current.size() == 2);          // and emitted by dedup again
}

TEST_CASE("Pipeline: full refresh clears the table, its flows' state and checkpoint; reset_allowed = false refuses (R-EXACT-5, R-TABLE-2)") {
  fl::MemorySource<Booking> feed{"feed"};
  fl::StreamingTable<Booking> current{"current"};
  fl::ManagedTable<Booking> backfill{"backfill"};
  fl::StreamingTable<Booking> locked{"locked", fl::table_options<Booking>().reset_allowed(false)};
  fl::MemoryCheckpoint ckpt;
  fl::Pipeline p{"bookings", ckpt};
  p.flow("current").from(feed).into(current, Current{"current"});
  p.flow("backfill").from(feed).into(backfill, fl::Append<fl::Once>{"backfill"});
  p.flow("locked").from(feed).into(locked, fl::Append{"locked"});
  feed.append(b(1, "a", 1, 5));
  p.update();
  feed.append(b(1, "b", 1, 3));  // lower sequence: ignored while the key is known
  p.update();
  CHECK(rows_of(current) == std::vector<Booking>{b(1, "a", 1, 5)});
  CHECK(backfill.size() == 1);  // ONCE: the second update skipped it
  CHECK(locked.size() == 2);

  p.full_refresh(current);
  CHECK(current.empty());
  p.update();  // reprocesses from the start
  CHECK(rows_of(current) == std::vector<Booking>{b(1, "a", 1, 5)});

  p.full_refresh(backfill);
  p.update();
  CHECK(backfill.size() == 2);  // ONCE ran again, over everything available

  CHECK(contains(flowtest::error_of([&] { p.full_refresh(locked); }).what(), "reset_allowed"));
  CHECK(locked.size() == 2);
  CHECK(p.update().batches() == 0);  // and its flow still knows where it was
}

TEST_CASE("Pipeline: quarantine moves violating rows to a table with the expectation and batch id (R-EXPECT-1, R-EXPECT-2)") {
  fl::MemorySource<Booking> feed{"feed"};
  fl::StreamingTable<Booking> current{"current"};
  fl::StreamingTable<fl::Quarantined<Booking>> rejected{"rejected"};
  fl::MemoryCheckpoint ckpt;
  fl::Pipeline p{"bookings", ckpt};
  p.flow("current")
      .from(feed)
      .quarantine(rejected, fl::expectations(fl::expect_or_quarantine(
                                "positive_amount", [](const Booking& x) { return x.amount > 0; })))
      .max_rows_per_batch(2)
      .into(current, Current{"current"});
  feed.append(b(1, "ok", 5, 1));
  feed.append(b(2, "bad", -5, 1));
  feed.append(b(3, "bad", 0, 1));
  const auto s = p.update();
  CHECK(s.flows[0].quarantined_rows == 2);
  CHECK(current.size() == 1);
  const auto q = rejected.sorted_rows();
  REQUIRE(q.size() == 2);
  CHECK(q[0].flow == "current");
  CHECK(q[0].expectation == "positive_amount");
  CHECK(q[0].batch_id == 0);
  CHECK(q[0].row == b(2, "bad", -5, 1));
  CHECK(q[1].batch_id == 1);
  CHECK(q[1].row == b(3, "bad", 0, 1));
}

TEST_CASE("Pipeline: a foreach-batch sink gets the same batch id and rows on a retry (R-EXACT-4)") {
  fl::MemorySource<Booking> feed{"feed"};
  fl::MemoryCheckpoint ckpt;
  std::vector<std::pair<std::uint64_t, std::vector<Booking>>> calls;
  bool fail_next = true;
  fl::Pipeline p{"export", ckpt};
  p.flow("export").from(feed).max_rows_per_batch(2).into(
      fl::ForeachBatch<Booking>{[&](std::uint64_t id, std::span<const Booking> rows) {
        calls.emplace_back(id, std::vector<Booking>(rows.begin(), rows.end()));
        if (id == 1 && fail_next) {
          fail_next = false;
          throw std::runtime_error("the external system is down");
        }
      }});
  for (int i = 0; i < 4; ++i) feed.append(b(i, "x", 1, i));
  CHECK_THROWS_WITH(p.update(), "the external system is down");
  feed.append(b(9, "later", 1, 9));  // arrives before the retry: not in batch 1
  p.update();
  REQUIRE(calls.size() == 4);
  CHECK(calls[1].first == 1);
  CHECK(calls[2].first == 1);
  CHECK(calls[1].second == calls[2].second);
  CHECK(calls[3].first == 2);
  CHECK(calls[3].second == std::vector<Booking>{b(9, "later", 1, 9)});
}

TEST_CASE("Pipeline: multi-hop through TableSource runs writers before readers (R-EXACT-1)") {
  fl::MemorySource<Booking> feed{"feed"};
  fl::StreamingTable<Booking> bronze{"bronze"};
  fl::StreamingTable<Booking> silver{"silver"};
  fl::StreamingTable<Booking> gold{"gold"};
  fl::MemoryCheckpoint ckpt;
  fl::Pipeline p{"hops", ckpt};
  // Declared readers first: the update still runs bronze -> silver -> gold.
  p.flow("gold").from(fl::TableSource{silver}).into(gold, fl::Append{"gold"});
  p.flow("silver").from(fl::TableSource{bronze}).into(silver, Current{"silver"});
  p.flow("bronze").from(feed).into(bronze, fl::Append{"bronze"});
  feed.append(b(1, "a", 1, 1));
  feed.append(b(1, "b", 1, 2));
  const auto s = p.update();
  CHECK(s.flows[0].flow == "bronze");
  CHECK(s.flows[2].flow == "gold");
  CHECK(rows_of(silver) == std::vector<Booking>{b(1, "b", 1, 2)});
  CHECK(gold.size() == 1);  // silver inserted one row version
  feed.append(b(1, "c", 1, 3));
  p.update();
  CHECK(rows_of(silver) == std::vector<Booking>{b(1, "c", 1, 3)});
  CHECK(rows_of(gold) == std::vector<Booking>{b(1, "b", 1, 2), b(1, "c", 1, 3)});
}

struct Hist {
  std::int64_t id = 0;
  std::string status;
  std::int64_t amount = 0;
  std::int64_t start_at = 0;
  std::optional<std::int64_t> end_at;
  friend bool operator==(const Hist&, const Hist&) = default;
};
FLOWLIB_SCHEMA(Hist, id, status, amount, (start_at, "__START_AT"), (end_at, "__END_AT"));
struct Cur {
  std::int64_t id = 0;
  std::string status;
  std::int64_t amount = 0;
  friend bool operator==(const Cur&, const Cur&) = default;
};
FLOWLIB_SCHEMA(Cur, id, status, amount);

using Cdc1 = fl::AutoCdc<fl::Key<&Booking::id>, fl::Seq<&Booking::seq>, fl::Scd1, fl::except_column_list<"seq", "at">>;
using Cdc2 = fl::AutoCdc<fl::Key<&Booking::id>, fl::Seq<&Booking::seq>, fl::Scd2<>, fl::except_column_list<"seq", "at">>;

// Dedup, then an expectation that fails the first attempt, into `into`:
// the repaired retry must give what a run that never failed gives.
template <class Into>
void dedup_then_failure(Into into) {
  auto run = [&](bool fail_once) {
    fl::MemorySource<Booking> feed{"feed", {.partitions = 1, .guarantee = fl::delivery::at_least_once}};
    fl::MemoryCheckpoint ckpt;
    bool failing = fail_once;
    fl::Pipeline p{"p", ckpt};
    auto result = into(p, feed, [&failing](const Booking& x) { return !failing || x.amount != 13; });
    feed.append(b(1, "a", 1, 1, 0));
    feed.append(b(1, "a", 1, 1, 0));  // a redelivery
    feed.append(b(2, "b", 13, 1, 1));  // fails the first attempt
    feed.append(b(1, "c", 2, 2, 2));
    if (fail_once) {
      CHECK_THROWS_AS(p.update(), fl::error);
      failing = false;
    }
    const auto s = p.update();
    CHECK(s.flows[0].input_rows == 4);
    CHECK(s.flows[0].deduplicated_rows == 1);
    return result();
  };
  CHECK(run(true) == run(false));
}

// dedup_then_failure's flow up to its target: dedup, then the expectation.
auto deduped(fl::Pipeline& p, fl::MemorySource<Booking>& feed, auto pred) {
  return p.flow("f")
      .from(feed)
      .through(Dedup{std::chrono::minutes(5), "dedup"})
      .expect(fl::expectations(fl::expect_or_fail("amount", pred)));
}

// dedup_then_failure into a table of Row by Policy.
template <class Row, class Policy>
void dedup_then_failure_into() {
  dedup_then_failure([](fl::Pipeline& p, fl::MemorySource<Booking>& feed, auto pred) {
    auto t = std::make_shared<fl::StreamingTable<Row>>("t");
    deduped(p, feed, pred).into(*t, Policy{"f"});
    return [t] { return t->sorted_rows(); };
  });
}

TEST_CASE("Pipeline: dedup's state rolls back with a failed batch in front of every flow type (R-EXACT-1, R-DEDUP-6)") {
  SUBCASE("APPEND") { dedup_then_failure_into<Booking, fl::Append<>>(); }
  SUBCASE("REPLACE USING") { dedup_then_failure_into<Booking, Current>(); }
  SUBCASE("AUTO CDC SCD1") { dedup_then_failure_into<Cur, Cdc1>(); }
  SUBCASE("AUTO CDC SCD2") { dedup_then_failure_into<Hist, Cdc2>(); }
  SUBCASE("FOREACH BATCH") {
    dedup_then_failure([](fl::Pipeline& p, fl::MemorySource<Booking>& feed, auto pred) {
      auto got = std::make_shared<std::map<std::uint64_t, std::vector<Booking>>>();
      deduped(p, feed, pred).into(fl::ForeachBatch<Booking>{[got](std::uint64_t id, std::span<const Booking> rows) {
        (*got)[id] = std::vector<Booking>(rows.begin(), rows.end());
      }});
      return [got] { return *got; };
    });
  }
}

TEST_CASE("Pipeline: snapshots are spread over at least a snapshot's worth of deltas, so a commit's cost follows the batch (R-DEDUP-6)") {
  fl::MemorySource<Booking> feed{"feed"};
  fl::StreamingTable<Booking> log{"log"};
  fl::MemoryCheckpoint ckpt;
  const std::string dir = "flows/" + std::string("6c6f67") + "/state/";  // hex("log")
  std::vector<std::uint64_t> snapshot_batches;
  auto declare = [&](fl::Pipeline& p) {
    p.flow("log").from(feed).through(Dedup{std::chrono::hours(24), "dedup"}).max_rows_per_batch(10).into(log, fl::Append{"log"});
  };
  std::int64_t seq = 0;
  {
    fl::Pipeline p{"p", ckpt, {.snapshot_interval = 2}};
    declare(p);
    for (std::uint64_t batch = 0; batch < 60; ++batch) {
      for (int i = 0; i < 10; ++i, ++seq) feed.append(b(seq, "x", 1, seq, static_cast<int>(seq)));
      p.update();
      const std::string name = fl::detail::checkpoint_log::batch_name(batch) + ".1.snapshot";
      if (ckpt.raw(dir + name)) snapshot_batches.push_back(batch);
    }
  }
  // The dedup state grows by 10 identities a batch: each snapshot is larger
  // than the last, and the gaps between snapshots grow with it.
  REQUIRE(snapshot_batches.size() >= 3);
  CHECK(snapshot_batches.front() == 0);
  CHECK(snapshot_batches.size() < 12);  // every 2 batches would be 30
  for (std::size_t i = 2; i < snapshot_batches.size(); ++i) {
    CHECK(snapshot_batches[i] - snapshot_batches[i - 1] >= snapshot_batches[i - 1] - snapshot_batches[i - 2]);
  }
  // A restart restores from the last snapshot and the deltas after it.
  feed.append(b(0, "x", 1, 0, 0));  // a duplicate of the first row
  feed.append(b(seq, "x", 1, seq, static_cast<int>(seq)));
  fl::Pipeline p{"p", ckpt, {.snapshot_interval = 2}};
  declare(p);
  const auto s = p.update();
  CHECK(s.flows[0].input_rows == 2);
  CHECK(s.flows[0].deduplicated_rows == 1);
  CHECK(log.size() == 601);
}

}  // namespace runtime_pipeline
