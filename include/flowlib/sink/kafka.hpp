// flowlib/sink/kafka.hpp
//
// KafkaSink<Row>: a sink that writes each committed batch of a flow to a
// Kafka topic, every record once (R-SINK-1), without Kafka transactions.
//
//   flowlib::KafkaSinkOptions<Order> out;
//   out.brokers = "kafka1:9092";
//   out.topic = "orders_out";               // must exist
//   out.writer = "orders_pipeline";         // the pipeline's name
//   out.key = [](const Order& o) { return std::optional<std::string>(std::to_string(o.id)); };
//   pipeline.flow("export").from(orders).into(flowlib::KafkaSink<Order>{std::move(out)});
//
// Records. Each row is one record: its value is options.serialize(row)
// (default: a JSON object by FLOWLIB_SCHEMA, see kafka_json_value), its key
// options.key(row) (default: none), and it carries five headers
// (kafka_sink_headers): the writer (options.writer: the pipeline's name, or
// any name unique among the programs writing the topic), the flow, the
// batch id, the record's index within the batch and the batch's record
// count, as decimal text. The sink chooses every record's partition itself,
// deterministically, so a batch delivered again sends each record where it
// went before: options.partitioner(row, partitions) when given; otherwise a
// keyed record goes to murmur2(key) mod partitions, as Kafka's own clients
// place keys (kafka_key_partition), and a record without a key to
// (batch id + index) mod partitions.
//
// Exactly once, without transactions (docs/kafka-sink.md). The producer is
// idempotent (enable.idempotence, acks=all): within one producer the records
// of a partition land in the order given, each once, through its retries.
// What a restart or a failure leaves unknown, the sink reads back: before it
// writes a batch after its start, after a failure, or after a batch id it
// did not expect, it reads each partition the batch writes to backwards from
// the high watermark, in chunks, down to the last record of this writer and
// flow from an earlier batch (or the partition's start, or
// options.max_tail_scan records), collects the records of this batch found
// on the way, and writes only the others, in batch order. After a batch it
// delivered without failure it knows what it wrote: the next batch (the next
// id) reads nothing back, and the same id again writes nothing. deliver()
// waits for every delivery report; any failed record (or a failure to hand
// it over) throws errc::sink_io after the reports are in, so the batch is
// not committed and is delivered again, and the sink forgets what it knew
// and starts a new producer. A record of this writer and flow with a later
// batch id than the batch being delivered, or of this batch but not the
// same record (another record count, another partition), throws
// errc::checkpoint_mismatch: another process writes as this writer and
// flow, or the checkpoint is older than the topic, or the flow's rows or
// partitioning changed.
//
// Why headers and tail reads rather than transactions: Kafka transactions
// give a reader committed records only if every reader is configured for
// read_committed, and fence a restarted writer only through a stable
// transactional.id; the headers make every record self-describing for any
// reader, and the tail read needs nothing of the cluster beyond produce and
// fetch. The cost is a read of each written partition's tail after a start
// or a failure (usually one chunk), none in the steady state.
//
// Threads. A sink is used by one thread at a time (the pipeline's); it is
// movable, not copyable. Its producer and tail reader are made at the first
// batch and kept (the producer is made anew after a failure).
#pragma once

#include <flowlib/detail/json.hpp>
#include <flowlib/detail/kafka.hpp>
#include <flowlib/detail/type_traits.hpp>
#include <flowlib/error.hpp>
#include <flowlib/expect.hpp>
#include <flowlib/flows/contract.hpp>
#include <flowlib/schema.hpp>
#include <flowlib/sink/foreach_batch.hpp>  // sink_expectations
#include <flowlib/stats.hpp>
#include <flowlib/table.hpp>  // detail::describe_row

#include <librdkafka/rdkafka.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

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

