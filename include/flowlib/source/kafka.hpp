// flowlib/source/kafka.hpp
//
// flowlib::KafkaSource<Row>: the partitions of a Kafka topic as a
// `flowlib::source` (source/position.hpp), read through librdkafka. Needs
// the CMake target flowlib::kafka.
//
//   fl::KafkaSource<Order> orders{"orders", {.brokers = "k1:9092,k2:9092",
//                                            .topic = "orders"}};
//   pipeline.flow("orders_bronze").from(orders).into(bronze, fl::Append{"orders_bronze"});
//
// Positions (R-SOURCE-5). The source's partition number is the Kafka
// partition number, and a position holds, for each partition the source
// reads, the offset of the next record to read. start() is each
// partition's low watermark (the first offset still held), latest() each
// partition's high watermark (one ListOffsets request per partition
// leader). A batch reads exact offset ranges: read(from, to) reads the
// records at offsets [from, to) of each partition, so a replay reads the
// same records. The pipeline keeps the positions in its checkpoint,
// committed with the batch's tables; Kafka's consumer-group offsets play no
// part (see commit_offsets_for_monitoring). Offsets have gaps (compaction,
// transaction markers): a range is complete at its first record at or past
// `to`, or when the partition's end is at or past `to`; the source never
// waits for an offset that does not exist.
//
// Partitions. options.partitions names the partitions to read; empty means
// all of the topic's, found at the first start()/latest() and looked up
// again at most every options.partition_refresh, so partitions added to the
// topic later are read too, from offset 0 (a partition a position does not
// name is at offset 0). A position's partitions the source does not read
// are carried through plan() unchanged and never read; latest() does not
// name them, so a pipeline whose checkpoint committed offsets of a
// partition the source no longer reads refuses to run (CHECKPOINT_MISMATCH,
// R-EXACT-6): a set of partitions may grow, not shrink. Processes that read
// disjoint subsets of one topic share nothing but the topic
// (docs/kafka-source.md, "Scaling by partitions").
//
// Batches. plan(from, limit) with limit 0 takes everything up to the last
// latest(); otherwise at most `limit` offsets in all, shared evenly among
// the partitions that have records to read: each gets the same share, a
// partition that needs less leaves the rest to the others, and what does
// not divide evenly goes one offset each to the lowest-numbered partitions
// (the same result as dealing offsets out one at a time, round robin, in
// ascending partition order). Why not partition by partition, like
// MemorySource: a topic's partitions are independent streams written at
// once, and a backlog in one must not hold the others back for a whole
// update; reading several partitions in one batch also keeps several
// fetches in flight. Offsets, not records, are counted (a gap counts).
// plan() uses the high watermarks of the last latest() (the pipeline calls
// latest() before it plans), and is deterministic for a given `from` and
// latest(). read() appends the rows of the lowest-numbered partition first,
// each partition's in offset order.
//
// Records into rows. options.deserialize(const KafkaRecord&) returns the
// row, or std::nullopt to skip the record (e.g. a tombstone). Without one,
// the record's value is a JSON object decoded by Row's FLOWLIB_SCHEMA into
// a value-initialised Row (source/detail/json_row.hpp; options.rescued_column
// keeps values that do not decode) and a tombstone (no value) is skipped;
// a Row without a schema, or not default-constructible, needs a
// deserializer (the constructor says so).
//
// Errors (flowlib::error naming the source; a batch that fails is not
// committed and the position does not move):
//   - a record that does not decode: errc::malformed_record naming the
//     partition and offset; a flowlib::error thrown by options.deserialize
//     passes through as it is, any other exception it throws becomes
//     malformed_record with its what();
//   - records a position names that retention removed (an offset below the
//     partition's low watermark): errc::source_data_lost naming the topic,
//     the partition and the offsets lost (R-SOURCE-3);
//   - a broker error or a timeout (options.request_timeout for metadata and
//     watermarks, options.read_timeout for a whole read): errc::source_io
//     with librdkafka's text, and the last error the client reported
//     through its error callback (a refused connection, brokers down).
//     librdkafka retries retriable errors (a broker that is down, a leader
//     that moved) until the timeout, so a read that completes within it
//     succeeds; errors that waiting does not cure (authorization) fail at
//     once. A broker that claims an offset the partition holds is out of
//     range is source_io too, not data loss (the watermarks decide);
//   - a bad configuration (an empty topic or broker list, a librdkafka
//     property it rejects, a property the source needs set otherwise, a
//     partition the topic does not have): errc::invalid_argument.
// When read() throws, `out` is as it was.
//
// The consumer. One librdkafka consumer per source, made by the
// constructor and reused by every call (a consumer per batch would pay its
// connection setup each time); it joins no group: read() assigns it the
// partitions of the batch at their `from` offsets and unassigns them when
// the batch is read. It needs a group.id to poll (options.config may set
// one; the default is "flowlib.kafka_source"), and the source sets
// enable.auto.commit=false, enable.auto.offset.store=false,
// enable.partition.eof=true and auto.offset.reset=error (a position
// retention removed fails instead of skipping); options.config may not set
// these otherwise. Its defaults fetch.wait.max.ms=1 and
// socket.nagle.disable=true keep a batch's reads from waiting on broker
// long polls (detail/kafka.hpp says why). After a read fails with a broker
// error the consumer is replaced by a new one at the next call: librdkafka
// may keep partitions in an error state (an authorization failure does for
// good), and a new consumer starts clean. The destructor closes the
// consumer.
//
// Monitoring offsets. With options.commit_offsets_for_monitoring, read()
// commits each partition's `from` offset to the consumer group named by
// the group.id in options.config (required then), asynchronously, before it
// reads: `from` is the position the pipeline committed before the batch,
// so the group's offsets trail the pipeline's by the batch in progress and
// never run ahead of it (lag tools read them). The end of an update's last
// batch is mirrored when a later batch reads, so the group's lag shows at
// most one batch more than the pipeline's own. Meaningful when one flow
// reads the source: two flows at different positions would commit both
// positions in turn. A commit that fails is not retried; the pipeline's
// checkpoint, not the group's offsets, decides what is read.
//
// Threads. Every member may be called from any thread; a mutex serialises
// them (a read holds it for its whole length, so a concurrent latest()
// waits). The pipeline calls them from its own thread. Not copyable or
// movable (programs share it by reference).
#pragma once

