// tests/kafka/sink/sink_support.hpp
//
// What the KafkaSink tests share:
//   - read_topic(): every record of a topic, partition by partition in
//     offset order, read by a plain consumer of its own (assign from the
//     beginning, read to each partition's end), independent of the sink's
//     tail reader;
//   - expected_topic: a model of what the topic must hold, a map of batch id
//     to the batch's records (value, key, partition); check() compares the
//     topic with it: each record of each batch exactly once, in its
//     partition, with its headers, and each partition in batch order;
//   - fresh_topic(): a topic of its own per test, on the program's shared
//     mock cluster (flowtest::shared_kafka_mock(); the tests that take its
//     broker down or inject errors undo that however they end);
//   - sink_options(): a sink's options for the mock cluster (quiet logs,
//     short reconnect backoff so a broker that comes back is seen quickly).
#pragma once

#include <flowlib/sink/kafka.hpp>

#include "support/kafka_mock.hpp"

#include <doctest/doctest.h>
#include <librdkafka/rdkafka.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace kafka_sink_support {

namespace fl = flowlib;

/// One record read back.
struct topic_record {
  std::int32_t partition = 0;
  std::int64_t offset = 0;
  std::optional<std::string> key;
  std::string value;
  std::vector<std::pair<std::string, std::string>> headers;

  /// The last header called `name` (std::nullopt when absent).
  std::optional<std::string> header(std::string_view name) const {
    std::optional<std::string> out;
    for (const auto& [n, v] : headers)
      if (n == name) out = v;
    return out;
  }
  std::uint64_t number(std::string_view name) const {
    const auto h = header(name);
    REQUIRE_MESSAGE(h.has_value(), "record at partition " << partition << " offset " << offset
                                                          << " has no header " << name);
    return std::stoull(*h);
  }
};

/// Every record of `topic` (partition by partition, offset order).
inline std::vector<topic_record> read_topic(const flowtest::kafka_mock& mock, const std::string& topic) {
  char err[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  const std::pair<const char*, std::string> props[] = {
      {"bootstrap.servers", mock.bootstraps()}, {"group.id", "kafka_sink_test.reader"},
      {"enable.auto.commit", "false"},          {"enable.partition.eof", "true"},
      {"fetch.wait.max.ms", "10"},              {"log_level", "0"}};
  for (const auto& [n, v] : props) REQUIRE(rd_kafka_conf_set(conf, n, v.c_str(), err, sizeof err) == RD_KAFKA_CONF_OK);
  rd_kafka_t* rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
  REQUIRE_MESSAGE(rk != nullptr, err);
  rd_kafka_poll_set_consumer(rk);

  const rd_kafka_metadata_t* md = nullptr;
  rd_kafka_topic_t* t = rd_kafka_topic_new(rk, topic.c_str(), nullptr);
  REQUIRE(rd_kafka_metadata(rk, 0, t, &md, 10000) == RD_KAFKA_RESP_ERR_NO_ERROR);
  int partitions = 0;
  for (int i = 0; i < md->topic_cnt; ++i)
    if (topic == md->topics[i].topic) partitions = md->topics[i].partition_cnt;
  rd_kafka_metadata_destroy(md);
  rd_kafka_topic_destroy(t);
  REQUIRE(partitions > 0);

  std::vector<std::vector<topic_record>> by_partition(static_cast<std::size_t>(partitions));
  std::vector<std::int64_t> high(static_cast<std::size_t>(partitions));
  rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(partitions);
  int open = 0;
  for (int p = 0; p < partitions; ++p) {
    std::int64_t lo = 0;
    REQUIRE(rd_kafka_query_watermark_offsets(rk, topic.c_str(), p, &lo, &high[static_cast<std::size_t>(p)], 10000) ==
            RD_KAFKA_RESP_ERR_NO_ERROR);
    if (high[static_cast<std::size_t>(p)] > lo) {
      rd_kafka_topic_partition_list_add(list, topic.c_str(), p)->offset = RD_KAFKA_OFFSET_BEGINNING;
      ++open;
    }
  }
  REQUIRE(rd_kafka_assign(rk, list) == RD_KAFKA_RESP_ERR_NO_ERROR);
  rd_kafka_topic_partition_list_destroy(list);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  std::vector<char> done(static_cast<std::size_t>(partitions), 0);
  while (open > 0) {
    REQUIRE_MESSAGE(std::chrono::steady_clock::now() < deadline, "reading topic " << topic << " timed out");
    rd_kafka_message_t* m = rd_kafka_consumer_poll(rk, 100);
    if (!m) continue;
    const auto p = static_cast<std::size_t>(m->partition);
    if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
      if (!done[p] && m->offset >= high[p]) {
        done[p] = 1;
        --open;
      }
    } else if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
      topic_record r;
      r.partition = m->partition;
      r.offset = m->offset;
      if (m->key) r.key = std::string(static_cast<const char*>(m->key), m->key_len);
      if (m->payload) r.value.assign(static_cast<const char*>(m->payload), m->len);
      rd_kafka_headers_t* hdrs = nullptr;
      if (rd_kafka_message_headers(m, &hdrs) == RD_KAFKA_RESP_ERR_NO_ERROR) {
        const char* name = nullptr;
        const void* v = nullptr;
        std::size_t size = 0;
        for (std::size_t i = 0; rd_kafka_header_get_all(hdrs, i, &name, &v, &size) == RD_KAFKA_RESP_ERR_NO_ERROR; ++i)
          r.headers.emplace_back(name, v ? std::string(static_cast<const char*>(v), size) : std::string());
      }
      if (by_partition[p].empty() || by_partition[p].back().offset < r.offset) by_partition[p].push_back(std::move(r));
    }
    rd_kafka_message_destroy(m);
  }
  rd_kafka_consumer_close(rk);
  rd_kafka_destroy(rk);
  std::vector<topic_record> out;
  for (auto& part : by_partition)
    for (auto& r : part) out.push_back(std::move(r));
  return out;
}