/// @brief Settings of a KafkaSink. brokers, topic and writer are required.
template <class Row>
struct KafkaSinkOptions {
  /// bootstrap.servers: "host:port,...".
  std::string brokers;
  /// The topic written; it must exist (the sink reads its partition count).
  std::string topic;
  /// The writer's name in every record's headers: the pipeline's name, or
  /// any name no other program writing the topic uses for the same flow.
  std::string writer;
  /// librdkafka properties for both of the sink's clients (the producer and
  /// the tail reader): security, client.id, ... Applied after the sink's
  /// own; enable.idempotence and acks cannot be changed.
  std::vector<std::pair<std::string, std::string>> config;
  /// librdkafka properties for the producer only (linger.ms, compression...).
  std::vector<std::pair<std::string, std::string>> producer_config;
  /// A row's value bytes. Default: kafka_json_value (a JSON object by
  /// FLOWLIB_SCHEMA); required for a row type without one.
  std::function<std::string(const Row&)> serialize;
  /// A row's key bytes (std::nullopt: no key). Default: no key.
  std::function<std::optional<std::string>(const Row&)> key;
  /// A row's partition, in [0, partitions). Must give a row the same
  /// partition every time. Default: see the header comment.
  std::function<std::int32_t(const Row&, std::int32_t partitions)> partitioner;
  /// message.timeout.ms: how long the producer tries to deliver a record
  /// (retrying through broker failures) before the batch fails.
  std::chrono::milliseconds delivery_timeout{std::chrono::seconds(30)};
  /// The limit of each metadata, watermark and tail read.
  std::chrono::milliseconds request_timeout{std::chrono::seconds(30)};
  /// The most records of one partition a tail read goes back over before
  /// it concludes that none of the batch is there (docs/kafka-sink.md).
  std::uint64_t max_tail_scan = 1'000'000;
  /// For fault-injection tests: called before the record at `index` of
  /// batch `batch_id` is handed to the producer (only for records the sink
  /// writes). An exception it throws is a failure at that point: the sink
  /// waits for the reports of the records handed over, forgets what it
  /// knew, and lets the exception propagate.
  std::function<void(std::uint64_t batch_id, std::size_t index)> fault_hook;
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

namespace detail {

// --- The default value: JSON by FLOWLIB_SCHEMA --------------------------------

template <class T>
constexpr bool kafka_json_char = std::is_same_v<T, char> || std::is_same_v<T, char8_t> ||
                                 std::is_same_v<T, char16_t> || std::is_same_v<T, char32_t> ||
                                 std::is_same_v<T, wchar_t>;

/// Whether kafka_json_value can write a column of type T.
template <class T>
consteval bool kafka_json_column() {
  if constexpr (is_optional_v<T>) {
    return kafka_json_column<typename T::value_type>();
  } else {
    return std::is_arithmetic_v<T> || std::is_enum_v<T> || std::is_same_v<T, std::string> ||
           std::is_same_v<T, std::chrono::sys_days> || is_integral_sys_time_v<T>;
  }
}

/// Whether Row has a FLOWLIB_SCHEMA whose every column kafka_json_value can write.
template <class Row>
consteval bool kafka_json_row() {
  if constexpr (!has_schema<Row>) {
    return false;
  } else {
    bool ok = true;
    schema_of<Row>::for_each([&](auto col) {
      using V = std::remove_cvref_t<decltype(decltype(col)::get(std::declval<const Row&>()))>;
      ok = ok && kafka_json_column<V>();
    });
    return ok;
  }
}

/// "YYYY-MM-DD" (a year outside 0..9999 as its number).
inline void kafka_json_date(std::string& out, std::chrono::sys_days d) {
  const std::chrono::year_month_day ymd{d};
  char buf[32];
  const int n = std::snprintf(buf, sizeof buf, "%04d-%02u-%02u", static_cast<int>(ymd.year()),
                              static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()));
  out.append(buf, static_cast<std::size_t>(n));
}

/// ISO 8601 in UTC: "YYYY-MM-DDTHH:MM:SS[.fraction]Z", the fraction with as
/// many digits (3, 6 or 9) as the time point's duration needs (none for
/// whole seconds or coarser); a period that no such fraction writes exactly
/// is written in nanoseconds, rounded down.
template <class D>
std::string kafka_json_time_text(std::chrono::time_point<std::chrono::system_clock, D> t) {
  using namespace std::chrono;
  using P = typename D::period;
  constexpr int digits = P::den == 1                        ? 0
                         : (1000 % P::den == 0)             ? 3
                         : (1000000 % P::den == 0)          ? 6
                                                            : 9;
  const auto ns = time_point_cast<nanoseconds>(floor<nanoseconds>(t));
  const auto day = floor<days>(ns);
  const hh_mm_ss<nanoseconds> tod{ns - day};
  std::string out;
  kafka_json_date(out, day);
  char buf[48];
  int n = std::snprintf(buf, sizeof buf, "T%02d:%02d:%02d", static_cast<int>(tod.hours().count()),
                        static_cast<int>(tod.minutes().count()), static_cast<int>(tod.seconds().count()));
  out.append(buf, static_cast<std::size_t>(n));
  if constexpr (digits > 0) {
    long long frac = static_cast<long long>(tod.subseconds().count());
    for (int i = digits; i < 9; ++i) frac /= 10;
    n = std::snprintf(buf, sizeof buf, ".%0*lld", digits, frac);
    out.append(buf, static_cast<std::size_t>(n));
  }
  out += 'Z';
  return out;
}

template <class T>
void kafka_json_write(json_writer& w, const T& v) {
  if constexpr (is_optional_v<T>) {
    if (v) {
      kafka_json_write(w, *v);
    } else {
      w.null();
    }
  } else if constexpr (std::is_same_v<T, bool>) {
    w.value(v);
  } else if constexpr (std::is_enum_v<T>) {
    kafka_json_write(w, static_cast<std::underlying_type_t<T>>(v));
  } else if constexpr (kafka_json_char<T>) {
    w.value(static_cast<std::int64_t>(v));
  } else if constexpr (std::is_integral_v<T>) {
    w.value(v);
  } else if constexpr (std::is_floating_point_v<T>) {
    w.value(static_cast<double>(v));
  } else if constexpr (std::is_same_v<T, std::string>) {
    w.value(std::string_view(v));
  } else if constexpr (std::is_same_v<T, std::chrono::sys_days>) {
    std::string s;
    kafka_json_date(s, v);
    w.value(std::string_view(s));
  } else {
    static_assert(is_integral_sys_time_v<T>);
    w.value(std::string_view(kafka_json_time_text(v)));
  }
}

// --- The record stream: producing and reading back ---------------------------

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
inline std::string kafka_sink_excerpt(std::string_view s) {
  std::string out(s.substr(0, 80));
  if (s.size() > 80) out += "...";
  return out;
}

/// A header's value of a consumed record (false when absent).
inline bool kafka_sink_header(rd_kafka_headers_t* hdrs, std::string_view name, std::string_view& out) {
  const void* v = nullptr;
  std::size_t size = 0;
  const std::string n(name);
  if (!hdrs || rd_kafka_header_get_last(hdrs, n.c_str(), &v, &size) != RD_KAFKA_RESP_ERR_NO_ERROR)
    return false;
  out = v ? std::string_view(static_cast<const char*>(v), size) : std::string_view();
  return true;
}

inline bool kafka_sink_number(std::string_view s, std::uint64_t& out) {
  const auto r = std::from_chars(s.data(), s.data() + s.size(), out);
  return !s.empty() && r.ec == std::errc() && r.ptr == s.data() + s.size();
}

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
  std::int32_t partition_count(std::string_view flow) {
    if (partitions_ > 0) return partitions_;
    const kafka_context ctx = context(flow);
    // Asked through the producer: the request connects it, and its
    // producer id is then requested at once (an idempotent producer that
    // has no connection yet asks again only on a timer, after up to a
    // second), while the tails are read.
    ensure_producer(ctx);
    const auto ids = topic_partition_ids(producer_.get(), s_.topic, s_.request_timeout, ctx);
    // Kafka numbers a topic's partitions 0..n-1.
    partitions_ = static_cast<std::int32_t>(ids.size());
    return partitions_;
  }

