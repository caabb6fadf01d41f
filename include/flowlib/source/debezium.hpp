// flowlib/source/debezium.hpp
//
// flowlib::DebeziumDecoder<Change>: Debezium change events (JSON, as Kafka
// Connect's JsonConverter writes them) into the change rows of an AUTO CDC
// flow (R-SOURCE-6). docs/debezium.md shows it in whole pipelines.
//
//   struct Change { std::int64_t id; std::optional<std::string> name; char op; std::int64_t lsn; };
//   FLOWLIB_SCHEMA(Change, id, name, op, lsn);
//   fl::DebeziumDecoder<Change> decode{{.op = &Change::op, .sequence = &Change::lsn}};
//
//   fl::KafkaSourceOptions<Change> options;                 // a Kafka topic of events
//   options.deserialize = decode;                           // ... brokers, topic
//   fl::KafkaSource<Change> changes{"pg.public.users", options};
//   pipeline.flow("users").from(changes).into(users, UsersCdc{"users"});
//
//   pipeline.flow("users").from(texts).flat_map(decode).into(users, UsersCdc{"users"});
//                                                           // any source of std::string
//
// Mapping (one envelope -> at most one change):
//   - the envelope is the record's JSON object, or its "payload" when the
//     object has one (JsonConverter with schemas.enable=true wraps the
//     envelope as {"schema":...,"payload":...}; the schema is not read);
//   - op "c" (create), "r" (snapshot read), "u" (update): the "after" row,
//     an upsert; op "d": the "before" row, a delete (with delete_keys set,
//     only those columns must be there: the others may be missing or null
//     and are then value-initialised, as a table whose replica identity
//     holds only its key writes them); op "t" (truncate): an error, or with
//     truncate = debezium_truncate::emit a change whose columns are
//     value-initialised but op ('t') and sequence, for apply_as_truncates
//     (SCD type 1 only);
//   - the op column receives the op: 'c' 'r' 'u' 'd' 't' (char), "c" ...
//     (std::string), or true for a delete and false otherwise (bool);
//   - the sequence column receives source.lsn (sequence_from lsn, the
//     default: PostgreSQL's log position), source.ts_ms (when the database
//     made the change) or the envelope's ts_ms (when the connector read
//     it); a column of a system_clock time point takes the milliseconds
//     converted to its unit;
//   - the row's columns are read by name with detail::json_to_row's rules
//     (source/detail/json_row.hpp): Debezium's dates (io.debezium.time.Date) are
//     integer days, its Timestamp / MicroTimestamp / NanoTimestamp integer
//     counts of ms / us / ns (declare the column as a time point of that
//     unit), ZonedTimestamp an ISO 8601 string. The op and sequence columns
//     are not read from the row;
//   - "transaction", the other "source" fields and unknown keys are ignored;
//   - a tombstone (an empty value, the JSON text null, or a null payload)
//     maps to no change: std::nullopt.
// Errors: an envelope that cannot be mapped throws flowlib::error
// (errc::malformed_record) naming the source and the record (origin.source
// and origin.where; for a Kafka record options.name, or else its topic,
// and its topic, partition and offset; for the 1-argument call, which has
// no origin, options.name, or else "debezium", and the record's first 80
// bytes) and what is wrong: not
// JSON, not an object, no "op", an unknown op, no "after" for c/r/u, no
// "before" for d, a truncate, no sequence, a row value that does not fit
// its column (the column is named). A pipeline fails the batch; its source
// position does not advance (R-SOURCE-2). Options that do not fit Change
// (no op or sequence column, an unknown delete key, emit truncates into a
// bool op) throw errc::invalid_argument when the decoder is made.
//
// Calls:
//   - operator()(record) -> std::optional<Change>, for any record with
//     `value` (std::optional<std::string_view>, std::nullopt a tombstone),
//     `topic`, `partition` and `offset`: KafkaRecord, so the decoder is a
//     KafkaSourceOptions::deserialize as it is. Errors name the topic,
//     partition and offset;
//   - operator()(value, origin) -> std::optional<Change>: any other source
//     that knows where its record came from;
//   - operator()(value) -> optional_row<Change>, a std::optional that is
//     also a range of zero or one row: the form flat_map takes (a source of
//     std::string records flat_mapped into changes, tombstones vanishing).
//
// Why a parser per decoder, and find_field_unordered: simdjson's on-demand
// parser reuses its buffers from record to record, so a decoder keeps one
// (and copies get their own: calls on one decoder must not overlap; give
// each thread its own copy). Debezium writes "op" after "before" and
// "after", and which row to read depends on it: looking fields up by name
// skips the unread values (the schema of a wrapped record, the other row)
// without decoding them.
#pragma once