/// One record a batch must write.
struct expected_record {
  std::int32_t partition = 0;
  std::optional<std::string> key;
  std::string value;
};

/// The records the topic must hold for one writer and flow: batch id ->
/// its records by index.
struct expected_topic {
  std::string writer;
  std::string flow;
  std::map<std::uint64_t, std::vector<expected_record>> batches;

  std::size_t size() const {
    std::size_t n = 0;
    for (const auto& [id, b] : batches) n += b.size();
    return n;
  }

  /// The records of `got` of this writer and flow must be exactly the
  /// batches' records, each once, in its partition, with its key, value
  /// and headers; each partition's in (batch, index) order.
  void check(const std::vector<topic_record>& got) const {
    std::map<std::pair<std::uint64_t, std::uint64_t>, int> seen;
    std::map<std::int32_t, std::pair<std::uint64_t, std::uint64_t>> last_in_partition;
    std::size_t ours = 0;
    for (const auto& r : got) {
      if (r.header(fl::kafka_sink_headers::writer) != writer || r.header(fl::kafka_sink_headers::flow) != flow)
        continue;
      ++ours;
      const std::uint64_t batch = r.number(fl::kafka_sink_headers::batch);
      const std::uint64_t index = r.number(fl::kafka_sink_headers::index);
      INFO("record of batch " << batch << " index " << index << " at partition " << r.partition << " offset "
                              << r.offset);
      const auto b = batches.find(batch);
      REQUIRE_MESSAGE(b != batches.end(), "a batch that was never delivered");
      REQUIRE(index < b->second.size());
      CHECK(r.number(fl::kafka_sink_headers::count) == b->second.size());
      const expected_record& e = b->second[index];
      CHECK(r.partition == e.partition);
      CHECK(r.key == e.key);
      CHECK(r.value == e.value);
      const auto at = std::make_pair(batch, index);
      CHECK_MESSAGE(++seen[at] == 1, "written twice");
      if (const auto l = last_in_partition.find(r.partition); l != last_in_partition.end())
        CHECK_MESSAGE(l->second < at, "out of batch order in its partition");
      last_in_partition[r.partition] = at;
    }
    CHECK(ours == size());
    for (const auto& [id, b] : batches)
      for (std::size_t i = 0; i < b.size(); ++i)
        CHECK_MESSAGE(seen.count(std::make_pair(id, std::uint64_t{i})) == 1,
                      "batch " << id << " record " << i << " is missing");
  }
};

/// A new topic of `partitions` partitions on `mock`: "<stem>_<n>".
inline std::string fresh_topic(flowtest::kafka_mock& mock, int partitions, const std::string& stem = "t") {
  static int n = 0;
  std::string name = stem;
  name += '_';
  name += std::to_string(n++);
  mock.create_topic(name, partitions);
  return name;
}

/// A sink's options for the mock cluster.
template <class Row>
fl::KafkaSinkOptions<Row> sink_options(const flowtest::kafka_mock& mock, std::string topic,
                                       std::string writer = "pipeline") {
  fl::KafkaSinkOptions<Row> o;
  o.brokers = mock.bootstraps();
  o.topic = std::move(topic);
  o.writer = std::move(writer);
  o.config = {{"log_level", "0"}, {"reconnect.backoff.max.ms", "100"}};
  o.delivery_timeout = std::chrono::seconds(10);
  o.request_timeout = std::chrono::seconds(10);
  return o;
}

}  // namespace kafka_sink_support
