// flowlib/detail/kafka.hpp
//
// The parts of librdkafka that KafkaSource and KafkaSink share: owning
// handles, configuration from key/value pairs, offset queries, and a reader
// of exact offset ranges.
//
//   kafka_conf       rd_kafka_conf_t, owned (make_kafka_conf builds one from
//                    key/value pairs; a rejected pair is a flowlib::error)
//   kafka_handle     rd_kafka_t, owned; a consumer is closed
//                    (rd_kafka_consumer_close) before it is destroyed, so its
//                    broker connections go at once
//   kafka_partitions rd_kafka_topic_partition_list_t, owned
//   kafka_message    rd_kafka_message_t, owned (returned to librdkafka on
//                    destruction, which frees its fetch buffer)
//   kafka_error_note the last error a handle reported through its
//                    error_cb (connection failures are reported nowhere
//                    else), added to the messages of failed calls
//
//   topic_partition_ids(h, topic)       the topic's partitions (metadata)
//   query_offsets(h, topic, parts, end) every partition's high (or low)
//                                       watermark in one request per leader
//   query_watermarks(h, topic, p)       one partition's (low, high)
//   read_offset_ranges(h, topic, ranges, timeout, ctx, f)
//                                       every record at offsets [from, to) of
//                                       each range, handed to f
//
// Errors are flowlib::error naming `ctx.who` (the source or sink): a broker
// error or a timeout is `ctx.io` (errc::source_io for a source, sink_io for
// a sink) with librdkafka's text and the note's last error; records
// retention removed are errc::source_data_lost; a bad configuration pair is
// invalid_argument.
//
// Exact ranges. A record's offset is its place in its partition; offsets
// have gaps (compaction removes records, transaction markers take an offset
// and are never delivered), so "the records of [from, to)" is read as: start
// fetching at `from`, hand over every record whose offset is below `to`, and
// stop at the first record at or beyond `to` or when the partition's end
// (enable.partition.eof: the consumer says it fetched up to the high
// watermark) is at or beyond `to`. The reader never waits for an offset that
// does not exist, as long as `to` is not beyond the high watermark the
// caller saw. A record handed over twice (a refetch) is dropped by its
// offset, so f sees each offset of a partition once, ascending; partitions
// interleave in arrival order. A fetch at an offset the broker does not
// hold is data loss only when the offset is below the low watermark;
// otherwise (a broker that is wrong for a while) it is ctx.io.
//
// The consumer must be configured for it (kafka_consumer_settings): a
// group.id (librdkafka polls only with one, even though no group is
// joined: partitions are assign()ed), no automatic commits or offset
// stores, partition EOF events, and auto.offset.reset=error, so that a
// position retention removed fails rather than skipping silently.
// A handle is used by one thread at a time.
#pragma once

#include <flowlib/detail/config.hpp>
#include <flowlib/error.hpp>

#include <librdkafka/rdkafka.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace flowlib::detail {

/// Configuration properties as (name, value) pairs, applied in order.
using kafka_properties = std::vector<std::pair<std::string, std::string>>;

/// Who reports an error, and the code of a broker error or timeout.
/// The last error librdkafka reported through a handle's error_cb
/// (connection failures and the like, which it reports nowhere else), for
/// messages. install() sets the configuration's error_cb and its opaque
/// (rd_kafka_conf_set_opaque: the handle's callbacks then get this note
/// as their opaque). The callback runs in whichever thread polls the
/// handle; a mutex guards the text.
class kafka_error_note {
 public:
  kafka_error_note() = default;
  kafka_error_note(const kafka_error_note&) = delete;
  kafka_error_note& operator=(const kafka_error_note&) = delete;

  /// Routes the error_cb of handles made from `conf` to this note, which
  /// must outlive them.
  FLOWLIB_KAFKA_DECL void install(rd_kafka_conf_t* conf) noexcept;
  /// The last error's text ("" when none since the last clear()).
  FLOWLIB_KAFKA_DECL std::string last() const;
  FLOWLIB_KAFKA_DECL void clear();

 private:
  FLOWLIB_KAFKA_DECL static void on_error(rd_kafka_t*, int err, const char* reason, void* opaque);
  mutable std::mutex mutex_;
  std::string last_;
};