#include <flowlib/detail/config.hpp>
#include <flowlib/detail/kafka.hpp>
#include <flowlib/error.hpp>
#include <flowlib/schema.hpp>
#include <flowlib/source/detail/json_row.hpp>
#include <flowlib/source/position.hpp>

#include <librdkafka/rdkafka.h>
#include <simdjson.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace flowlib {

/// @brief One header of a Kafka record (a value may be absent).
struct KafkaHeader {
  std::string_view name{};
  std::optional<std::string_view> value{};
};

/// @brief A Kafka record as a deserializer sees it. The views point into
/// the consumer's buffers and are valid during the deserializer's call only.
struct KafkaRecord {
  std::string_view topic{};
  std::int32_t partition = 0;
  std::int64_t offset = 0;
  std::optional<std::string_view> key{};    ///< std::nullopt: no key
  std::optional<std::string_view> value{};  ///< std::nullopt: a tombstone
  /// The record's timestamp (create or log-append time), when it has one.
  std::optional<std::chrono::sys_time<std::chrono::milliseconds>> timestamp{};
  std::span<const KafkaHeader> headers{};
};

/// @brief Options of a KafkaSource<Row>; see source/kafka.hpp.
template <class Row>
struct KafkaSourceOptions {
  std::string brokers{};                      ///< bootstrap.servers, "host:port,..."
  std::string topic{};                        ///< the topic read
  std::vector<std::int32_t> partitions{};     ///< empty: all of the topic's
  /// Further librdkafka consumer properties, applied in order (security,
  /// client.id, group.id, fetch sizes, ...).
  std::vector<std::pair<std::string, std::string>> config{};
  /// The record's row, or std::nullopt to skip it. Empty: the value as a
  /// JSON object by Row's FLOWLIB_SCHEMA, tombstones skipped.
  std::function<std::optional<Row>(const KafkaRecord&)> deserialize{};
  /// Default JSON decoding only: a column of Row (std::string or
  /// std::optional<std::string>) that keeps the values that do not decode,
  /// as a JSON object (empty: such a value fails the batch).
  std::string rescued_column{};
  /// With rescued_column: keys that name no column are kept there too.
  bool rescue_unknown_keys = false;
  /// Commit each batch's start offsets to the consumer group of
  /// config's group.id, for lag monitoring only (see the header comment).
  bool commit_offsets_for_monitoring = false;
  /// A declaration about the topic's content (R-EXACT-3): at_least_once
  /// when its producers may write a record twice (retries without
  /// idempotence).
  flowlib::delivery guarantee = flowlib::delivery::exactly_once;
  /// Metadata and watermark requests.
  std::chrono::milliseconds request_timeout = std::chrono::seconds(10);
  /// A whole read() (one batch).
  std::chrono::milliseconds read_timeout = std::chrono::seconds(30);
  /// With `partitions` empty: how often the topic's partition list is
  /// looked up again (at a start() or latest() call).
  std::chrono::milliseconds partition_refresh = std::chrono::minutes(5);
};

