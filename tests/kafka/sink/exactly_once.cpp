// KafkaSink's exactly-once writes (R-SINK-1) against a model of the topic
// (sink_support.hpp's expected_topic: every record of every delivered
// batch once, in its partition, each partition in batch order):
//   - a failure at every record position of a batch (the fault hook), then
//     a retry by the same sink, or by a new sink (a restarted process);
//   - replays of a batch already delivered write nothing, with or without
//     a tail read; a later batch after a partial one;
//   - other writers and flows on the same topic are left alone and skipped;
//   - randomised runs (several seeds) mixing failures, restarts, injected
//     produce errors and replays over many batches;
//   - what the sink refuses: a topic holding a later batch of its writer
//     and flow, a batch whose rows changed between deliveries;
//   - the tail read's bound (max_tail_scan).
#include <flowlib/sink/kafka.hpp>

#include "kafka/sink/sink_support.hpp"
#include "support/errors.hpp"
#include "support/kafka_mock.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace kafka_sink_exactly_once {

namespace fl = flowlib;
using flowtest::contains;
using kafka_sink_support::expected_record;
using kafka_sink_support::expected_topic;
using kafka_sink_support::read_topic;
using kafka_sink_support::fresh_topic;
using kafka_sink_support::sink_options;

struct Ev {
  std::int64_t id = 0;
  std::string key;  // empty: no key
  std::int64_t n = 0;
};
FLOWLIB_SCHEMA(Ev, id, key, n);

struct injected_failure : std::runtime_error {
  injected_failure() : std::runtime_error("injected failure") {}
};

/// The sink's options with keys from Ev::key and a fault hook that throws
/// at `fail_at` (when set: batch, index).
struct harness {
  flowtest::kafka_mock& mock;
  std::string topic;
  std::int32_t partitions;
  std::string writer = "pipeline";
  std::string flow = "export";
  std::optional<std::pair<std::uint64_t, std::size_t>> fail_at;
  std::unique_ptr<fl::KafkaSink<Ev>> sink;
  expected_topic want{writer, flow, {}};

  /// Writes `topic` (of `parts` partitions) as writer `w`, flow `f`.
  harness(flowtest::kafka_mock& m, std::string t, std::int32_t parts, std::string w = "pipeline",
          std::string f = "export")
      : mock(m), topic(std::move(t)), partitions(parts), writer(std::move(w)), flow(std::move(f)) {
    want.writer = writer;
    want.flow = flow;
    restart();
  }

  /// A new sink, as a restarted process has: it knows nothing of the topic.
  void restart() {
    auto o = sink_options<Ev>(mock, topic, writer);
    o.key = [](const Ev& e) -> std::optional<std::string> {
      if (e.key.empty()) return std::nullopt;
      return e.key;
    };
    o.fault_hook = [this](std::uint64_t batch, std::size_t index) {
      if (fail_at && fail_at->first == batch && fail_at->second == index) {
        fail_at.reset();
        throw injected_failure();
      }
    };
    sink.reset();
    sink = std::make_unique<fl::KafkaSink<Ev>>(std::move(o));
  }

  /// Records what a successful delivery of `rows` as `batch` must leave.
  void expect(std::uint64_t batch, const std::vector<Ev>& rows) {
    auto& b = want.batches[batch];
    b.clear();
    for (std::size_t i = 0; i < rows.size(); ++i) {
      expected_record e;
      if (!rows[i].key.empty()) e.key = rows[i].key;
      e.partition = e.key ? fl::kafka_key_partition(*e.key, partitions)
                          : static_cast<std::int32_t>((batch + i) % static_cast<std::uint64_t>(partitions));
      e.value = fl::kafka_json_value(rows[i]);
      b.push_back(std::move(e));
    }
  }

  void deliver(std::uint64_t batch, const std::vector<Ev>& rows) { sink->deliver(flow, batch, rows); }
  /// Delivers `rows` as `batch`, which the topic must then hold once.
  void deliver_expected(std::uint64_t batch, const std::vector<Ev>& rows) {
    deliver(batch, rows);
    expect(batch, rows);
  }
  void check() const { want.check(read_topic(mock, topic)); }
  const fl::KafkaSinkDelivery& last() const { return sink->last_delivery(); }
};

