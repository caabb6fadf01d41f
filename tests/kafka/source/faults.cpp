// KafkaSource when the cluster fails (R-SOURCE-1): a broker that is down
// fails reads and offset queries with SOURCE_IO_ERROR and librdkafka's
// text, or a read waits for it within its timeout; requests that fail with
// injected errors (rd_kafka_mock_push_request_errors) are retried when the
// error is retriable and fail the read at once when it is not; a pipeline
// that fails this way commits nothing, and once the cluster answers again
// every record is applied once. Each test case has a cluster of its own
// (brokers go down, errors are injected).
#include <flowlib/checkpoint/memory.hpp>
#include <flowlib/flowlib.hpp>
#include <flowlib/pipeline.hpp>
#include <flowlib/source/kafka.hpp>

#include "source_support.hpp"
#include "support/errors.hpp"
#include "support/kafka_mock.hpp"
#include "support/rows.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace kafka_source_faults {

namespace fl = flowlib;
using namespace std::chrono_literals;
using flowtest::contains;

using Ev = flowtest::Item;  // an id (k) and a value

namespace {

std::string json_of(const Ev& e) { return nlohmann::json{{"k", e.k}, {"v", e.v}}.dump(); }

// Short timeouts and backoffs: the failures below resolve in well under a
// second once the cluster answers again.
fl::KafkaSourceOptions<Ev> options(const flowtest::kafka_mock& mock, std::string topic,
                                   std::chrono::milliseconds read_timeout) {
  auto o = kafka_source_support::source_options<Ev>(mock, std::move(topic));
  o.config.insert(o.config.end(), {{"reconnect.backoff.ms", "20"},
                                   {"reconnect.backoff.max.ms", "100"},
                                   {"fetch.error.backoff.ms", "50"},
                                   {"retry.backoff.ms", "20"}});
  o.request_timeout = 300ms;
  o.read_timeout = read_timeout;
  return o;
}

// Produces `n` records to partitions 0 and 1 in turn; returns them in the
// order a read of the whole topic gives them (partition 0's, then 1's).
std::vector<Ev> produce(flowtest::kafka_mock& mock, const std::string& topic, int first, int n) {
  std::vector<flowtest::mock_record> recs;
  for (int i = first; i < first + n; ++i) recs.push_back({i % 2, std::nullopt, json_of({i, "v"}), {}, 0});
  mock.produce(topic, recs);
  std::vector<Ev> out;
  for (int p = 0; p < 2; ++p)
    for (int i = first; i < first + n; ++i)
      if (i % 2 == p) out.push_back({i, "v"});
  return out;
}

std::string io_error_of(auto&& f) { return flowtest::message_of(fl::errc::source_io, f); }

// Calls f until it does not throw SOURCE_IO_ERROR (the client reconnecting),
// at most `attempts` times; returns its result.
template <class F>
auto until_answered(F&& f, int attempts = 20) {
  for (int i = 1;; ++i) {
    try {
      return f();
    } catch (const fl::error& e) {
      REQUIRE(e.code() == fl::errc::source_io);
      if (i == attempts) throw;
    }
  }
}

}  // namespace

TEST_CASE("R-SOURCE-1: a broker that is down fails reads and queries with SOURCE_IO_ERROR; up again, the same range reads the same rows; a read waits for it within its timeout") {
  flowtest::kafka_mock mock;
  mock.create_topic("t", 2);
  const std::vector<Ev> model = produce(mock, "t", 0, 20);
  fl::KafkaSource<Ev> quick{"quick", options(mock, "t", 300ms)};
  fl::KafkaSource<Ev> patient{"patient", options(mock, "t", 20s)};
  const fl::source_position from = quick.start();
  const fl::source_position to = quick.latest();
  CHECK(patient.latest() == to);
  std::vector<Ev> rows;
  quick.read(from, to, rows);
  CHECK(rows == model);

  mock.broker_down();
  rows = {{-1, "kept"}};
  auto msg = io_error_of([&] { quick.read(from, to, rows); });
  CHECK(contains(msg, "'quick'"));
  CHECK(contains(msg, "timed out after 300 ms"));
  CHECK(rows == std::vector<Ev>{{-1, "kept"}});
  msg = io_error_of([&] { (void)quick.latest(); });
  CHECK(contains(msg, "of topic 't'"));

  mock.broker_up();
  rows.clear();
  until_answered([&] {
    rows.clear();
    quick.read(from, to, rows);
    return 0;
  });
  CHECK(rows == model);
  CHECK(until_answered([&] { return quick.latest(); }) == to);

  // Down, and up again while a read waits.
  mock.broker_down();
  std::thread up([&] {
    std::this_thread::sleep_for(300ms);
    mock.broker_up();
  });
  rows.clear();
  patient.read(from, to, rows);
  up.join();
  CHECK(rows == model);
}

