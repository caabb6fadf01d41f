// KafkaSink and broker failures (R-SINK-1): the broker going down in the
// middle of a batch (the batch fails with SINK_IO_ERROR once its records
// time out, and the retry after the broker is back writes each record
// once; or the broker comes back while the sink waits, and the batch
// succeeds); errors the broker returns for produce requests: fatal ones
// (the producer's sequence broken: it is replaced), permanent ones (the
// records fail), retriable ones (retried inside the producer: no failure).
#include <flowlib/sink/kafka.hpp>

#include "kafka/sink/sink_support.hpp"
#include "support/errors.hpp"
#include "support/kafka_mock.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace kafka_sink_broker {

namespace fl = flowlib;
using namespace std::chrono_literals;
using kafka_sink_support::expected_record;
using kafka_sink_support::expected_topic;
using kafka_sink_support::fresh_topic;
using kafka_sink_support::read_topic;
using kafka_sink_support::sink_options;

struct Reading {
  std::int64_t sensor = 0;
  std::int64_t seq = 0;
  double value = 0;
};
FLOWLIB_SCHEMA(Reading, sensor, seq, value);

constexpr std::int16_t produce_api = 0;

std::vector<Reading> readings(std::int64_t first_seq, std::size_t n) {
  std::vector<Reading> rows(n);
  for (std::size_t i = 0; i < n; ++i)
    rows[i] = {static_cast<std::int64_t>(i % 5), first_seq + static_cast<std::int64_t>(i), static_cast<double>(i) / 4};
  return rows;
}

void expect_batch(expected_topic& want, std::uint64_t batch, const std::vector<Reading>& rows, std::int32_t partitions) {
  auto& b = want.batches[batch];
  b.clear();
  for (const auto& r : rows) {
    const std::string key = std::to_string(r.sensor);
    b.push_back({fl::kafka_key_partition(key, partitions), key, fl::kafka_json_value(r)});
  }
}

// A sink writing the flow "export"'s batches to a topic of `partitions`
// partitions, and the model of what the topic must hold.
struct exporter {
  fl::KafkaSink<Reading> sink;
  std::int32_t partitions;
  expected_topic want{"pipeline", "export", {}};

  exporter(const fl::KafkaSinkOptions<Reading>& o, std::int32_t parts) : sink{o}, partitions(parts) {}
  /// Delivers batch `id`; the topic must then hold its records once.
  void deliver(std::uint64_t id, const std::vector<Reading>& rows) {
    sink.deliver("export", id, rows);
    expect_batch(want, id, rows, partitions);
  }
};

fl::KafkaSinkOptions<Reading> options(const std::string& topic, std::chrono::milliseconds delivery_timeout) {
  auto o = sink_options<Reading>(flowtest::shared_kafka_mock(), topic);
  o.key = [](const Reading& r) { return std::optional<std::string>(std::to_string(r.sensor)); };
  o.delivery_timeout = delivery_timeout;
  return o;
}

/// Leaves the shared cluster as it found it however the test ends: its
/// broker up, no produce errors queued.
struct mock_guard {
  ~mock_guard() {
    flowtest::shared_kafka_mock().broker_up();
    flowtest::shared_kafka_mock().clear_request_errors(produce_api);
  }
};

TEST_CASE("R-SINK-1: the broker goes down during a batch: SINK_IO_ERROR, then the retry writes each record once") {
  auto& mock = flowtest::shared_kafka_mock();
  mock_guard guard;
  for (const std::size_t down_at : {std::size_t{0}, std::size_t{6}}) {
    CAPTURE(down_at);
    const std::string topic = fresh_topic(mock, 3);
    auto o = options(topic, 1000ms);
    bool take_down = false;
    o.fault_hook = [&](std::uint64_t batch, std::size_t index) {
      if (take_down && batch == 1 && index == down_at) {
        take_down = false;
        mock.broker_down();
      }
    };
    exporter e{o, 3};
    e.deliver(0, readings(0, 10));
    const auto b1 = readings(100, 10);
    take_down = true;
    const fl::error failed = flowtest::error_of([&] { e.sink.deliver("export", 1, b1); });  // the broker is down
    CHECK(failed.code() == fl::errc::sink_io);
    CHECK(failed.flow() == "export");
    CHECK(flowtest::contains(failed.what(), "of batch 1 to topic '" + topic + "'"));
    mock.broker_up();
    e.deliver(1, b1);
    CHECK(e.sink.last_delivery().read_tails);
    CHECK(e.sink.last_delivery().already_there + e.sink.last_delivery().written == b1.size());
    CHECK(e.sink.last_delivery().already_there <= down_at);
    e.want.check(read_topic(mock, topic));
  }
}