  /// Writes the records of batch `batch` of `flow` that the topic does not
  /// hold yet. Throws errc::sink_io when a record could not be written (after
  /// every report is in), errc::checkpoint_mismatch when the topic holds
  /// what this batch cannot follow.
  void write(std::string_view flow, std::uint64_t batch, std::span<const kafka_sink_record> records,
             KafkaSinkDelivery& report) {
    report = KafkaSinkDelivery{};
    report.batch_id = batch;
    report.records = records.size();
    if (flow != flow_) {
      forget_positions();
      flow_ = std::string(flow);
    }
    if (last_batch_ && *last_batch_ == batch) {  // delivered in full by this sink
      report.already_there = records.size();
      return;
    }
    if (last_batch_ && *last_batch_ + 1 != batch) forget_positions();
    const kafka_context ctx = context(flow);
    try {
      std::vector<char> present(records.size(), 0);
      // The partitions to read back: those this batch writes whose tail the
      // sink does not know.
      std::vector<std::int32_t> unknown;
      for (const auto& r : records) {
        if (r.partition < 0 || r.partition >= partitions_) {
          std::string d = "record partition ";
          d += std::to_string(r.partition);
          d += " is outside the topic's ";
          d += std::to_string(partitions_);
          d += " partitions";
          throw error(errc::invalid_argument, std::string(flow), "", "", d);
        }
        if (!known(r.partition) && std::find(unknown.begin(), unknown.end(), r.partition) == unknown.end())
          unknown.push_back(r.partition);
      }
      if (!unknown.empty()) {
        std::sort(unknown.begin(), unknown.end());
        report.read_tails = true;
        report.tail_records_read = read_tails(ctx, batch, records, unknown, present);
      }
      for (const char p : present) report.already_there += p != 0 ? 1 : 0;
      produce(ctx, batch, records, present, report);
      for (const auto p : unknown) mark_known(p);
      last_batch_ = batch;
    } catch (...) {
      forget();
      throw;
    }
  }