std::vector<Ev> make_rows(std::int64_t first_id, std::size_t n, std::mt19937_64& rng, int keyless_in = 3) {
  std::vector<Ev> rows(n);
  for (std::size_t i = 0; i < n; ++i) {
    rows[i].id = first_id + static_cast<std::int64_t>(i);
    rows[i].key = rng() % static_cast<std::uint64_t>(keyless_in) == 0 ? std::string() : "k" + std::to_string(rng() % 11);
    rows[i].n = static_cast<std::int64_t>(rng() % 100000);
  }
  return rows;
}

TEST_CASE("R-SINK-1: a failure at every record position of a batch, then a retry: each record once") {
  // For every position k of batch 1 (and one past the end: no failure),
  // the batch fails at record k; the retry comes from the same sink, or
  // from a new one (a restarted process). For some k batch 2 follows. Each
  // k is a flow of its own on one topic (so the tail reads also skip the
  // other flows' records).
  std::mt19937_64 rng(7);
  const std::vector<Ev> b0 = make_rows(0, 7, rng);
  const std::vector<Ev> b1 = make_rows(100, 11, rng);
  const std::vector<Ev> b2 = make_rows(200, 5, rng);
  auto& mock = flowtest::shared_kafka_mock();
  for (const bool restart : {false, true}) {
    CAPTURE(restart);
    const std::string topic = fresh_topic(mock, 3, restart ? "restarted" : "same_sink");
    std::vector<std::unique_ptr<harness>> flows;
    for (std::size_t k = 0; k <= b1.size(); ++k) {
      CAPTURE(k);
      auto& h = *flows.emplace_back(std::make_unique<harness>(mock, topic, 3, "pipeline", "f" + std::to_string(k)));
      h.deliver_expected(0, b0);
      h.fail_at = std::make_pair(std::uint64_t{1}, k);
      if (k < b1.size()) {
        CHECK_THROWS_AS(h.deliver(1, b1), injected_failure);
        CHECK(h.last().written == k);  // records before k were handed over and delivered
        if (restart) h.restart();
      }
      h.deliver_expected(1, b1);
      if (k < b1.size()) {
        CHECK(h.last().read_tails);
        CHECK(h.last().already_there == k);
        CHECK(h.last().written == b1.size() - k);
      } else {
        CHECK_FALSE(h.last().read_tails);  // no failure: the sink knows its tails
        CHECK(h.last().written == b1.size());
      }
      if (k % 5 == 0) {
        h.deliver_expected(2, b2);
        CHECK_FALSE(h.last().read_tails);
      }
    }
    const auto got = read_topic(mock, topic);
    std::size_t total = 0;
    for (const auto& h : flows) {
      INFO("flow " << h->flow);
      h->want.check(got);
      total += h->want.size();
    }
    CHECK(got.size() == total);
  }
}

TEST_CASE("R-SINK-1: a batch delivered again (its commit did not happen) writes nothing new") {
  std::mt19937_64 rng(8);
  auto& mock = flowtest::shared_kafka_mock();
  harness h(mock, fresh_topic(mock, 4), 4);
  const auto b0 = make_rows(0, 12, rng);
  const auto b1 = make_rows(100, 17, rng);
  h.deliver_expected(0, b0);
  h.deliver_expected(1, b1);
  // The same sink: it knows batch 1 is written, reads nothing back.
  h.deliver(1, b1);
  CHECK(h.last().written == 0);
  CHECK(h.last().already_there == b1.size());
  CHECK_FALSE(h.last().read_tails);
  // A restarted process: it reads the tails and finds every record.
  h.restart();
  h.deliver(1, b1);
  CHECK(h.last().written == 0);
  CHECK(h.last().already_there == b1.size());
  CHECK(h.last().read_tails);
  h.deliver(1, b1);
  CHECK(h.last().written == 0);
  // Then the next batch, without reading tails again.
  const auto b2 = make_rows(200, 5, rng);
  h.deliver_expected(2, b2);
  CHECK(h.last().written == b2.size());
  CHECK_FALSE(h.last().read_tails);
  // An empty batch writes nothing and is no failure.
  h.deliver_expected(3, {});
  CHECK(h.last().written == 0);
  h.check();
}