namespace detail {

/// The row-independent settings of a KafkaSource: its options but the
/// decoding.
struct kafka_source_settings {
  std::string brokers;
  std::string topic;
  std::vector<std::int32_t> partitions;
  kafka_properties config;
  bool commit_offsets_for_monitoring = false;
  std::chrono::milliseconds request_timeout{};
  std::chrono::milliseconds read_timeout{};
  std::chrono::milliseconds partition_refresh{};
};

/// What a KafkaSource does that does not depend on its row type: the
/// consumer, the topic's partitions, the positions and the planning of
/// batches, the offset ranges of a read and the records as a deserializer
/// sees them. KafkaSource<Row> decodes the records into rows. Every member
/// but those that say "under the lock" takes the lock (mutex()) itself.
/// See the header comment.
class kafka_source_core {
 public:
  /// Checks `settings` and makes the consumer; throws errc::invalid_argument
  /// naming the source `name`. `row_problem`, when not empty, is what the
  /// row type's options got wrong: thrown after the checks of the topic and
  /// the brokers, before the others.
  FLOWLIB_KAFKA_DECL kafka_source_core(std::string name, kafka_source_settings settings,
                                       std::string_view row_problem);
  kafka_source_core(const kafka_source_core&) = delete;
  kafka_source_core& operator=(const kafka_source_core&) = delete;

  const std::string& name() const noexcept { return name_; }
  const std::string& topic() const noexcept { return s_.topic; }
  /// KafkaSource::start(), latest(), plan() and partitions().
  FLOWLIB_KAFKA_DECL source_position start() const;
  FLOWLIB_KAFKA_DECL source_position latest() const;
  FLOWLIB_KAFKA_DECL source_position plan(const source_position& from, std::size_t limit) const;
  FLOWLIB_KAFKA_DECL std::vector<std::int32_t> partitions() const;

  /// The lock a read holds for its whole length.
  std::mutex& mutex() const noexcept { return mutex_; }
  /// Under the lock: the offset ranges of the batch [from, to) (the
  /// partitions looked up when due; errc::invalid_argument when the batch
  /// ends before it starts), and their offset count in `expected`; mirrors
  /// `from` to the consumer group when the settings say so.
  FLOWLIB_KAFKA_DECL std::vector<kafka_offset_range> begin_read(const source_position& from,
                                                                const source_position& to,
                                                                std::uint64_t& expected) const;
  /// Under the lock: the consumer, the read's limit and the context of its
  /// errors.
  rd_kafka_t* consumer() const noexcept { return consumer_.get(); }
  std::chrono::milliseconds read_timeout() const noexcept { return s_.read_timeout; }
  kafka_context ctx() const noexcept { return {name_, errc::source_io, &note_, true}; }
  /// Under the lock: a read ended; `failed` is the error it threw, if any
  /// (after a broker error the next call makes a new consumer).
  FLOWLIB_KAFKA_DECL void end_read(const error* failed) const noexcept;

  /// Under the lock: `m` as a deserializer sees it, its headers kept in
  /// `headers` (valid until the next call).
  FLOWLIB_KAFKA_DECL KafkaRecord record_of(const rd_kafka_message_t& m,
                                           std::vector<KafkaHeader>& headers) const;
  /// Throws errc::malformed_record: the deserializer threw `what` for `m`.
  [[noreturn]] FLOWLIB_KAFKA_DECL void deserializer_failed(
      const rd_kafka_message_t& m, std::string_view what) const;
  /// "partition P offset O", without allocating.
  FLOWLIB_KAFKA_DECL static std::string_view where_of(const rd_kafka_message_t& m,
                                                      std::array<char, 64>& buf);

