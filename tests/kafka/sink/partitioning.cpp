// KafkaSink's partitions (R-SINK-1: a batch delivered again sends every
// record where it went before): the default for keyed records is Kafka's
// murmur2 placement, checked against librdkafka's own murmur2 partitioner
// over random keys; keyed records stay on their key's partition across
// batches, sinks and replays; a user partitioner decides when given, and a
// result out of range fails the batch before anything is written.
#include <flowlib/sink/kafka.hpp>

#include "kafka/sink/sink_support.hpp"
#include "support/errors.hpp"
#include "support/kafka_mock.hpp"

#include <doctest/doctest.h>
#include <librdkafka/rdkafka.h>

#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace kafka_sink_partitioning {

namespace fl = flowlib;
using kafka_sink_support::expected_topic;
using kafka_sink_support::fresh_topic;
using kafka_sink_support::read_topic;
using kafka_sink_support::sink_options;

struct Click {
  std::string user;
  std::int64_t n = 0;
};
FLOWLIB_SCHEMA(Click, user, n);

TEST_CASE("kafka_key_partition places keys as librdkafka's murmur2 partitioner does") {
  for (const std::uint64_t seed : {1u, 2u, 3u}) {
    std::mt19937_64 rng(seed);
    for (int i = 0; i < 3000; ++i) {
      std::string key(rng() % 40, '\0');
      for (auto& c : key) c = static_cast<char>(rng() % 256);  // any bytes, high ones included
      const auto partitions = static_cast<std::int32_t>(1 + rng() % 64);
      CAPTURE(key.size());
      CAPTURE(partitions);
      CHECK(fl::kafka_key_partition(key, partitions) ==
            rd_kafka_msg_partitioner_murmur2(nullptr, key.data(), key.size(), partitions, nullptr, nullptr));
    }
  }
}

TEST_CASE("R-SINK-1: keyed records stay on their key's partition across batches, restarts and replays") {
  auto& mock = flowtest::shared_kafka_mock();
  const std::string topic = fresh_topic(mock, 5);
  auto o = sink_options<Click>(mock, topic);
  o.key = [](const Click& c) { return std::optional<std::string>(c.user); };
  std::size_t fail_at = 1000;
  o.fault_hook = [&](std::uint64_t, std::size_t i) {
    if (i == fail_at) throw std::runtime_error("injected");
  };
  std::mt19937_64 rng(4);
  std::vector<std::vector<Click>> batches(6);
  std::int64_t n = 0;
  for (auto& b : batches) {
    b.resize(10 + rng() % 10);
    for (auto& c : b) c = Click{"user" + std::to_string(rng() % 23), n++};
  }
  expected_topic want{"pipeline", "clicks", {}};
  for (std::uint64_t id = 0; id < batches.size(); ++id) {
    // Each batch fails halfway once, and a new sink finishes it.
    fail_at = batches[id].size() / 2;
    {
      fl::KafkaSink<Click> first{o};
      CHECK_THROWS(first.deliver("clicks", id, batches[id]));
    }
    fail_at = 1000;
    fl::KafkaSink<Click> second{o};
    second.deliver("clicks", id, batches[id]);
    second.deliver("clicks", id, batches[id]);  // a replay: nothing more
    for (const auto& c : batches[id])
      want.batches[id].push_back({fl::kafka_key_partition(c.user, 5), c.user, fl::kafka_json_value(c)});
  }
  const auto got = read_topic(mock, topic);
  want.check(got);
  std::map<std::string, std::int32_t> partition_of;
  for (const auto& r : got) {
    REQUIRE(r.key.has_value());
    const auto [it, fresh] = partition_of.try_emplace(*r.key, r.partition);
    CHECK(it->second == r.partition);
  }
  CHECK(partition_of.size() > 5);
}

TEST_CASE("R-SINK-1: a user partitioner decides; a partition out of range fails the batch, nothing written") {
  auto& mock = flowtest::shared_kafka_mock();
  const std::string topic = fresh_topic(mock, 3);
  auto o = sink_options<Click>(mock, topic);
  o.partitioner = [](const Click& c, std::int32_t partitions) { return static_cast<std::int32_t>(c.n % 7) - 3 + partitions / 3; };
  fl::KafkaSink<Click> sink{o};
  // n % 7 in 2..4 gives partitions 0..2.
  const std::vector<Click> fine{{"a", 2}, {"b", 3}, {"c", 4}, {"d", 9}};
  sink.deliver("clicks", 0, fine);
  expected_topic want{"pipeline", "clicks", {}};
  for (const auto& c : fine)
    want.batches[0].push_back({static_cast<std::int32_t>(c.n % 7) - 2, std::nullopt, fl::kafka_json_value(c)});
  want.check(read_topic(mock, topic));
  // n = 5 gives partition 3 of 3: refused before any record is written.
  const std::vector<Click> bad{{"e", 2}, {"f", 5}};
  const fl::error e = flowtest::error_of([&] { sink.deliver("clicks", 1, bad); });
  CHECK(e.code() == fl::errc::invalid_argument);
  CHECK(e.key() == "user=\"f\", n=5");
  CHECK(flowtest::contains(e.what(), "partition 3 for record 1 of batch 1"));
  want.check(read_topic(mock, topic));
}

}  // namespace kafka_sink_partitioning