#include <flowlib/detail/config.hpp>
#include <flowlib/error.hpp>
#include <flowlib/schema.hpp>
#include <flowlib/source/detail/json_row.hpp>

#include <simdjson.h>

#include <chrono>
#include <concepts>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

namespace flowlib {

/// @brief Where a DebeziumDecoder takes a change's sequence from.
enum class debezium_sequence {
  lsn,           ///< source.lsn: the database log's position (PostgreSQL)
  source_ts_ms,  ///< source.ts_ms: when the database made the change
  ts_ms,         ///< the envelope's ts_ms: when the connector read it
};

/// @brief What a DebeziumDecoder does with a truncate event (op "t").
enum class debezium_truncate {
  fail,  ///< errc::malformed_record
  emit,  ///< a change with op 't' and its sequence, for apply_as_truncates
};

/// @brief A std::optional<T> that is also a range of zero or one T, for
/// flat_map.
template <class T>
class optional_row : public std::optional<T> {
 public:
  using std::optional<T>::optional;
  optional_row(std::optional<T>&& o) noexcept(std::is_nothrow_move_constructible_v<T>)
      : std::optional<T>(std::move(o)) {}
  T* begin() noexcept { return this->has_value() ? std::addressof(**this) : nullptr; }
  T* end() noexcept { return this->has_value() ? std::addressof(**this) + 1 : nullptr; }
  const T* begin() const noexcept { return this->has_value() ? std::addressof(**this) : nullptr; }
  const T* end() const noexcept {
    return this->has_value() ? std::addressof(**this) + 1 : nullptr;
  }
  std::size_t size() const noexcept { return this->has_value() ? 1 : 0; }
};

namespace detail {

/// Throws errc::malformed_record naming `origin` (and `column`, when not
/// empty): "<origin.where>: <reason>".
[[noreturn]] FLOWLIB_KAFKA_DECL void debezium_fail(const record_origin& origin,
                                                   std::string_view column,
                                                   std::string_view reason);

/// The envelope's field `key` (absent: false). Syntax errors throw.
FLOWLIB_KAFKA_DECL bool debezium_field(simdjson::ondemand::object& obj, std::string_view key,
                                       simdjson::ondemand::value& out, const record_origin& origin);

/// Whether `v` is JSON null.
FLOWLIB_KAFKA_DECL bool debezium_is_null(simdjson::ondemand::value& v);

/// `v` as an object, or fails naming it `what`.
FLOWLIB_KAFKA_DECL simdjson::ondemand::object debezium_object_of(simdjson::ondemand::value& v,
                                                                 const record_origin& origin,
                                                                 std::string_view what);

/// A record's envelope, opened: the document, its object, the payload
/// object of a wrapped record, and the op. `env` points to `top` or
/// `wrapped`; the document stays where it was parsed (not copyable).
struct debezium_envelope {
  simdjson::ondemand::document doc;
  simdjson::ondemand::object top;
  simdjson::ondemand::object wrapped;
  simdjson::ondemand::object* env = nullptr;
  char op = '\0';
  debezium_envelope() = default;
  debezium_envelope(const debezium_envelope&) = delete;
  debezium_envelope& operator=(const debezium_envelope&) = delete;
};

/// Parses the non-empty `value` (copied into `buffer`, padded for
/// simdjson) into `e` up to its op: the envelope is the payload of a
/// wrapped record, else the record; the op is one of c, r, u, d and t, and
/// t only when `truncate` is emit. False for a tombstone (the text null, or
/// a null payload). Throws errc::malformed_record naming `origin`.
FLOWLIB_KAFKA_DECL bool debezium_open(simdjson::ondemand::parser& parser, std::string& buffer,
                                      std::string_view value, const record_origin& origin,
                                      debezium_truncate truncate, debezium_envelope& e);

}  // namespace detail

/// @brief The options of a DebeziumDecoder<Change>: see the header comment.
template <class Change>
struct debezium_options {
  /// The column that receives the op.
  using op_member =
      std::variant<std::monostate, char Change::*, std::string Change::*, bool Change::*>;
  /// The column that receives the sequence.
  using sequence_member =
      std::variant<std::monostate, std::int64_t Change::*, std::uint64_t Change::*,
                   std::optional<std::int64_t> Change::*, std::optional<std::uint64_t> Change::*,
                   std::chrono::sys_time<std::chrono::milliseconds> Change::*,
                   std::chrono::sys_time<std::chrono::microseconds> Change::*>;

