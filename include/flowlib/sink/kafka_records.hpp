// flowlib/sink/kafka_records.hpp
//
// What a KafkaSink (sink/kafka.hpp) writes into a topic and reports: the
// kind it is named by, the headers of every record it writes, what its last
// delivery did, and Kafka's default partition of a keyed record. Needs no
// library: a program that reads a sink's topic may include it alone.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace flowlib {

/// @brief The kind Kafka sinks are named by (in the event log and a flow's
/// stored layout).
inline constexpr std::string_view kafka_sink_kind = "KAFKA SINK";

/// @brief The headers of every record a KafkaSink writes; each value is text
/// (the numbers in decimal).
struct kafka_sink_headers {
  static constexpr std::string_view writer = "flowlib.writer";  ///< KafkaSinkOptions::writer
  static constexpr std::string_view flow = "flowlib.flow";      ///< the flow's name
  static constexpr std::string_view batch = "flowlib.batch";    ///< the batch id
  static constexpr std::string_view index = "flowlib.index";    ///< 0-based, within the batch
  static constexpr std::string_view count = "flowlib.count";    ///< the batch's record count
};

/// @brief What a KafkaSink's last deliver() did (for monitoring and tests).
struct KafkaSinkDelivery {
  std::uint64_t batch_id = 0;
  std::size_t records = 0;        ///< the batch's records
  std::size_t written = 0;        ///< records this call wrote
  std::size_t already_there = 0;  ///< records found in the topic, not written again
  bool read_tails = false;        ///< whether partitions' tails were read back
  std::uint64_t tail_records_read = 0;  ///< records read back from tails
};

/// @brief Kafka's default partition of a keyed record: murmur2 of the key,
/// as Kafka's Java client and librdkafka's murmur2 partitioner compute it,
/// made positive, modulo the partition count (> 0).
inline std::int32_t kafka_key_partition(std::string_view key, std::int32_t partitions) noexcept {
  const auto byte = [&](std::size_t i) { return static_cast<std::uint32_t>(static_cast<unsigned char>(key[i])); };
  constexpr std::uint32_t m = 0x5bd1e995u;
  const std::size_t n = key.size();
  std::uint32_t h = 0x9747b28cu ^ static_cast<std::uint32_t>(n);
  std::size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    std::uint32_t k = byte(i) | (byte(i + 1) << 8) | (byte(i + 2) << 16) | (byte(i + 3) << 24);
    k *= m;
    k ^= k >> 24;
    k *= m;
    h *= m;
    h ^= k;
  }
  switch (n & 3) {
    case 3: h ^= byte(i + 2) << 16; [[fallthrough]];
    case 2: h ^= byte(i + 1) << 8; [[fallthrough]];
    case 1:
      h ^= byte(i);
      h *= m;
  }
  h ^= h >> 13;
  h *= m;
  h ^= h >> 15;
  return static_cast<std::int32_t>((h & 0x7fffffffu) % static_cast<std::uint32_t>(partitions));
}

}  // namespace flowlib