struct kafka_context {
  std::string_view who{};                   // the source's or sink's name
  errc io = errc::source_io;                // source_io or sink_io
  const kafka_error_note* note = nullptr;   // its text is added to ctx.io errors
  /// With a note: before a query (metadata, offsets) reports a failure, serve
  /// the handle's pending events, so that the note holds what the client
  /// saw (a consumer's pending messages are dropped: set it only while the
  /// consumer has no partitions assigned, as between reads).
  bool serve_events = false;
};

/// Serves `rk`'s pending events without waiting (error_cb runs); a
/// consumer's messages among them are dropped.
FLOWLIB_KAFKA_DECL void serve_kafka_events(rd_kafka_t* rk) noexcept;

/// Throws flowlib::error(ctx.io) "<what>: <text>", with the note's last
/// error when there is one.
[[noreturn]] FLOWLIB_KAFKA_DECL void kafka_fail(const kafka_context& ctx, std::string_view what,
                                                std::string_view text);

/// kafka_fail, after serving rk's events when ctx.serve_events says so.
[[noreturn]] FLOWLIB_KAFKA_DECL void kafka_fail(rd_kafka_t* rk, const kafka_context& ctx,
                                                std::string_view what, std::string_view text);

// --- Owning handles ------------------------------------------------------------

struct kafka_conf_deleter {
  void operator()(rd_kafka_conf_t* c) const noexcept { rd_kafka_conf_destroy(c); }
};
/// An owned rd_kafka_conf_t (release() it into rd_kafka_new on success).
using kafka_conf = std::unique_ptr<rd_kafka_conf_t, kafka_conf_deleter>;

struct kafka_partitions_deleter {
  void operator()(rd_kafka_topic_partition_list_t* l) const noexcept {
    rd_kafka_topic_partition_list_destroy(l);
  }
};
/// An owned topic-partition list.
using kafka_partitions = std::unique_ptr<rd_kafka_topic_partition_list_t, kafka_partitions_deleter>;

/// A new empty topic-partition list with room for `n` entries.
FLOWLIB_KAFKA_DECL kafka_partitions make_kafka_partitions(std::size_t n);

struct kafka_message_deleter {
  void operator()(rd_kafka_message_t* m) const noexcept { rd_kafka_message_destroy(m); }
};
/// An owned message from a consumer poll.
using kafka_message = std::unique_ptr<rd_kafka_message_t, kafka_message_deleter>;

/// An owned rd_kafka_t. A consumer is closed (rd_kafka_consumer_close) and
/// then destroyed; a producer is destroyed without flushing (a sink flushes
/// what it must before). Movable, not copyable.
class kafka_handle {
 public:
  kafka_handle() = default;
  kafka_handle(rd_kafka_t* rk, bool consumer) noexcept : rk_(rk), consumer_(consumer) {}
  kafka_handle(kafka_handle&& o) noexcept
      : rk_(std::exchange(o.rk_, nullptr)), consumer_(o.consumer_) {}
  kafka_handle& operator=(kafka_handle&& o) noexcept {
    if (this != &o) {
      reset();
      rk_ = std::exchange(o.rk_, nullptr);
      consumer_ = o.consumer_;
    }
    return *this;
  }
  kafka_handle(const kafka_handle&) = delete;
  kafka_handle& operator=(const kafka_handle&) = delete;
  ~kafka_handle() { reset(); }

  rd_kafka_t* get() const noexcept { return rk_; }
  explicit operator bool() const noexcept { return rk_ != nullptr; }
  /// Closes (a consumer) and destroys the handle; empty afterwards.
  FLOWLIB_KAFKA_DECL void reset() noexcept;

 private:
  rd_kafka_t* rk_ = nullptr;
  bool consumer_ = false;
};

// --- Configuration -----------------------------------------------------------------

/// A configuration with `props` set in order. A property librdkafka rejects
/// (unknown name, bad value) throws flowlib::error(errc::invalid_argument)
/// naming ctx.who, the property and librdkafka's reason.
FLOWLIB_KAFKA_DECL kafka_conf make_kafka_conf(const kafka_properties& props,
                                              const kafka_context& ctx);

/// The settings read_offset_ranges needs of a consumer, which a user's
/// configuration must not change (see the header comment).
FLOWLIB_KAFKA_DECL kafka_properties kafka_consumer_required();