  op_member op = {};
  sequence_member sequence = {};
  debezium_sequence sequence_from = debezium_sequence::lsn;
  /// The key columns: required in the "before" row of a delete, where the
  /// other columns may then be missing or null. Empty: a delete's row is
  /// read like an upsert's.
  std::vector<std::string> delete_keys = {};
  debezium_truncate truncate = debezium_truncate::fail;
  /// The source named in messages when the call gives no origin; empty:
  /// a Kafka record's topic, or "debezium".
  std::string name = {};
};

/// @brief Debezium envelopes into AUTO CDC change rows: see the header
/// comment.
template <class Change>
class DebeziumDecoder {
  static_assert(has_schema<Change>,
                "flowlib::DebeziumDecoder<Change>: the row's columns are read by name: declare "
                "FLOWLIB_SCHEMA(Change, ...) listing the table's columns, the op column and the "
                "sequence column");
  static_assert(std::is_default_constructible_v<Change> && std::is_move_constructible_v<Change>,
                "flowlib::DebeziumDecoder<Change>: changes are decoded into a value-initialised "
                "Change: give Change a default constructor");

 public:
  using row_type = Change;
  using options_type = debezium_options<Change>;

  /// @brief Checks `options` against Change; throws errc::invalid_argument
  /// when they do not fit (see the header comment).
  explicit DebeziumDecoder(options_type options) : options_(std::move(options)) {
    using table = detail::json_row_table<Change>;
    if (options_.op.index() == 0) invalid("no op column: set .op = &Change::<column>");
    if (options_.sequence.index() == 0) {
      invalid("no sequence column: set .sequence = &Change::<column>");
    }
    if (options_.sequence_from == debezium_sequence::lsn) {
      std::visit(
          [&](auto m) {
            if constexpr (is_time_member<decltype(m)>) {
              invalid("sequence_from lsn into a time point column: an LSN is a log position, "
                      "not a time; use an integer column or sequence_from ts_ms");
            }
          },
          options_.sequence);
    }
    if (options_.truncate == debezium_truncate::emit &&
        std::holds_alternative<bool Change::*>(options_.op)) {
      invalid("truncate = emit needs an op column of type char or std::string (a bool op "
              "column says only whether a change is a delete)");
    }
    masks_.skip = column_bit(options_.op) | column_bit(options_.sequence);
    std::uint64_t keys = 0;
    for (const std::string& k : options_.delete_keys) {
      const std::size_t i = table::S::index_of(k);
      if (i == table::N) {
        std::string m = "delete_keys names '";
        m += k;
        m += "', which is not a column of FLOWLIB_SCHEMA(";
        m += table::S::name;
        m += ", ...)";
        invalid(std::move(m));
      }
      keys |= std::uint64_t{1} << i;
    }
    if (keys != 0) delete_masks_.lenient = table::all_mask & ~keys;
    delete_masks_.skip = masks_.skip;
  }

  /// A copy has the same options and a parser of its own.
  DebeziumDecoder(const DebeziumDecoder& other)
      : options_(other.options_), masks_(other.masks_), delete_masks_(other.delete_masks_) {}
  DebeziumDecoder& operator=(const DebeziumDecoder& other) {
    if (this != &other) {
      options_ = other.options_;
      masks_ = other.masks_;
      delete_masks_ = other.delete_masks_;
    }
    return *this;
  }
  DebeziumDecoder(DebeziumDecoder&&) noexcept = default;
  DebeziumDecoder& operator=(DebeziumDecoder&&) noexcept = default;

  const options_type& options() const noexcept { return options_; }