 private:
  kafka_context context(std::string_view flow) const {
    return kafka_context{flow.empty() ? std::string_view(s_.topic) : flow, errc::sink_io};
  }

  bool known(std::int32_t p) const {
    return static_cast<std::size_t>(p) < known_.size() && known_[static_cast<std::size_t>(p)] != 0;
  }
  void mark_known(std::int32_t p) {
    if (known_.size() <= static_cast<std::size_t>(p)) known_.resize(static_cast<std::size_t>(p) + 1, 0);
    known_[static_cast<std::size_t>(p)] = 1;
  }
  // The next batch reads every tail it writes to again.
  void forget_positions() {
    known_.clear();
    last_batch_.reset();
  }
  // After a failure: also a new producer and the partition count read again.
  void forget() {
    forget_positions();
    producer_.reset();
    partitions_ = 0;
  }

  kafka_properties base_properties() const {
    kafka_properties props{{"bootstrap.servers", s_.brokers}};
    return props;
  }

  void ensure_reader(const kafka_context& ctx) {
    if (reader_) return;
    // kafka_consumer_defaults: a short fetch wait (a tail read asks only for
    // offsets that exist); the required settings last, after the user's.
    kafka_properties props = base_properties();
    for (auto& p : kafka_consumer_defaults("flowlib.kafka_sink")) props.push_back(std::move(p));
    props.insert(props.end(), s_.config.begin(), s_.config.end());
    for (auto& p : kafka_consumer_required()) props.push_back(std::move(p));
    kafka_conf conf = make_kafka_conf(props, ctx);
    reader_note_.install(conf.get());
    reader_ = make_kafka_handle(RD_KAFKA_CONSUMER, std::move(conf), ctx);
  }

  void ensure_producer(const kafka_context& ctx) {
    if (producer_) return;
    kafka_properties props = base_properties();
    props.emplace_back("socket.nagle.disable", "true");  // as Kafka's own clients
    props.emplace_back("enable.idempotence", "true");
    props.emplace_back("acks", "all");
    props.emplace_back("message.timeout.ms", std::to_string(std::max<std::int64_t>(1, s_.delivery_timeout.count())));
    props.insert(props.end(), s_.config.begin(), s_.config.end());
    props.insert(props.end(), s_.producer_config.begin(), s_.producer_config.end());
    kafka_conf conf = make_kafka_conf(props, ctx);
    rd_kafka_conf_set_opaque(conf.get(), this);
    rd_kafka_conf_set_dr_msg_cb(conf.get(), &kafka_sink_engine::on_delivery);
    rd_kafka_conf_set_error_cb(conf.get(), &kafka_sink_engine::on_error);
    producer_ = make_kafka_handle(RD_KAFKA_PRODUCER, std::move(conf), ctx);
  }