/// Defaults a user's configuration may override: group.id `group_id`;
/// fetch.wait.max.ms 1 instead of 500: a reader asks only for records that
/// exist, so a long fetch wait never helps it, while the fetch still in
/// flight when a read unassigns its partitions delays the next request on
/// that connection (a broker answers a connection's requests in order) by
/// up to that wait (and a consumer fetches only while a read runs); socket.nagle.disable true, as Kafka's own clients do
/// (small requests are not held back waiting for acknowledgements).
FLOWLIB_KAFKA_DECL kafka_properties kafka_consumer_defaults(std::string group_id);

/// kafka_consumer_defaults(group_id) followed by kafka_consumer_required().
FLOWLIB_KAFKA_DECL kafka_properties kafka_consumer_settings(std::string group_id);

/// A consumer (or producer) handle from `conf` (consumed either way).
/// Throws flowlib::error(errc::invalid_argument) with librdkafka's reason
/// when it refuses the configuration.
FLOWLIB_KAFKA_DECL kafka_handle make_kafka_handle(rd_kafka_type_t type, kafka_conf conf,
                                                  const kafka_context& ctx);

// --- Offset queries ----------------------------------------------------------------

/// A partition's low (first offset held) and high (next offset to be
/// written) watermarks.
struct kafka_watermarks {
  std::int64_t low = 0;
  std::int64_t high = 0;
};

inline int kafka_timeout_ms(std::chrono::milliseconds t) {
  return static_cast<int>(std::clamp<std::chrono::milliseconds::rep>(t.count(), 0, 1 << 30));
}

/// The partition ids of `topic`, ascending, from the cluster's metadata.
/// Throws ctx.io when the topic does not exist, has no partitions, or the
/// cluster does not answer within `timeout`.
FLOWLIB_KAFKA_DECL std::vector<std::int32_t> topic_partition_ids(
    rd_kafka_t* rk, const std::string& topic, std::chrono::milliseconds timeout,
    const kafka_context& ctx);

/// The high watermark (`end` true) or low watermark (`end` false) of each
/// of `partitions` of `topic`, in their order: one ListOffsets request per
/// partition leader. Throws ctx.io on a broker error or a timeout.
FLOWLIB_KAFKA_DECL std::vector<std::int64_t> query_offsets(
    rd_kafka_t* rk, const std::string& topic, std::span<const std::int32_t> partitions, bool end,
    std::chrono::milliseconds timeout, const kafka_context& ctx);

/// One partition's watermarks (one request). Throws ctx.io on a broker
/// error or a timeout.
FLOWLIB_KAFKA_DECL kafka_watermarks query_watermarks(rd_kafka_t* rk, const std::string& topic,
                                                     std::int32_t partition,
                                                     std::chrono::milliseconds timeout,
                                                     const kafka_context& ctx);

// --- Exact offset ranges --------------------------------------------------------------

/// The records of one partition at offsets [from, to).
struct kafka_offset_range {
  std::int32_t partition = 0;
  std::int64_t from = 0;
  std::int64_t to = 0;
};

/// Errors a consumer reports that waiting does not cure: the read fails at
/// once instead of at its timeout.
FLOWLIB_KAFKA_DECL bool kafka_error_is_permanent(rd_kafka_resp_err_t e) noexcept;

/// Where a read_offset_ranges() call stands in one partition.
struct kafka_range_state {
  kafka_offset_range range;
  std::int64_t next = 0;       ///< first offset not yet handed over
  std::int64_t end_seen = -1;  ///< the last partition EOF offset reported
  bool done = false;
};

/// read_offset_ranges()'s start: the non-empty ranges by partition (each
/// once; errc::invalid_argument when one appears twice), assigned to
/// `consumer` at their `from` offsets after the events an earlier call left
/// were dropped. Nothing is assigned when no range is non-empty (the result
/// is empty then). Throws ctx.io when assign() fails. `what` names the read.
FLOWLIB_KAFKA_DECL std::vector<kafka_range_state> kafka_assign_ranges(
    rd_kafka_t* consumer, const std::string& topic, std::span<const kafka_offset_range> ranges,
    const kafka_context& ctx, std::string_view what);

/// Throws ctx.io: the ranges `parts` were not complete within `timeout`
/// (where each open one stands, and the consumer's last error).
[[noreturn]] FLOWLIB_KAFKA_DECL void kafka_ranges_timed_out(
    const kafka_context& ctx, std::string_view what, std::chrono::milliseconds timeout,
    std::span<const kafka_range_state> parts, const std::string& last_error);

