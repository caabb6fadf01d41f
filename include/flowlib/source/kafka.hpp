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
// a value-initialised Row (detail/json_row.hpp; options.rescued_column
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

#include <flowlib/detail/json_row.hpp>
#include <flowlib/detail/kafka.hpp>
#include <flowlib/error.hpp>
#include <flowlib/schema.hpp>
#include <flowlib/source/position.hpp>

#include <librdkafka/rdkafka.h>
#include <simdjson.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cinttypes>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <iterator>
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
      : name_(std::move(name)), options_(std::move(options)) {
    if (options_.topic.empty()) fail_argument("options.topic is empty: name the topic to read");
    if (options_.brokers.empty())
      fail_argument("options.brokers is empty: give the bootstrap servers, \"host:port,...\"");
    if constexpr (!json_rows) {
      if (!options_.deserialize)
        fail_argument(
            "the row type has no FLOWLIB_SCHEMA (or is not default-constructible), so records "
            "cannot be decoded as JSON: give options.deserialize, or declare the row's columns "
            "with FLOWLIB_SCHEMA");
    }
    if (!options_.rescued_column.empty() && options_.deserialize)
      fail_argument("options.rescued_column applies to the default JSON decoding only; "
                    "options.deserialize is set");
    for (const std::int32_t p : options_.partitions)
      if (p < 0) fail_argument("options.partitions holds a negative partition number");
    std::sort(options_.partitions.begin(), options_.partitions.end());
    if (std::adjacent_find(options_.partitions.begin(), options_.partitions.end()) !=
        options_.partitions.end())
      fail_argument("options.partitions names a partition twice");

    const detail::kafka_properties required = detail::kafka_consumer_required();
    bool group_set = false;
    for (const auto& [key, value] : options_.config) {
      if (key == "bootstrap.servers" || key == "metadata.broker.list")
        fail_argument(std::string("options.config sets '") + key + "': give the brokers in options.brokers");
      if (key == "group.id") group_set = true;
      for (const auto& [rk, rv] : required)
        if (key == rk && value != rv) {
          std::string d = "options.config sets '";
          d += key;
          d += "' = '";
          d += value;
          d += "', but the source reads exact offset ranges and needs '";
          d += rv;
          d += "' (docs/kafka-source.md)";
          fail_argument(d);
        }
    }
    if (options_.commit_offsets_for_monitoring && !group_set)
      fail_argument("options.commit_offsets_for_monitoring needs a consumer group: set 'group.id' "
                    "in options.config to the group whose offsets the lag monitoring reads");

    detail::kafka_properties props = detail::kafka_consumer_defaults("flowlib.kafka_source");
    props.emplace_back("bootstrap.servers", options_.brokers);
    std::string client_id = "flowlib.";
    client_id += name_;
    props.emplace_back("client.id", std::move(client_id));
    for (const auto& kv : options_.config) props.push_back(kv);
    for (const auto& kv : required) props.push_back(kv);
    properties_ = std::move(props);
    connect();
  }

  KafkaSource(const KafkaSource&) = delete;
  KafkaSource& operator=(const KafkaSource&) = delete;

  /// @brief Each partition's low watermark (the first offset still held).
  /// Throws errc::source_io when the cluster does not answer.
  source_position start() const {
    std::lock_guard lock(mutex_);
    refresh_partitions();
    const auto low = detail::query_offsets(consumer_.get(), options_.topic, partitions_, false,
                                           options_.request_timeout, ctx());
    note_.clear();  // the note holds the client's errors since the last call that succeeded
    source_position p;
    for (std::size_t i = 0; i < partitions_.size(); ++i)
      p.set(static_cast<source_position::partition_type>(partitions_[i]), to_offset(low[i]));
    return p;
  }

  /// @brief Each partition's high watermark (the offset the next record
  /// written gets); plan() plans up to it. Throws errc::source_io when the
  /// cluster does not answer.
  source_position latest() const {
    std::lock_guard lock(mutex_);
    refresh_partitions();
    const auto high = detail::query_offsets(consumer_.get(), options_.topic, partitions_, true,
                                            options_.request_timeout, ctx());
    note_.clear();
    latest_ = source_position{};
    for (std::size_t i = 0; i < partitions_.size(); ++i)
      latest_.set(static_cast<source_position::partition_type>(partitions_[i]), to_offset(high[i]));
    have_latest_ = true;
    return latest_;
  }

  /// @brief The end of the next batch from `from`: at most `limit` offsets
  /// (0: no limit) shared evenly among the partitions, never beyond the last
  /// latest() (see the header comment). Partitions of `from` the source
  /// does not read are carried unchanged.
  source_position plan(const source_position& from, std::size_t limit) const {
    std::unique_lock lock(mutex_);
    if (!have_latest_) {
      lock.unlock();
      (void)latest();
      lock.lock();
    }
    struct part {
      source_position::partition_type id;
      std::uint64_t from, pending, take;
    };
    std::vector<part> parts;
    for (const auto& [id, end] : latest_.partitions()) {
      const auto f = from.offset(id);
      parts.push_back({id, f, end > f ? end - f : 0, 0});
    }
    if (limit == 0) {
      for (auto& p : parts) p.take = p.pending;
    } else {
      std::uint64_t left = limit;
      std::vector<part*> open;
      for (auto& p : parts)
        if (p.pending > 0) open.push_back(&p);
      while (left > 0 && !open.empty()) {
        const std::uint64_t share = left / open.size();
        if (share == 0) {  // fewer offsets than partitions: one each, lowest first
          for (std::size_t i = 0; i < left; ++i) open[i]->take += 1;
          break;
        }
        for (part* p : open) {
          const std::uint64_t g = std::min(share, p->pending - p->take);
          p->take += g;
          left -= g;
        }
        std::erase_if(open, [](const part* p) { return p->take == p->pending; });
      }
    }
    source_position to = from;
    for (const auto& p : parts) to.set(p.id, p.from + p.take);
    return to;
  }

  /// @brief Appends the rows of the records at offsets [from, to) of each
  /// partition the source reads, the lowest-numbered partition's first,
  /// each in offset order (see the header comment for the errors). When it
  /// throws, `out` is as it was.
  void read(const source_position& from, const source_position& to, std::vector<Row>& out) const {
    std::lock_guard lock(mutex_);
    if (partitions_.empty() || reconnect_ || metadata_due_) refresh_partitions();
    std::vector<detail::kafka_offset_range> ranges;
    std::uint64_t expected = 0;
    for (const std::int32_t p : partitions_) {
      const auto id = static_cast<source_position::partition_type>(p);
      const std::uint64_t a = from.offset(id), b = to.offset(id);
      if (a > b) {
        std::string d = "read: the batch from ";
        d += from.to_string();
        d += " to ";
        d += to.to_string();
        d += " ends before it starts in partition ";
        d += std::to_string(p);
        fail_argument(d);
      }
      if (a < b) {
        ranges.push_back({p, static_cast<std::int64_t>(a), static_cast<std::int64_t>(b)});
        expected += b - a;
      }
    }
    if (options_.commit_offsets_for_monitoring) mirror(from);
    if (ranges.empty()) return;

    const std::size_t before = out.size();
    try {
      // Room for one row per offset, up to 64 MiB of rows (gaps and
      // skipped records make fewer).
      constexpr std::uint64_t reserve_cap = (std::uint64_t{64} << 20) / sizeof(Row);
      out.reserve(before + static_cast<std::size_t>(std::min<std::uint64_t>(expected, std::max<std::uint64_t>(reserve_cap, 1))));
      if (ranges.size() == 1) {
        // One partition: rows in arrival order are rows in offset order.
        detail::read_offset_ranges(consumer_.get(), options_.topic, ranges, options_.read_timeout, ctx(),
                                   [&](detail::kafka_message&& m) { decode(*m, out); });
      } else {
        // Several: keep each partition's records, then decode in order.
        std::vector<std::vector<detail::kafka_message>> held(ranges.size());
        detail::read_offset_ranges(consumer_.get(), options_.topic, ranges, options_.read_timeout, ctx(),
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
      note_.clear();
    } catch (const error& e) {
      out.erase(out.begin() + static_cast<std::ptrdiff_t>(before), out.end());
      // After a broker error the client may keep the partitions in an error
      // state (an authorization failure does, for good): the next call
      // makes a new consumer.
      if (e.code() == errc::source_io || e.code() == errc::source_data_lost) reconnect_ = true;
      throw;
    } catch (...) {
      out.erase(out.begin() + static_cast<std::ptrdiff_t>(before), out.end());
      throw;
    }
  }

  /// @brief The declared delivery guarantee (R-EXACT-3).
  flowlib::delivery delivery() const noexcept { return options_.guarantee; }
  /// @brief The source's name, for messages and the event log.
  const std::string& name() const noexcept { return name_; }
  /// @brief The topic read.
  const std::string& topic() const noexcept { return options_.topic; }
  /// @brief The partitions read, ascending: options.partitions, or the
  /// topic's as last looked up (empty before the first start(), latest()
  /// or read()).
  std::vector<std::int32_t> partitions() const {
    if (!options_.partitions.empty()) return options_.partitions;
    std::lock_guard lock(mutex_);
    return partitions_;
  }

 private:
  // Whether the default JSON decoding applies to Row.
  static constexpr bool json_rows = has_schema<Row> && std::default_initializable<Row>;

  detail::kafka_context ctx() const noexcept { return {name_, errc::source_io, &note_, true}; }

  [[noreturn]] void fail_argument(const std::string& detail) const {
    throw error(errc::invalid_argument, name_, "", "", detail);
  }

  static std::uint64_t to_offset(std::int64_t o) noexcept { return o < 0 ? 0 : static_cast<std::uint64_t>(o); }

  // The consumer, made from properties_.
  void connect() const {
    detail::kafka_conf conf = detail::make_kafka_conf(properties_, ctx());
    note_.install(conf.get());
    consumer_ = detail::make_kafka_handle(RD_KAFKA_CONSUMER, std::move(conf), ctx());
  }

  // Under the lock: the partition list, looked up when it is due, and after
  // a failed read, with a new consumer.
  void refresh_partitions() const {
    if (reconnect_) {
      consumer_.reset();
      connect();
      reconnect_ = false;
      metadata_due_ = true;  // a new consumer learns the topic's leaders before it reads
    }
    const auto now = std::chrono::steady_clock::now();
    if (!options_.partitions.empty()) {
      if (!partitions_.empty() && !metadata_due_) return;
      const auto ids = detail::topic_partition_ids(consumer_.get(), options_.topic, options_.request_timeout, ctx());
      for (const std::int32_t p : options_.partitions)
        if (!std::binary_search(ids.begin(), ids.end(), p)) {
          std::string d = "options.partitions names partition ";
          d += std::to_string(p);
          d += ", but topic '";
          d += options_.topic;
          d += "' has ";
          d += std::to_string(ids.size());
          d += ids.size() == 1 ? " partition" : " partitions";
          fail_argument(d);
        }
      partitions_ = options_.partitions;
      metadata_due_ = false;
      return;
    }
    if (!partitions_.empty() && !metadata_due_ && now - partitions_checked_ < options_.partition_refresh)
      return;
    auto ids = detail::topic_partition_ids(consumer_.get(), options_.topic, options_.request_timeout, ctx());
    // Kafka never removes partitions; a shorter answer (metadata from a
    // broker that is behind) does not drop any already read.
    for (const std::int32_t p : partitions_)
      if (!std::binary_search(ids.begin(), ids.end(), p)) ids.insert(std::upper_bound(ids.begin(), ids.end(), p), p);
    partitions_ = std::move(ids);
    partitions_checked_ = now;
    metadata_due_ = false;
  }

  // Under the lock: one record into `out` (or skipped).
  void decode(const rd_kafka_message_t& m, std::vector<Row>& out) const {
    if (!options_.deserialize) {
      if constexpr (json_rows) {
        if (!m.payload) return;  // a tombstone
        std::array<char, 64> where_buf;
        const std::string_view where = where_of(m, where_buf);
        Row row{};
        detail::json_row_options jo;
        if (!options_.rescued_column.empty()) {
          jo.rescue = true;
          jo.rescue_unknown = options_.rescue_unknown_keys;
          jo.rescued_column = options_.rescued_column;
        }
        detail::json_text_to_row(parser_, std::string_view(static_cast<const char*>(m.payload), m.len), row,
                                 detail::record_origin{name_, where}, jo);
        out.push_back(std::move(row));
      }
      return;
    }
    KafkaRecord r;
    r.topic = options_.topic;
    r.partition = m.partition;
    r.offset = m.offset;
    if (m.key) r.key = std::string_view(static_cast<const char*>(m.key), m.key_len);
    if (m.payload) r.value = std::string_view(static_cast<const char*>(m.payload), m.len);
    rd_kafka_timestamp_type_t tstype = RD_KAFKA_TIMESTAMP_NOT_AVAILABLE;
    const std::int64_t ts = rd_kafka_message_timestamp(&m, &tstype);
    if (tstype != RD_KAFKA_TIMESTAMP_NOT_AVAILABLE && ts >= 0)
      r.timestamp = std::chrono::sys_time<std::chrono::milliseconds>(std::chrono::milliseconds(ts));
    headers_.clear();
    rd_kafka_headers_t* hdrs = nullptr;
    if (rd_kafka_message_headers(&m, &hdrs) == RD_KAFKA_RESP_ERR_NO_ERROR && hdrs) {
      const char* hname = nullptr;
      const void* hvalue = nullptr;
      std::size_t hsize = 0;
      for (std::size_t i = 0; rd_kafka_header_get_all(hdrs, i, &hname, &hvalue, &hsize) == RD_KAFKA_RESP_ERR_NO_ERROR;
           ++i) {
        KafkaHeader h{hname, std::nullopt};
        if (hvalue) h.value = std::string_view(static_cast<const char*>(hvalue), hsize);
        headers_.push_back(h);
      }
    }
    r.headers = headers_;
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
      deserializer_failed(m, e.what());
    } catch (...) {
      deserializer_failed(m, "an exception that is not a std::exception");
    }
  }

  [[noreturn]] void deserializer_failed(const rd_kafka_message_t& m, std::string_view what) const {
    std::array<char, 64> buf;
    std::string d(where_of(m, buf));
    d += ": options.deserialize threw: ";
    d += what;
    throw error(errc::malformed_record, name_, "", "", d);
  }

  // "partition P offset O", without allocating.
  static std::string_view where_of(const rd_kafka_message_t& m, std::array<char, 64>& buf) {
    const int n = std::snprintf(buf.data(), buf.size(), "partition %" PRId32 " offset %" PRId64, m.partition,
                                m.offset);
    return {buf.data(), static_cast<std::size_t>(std::clamp(n, 0, static_cast<int>(buf.size()) - 1))};
  }

  // Under the lock: commit `from` to the consumer group (asynchronously),
  // when it moved since the last commit.
  void mirror(const source_position& from) const {
    std::vector<std::pair<std::int32_t, std::int64_t>> changed;
    for (const std::int32_t p : partitions_) {
      const auto o = from.offset(static_cast<source_position::partition_type>(p));
      if (mirrored_.offset(static_cast<source_position::partition_type>(p)) != o || !mirrored_any_)
        changed.emplace_back(p, static_cast<std::int64_t>(o));
    }
    if (changed.empty()) return;
    detail::kafka_partitions list = detail::make_kafka_partitions(changed.size());
    for (const auto& [p, o] : changed)
      rd_kafka_topic_partition_list_add(list.get(), options_.topic.c_str(), p)->offset = o;
    if (rd_kafka_commit(consumer_.get(), list.get(), 1) == RD_KAFKA_RESP_ERR_NO_ERROR) {
      for (const auto& [p, o] : changed)
        mirrored_.set(static_cast<source_position::partition_type>(p), static_cast<std::uint64_t>(o));
      mirrored_any_ = true;
    }
  }

  std::string name_;
  options_type options_;
  mutable std::mutex mutex_;
  detail::kafka_properties properties_;      // the consumer's configuration
  mutable detail::kafka_error_note note_;  // before consumer_: outlives it
  mutable detail::kafka_handle consumer_;
  mutable std::vector<std::int32_t> partitions_;
  mutable std::chrono::steady_clock::time_point partitions_checked_{};
  mutable source_position latest_;
  mutable bool have_latest_ = false;
  mutable bool reconnect_ = false;     // a read failed: make a new consumer
  mutable bool metadata_due_ = false;  // the consumer is new: ask for the topic's metadata
  mutable simdjson::ondemand::parser parser_;
  mutable std::vector<KafkaHeader> headers_;
  mutable source_position mirrored_;
  mutable bool mirrored_any_ = false;
};

}  // namespace flowlib