  static void on_delivery(rd_kafka_t*, const rd_kafka_message_t* m, void* opaque) {
    auto* self = static_cast<kafka_sink_engine*>(opaque);
    const auto i = reinterpret_cast<std::uintptr_t>(m->_private);
    if (i == 0 || i > self->reports_.size()) return;
    auto& r = self->reports_[i - 1];
    r.reported = true;
    r.err = m->err;
    if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) r.text = rd_kafka_err2str(m->err);
  }
  static void on_error(rd_kafka_t*, int err, const char* reason, void* opaque) {
    auto* self = static_cast<kafka_sink_engine*>(opaque);
    self->last_error_ = rd_kafka_err2str(static_cast<rd_kafka_resp_err_t>(err));
    self->last_error_ += ": ";
    self->last_error_ += reason ? reason : "";
  }

  // Reads back the tails of `parts` (see the header comment): marks in
  // `present` the records of `batch` found. Returns the records read.
  std::uint64_t read_tails(const kafka_context& sink_ctx, std::uint64_t batch,
                           std::span<const kafka_sink_record> records, std::span<const std::int32_t> parts,
                           std::vector<char>& present) {
    ensure_reader(sink_ctx);
    kafka_context ctx = sink_ctx;
    ctx.note = &reader_note_;
    reader_note_.clear();
    const auto lows = query_offsets(reader_.get(), s_.topic, parts, false, s_.request_timeout, ctx);
    const auto highs = query_offsets(reader_.get(), s_.topic, parts, true, s_.request_timeout, ctx);
    struct cursor {
      std::int32_t partition;
      std::int64_t low;
      std::int64_t end;  // the first offset not read back yet (going down)
      std::uint64_t scanned = 0;
      bool done = false;
    };
    std::vector<cursor> cur;
    for (std::size_t i = 0; i < parts.size(); ++i)
      cur.push_back({parts[i], lows[i], highs[i], 0, highs[i] <= lows[i]});
    // This writer's and flow's records of one chunk: (partition, offset,
    // batch, index, count).
    struct ours {
      std::int32_t partition;
      std::int64_t offset;
      std::uint64_t batch, index, count;
    };
    std::vector<ours> found;
    std::uint64_t total = 0;
    std::int64_t chunk = 64;
    std::vector<kafka_offset_range> ranges;
    for (;;) {
      ranges.clear();
      for (auto& c : cur) {
        if (c.done) continue;
        const std::int64_t room = static_cast<std::int64_t>(
            std::min<std::uint64_t>(s_.max_tail_scan - std::min(s_.max_tail_scan, c.scanned), 1u << 30));
        const std::int64_t from = std::max(c.low, c.end - std::min(chunk, room));
        if (from >= c.end) {
          c.done = true;
          continue;
        }
        ranges.push_back({c.partition, from, c.end});
      }
      if (ranges.empty()) break;
      found.clear();
      try {
        read_offset_ranges(reader_.get(), s_.topic, std::span<const kafka_offset_range>(ranges), s_.request_timeout,
                           ctx, [&](kafka_message&& m) {
                             ++total;
                             rd_kafka_headers_t* hdrs = nullptr;
                             if (rd_kafka_message_headers(m.get(), &hdrs) != RD_KAFKA_RESP_ERR_NO_ERROR) return;
                             std::string_view w, f, b, i, n;
                             if (!kafka_sink_header(hdrs, kafka_sink_headers::writer, w) || w != s_.writer) return;
                             if (!kafka_sink_header(hdrs, kafka_sink_headers::flow, f) || f != flow_) return;
                             ours o{m->partition, m->offset, 0, 0, 0};
                             if (!kafka_sink_header(hdrs, kafka_sink_headers::batch, b) ||
                                 !kafka_sink_header(hdrs, kafka_sink_headers::index, i) ||
                                 !kafka_sink_header(hdrs, kafka_sink_headers::count, n) ||
                                 !kafka_sink_number(b, o.batch) || !kafka_sink_number(i, o.index) ||
                                 !kafka_sink_number(n, o.count)) {
                               mismatch(ctx, m->partition, m->offset,
                                        "names this writer and flow but its batch, index or count header is "
                                        "missing or not a number");
                             }
                             found.push_back(o);
                           });
      } catch (const error& e) {
        if (e.code() != errc::source_data_lost) throw;
        // Retention removed records below a chunk while it was read.
        throw error(errc::sink_io, e.flow(), "", "", std::string("reading back the tail: ") + e.what());
      }
      std::sort(found.begin(), found.end(), [](const ours& a, const ours& b) {
        return a.partition != b.partition ? a.partition < b.partition : a.offset > b.offset;
      });
      for (const auto& r : ranges) {
        cursor& c = *std::find_if(cur.begin(), cur.end(), [&](const cursor& x) { return x.partition == r.partition; });
        c.scanned += static_cast<std::uint64_t>(r.to - r.from);
        c.end = r.from;
        for (const ours& o : found) {
          if (o.partition != c.partition) continue;
          if (o.batch < batch) {  // everything of this batch in the partition is above it
            c.done = true;
            break;
          }
          if (o.batch > batch) {
            std::string d = "holds batch ";
            d += std::to_string(o.batch);
            d += " of this writer and flow, but batch ";
            d += std::to_string(batch);
            d += " is being delivered: another process writes as writer '";
            d += s_.writer;
            d += "', or the pipeline's checkpoint is older than the topic";
            mismatch(ctx, o.partition, o.offset, d);
          }
          if (o.count != records.size() || o.index >= records.size() ||
              records[static_cast<std::size_t>(o.index)].partition != o.partition) {
            std::string d = "holds record ";
            d += std::to_string(o.index);
            d += " of ";
            d += std::to_string(o.count);
            d += " of batch ";
            d += std::to_string(batch);
            d += ", but this delivery of the batch has ";
            d += std::to_string(records.size());
            d += " records";
            if (o.index < records.size()) {
              d += " and sends that one to partition ";
              d += std::to_string(records[static_cast<std::size_t>(o.index)].partition);
            }
            d += ": the flow's rows or partitioning changed between two deliveries of the batch";
            mismatch(ctx, o.partition, o.offset, d);
          }
          present[static_cast<std::size_t>(o.index)] = 1;
        }
        if (c.end <= c.low || c.scanned >= s_.max_tail_scan) c.done = true;
      }
      chunk = std::min<std::int64_t>(chunk * 4, 16384);
    }
    return total;
  }

  [[noreturn]] void mismatch(const kafka_context& ctx, std::int32_t partition, std::int64_t offset,
                             std::string_view what) const {
    std::string d = "topic '";
    d += s_.topic;
    d += "' partition ";
    d += std::to_string(partition);
    d += " offset ";
    d += std::to_string(offset);
    d += ' ';
    d += what;
    throw error(errc::checkpoint_mismatch, std::string(ctx.who), "", "", d);
  }

  struct report_state {
    bool reported = false;
    rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR_NO_ERROR;
    std::string text;
  };

  // Hands the records not `present` to the producer in batch order, waits
  // for every report, and throws sink_io naming the first that failed.
  void produce(const kafka_context& ctx, std::uint64_t batch, std::span<const kafka_sink_record> records,
               const std::vector<char>& present, KafkaSinkDelivery& report) {
    std::size_t todo = 0;
    for (const char p : present) todo += p == 0 ? 1 : 0;
    if (todo == 0) return;
    ensure_producer(ctx);
    rd_kafka_t* rk = producer_.get();
    reports_.assign(records.size(), report_state{});
    last_error_.clear();
    const std::string batch_text = std::to_string(batch);
    const std::string count_text = std::to_string(records.size());
    // An exception while records are handed over (the fault hook's, or
    // memory) is rethrown only after the reports of those handed over.
    std::exception_ptr failure;
    std::size_t handed = 0;
    std::optional<std::size_t> refused;  // a record the producer did not take
    try {
      for (std::size_t i = 0; i < records.size(); ++i) {
        if (present[i]) continue;
        if (s_.fault_hook) s_.fault_hook(batch, i);
        const auto& r = records[i];
        const std::string index_text = std::to_string(i);
        const void* key = r.key ? static_cast<const void*>(r.key->data()) : nullptr;
        const std::size_t key_size = r.key ? r.key->size() : 0;
        for (;;) {
          // (The header names are NUL-terminated: they view string literals.)
          const rd_kafka_resp_err_t e = rd_kafka_producev(
              rk, RD_KAFKA_V_TOPIC(s_.topic.c_str()), RD_KAFKA_V_PARTITION(r.partition),
              RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_KEY(key, key_size),
              RD_KAFKA_V_VALUE(const_cast<char*>(r.value.data()), r.value.size()),
              RD_KAFKA_V_HEADER(kafka_sink_headers::writer.data(), s_.writer.data(),
                                static_cast<ssize_t>(s_.writer.size())),
              RD_KAFKA_V_HEADER(kafka_sink_headers::flow.data(), flow_.data(), static_cast<ssize_t>(flow_.size())),
              RD_KAFKA_V_HEADER(kafka_sink_headers::batch.data(), batch_text.data(),
                                static_cast<ssize_t>(batch_text.size())),
              RD_KAFKA_V_HEADER(kafka_sink_headers::index.data(), index_text.data(),
                                static_cast<ssize_t>(index_text.size())),
              RD_KAFKA_V_HEADER(kafka_sink_headers::count.data(), count_text.data(),
                                static_cast<ssize_t>(count_text.size())),
              RD_KAFKA_V_OPAQUE(reinterpret_cast<void*>(static_cast<std::uintptr_t>(i + 1))), RD_KAFKA_V_END);
          if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
            rd_kafka_poll(rk, 10);
            continue;
          }
          if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
            reports_[i].reported = true;
            reports_[i].err = e;
            reports_[i].text = rd_kafka_err2str(e);
            refused = i;
          }
          break;
        }
        if (refused) break;
        ++handed;
        rd_kafka_poll(rk, 0);
      }
    } catch (...) {
      failure = std::current_exception();
    }
    // Every record handed over gets its report (librdkafka reports each
    // within message.timeout.ms): none may still be on its way when the
    // batch is retried.
    while (rd_kafka_outq_len(rk) > 0) rd_kafka_flush(rk, 100);
    report.written = handed;
    if (failure) std::rethrow_exception(failure);

    std::optional<std::size_t> failed = refused;
    std::size_t failures = 0;
    for (std::size_t i = 0; i < records.size(); ++i) {
      if (present[i] || (refused && i >= *refused)) continue;
      if (!reports_[i].reported || reports_[i].err != RD_KAFKA_RESP_ERR_NO_ERROR) {
        ++failures;
        if (!failed || i < *failed) failed = i;
        if (!reports_[i].reported) reports_[i].text = "no delivery report";
      }
    }
    if (!failed) return;
    if (!refused) report.written = handed - failures;
    const auto& r = records[*failed];
    std::string d = "writing record ";
    d += std::to_string(*failed);
    d += " of batch ";
    d += std::to_string(batch);
    d += " to topic '";
    d += s_.topic;
    d += "' partition ";
    d += std::to_string(r.partition);
    if (r.key) {
      d += " (key '";
      d += kafka_sink_excerpt(*r.key);
      d += "')";
    }
    d += " failed: ";
    d += reports_[*failed].text;
    if (failures > 1) {
      d += " (";
      d += std::to_string(failures);
      d += " records of the batch failed)";
    }
    char fatal[512];
    if (rd_kafka_fatal_error(rk, fatal, sizeof fatal) != RD_KAFKA_RESP_ERR_NO_ERROR) {
      d += "; the producer's fatal error: ";
      d += fatal;
    } else if (!last_error_.empty()) {
      d += "; the producer's last error: ";
      d += last_error_;
    }
    throw error(errc::sink_io, std::string(ctx.who), "", "", d);
  }

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

}  // namespace detail

