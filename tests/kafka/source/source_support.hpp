// tests/kafka/source/source_support.hpp
//
// What the KafkaSource tests share: a source's options for the program's
// mock cluster (quiet logs, timeouts that a healthy mock never reaches).
#pragma once

#include <flowlib/source/kafka.hpp>

#include "support/kafka_mock.hpp"

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kafka_source_support {

template <class Row>
flowlib::KafkaSourceOptions<Row> source_options(const flowtest::kafka_mock& mock, std::string topic,
                                                std::vector<std::int32_t> partitions = {}) {
  flowlib::KafkaSourceOptions<Row> o;
  o.brokers = mock.bootstraps();
  o.topic = std::move(topic);
  o.partitions = std::move(partitions);
  o.config = {{"log_level", "0"}};
  o.request_timeout = std::chrono::seconds(5);
  o.read_timeout = std::chrono::seconds(10);
  return o;
}

}  // namespace kafka_source_support