TEST_CASE("R-SINK-1: a later batch after a partial one, and a partial batch retried more than once") {
  std::mt19937_64 rng(9);
  auto& mock = flowtest::shared_kafka_mock();
  harness h(mock, fresh_topic(mock, 3), 3);
  const auto b0 = make_rows(0, 20, rng);
  // Attempt 1 fails at 5, a restart's attempt fails at 11, a third
  // finishes it.
  h.fail_at = std::make_pair(std::uint64_t{0}, std::size_t{5});
  CHECK_THROWS_AS(h.deliver(0, b0), injected_failure);
  h.restart();
  h.fail_at = std::make_pair(std::uint64_t{0}, std::size_t{11});
  CHECK_THROWS_AS(h.deliver(0, b0), injected_failure);
  CHECK(h.last().already_there == 5);
  h.restart();
  h.deliver_expected(0, b0);
  CHECK(h.last().already_there == 11);
  CHECK(h.last().written == 9);
  // The next batch after the restart: nothing of it is there; the tails of
  // the partitions batch 0 wrote are known, those it did not are read.
  const auto b1 = make_rows(100, 30, rng);
  h.deliver_expected(1, b1);
  CHECK(h.last().already_there == 0);
  CHECK(h.last().written == b1.size());
  h.check();
}

TEST_CASE("R-SINK-1: other writers and flows on the topic are skipped, and their records left alone") {
  std::mt19937_64 rng(10);
  auto& mock = flowtest::shared_kafka_mock();
  const std::string topic = fresh_topic(mock, 2, "shared");
  // Three sinks on one topic: writer "p1" flow "f", writer "p1" flow "g",
  // writer "p2" flow "f". Each fails partway in turn while the others write.
  std::vector<std::unique_ptr<harness>> sinks;
  const std::pair<const char*, const char*> ids[] = {{"p1", "f"}, {"p1", "g"}, {"p2", "f"}};
  for (const auto& [w, f] : ids) sinks.push_back(std::make_unique<harness>(mock, topic, 2, w, f));
  std::int64_t id = 0;
  for (std::uint64_t batch = 0; batch < 4; ++batch) {
    std::vector<std::vector<Ev>> rows;
    for (std::size_t s = 0; s < sinks.size(); ++s) {
      rows.push_back(make_rows(id, 8 + s, rng));
      id += 100;
      sinks[s]->fail_at = std::make_pair(batch, (batch + s) % 8);
      CHECK_THROWS_AS(sinks[s]->deliver(batch, rows[s]), injected_failure);
    }
    // Everyone restarts and retries, in reverse order.
    for (std::size_t s = sinks.size(); s-- > 0;) {
      sinks[s]->restart();
      sinks[s]->deliver(batch, rows[s]);
      sinks[s]->expect(batch, rows[s]);
      CHECK(sinks[s]->last().already_there == (batch + s) % 8);
    }
  }
  const auto got = read_topic(mock, topic);
  std::size_t total = 0;
  for (const auto& s : sinks) {
    s->want.check(got);
    total += s->want.size();
  }
  CHECK(got.size() == total);
}

TEST_CASE("R-SINK-1: randomised failures, restarts, injected produce errors and replays, against the model") {
  for (const std::uint64_t seed : {101u, 102u, 103u}) {
    CAPTURE(seed);
    std::mt19937_64 rng(seed);
    auto& mock = flowtest::shared_kafka_mock();
    const auto partitions = static_cast<std::int32_t>(1 + rng() % 4);
    harness h(mock, fresh_topic(mock, partitions), partitions);
    std::int64_t id = 0;
    std::uint64_t batch = 0;
    std::size_t failures = 0;
    while (batch < 10) {
      const auto rows = make_rows(id, rng() % 25, rng, 1 + static_cast<int>(rng() % 4));
      id += 1000;
      // Attempts until one succeeds: each may fail at a record, or with a
      // produce error the broker returns, and a restart may follow.
      for (int attempt = 0;; ++attempt) {
        const auto what = attempt < 3 ? rng() % 4 : 3;
        if (what == 0 && !rows.empty()) h.fail_at = std::make_pair(batch, static_cast<std::size_t>(rng() % rows.size()));
        if (what == 1 && !rows.empty())  // a permanent error for one produce request
          mock.push_request_errors(0, {RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED});
        bool ok = true;
        try {
          h.deliver(batch, rows);
        } catch (const injected_failure&) {
          ok = false;
        } catch (const fl::error& e) {
          CHECK(e.code() == fl::errc::sink_io);
          ok = false;
        }
        mock.clear_request_errors(0);
        h.fail_at.reset();
        if (ok) break;
        ++failures;
        if (rng() % 2 == 0) h.restart();
      }
      h.expect(batch, rows);
      // Sometimes the commit "fails" after the writes: the same batch
      // again, from this sink or after a restart.
      if (rng() % 4 == 0) {
        if (rng() % 2 == 0) h.restart();
        h.deliver(batch, rows);
        CHECK(h.last().written == 0);
        CHECK(h.last().already_there == rows.size());
      }
      ++batch;
    }
    CHECK(failures > 0);
    h.check();
  }
}