/// @brief The default value of a KafkaSink record: a JSON object with one
/// member per FLOWLIB_SCHEMA column, in schema order: numbers (enums as
/// their underlying integer; NaN and infinities as null), true/false,
/// strings (ill-formed UTF-8 replaced by U+FFFD), null for an empty
/// std::optional, std::chrono::sys_days as "YYYY-MM-DD" and system-clock
/// time points as ISO 8601 in UTC ("2026-01-02T03:04:05.678Z", the fraction
/// as fine as the time point's duration). The JSON rows a KafkaSource
/// reads by the same schema decode it back.
template <class Row>
std::string kafka_json_value(const Row& row) {
  static_assert(has_schema<Row>,
                "flowlib::kafka_json_value: the row type needs FLOWLIB_SCHEMA(Row, columns...) (its "
                "columns become the JSON object's members), or give KafkaSinkOptions::serialize.");
  static_assert(detail::kafka_json_row<Row>(),
                "flowlib::kafka_json_value: a column's type has no JSON form here (the types are "
                "bool, integers, enums, float, double, std::string, std::chrono::sys_days, "
                "system-clock time points with an integral count, and std::optional of them); "
                "give KafkaSinkOptions::serialize.");
  detail::json_writer w;
  w.begin_object();
  schema_of<Row>::for_each([&](auto col) {
    w.key(decltype(col)::name);
    detail::kafka_json_write(w, decltype(col)::get(row));
  });
  w.end_object();
  return w.take();
}