 private:
  [[noreturn]] FLOWLIB_KAFKA_DECL void fail_argument(const std::string& detail) const;
  static std::uint64_t to_offset(std::int64_t o) noexcept { return o < 0 ? 0 : static_cast<std::uint64_t>(o); }
  // The consumer, made from properties_.
  FLOWLIB_KAFKA_DECL void connect() const;
  // Under the lock: the partition list, looked up when it is due, and after
  // a failed read, with a new consumer.
  FLOWLIB_KAFKA_DECL void refresh_partitions() const;
  // Under the lock: commit `from` to the consumer group (asynchronously),
  // when it moved since the last commit.
  FLOWLIB_KAFKA_DECL void mirror(const source_position& from) const;

  std::string name_;
  kafka_source_settings s_;
  mutable std::mutex mutex_;
  kafka_properties properties_;      // the consumer's configuration
  mutable kafka_error_note note_;    // before consumer_: outlives it
  mutable kafka_handle consumer_;
  mutable std::vector<std::int32_t> partitions_;
  mutable std::chrono::steady_clock::time_point partitions_checked_{};
  mutable source_position latest_;
  mutable bool have_latest_ = false;
  mutable bool reconnect_ = false;     // a read failed: make a new consumer
  mutable bool metadata_due_ = false;  // the consumer is new: ask for the topic's metadata
  mutable source_position mirrored_;
  mutable bool mirrored_any_ = false;
};

}  // namespace detail

/// @brief The partitions of a Kafka topic as a source; see the header
/// comment.
template <class Row>
class KafkaSource {
  static_assert(std::move_constructible<Row>,
                "KafkaSource<Row>: Row must be move-constructible: read() moves each "
                "deserialized row into the batch");

 public:
  using row_type = Row;
  using options_type = KafkaSourceOptions<Row>;

  /// @brief A source called `name` (for messages and the event log) over
  /// options.topic. Makes the consumer (it connects in the background).
  /// Throws flowlib::error (errc::invalid_argument) for a bad configuration
  /// (see the header comment).
  KafkaSource(std::string name, options_type options)
      : core_(std::move(name), settings_of(options), row_problem(options)), options_(std::move(options)) {}

  KafkaSource(const KafkaSource&) = delete;
  KafkaSource& operator=(const KafkaSource&) = delete;

  /// @brief Each partition's low watermark (the first offset still held).
  /// Throws errc::source_io when the cluster does not answer.
  source_position start() const { return core_.start(); }

  /// @brief Each partition's high watermark (the offset the next record
  /// written gets); plan() plans up to it. Throws errc::source_io when the
  /// cluster does not answer.
  source_position latest() const { return core_.latest(); }

  /// @brief The end of the next batch from `from`: at most `limit` offsets
  /// (0: no limit) shared evenly among the partitions, never beyond the last
  /// latest() (see the header comment). Partitions of `from` the source
  /// does not read are carried unchanged.
  source_position plan(const source_position& from, std::size_t limit) const {
    return core_.plan(from, limit);
  }

  /// @brief Appends the rows of the records at offsets [from, to) of each
  /// partition the source reads, the lowest-numbered partition's first,
  /// each in offset order (see the header comment for the errors). When it
  /// throws, `out` is as it was.
  void read(const source_position& from, const source_position& to, std::vector<Row>& out) const {
    std::lock_guard lock(core_.mutex());
    std::uint64_t expected = 0;
    const std::vector<detail::kafka_offset_range> ranges = core_.begin_read(from, to, expected);
    if (ranges.empty()) return;

    const std::size_t before = out.size();
    try {
      // Room for one row per offset, up to 64 MiB of rows (gaps and
      // skipped records make fewer).
      constexpr std::uint64_t reserve_cap = (std::uint64_t{64} << 20) / sizeof(Row);
      out.reserve(before + static_cast<std::size_t>(std::min<std::uint64_t>(expected, std::max<std::uint64_t>(reserve_cap, 1))));
      if (ranges.size() == 1) {
        // One partition: rows in arrival order are rows in offset order.
        detail::read_offset_ranges(core_.consumer(), core_.topic(), ranges, core_.read_timeout(), core_.ctx(),
                                   [&](detail::kafka_message&& m) { decode(*m, out); });
      } else {
        // Several: keep each partition's records, then decode in order.
        std::vector<std::vector<detail::kafka_message>> held(ranges.size());
        detail::read_offset_ranges(core_.consumer(), core_.topic(), ranges, core_.read_timeout(), core_.ctx(),
                                   [&](detail::kafka_message&& m) {
                                     const auto it = std::lower_bound(
                                         ranges.begin(), ranges.end(), m->partition,
                                         [](const detail::kafka_offset_range& r, std::int32_t p) {
                                           return r.partition < p;
                                         });
                                     held[static_cast<std::size_t>(it - ranges.begin())].push_back(std::move(m));
                                   });
        for (auto& part : held) {
          for (auto& m : part) {
            decode(*m, out);
            m.reset();  // return each buffer as soon as it is decoded
          }
        }
      }
      core_.end_read(nullptr);
    } catch (const error& e) {
      out.erase(out.begin() + static_cast<std::ptrdiff_t>(before), out.end());
      core_.end_read(&e);
      throw;
    } catch (...) {
      out.erase(out.begin() + static_cast<std::ptrdiff_t>(before), out.end());
      throw;
    }
  }