TEST_CASE("R-SINK-1: a topic holding a later batch of the writer and flow is CHECKPOINT_MISMATCH") {
  std::mt19937_64 rng(11);
  auto& mock = flowtest::shared_kafka_mock();
  harness h(mock, fresh_topic(mock, 2), 2);
  const auto b0 = make_rows(0, 6, rng);
  const auto b1 = make_rows(100, 6, rng);
  h.deliver(0, b0);
  h.deliver(1, b1);
  h.expect(0, b0);
  h.expect(1, b1);
  // A pipeline whose checkpoint is older than the topic delivers batch 0
  // again, from a restart: batch 1 is found above it.
  h.restart();
  const fl::error e = flowtest::error_of([&] { h.deliver(0, b0); });
  CHECK(e.code() == fl::errc::checkpoint_mismatch);
  CHECK(e.flow() == "export");
  CHECK(contains(e.what(), "holds batch 1"));
  CHECK(contains(e.what(), "batch 0 is being delivered"));
  CHECK(contains(e.what(), "topic '" + h.topic + "' partition"));
  // The same id twice in one process after other ids: read back too.
  h.restart();
  h.deliver(1, b1);
  CHECK(h.last().written == 0);
  CHECK_THROWS_AS(h.deliver(0, b0), fl::error);
  h.check();
}

TEST_CASE("R-SINK-1: a batch whose rows changed between two deliveries is CHECKPOINT_MISMATCH") {
  std::mt19937_64 rng(12);
  auto& mock = flowtest::shared_kafka_mock();
  harness h(mock, fresh_topic(mock, 1), 1);
  auto b0 = make_rows(0, 8, rng);
  h.fail_at = std::make_pair(std::uint64_t{0}, std::size_t{4});
  CHECK_THROWS_AS(h.deliver(0, b0), injected_failure);
  b0.pop_back();  // the replay has one row fewer
  CHECK(contains(flowtest::message_of(fl::errc::checkpoint_mismatch, [&] { h.deliver(0, b0); }),
                 "rows or partitioning changed"));
  const auto got = read_topic(mock, h.topic);
  CHECK(got.size() == 4);  // nothing more was written
}

TEST_CASE("R-SINK-1: the tail read stops after max_tail_scan records of a partition") {
  // A partial batch, then more records of another writer than the bound
  // above it: the retry no longer finds the partial batch and writes it
  // whole (the failure docs/kafka-sink.md lists as not covered). With the
  // bound above the other writer's records, the retry finds it.
  for (const std::uint64_t bound : {50u, 1000u}) {
    CAPTURE(bound);
    std::mt19937_64 rng(13);
    auto& mock = flowtest::shared_kafka_mock();
    const std::string topic = fresh_topic(mock, 1);
    auto o = sink_options<Ev>(mock, topic);
    o.max_tail_scan = bound;
    std::size_t fail_at = 3;
    o.fault_hook = [&](std::uint64_t, std::size_t i) {
      if (i == fail_at) throw injected_failure();
    };
    const auto rows = make_rows(0, 10, rng);
    {
      fl::KafkaSink<Ev> sink{o};
      CHECK_THROWS_AS(sink.deliver("f", 0, rows), injected_failure);
    }
    std::vector<flowtest::mock_record> others(200);
    for (auto& r : others) r.value = "other";
    mock.produce(topic, others);
    fail_at = 99;
    fl::KafkaSink<Ev> sink{o};
    sink.deliver("f", 0, rows);
    CHECK(sink.last_delivery().tail_records_read <= bound);
    const auto got = read_topic(mock, topic);
    if (bound < 200) {
      CHECK(sink.last_delivery().already_there == 0);
      CHECK(got.size() == 3 + 200 + 10);
    } else {
      CHECK(sink.last_delivery().already_there == 3);
      CHECK(got.size() == 3 + 200 + 7);
    }
  }
}

}  // namespace kafka_sink_exactly_once