  /// @brief The change of one record (std::nullopt for a tombstone), for a
  /// source's deserializer: `origin` names the record in errors.
  std::optional<Change> operator()(std::string_view value,
                                   const detail::record_origin& origin) const {
    std::optional<Change> out;
    decode(value, origin, out);
    return out;
  }

  /// @brief The change of one Kafka record (KafkaSourceOptions::deserialize
  /// takes the decoder as it is): its value (std::nullopt, a tombstone,
  /// gives std::nullopt); errors name options().name, the topic, the
  /// partition and the offset.
  template <class Record>
    requires requires(const Record& r) {
      { r.value } -> std::convertible_to<std::optional<std::string_view>>;
      { r.topic } -> std::convertible_to<std::string_view>;
      { r.partition } -> std::convertible_to<std::int64_t>;
      { r.offset } -> std::convertible_to<std::int64_t>;
    }
  std::optional<Change> operator()(const Record& record) const {
    std::optional<Change> out;
    const std::optional<std::string_view> value = record.value;
    if (!value) return out;
    std::string where = "topic '";
    where += std::string_view(record.topic);
    where += "' partition ";
    where += std::to_string(static_cast<std::int64_t>(record.partition));
    where += " offset ";
    where += std::to_string(static_cast<std::int64_t>(record.offset));
    decode(*value, {options_.name.empty() ? std::string_view(record.topic) : options_.name, where},
           out);
    return out;
  }

  /// @brief The change of one record as a range of zero or one row, for
  /// flat_map; errors name options().name and quote the record.
  optional_row<Change> operator()(std::string_view value) const {
    std::string where = "record ";
    where += detail::json_cut(value);
    optional_row<Change> out;
    decode(value, {source_name(), where}, out);
    return out;
  }

 private:
  template <class M>
  static constexpr bool is_time_member =
      std::is_same_v<M, std::chrono::sys_time<std::chrono::milliseconds> Change::*> ||
      std::is_same_v<M, std::chrono::sys_time<std::chrono::microseconds> Change::*>;

  std::string_view source_name() const noexcept {
    return options_.name.empty() ? std::string_view("debezium") : std::string_view(options_.name);
  }

  [[noreturn]] void invalid(std::string detail) const {
    throw error(errc::invalid_argument, std::string(source_name()), "", "",
                "DebeziumDecoder: " + std::move(detail));
  }

  /// The schema bit of the column member `v` holds (0 when not in the schema).
  template <class Variant>
  static std::uint64_t column_bit(const Variant& v) {
    std::uint64_t bit = 0;
    std::visit(
        [&](auto m) {
          using M = decltype(m);
          if constexpr (!std::is_same_v<M, std::monostate>) {
            std::size_t i = 0;
            schema_of<Change>::for_each([&](auto col) {
              if constexpr (std::is_same_v<std::remove_cv_t<decltype(decltype(col)::member)>, M>) {
                if (decltype(col)::member == m) bit |= std::uint64_t{1} << i;
              }
              ++i;
            });
          }
        },
        v);
    return bit;
  }

  /// The schema name of the sequence column (for messages).
  std::string_view sequence_name() const {
    std::string_view name = "sequence";
    std::visit(
        [&](auto m) {
          using M = decltype(m);
          if constexpr (!std::is_same_v<M, std::monostate>) {
            schema_of<Change>::for_each([&](auto col) {
              if constexpr (std::is_same_v<std::remove_cv_t<decltype(decltype(col)::member)>, M>) {
                if (decltype(col)::member == m) name = decltype(col)::name;
              }
            });
          }
        },
        options_.sequence);
    return name;
  }

  [[noreturn]] static void fail(const detail::record_origin& origin, std::string_view column,
                                std::string_view reason) {
    detail::debezium_fail(origin, column, reason);
  }
  static bool field(simdjson::ondemand::object& obj, std::string_view key,
                    simdjson::ondemand::value& out, const detail::record_origin& origin) {
    return detail::debezium_field(obj, key, out, origin);
  }
  static bool is_null(simdjson::ondemand::value& v) { return detail::debezium_is_null(v); }
  static simdjson::ondemand::object object_of(simdjson::ondemand::value& v,
                                              const detail::record_origin& origin,
                                              std::string_view what) {
    return detail::debezium_object_of(v, origin, what);
  }

