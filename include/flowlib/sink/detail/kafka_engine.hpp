// flowlib/sink/detail/kafka_engine.hpp
//
// KafkaSink's engine (sink/kafka.hpp; its header comment says how a batch is
// written exactly once): the row-independent part of the sink, which writes
// a batch's records, reads partitions' tails back and keeps what the sink
// knows of the topic. KafkaSink<Row> turns rows into records
// (kafka_sink_record) and hands them to it. Internal; needs librdkafka.
#pragma once

#include <flowlib/detail/config.hpp>
#include <flowlib/detail/kafka.hpp>
#include <flowlib/error.hpp>
#include <flowlib/sink/kafka_records.hpp>

#include <librdkafka/rdkafka.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace flowlib::detail {

/// One record of a batch, ready to write.
struct kafka_sink_record {
  std::int32_t partition = 0;
  std::optional<std::string> key;
  std::string value;
};

/// The settings the engine uses (the row-independent part of the options).
struct kafka_sink_settings {
  std::string brokers;
  std::string topic;
  std::string writer;
  kafka_properties config;
  kafka_properties producer_config;
  std::chrono::milliseconds delivery_timeout{};
  std::chrono::milliseconds request_timeout{};
  std::uint64_t max_tail_scan = 0;
  std::function<void(std::uint64_t, std::size_t)> fault_hook;
};

/// Up to 80 bytes of `s`, for messages.
FLOWLIB_KAFKA_DECL std::string kafka_sink_excerpt(std::string_view s);

/// A header's value of a consumed record (false when absent).
FLOWLIB_KAFKA_DECL bool kafka_sink_header(rd_kafka_headers_t* hdrs, std::string_view name,
                                          std::string_view& out);

FLOWLIB_KAFKA_DECL bool kafka_sink_number(std::string_view s, std::uint64_t& out);

/// Writes batches of records once each (see the header comment): the
/// producer, the tail reader and what the sink knows of the topic. Not
/// movable (librdkafka's callbacks hold its address); KafkaSink owns it
/// through a unique_ptr.
class kafka_sink_engine {
 public:
  explicit kafka_sink_engine(kafka_sink_settings s) : s_(std::move(s)) {}
  kafka_sink_engine(const kafka_sink_engine&) = delete;
  kafka_sink_engine& operator=(const kafka_sink_engine&) = delete;

  /// The topic's partition count, read from the cluster at the first batch
  /// and after a failure, and kept otherwise.
  FLOWLIB_KAFKA_DECL std::int32_t partition_count(std::string_view flow);

  /// Writes the records of batch `batch` of `flow` that the topic does not
  /// hold yet. Throws errc::sink_io when a record could not be written (after
  /// every report is in), errc::checkpoint_mismatch when the topic holds
  /// what this batch cannot follow.
  FLOWLIB_KAFKA_DECL void write(std::string_view flow, std::uint64_t batch,
                                std::span<const kafka_sink_record> records,
                                KafkaSinkDelivery& report);

 private:
  FLOWLIB_KAFKA_DECL kafka_context context(std::string_view flow) const;

  FLOWLIB_KAFKA_DECL bool known(std::int32_t p) const;
  FLOWLIB_KAFKA_DECL void mark_known(std::int32_t p);
  // The next batch reads every tail it writes to again.
  FLOWLIB_KAFKA_DECL void forget_positions();
  // After a failure: also a new producer and the partition count read again.
  FLOWLIB_KAFKA_DECL void forget();

  FLOWLIB_KAFKA_DECL kafka_properties base_properties() const;

  FLOWLIB_KAFKA_DECL void ensure_reader(const kafka_context& ctx);

  FLOWLIB_KAFKA_DECL void ensure_producer(const kafka_context& ctx);

  FLOWLIB_KAFKA_DECL static void on_delivery(rd_kafka_t*, const rd_kafka_message_t* m,
                                             void* opaque);
  FLOWLIB_KAFKA_DECL static void on_error(rd_kafka_t*, int err, const char* reason, void* opaque);

  // Reads back the tails of `parts` (see the header comment): marks in
  // `present` the records of `batch` found. Returns the records read.
  FLOWLIB_KAFKA_DECL std::uint64_t read_tails(const kafka_context& sink_ctx, std::uint64_t batch,
                                              std::span<const kafka_sink_record> records,
                                              std::span<const std::int32_t> parts,
                                              std::vector<char>& present);

  [[noreturn]] FLOWLIB_KAFKA_DECL void mismatch(const kafka_context& ctx, std::int32_t partition,
                                                std::int64_t offset, std::string_view what) const;

  struct report_state {
    bool reported = false;
    rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR_NO_ERROR;
    std::string text;
  };

  // Hands the records not `present` to the producer in batch order, waits
  // for every report, and throws sink_io naming the first that failed.
  FLOWLIB_KAFKA_DECL void produce(const kafka_context& ctx, std::uint64_t batch,
                                  std::span<const kafka_sink_record> records,
                                  const std::vector<char>& present, KafkaSinkDelivery& report);

  kafka_sink_settings s_;
  kafka_handle producer_;
  kafka_error_note reader_note_;  // the reader's last client error, for messages
  kafka_handle reader_;
  std::int32_t partitions_ = 0;        // 0: read it at the next batch
  std::string flow_;                   // the flow whose records the sink knows
  std::optional<std::uint64_t> last_batch_;  // the last batch it delivered in full
  std::vector<char> known_;            // by partition: its tail holds nothing of this flow after last_batch_
  std::vector<report_state> reports_;  // by record index, for the batch being written
  std::string last_error_;             // the producer's last error callback
};

}  // namespace flowlib::detail

#if !defined(FLOWLIB_KAFKA_SEPARATE_COMPILATION)
#include <flowlib/sink/detail/impl/kafka_engine.ipp>
#endif