  /// @brief The declared delivery guarantee (R-EXACT-3).
  flowlib::delivery delivery() const noexcept { return options_.guarantee; }
  /// @brief The source's name, for messages and the event log.
  const std::string& name() const noexcept { return core_.name(); }
  /// @brief The topic read.
  const std::string& topic() const noexcept { return core_.topic(); }
  /// @brief The partitions read, ascending: options.partitions, or the
  /// topic's as last looked up (empty before the first start(), latest()
  /// or read()).
  std::vector<std::int32_t> partitions() const { return core_.partitions(); }

 private:
  // Whether the default JSON decoding applies to Row.
  static constexpr bool json_rows = has_schema<Row> && std::default_initializable<Row>;

  // The row-independent options, moved out of `o`.
  static detail::kafka_source_settings settings_of(options_type& o) {
    return {std::move(o.brokers),
            std::move(o.topic),
            std::move(o.partitions),
            std::move(o.config),
            o.commit_offsets_for_monitoring,
            o.request_timeout,
            o.read_timeout,
            o.partition_refresh};
  }

  // What `o` gets wrong about decoding Row (empty: nothing).
  static std::string_view row_problem(const options_type& o) {
    if constexpr (!json_rows) {
      if (!o.deserialize)
        return "the row type has no FLOWLIB_SCHEMA (or is not default-constructible), so records "
               "cannot be decoded as JSON: give options.deserialize, or declare the row's columns "
               "with FLOWLIB_SCHEMA";
    }
    if (!o.rescued_column.empty() && o.deserialize)
      return "options.rescued_column applies to the default JSON decoding only; "
             "options.deserialize is set";
    return {};
  }

  // Under the lock: one record into `out` (or skipped).
  void decode(const rd_kafka_message_t& m, std::vector<Row>& out) const {
    if (!options_.deserialize) {
      if constexpr (json_rows) {
        if (!m.payload) return;  // a tombstone
        std::array<char, 64> where_buf;
        const std::string_view where = detail::kafka_source_core::where_of(m, where_buf);
        Row row{};
        detail::json_row_options jo;
        if (!options_.rescued_column.empty()) {
          jo.rescue = true;
          jo.rescue_unknown = options_.rescue_unknown_keys;
          jo.rescued_column = options_.rescued_column;
        }
        detail::json_text_to_row(parser_, std::string_view(static_cast<const char*>(m.payload), m.len), row,
                                 detail::record_origin{core_.name(), where}, jo);
        out.push_back(std::move(row));
      }
      return;
    }
    const KafkaRecord r = core_.record_of(m, headers_);
    std::optional<Row> row = deserialize(m, r);
    if (row) out.push_back(std::move(*row));
  }

  // options.deserialize(r), its exceptions other than flowlib::error
  // wrapped as malformed_record naming the record.
  std::optional<Row> deserialize(const rd_kafka_message_t& m, const KafkaRecord& r) const {
    try {
      return options_.deserialize(r);
    } catch (const error&) {
      throw;
    } catch (const std::exception& e) {
      core_.deserializer_failed(m, e.what());
    } catch (...) {
      core_.deserializer_failed(m, "an exception that is not a std::exception");
    }
  }

  detail::kafka_source_core core_;
  options_type options_;  // the decoding (the rest moved to core_)
  mutable simdjson::ondemand::parser parser_;
  mutable std::vector<KafkaHeader> headers_;
};

}  // namespace flowlib

#if !defined(FLOWLIB_KAFKA_SEPARATE_COMPILATION)
#include <flowlib/source/impl/kafka.ipp>
#endif
