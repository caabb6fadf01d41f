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
#include <flowlib/detail/type_traits.hpp>
#include <flowlib/error.hpp>
#include <flowlib/expect.hpp>
#include <flowlib/flows/contract.hpp>
#include <flowlib/schema.hpp>
#include <flowlib/sink/detail/kafka_engine.hpp>
#include <flowlib/sink/foreach_batch.hpp>  // sink_expectations
#include <flowlib/sink/kafka_records.hpp>
#include <flowlib/stats.hpp>
#include <flowlib/table.hpp>  // detail::describe_row

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
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