/// @brief A sink writing each batch's rows to a Kafka topic, each once. See
/// the header comment and docs/kafka-sink.md.
template <class Row>
class KafkaSink {
 public:
  using row_type = Row;
  using options_type = KafkaSinkOptions<Row>;
  static constexpr std::string_view kind = kafka_sink_kind;
  static constexpr bool is_sink = true;  ///< a pipeline flow may end in it (flowlib::sink)

  /// Checks the options (errc::invalid_argument naming what is missing);
  /// connects nothing until the first batch.
  explicit KafkaSink(KafkaSinkOptions<Row> options, std::string name = "kafka_sink")
      : serialize_(std::move(options.serialize)),
        key_(std::move(options.key)),
        partitioner_(std::move(options.partitioner)),
        name_(std::move(name)) {
    const auto refuse = [&](const std::string& what) {
      std::string d = "KafkaSink '";
      d += name_;
      d += "': ";
      d += what;
      throw error(errc::invalid_argument, name_, "", "", d);
    };
    if (options.brokers.empty()) refuse("options.brokers is empty: give the bootstrap servers (host:port,...)");
    if (options.topic.empty()) refuse("options.topic is empty: name the topic to write");
    if (options.writer.empty())
      refuse("options.writer is empty: give the pipeline's name (the records' writer header, which the "
             "sink looks for when it reads a partition's tail back)");
    if (!serialize_) {
      if constexpr (detail::kafka_json_row<Row>()) {
        serialize_ = [](const Row& r) { return kafka_json_value(r); };
      } else {
        refuse("options.serialize is empty and the row type has no FLOWLIB_SCHEMA whose every column "
               "has a JSON form: give options.serialize (Row -> value bytes)");
      }
    }
    const auto check_fixed = [&](const auto& props) {
      for (const auto& [k, v] : props) {
        if (k == "enable.idempotence" && v != "true")
          refuse("enable.idempotence must stay true: the sink's exactly-once writes rely on the idempotent "
                 "producer keeping each partition's records in order through retries");
        if ((k == "acks" || k == "request.required.acks") && v != "all" && v != "-1")
          refuse("acks must stay 'all': a record the sink was told is written must survive a broker's loss");
        if (k == "transactional.id")
          refuse("transactional.id is not used: the sink writes exactly once without transactions");
      }
    };
    check_fixed(options.config);
    check_fixed(options.producer_config);
    if (options.max_tail_scan == 0) refuse("options.max_tail_scan is 0: the sink must read at least one record back");
    detail::kafka_sink_settings s{std::move(options.brokers),     std::move(options.topic),
                                  std::move(options.writer),      std::move(options.config),
                                  std::move(options.producer_config), options.delivery_timeout,
                                  options.request_timeout,        options.max_tail_scan,
                                  std::move(options.fault_hook)};
    engine_ = std::make_unique<detail::kafka_sink_engine>(std::move(s));
  }