TEST_CASE("R-SOURCE-1: a pipeline whose batch fails on a broker that is down commits nothing; up again, every record is applied once") {
  flowtest::kafka_mock mock;
  mock.create_topic("t", 2);
  std::vector<Ev> all = produce(mock, "t", 0, 30);
  fl::KafkaSource<Ev> src{"events", options(mock, "t", 300ms)};
  fl::MemoryCheckpoint ckpt;
  fl::StreamingTable<Ev> log{"log"};
  bool take_down = false;
  fl::PipelineOptions po;
  // The broker goes down once the second batch's positions are recorded:
  // that batch's read fails.
  po.fault_hook = [&](fl::fault_point at, std::string_view, std::uint64_t batch) {
    if (take_down && at == fl::fault_point::positions_recorded && batch == 1) mock.broker_down();
  };
  fl::Pipeline p{"p", ckpt, po};
  p.flow("log").from(src).max_rows_per_batch(8).into(log, fl::Append{"log"});

  take_down = true;
  const auto msg = io_error_of([&] { p.update(); });
  CHECK(contains(msg, "'events'"));
  CHECK(log.size() == 8);  // the first batch only
  take_down = false;
  // A second update while down fails before it reads.
  io_error_of([&] { p.update(); });
  CHECK(log.size() == 8);

  mock.broker_up();
  const auto more = produce(mock, "t", 30, 10);
  all.insert(all.end(), more.begin(), more.end());
  until_answered([&] { return p.update(); });
  CHECK(log.sorted_rows() == flowtest::sorted(all));
  CHECK(p.update().batches() == 0);
}

TEST_CASE("R-SOURCE-1: injected request errors: retriable ones are retried within the read's timeout, others fail at once with SOURCE_IO_ERROR; the next read gives the same rows") {
  flowtest::kafka_mock mock;
  mock.create_topic("t", 2);
  const std::vector<Ev> model = produce(mock, "t", 0, 16);
  fl::source_position from, to;
  {
    fl::KafkaSource<Ev> src{"events", options(mock, "t", 10s)};
    from = src.start();
    to = src.latest();
  }
  constexpr std::int16_t fetch = 1, list_offsets = 2;
  // The mock fails the next requests of an API from any client, so each
  // round uses a new source: no fetch of an earlier read is still in flight
  // to take the error.
  SUBCASE("retriable Fetch errors") {
    for (const auto err : {RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT, RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION,
                           RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE, RD_KAFKA_RESP_ERR_UNKNOWN}) {
      const std::string name = rd_kafka_err2name(err);
      CAPTURE(name);
      fl::KafkaSource<Ev> src{"events", options(mock, "t", 10s)};
      CHECK(src.latest() == to);
      mock.push_request_errors(fetch, {err, err, err});
      std::vector<Ev> rows;
      src.read(from, to, rows);
      CHECK(rows == model);
      mock.clear_request_errors(fetch);
    }
  }
  // A new source's next read meets `err` once: SOURCE_IO_ERROR at once,
  // `out` as it was; the read after it gives the rows.
  const auto fails_once = [&](rd_kafka_resp_err_t err) {
    fl::KafkaSource<Ev> src{"events", options(mock, "t", 10s)};
    CHECK(src.latest() == to);
    mock.push_request_errors(fetch, {err});
    std::vector<Ev> rows{{-1, "kept"}};
    const auto msg = io_error_of([&] { src.read(from, to, rows); });
    CHECK(rows == std::vector<Ev>{{-1, "kept"}});
    mock.clear_request_errors(fetch);
    rows.clear();
    src.read(from, to, rows);
    CHECK(rows == model);
    return msg;
  };
  SUBCASE("a Fetch error that is not retriable fails the read at once; the next read succeeds") {
    for (int round = 0; round < 2; ++round) {
      CAPTURE(round);
      const auto msg = fails_once(RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED);
      CHECK(contains(msg, "Topic authorization failed"));
      CHECK(!contains(msg, "timed out"));
    }
  }
  SUBCASE("a broker that says an offset it holds is out of range: SOURCE_IO_ERROR, not SOURCE_DATA_LOST") {
    CHECK(contains(fails_once(RD_KAFKA_RESP_ERR_OFFSET_OUT_OF_RANGE),
                   "out of range although the partition holds offsets [0, 8)"));
  }
  SUBCASE("a ListOffsets error fails latest() and start(); the next call answers") {
    fl::KafkaSource<Ev> src{"events", options(mock, "t", 10s)};
    CHECK(src.latest() == to);
    mock.push_request_errors(list_offsets, {RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED});
    auto msg = io_error_of([&] { (void)src.latest(); });
    CHECK(contains(msg, "high watermarks of topic 't'"));
    CHECK(contains(msg, "Topic authorization failed"));
    mock.clear_request_errors(list_offsets);
    CHECK(src.latest() == to);
    mock.push_request_errors(list_offsets, {RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED});
    msg = io_error_of([&] { (void)src.start(); });
    CHECK(contains(msg, "low watermarks of topic 't'"));
    mock.clear_request_errors(list_offsets);
    CHECK(src.start() == from);
  }
}

}  // namespace kafka_source_faults