TEST_CASE("R-SINK-1: the broker comes back while the sink waits: the batch succeeds, each record once") {
  auto& mock = flowtest::shared_kafka_mock();
  mock_guard guard;
  const std::string topic = fresh_topic(mock, 2);
  auto o = options(topic, 30s);
  std::thread up;
  o.fault_hook = [&](std::uint64_t batch, std::size_t index) {
    if (batch == 1 && index == 3 && !up.joinable()) {
      mock.broker_down();
      up = std::thread([&] {
        std::this_thread::sleep_for(300ms);
        mock.broker_up();
      });
    }
  };
  exporter e{o, 2};
  e.deliver(0, readings(0, 8));
  const auto b1 = readings(100, 12);
  e.deliver(1, b1);
  up.join();
  CHECK(e.sink.last_delivery().written == b1.size());
  e.want.check(read_topic(mock, topic));
}

TEST_CASE("R-SINK-1: fatal, permanent and retriable produce errors: SINK_IO_ERROR where the records fail, and a clean retry") {
  auto& mock = flowtest::shared_kafka_mock();
  mock_guard guard;
  struct injected {
    rd_kafka_resp_err_t err;
    bool fails;
    const char* text;  // in the message
  };
  const injected cases[] = {
      // The broker says the producer's sequence is broken: a fatal error
      // of the idempotent producer; the sink replaces it.
      {RD_KAFKA_RESP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER, true, "fatal error"},
      // Permanent errors: the request's records fail.
      {RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED, true, "Topic authorization failed"},
      {RD_KAFKA_RESP_ERR_INVALID_PRODUCER_EPOCH, true, "epoch"},
      {RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE, true, "size too large"},
      // Retriable: the producer retries, in order, without duplicates.
      {RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION, false, ""},
      {RD_KAFKA_RESP_ERR_REQUEST_TIMED_OUT, false, ""},
      {RD_KAFKA_RESP_ERR_NOT_ENOUGH_REPLICAS, false, ""},
  };
  for (const auto& c : cases) {
    CAPTURE(rd_kafka_err2name(c.err));
    const std::string topic = fresh_topic(mock, 3);
    exporter e{options(topic, 10s), 3};
    auto& sink = e.sink;
    e.deliver(0, readings(0, 9));
    const auto b1 = readings(100, 15);
    // The first produce request of batch 1 fails; twice for the retriable
    // ones.
    mock.push_request_errors(produce_api, c.fails ? std::vector<rd_kafka_resp_err_t>{c.err}
                                                  : std::vector<rd_kafka_resp_err_t>{c.err, c.err});
    bool failed = false;
    try {
      sink.deliver("export", 1, b1);
    } catch (const fl::error& e) {
      failed = true;
      CHECK(e.code() == fl::errc::sink_io);
      CHECK_MESSAGE(std::string(e.what()).find(c.text) != std::string::npos, e.what());
    }
    mock.clear_request_errors(produce_api);
    CHECK(failed == c.fails);
    if (failed) {
      const std::size_t written = sink.last_delivery().written;
      CHECK(written < b1.size());
      sink.deliver("export", 1, b1);  // the retry
      CHECK(sink.last_delivery().read_tails);
      CHECK(sink.last_delivery().already_there == written);
      CHECK(sink.last_delivery().written == b1.size() - written);
    }
    expect_batch(e.want, 1, b1, 3);
    e.deliver(2, readings(200, 6));
    CHECK_FALSE(sink.last_delivery().read_tails);
    e.want.check(read_topic(mock, topic));
  }
}

TEST_CASE("R-SINK-1: a topic the cluster refuses fails the batch with SINK_IO_ERROR naming it, and nothing is written") {
  auto& mock = flowtest::shared_kafka_mock();
  const std::string topic = fresh_topic(mock, 2);
  mock.set_topic_error(topic, RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED);
  exporter e{options(topic, 2s), 2};
  const auto rows = readings(0, 5);
  CHECK(flowtest::contains(flowtest::message_of(fl::errc::sink_io, [&] { e.sink.deliver("export", 0, rows); }),
                           "topic '" + topic + "'"));
  mock.set_topic_error(topic, RD_KAFKA_RESP_ERR_NO_ERROR);
  e.deliver(0, rows);
  e.want.check(read_topic(mock, topic));
}

}  // namespace kafka_sink_broker