/// Throws for a fetch at `s.next` that the broker reported out of range:
/// errc::source_data_lost when the partition's low watermark (asked within
/// `left`, at least a second) is above it (retention removed the records),
/// ctx.io otherwise (a broker that is wrong for a while).
[[noreturn]] FLOWLIB_KAFKA_DECL void kafka_range_out_of_range(
    rd_kafka_t* consumer, const std::string& topic, const kafka_range_state& s,
    const rd_kafka_message_t& m, std::chrono::milliseconds left, const kafka_context& ctx,
    std::string_view what);

/// A consumer error event `m` during a read: kept in `last_error` (for the
/// timeout's message); throws ctx.io at once on a fatal error or one that
/// waiting does not cure (kafka_error_is_permanent).
FLOWLIB_KAFKA_DECL void kafka_range_error(rd_kafka_t* consumer, const rd_kafka_message_t& m,
                                          std::string& last_error, const kafka_context& ctx,
                                          std::string_view what);

/// Assigns `consumer` the partitions of `ranges` (each once) at their
/// `from` offsets and calls f(kafka_message&&) for every record with
/// from <= offset < to, until every range is complete (see the header
/// comment); unassigns before returning or throwing. Within a partition f
/// sees ascending offsets, each once. Throws:
///   - errc::source_data_lost when a range starts before the partition's
///     low watermark (retention removed the records), naming the topic,
///     partition and the offsets lost;
///   - ctx.io when the ranges are not complete within `timeout` (with the
///     last error the consumer reported, e.g. a broker that is down), on a
///     fatal or permanent consumer error, when assign() fails, or when the
///     broker reports an offset at or above the low watermark out of range;
///   - errc::invalid_argument when a partition appears in two ranges;
///   - whatever f throws (the read stops there).
/// Events left in the consumer's queue by an earlier call are dropped
/// before the partitions are assigned.
template <class F>
void read_offset_ranges(rd_kafka_t* consumer, const std::string& topic,
                        std::span<const kafka_offset_range> ranges, std::chrono::milliseconds timeout,
                        const kafka_context& ctx, F&& f) {
  std::string what = "reading topic '";
  what += topic;
  what += "'";
  std::vector<kafka_range_state> parts = kafka_assign_ranges(consumer, topic, ranges, ctx, what);
  if (parts.empty()) return;
  struct unassign {
    rd_kafka_t* rk;
    ~unassign() { rd_kafka_assign(rk, nullptr); }
  } unassign_guard{consumer};

  auto find = [&](std::int32_t partition) -> kafka_range_state* {
    auto it = std::lower_bound(parts.begin(), parts.end(), partition,
                               [](const kafka_range_state& s, std::int32_t p) { return s.range.partition < p; });
    return it != parts.end() && it->range.partition == partition ? &*it : nullptr;
  };

  std::size_t open = parts.size();
  std::string last_error;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (open > 0) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) kafka_ranges_timed_out(ctx, what, timeout, parts, last_error);
    kafka_message m(rd_kafka_consumer_poll(consumer, kafka_timeout_ms(std::min(left, std::chrono::milliseconds(200)))));
    if (!m) continue;
    if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
      if (kafka_range_state* s = find(m->partition); s && !s->done) {
        s->end_seen = m->offset;
        if (m->offset >= s->range.to) {
          s->done = true;
          --open;
        }
      }
      continue;
    }
    if (m->err == RD_KAFKA_RESP_ERR__AUTO_OFFSET_RESET || m->err == RD_KAFKA_RESP_ERR_OFFSET_OUT_OF_RANGE) {
      // The broker has no record at the fetch offset: retention removed it
      // (data lost), or the broker is wrong for a while (a leader change):
      // the watermarks tell which.
      const kafka_range_state* s = find(m->partition);
      if (!s || s->done) continue;
      kafka_range_out_of_range(consumer, topic, *s, *m, left, ctx, what);
    }
    if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      kafka_range_error(consumer, *m, last_error, ctx, what);
      continue;
    }
    kafka_range_state* s = find(m->partition);
    if (!s || s->done || m->offset < s->next) continue;  // not asked for, or a refetch
    if (m->offset >= s->range.to) {
      s->done = true;
      --open;
      continue;
    }
    s->next = m->offset + 1;
    const bool last = s->next >= s->range.to;
    f(std::move(m));
    if (last) {
      s->done = true;
      --open;
    }
  }
}

}  // namespace flowlib::detail

#if !defined(FLOWLIB_KAFKA_SEPARATE_COMPILATION)
#include <flowlib/detail/impl/kafka.ipp>
#endif