  /// Decodes `value` into `out` (left empty for a tombstone).
  template <class Opt>
  void decode(std::string_view value, const detail::record_origin& origin, Opt& out) const {
    if (value.empty()) return;  // a tombstone
    detail::debezium_envelope e;
    if (!detail::debezium_open(*parser_, buffer_, value, origin, options_.truncate, e)) return;
    simdjson::ondemand::object& env = *e.env;
    const char op = e.op;
    simdjson::ondemand::value v;

    out.emplace();
    Change& row = *out;

    // The row.
    if (op == 'd') {
      if (!field(env, "before", v, origin) || is_null(v)) {
        fail(origin, "",
             "op \"d\" (a delete) without a \"before\" row (the table's replica identity must "
             "hold at least its key)");
      }
      detail::json_to_row_masked(object_of(v, origin, "\"before\""), row, origin, {},
                                 delete_masks_);
    } else if (op != 't') {
      if (!field(env, "after", v, origin) || is_null(v)) {
        std::string reason = "op \"";
        reason += op;
        reason += "\" without an \"after\" row";
        fail(origin, "", reason);
      }
      detail::json_to_row_masked(object_of(v, origin, "\"after\""), row, origin, {}, masks_);
    }

    // The sequence.
    read_sequence(env, origin, row);

    // The op column.
    std::visit(
        [&](auto m) {
          using M = decltype(m);
          if constexpr (std::is_same_v<M, char Change::*>) {
            row.*m = op;
          } else if constexpr (std::is_same_v<M, std::string Change::*>) {
            (row.*m).assign(1, op);
          } else if constexpr (std::is_same_v<M, bool Change::*>) {
            row.*m = op == 'd';
          }
        },
        options_.op);
  }

  void read_sequence(simdjson::ondemand::object& env, const detail::record_origin& origin,
                     Change& row) const {
    simdjson::ondemand::value v;
    std::string_view path;
    bool found = false;
    if (options_.sequence_from == debezium_sequence::ts_ms) {
      path = "ts_ms";
      found = field(env, "ts_ms", v, origin);
    } else {
      path = options_.sequence_from == debezium_sequence::lsn ? "source.lsn" : "source.ts_ms";
      simdjson::ondemand::value src;
      if (field(env, "source", src, origin) && !is_null(src)) {
        simdjson::ondemand::object so = object_of(src, origin, "\"source\"");
        found = field(so, options_.sequence_from == debezium_sequence::lsn ? "lsn" : "ts_ms", v,
                      origin);
      }
    }
    if (!found || is_null(v)) {
      std::string reason = "the envelope has no ";
      reason += path;
      if (options_.sequence_from == debezium_sequence::lsn) {
        reason += " (a connector without LSNs needs sequence_from = debezium_sequence::ts_ms or "
                  "source_ts_ms)";
      }
      fail(origin, sequence_name(), reason);
    }
    std::visit(
        [&](auto m) {
          using M = decltype(m);
          if constexpr (!std::is_same_v<M, std::monostate>) {
            std::string why;
            if constexpr (is_time_member<M>) {
              std::int64_t ms = 0;
              why = detail::json_read_value(v, ms);
              using TP = std::remove_reference_t<decltype(row.*m)>;
              if (why.empty()) {
                row.*m = std::chrono::time_point_cast<typename TP::duration>(
                    std::chrono::sys_time<std::chrono::milliseconds>{
                        std::chrono::milliseconds{ms}});
              }
            } else {
              why = detail::json_read_value(v, row.*m);
            }
            if (!why.empty()) {
              std::string reason(path);
              reason += ": ";
              reason += why;
              reason += ", value ";
              reason += detail::json_cut(detail::json_raw_value(v));
              fail(origin, sequence_name(), reason);
            }
          }
        },
        options_.sequence);
  }

  options_type options_;
  detail::json_row_masks masks_;
  detail::json_row_masks delete_masks_;
  mutable std::unique_ptr<simdjson::ondemand::parser> parser_ =
      std::make_unique<simdjson::ondemand::parser>();
  mutable std::string buffer_;
};

}  // namespace flowlib

#if !defined(FLOWLIB_KAFKA_SEPARATE_COMPILATION)
#include <flowlib/source/impl/debezium.ipp>
#endif