  KafkaSink(KafkaSink&&) noexcept = default;
  KafkaSink& operator=(KafkaSink&&) noexcept = default;
  KafkaSink(const KafkaSink&) = delete;
  KafkaSink& operator=(const KafkaSink&) = delete;

  const std::string& name() const noexcept { return name_; }
  /// What the last deliver() did.
  const KafkaSinkDelivery& last_delivery() const noexcept { return last_; }

  /// Writes batch `batch_id` of `flow`: each row once, however often the
  /// batch is delivered (see the header comment). The rows' values, keys
  /// and partitions are all computed first: an exception from serialize,
  /// key or partitioner writes nothing. Throws errc::sink_io when a record
  /// could not be written (the batch must not be committed; deliver it
  /// again), errc::checkpoint_mismatch when the topic holds records this
  /// batch cannot follow, errc::invalid_argument for a partition out of
  /// range or options librdkafka refuses.
  void deliver(std::string_view flow, std::uint64_t batch_id, std::span<const Row> rows) {
    const std::int32_t partitions = engine_->partition_count(flow);
    records_.resize(rows.size());
    for (std::size_t i = 0; i < rows.size(); ++i) {
      auto& rec = records_[i];
      rec.value = serialize_(rows[i]);
      rec.key = key_ ? key_(rows[i]) : std::nullopt;
      if (partitioner_) {
        rec.partition = partitioner_(rows[i], partitions);
        if (rec.partition < 0 || rec.partition >= partitions) {
          std::string d = "options.partitioner gave partition ";
          d += std::to_string(rec.partition);
          d += " for record ";
          d += std::to_string(i);
          d += " of batch ";
          d += std::to_string(batch_id);
          d += "; topic has ";
          d += std::to_string(partitions);
          d += " partitions";
          throw error(errc::invalid_argument, std::string(flow), "", detail::describe_row(rows[i]), d);
        }
      } else if (rec.key) {
        rec.partition = kafka_key_partition(*rec.key, partitions);
      } else {
        rec.partition = static_cast<std::int32_t>((batch_id + i) % static_cast<std::uint64_t>(partitions));
      }
    }
    engine_->write(flow, batch_id, std::span<const detail::kafka_sink_record>(records_), last_);
  }

  /// The flow contract's batch (flows/contract.hpp), as ForeachBatch's: a
  /// sink writes no table and keeps no state; the flow's expectations run
  /// here (R-EXPECT-1) and the rows that pass are delivered.
  template <class Table, class... P>
  BatchStats apply_batch(Table&, std::vector<Row>& rows, const Expectations<P...>& checks,
                         const batch_info& batch) {
    BatchStats stats = detail::sink_expectations(rows, checks, batch);
    deliver(batch.flow, batch.batch_id, std::span<const Row>(rows));
    return stats;
  }

 private:
  std::function<std::string(const Row&)> serialize_;
  std::function<std::optional<std::string>(const Row&)> key_;
  std::function<std::int32_t(const Row&, std::int32_t)> partitioner_;
  std::string name_;
  std::unique_ptr<detail::kafka_sink_engine> engine_;
  std::vector<detail::kafka_sink_record> records_;
  KafkaSinkDelivery last_;
};

}  // namespace flowlib
