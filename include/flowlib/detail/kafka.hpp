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
  void install(rd_kafka_conf_t* conf) noexcept {
    rd_kafka_conf_set_opaque(conf, this);
    rd_kafka_conf_set_error_cb(conf, &kafka_error_note::on_error);
  }
  /// The last error's text ("" when none since the last clear()).
  std::string last() const {
    std::lock_guard lock(mutex_);
    return last_;
  }
  void clear() {
    std::lock_guard lock(mutex_);
    last_.clear();
  }

 private:
  static void on_error(rd_kafka_t*, int err, const char* reason, void* opaque) {
    auto* self = static_cast<kafka_error_note*>(opaque);
    if (!self) return;
    std::lock_guard lock(self->mutex_);
    self->last_ = reason && *reason ? reason : rd_kafka_err2str(static_cast<rd_kafka_resp_err_t>(err));
  }
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
inline void serve_kafka_events(rd_kafka_t* rk) noexcept {
  if (rd_kafka_type(rk) == RD_KAFKA_CONSUMER) {
    for (int i = 0; i < 1000; ++i) {
      rd_kafka_message_t* m = rd_kafka_consumer_poll(rk, 0);
      if (!m) break;
      rd_kafka_message_destroy(m);
    }
  } else {
    rd_kafka_poll(rk, 0);
  }
}

/// Throws flowlib::error(ctx.io) "<what>: <text>", with the note's last
/// error when there is one.
[[noreturn]] inline void kafka_fail(const kafka_context& ctx, std::string_view what,
                                    std::string_view text) {
  std::string detail(what);
  detail += ": ";
  detail += text;
  if (ctx.note) {
    if (const std::string last = ctx.note->last(); !last.empty() && last != text) {
      detail += " (last client error: ";
      detail += last;
      detail += ")";
    }
  }
  throw error(ctx.io, std::string(ctx.who), "", "", detail);
}

/// kafka_fail, after serving rk's events when ctx.serve_events says so.
[[noreturn]] inline void kafka_fail(rd_kafka_t* rk, const kafka_context& ctx, std::string_view what,
                                    std::string_view text) {
  if (ctx.note && ctx.serve_events) serve_kafka_events(rk);
  kafka_fail(ctx, what, text);
}

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
inline kafka_partitions make_kafka_partitions(std::size_t n) {
  return kafka_partitions(rd_kafka_topic_partition_list_new(static_cast<int>(std::max<std::size_t>(n, 1))));
}

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
  void reset() noexcept {
    if (!rk_) return;
    if (consumer_) rd_kafka_consumer_close(rk_);
    rd_kafka_destroy(rk_);
    rk_ = nullptr;
  }

 private:
  rd_kafka_t* rk_ = nullptr;
  bool consumer_ = false;
};

// --- Configuration -----------------------------------------------------------------

/// A configuration with `props` set in order. A property librdkafka rejects
/// (unknown name, bad value) throws flowlib::error(errc::invalid_argument)
/// naming ctx.who, the property and librdkafka's reason.
inline kafka_conf make_kafka_conf(const kafka_properties& props, const kafka_context& ctx) {
  kafka_conf conf(rd_kafka_conf_new());
  char err[512];
  for (const auto& [name, value] : props) {
    if (rd_kafka_conf_set(conf.get(), name.c_str(), value.c_str(), err, sizeof err) !=
        RD_KAFKA_CONF_OK) {
      std::string d = "librdkafka property '";
      d += name;
      d += "' = '";
      d += value;
      d += "' is not accepted: ";
      d += err;
      throw error(errc::invalid_argument, std::string(ctx.who), "", "", d);
    }
  }
  return conf;
}

/// The settings read_offset_ranges needs of a consumer, which a user's
/// configuration must not change (see the header comment).
inline kafka_properties kafka_consumer_required() {
  return {{"enable.auto.commit", "false"},
          {"enable.auto.offset.store", "false"},
          {"enable.partition.eof", "true"},
          {"auto.offset.reset", "error"}};
}

/// Defaults a user's configuration may override: group.id `group_id`;
/// fetch.wait.max.ms 1 instead of 500: a reader asks only for records that
/// exist, so a long fetch wait never helps it, while the fetch still in
/// flight when a read unassigns its partitions delays the next request on
/// that connection (a broker answers a connection's requests in order) by
/// up to that wait (and a consumer fetches only while a read runs); socket.nagle.disable true, as Kafka's own clients do
/// (small requests are not held back waiting for acknowledgements).
inline kafka_properties kafka_consumer_defaults(std::string group_id) {
  return {{"group.id", std::move(group_id)},
          {"fetch.wait.max.ms", "1"},
          {"socket.nagle.disable", "true"}};
}

/// kafka_consumer_defaults(group_id) followed by kafka_consumer_required().
inline kafka_properties kafka_consumer_settings(std::string group_id) {
  kafka_properties p = kafka_consumer_defaults(std::move(group_id));
  for (auto& kv : kafka_consumer_required()) p.push_back(std::move(kv));
  return p;
}

/// A consumer (or producer) handle from `conf` (consumed either way).
/// Throws flowlib::error(errc::invalid_argument) with librdkafka's reason
/// when it refuses the configuration.
inline kafka_handle make_kafka_handle(rd_kafka_type_t type, kafka_conf conf, const kafka_context& ctx) {
  char err[512];
  rd_kafka_t* rk = rd_kafka_new(type, conf.get(), err, sizeof err);
  if (!rk) {
    std::string d = "librdkafka refused the configuration: ";
    d += err;
    throw error(errc::invalid_argument, std::string(ctx.who), "", "", d);
  }
  (void)conf.release();  // owned by rk now
  if (type == RD_KAFKA_CONSUMER) rd_kafka_poll_set_consumer(rk);
  return kafka_handle(rk, type == RD_KAFKA_CONSUMER);
}

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
inline std::vector<std::int32_t> topic_partition_ids(rd_kafka_t* rk, const std::string& topic,
                                                     std::chrono::milliseconds timeout,
                                                     const kafka_context& ctx) {
  std::unique_ptr<rd_kafka_topic_t, decltype(&rd_kafka_topic_destroy)> t(
      rd_kafka_topic_new(rk, topic.c_str(), nullptr), &rd_kafka_topic_destroy);
  std::string what = "reading the partitions of topic '";
  what += topic;
  what += "'";
  if (!t) kafka_fail(rk, ctx, what, rd_kafka_err2str(rd_kafka_last_error()));
  const rd_kafka_metadata_t* md = nullptr;
  const rd_kafka_resp_err_t e = rd_kafka_metadata(rk, 0, t.get(), &md, kafka_timeout_ms(timeout));
  if (e != RD_KAFKA_RESP_ERR_NO_ERROR) kafka_fail(rk, ctx, what, rd_kafka_err2str(e));
  std::unique_ptr<const rd_kafka_metadata_t, decltype(&rd_kafka_metadata_destroy)> guard(
      md, &rd_kafka_metadata_destroy);
  std::vector<std::int32_t> ids;
  for (int i = 0; i < md->topic_cnt; ++i) {
    const auto& mt = md->topics[i];
    if (topic != mt.topic) continue;
    if (mt.err != RD_KAFKA_RESP_ERR_NO_ERROR) kafka_fail(rk, ctx, what, rd_kafka_err2str(mt.err));
    for (int j = 0; j < mt.partition_cnt; ++j) ids.push_back(mt.partitions[j].id);
  }
  if (ids.empty()) kafka_fail(rk, ctx, what, "the cluster reports no partitions for it");
  std::sort(ids.begin(), ids.end());
  return ids;
}

/// The high watermark (`end` true) or low watermark (`end` false) of each
/// of `partitions` of `topic`, in their order: one ListOffsets request per
/// partition leader. Throws ctx.io on a broker error or a timeout.
inline std::vector<std::int64_t> query_offsets(rd_kafka_t* rk, const std::string& topic,
                                               std::span<const std::int32_t> partitions, bool end,
                                               std::chrono::milliseconds timeout,
                                               const kafka_context& ctx) {
  std::vector<std::int64_t> out;
  if (partitions.empty()) return out;
  kafka_partitions list = make_kafka_partitions(partitions.size());
  for (const std::int32_t p : partitions)
    rd_kafka_topic_partition_list_add(list.get(), topic.c_str(), p)->offset =
        end ? RD_KAFKA_OFFSET_END : RD_KAFKA_OFFSET_BEGINNING;
  std::string what = end ? "reading the high watermarks of topic '" : "reading the low watermarks of topic '";
  what += topic;
  what += "'";
  const rd_kafka_resp_err_t e = rd_kafka_offsets_for_times(rk, list.get(), kafka_timeout_ms(timeout));
  if (e != RD_KAFKA_RESP_ERR_NO_ERROR) kafka_fail(rk, ctx, what, rd_kafka_err2str(e));
  out.reserve(partitions.size());
  for (int i = 0; i < list->cnt; ++i) {
    const auto& el = list->elems[i];
    if (el.err != RD_KAFKA_RESP_ERR_NO_ERROR || el.offset < 0) {
      std::string w = what;
      w += ", partition ";
      w += std::to_string(el.partition);
      kafka_fail(rk, ctx, w, el.err != RD_KAFKA_RESP_ERR_NO_ERROR ? rd_kafka_err2str(el.err)
                                                                   : "the broker returned no offset");
    }
    out.push_back(el.offset);
  }
  return out;
}

/// One partition's watermarks (one request). Throws ctx.io on a broker
/// error or a timeout.
inline kafka_watermarks query_watermarks(rd_kafka_t* rk, const std::string& topic, std::int32_t partition,
                                         std::chrono::milliseconds timeout, const kafka_context& ctx) {
  kafka_watermarks w;
  const rd_kafka_resp_err_t e = rd_kafka_query_watermark_offsets(rk, topic.c_str(), partition, &w.low,
                                                                 &w.high, kafka_timeout_ms(timeout));
  if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
    std::string what = "reading the watermarks of topic '";
    what += topic;
    what += "' partition ";
    what += std::to_string(partition);
    kafka_fail(rk, ctx, what, rd_kafka_err2str(e));
  }
  return w;
}

// --- Exact offset ranges --------------------------------------------------------------

/// The records of one partition at offsets [from, to).
struct kafka_offset_range {
  std::int32_t partition = 0;
  std::int64_t from = 0;
  std::int64_t to = 0;
};

/// Errors a consumer reports that waiting does not cure: the read fails at
/// once instead of at its timeout.
inline bool kafka_error_is_permanent(rd_kafka_resp_err_t e) noexcept {
  switch (e) {
    case RD_KAFKA_RESP_ERR__FATAL:
    case RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC:
    case RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION:
    case RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART:
    case RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED:
    case RD_KAFKA_RESP_ERR_CLUSTER_AUTHORIZATION_FAILED:
    case RD_KAFKA_RESP_ERR__AUTHENTICATION:
    case RD_KAFKA_RESP_ERR_UNSUPPORTED_VERSION:
    case RD_KAFKA_RESP_ERR__UNSUPPORTED_FEATURE:
      return true;
    default:
      return false;
  }
}

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
  struct state {
    kafka_offset_range range;
    std::int64_t next = 0;   // first offset not yet handed over
    std::int64_t end_seen = -1;  // the last partition EOF offset reported
    bool done = false;
  };
  std::vector<state> parts;
  parts.reserve(ranges.size());
  for (const auto& r : ranges)
    if (r.from < r.to) parts.push_back({r, r.from, -1, false});
  if (parts.empty()) return;
  std::sort(parts.begin(), parts.end(),
            [](const state& a, const state& b) { return a.range.partition < b.range.partition; });
  for (std::size_t i = 1; i < parts.size(); ++i)
    if (parts[i].range.partition == parts[i - 1].range.partition)
    {
      std::string d = "partition ";
      d += std::to_string(parts[i].range.partition);
      d += " appears twice in one read of topic '";
      d += topic;
      d += "'";
      throw error(errc::invalid_argument, std::string(ctx.who), "", "", d);
    }

  kafka_partitions list = make_kafka_partitions(parts.size());
  for (const auto& s : parts)
    rd_kafka_topic_partition_list_add(list.get(), topic.c_str(), s.range.partition)->offset = s.range.from;
  std::string what = "reading topic '";
  what += topic;
  what += "'";
  // Events left from an earlier read (an error for a partition it had)
  // must not count for this one.
  while (kafka_message stale{rd_kafka_consumer_poll(consumer, 0)}) {
  }
  if (const rd_kafka_resp_err_t e = rd_kafka_assign(consumer, list.get()); e != RD_KAFKA_RESP_ERR_NO_ERROR)
    kafka_fail(ctx, what + " (assigning its partitions)", rd_kafka_err2str(e));
  struct unassign {
    rd_kafka_t* rk;
    ~unassign() { rd_kafka_assign(rk, nullptr); }
  } unassign_guard{consumer};

  auto find = [&](std::int32_t partition) -> state* {
    auto it = std::lower_bound(parts.begin(), parts.end(), partition,
                               [](const state& s, std::int32_t p) { return s.range.partition < p; });
    return it != parts.end() && it->range.partition == partition ? &*it : nullptr;
  };

  std::size_t open = parts.size();
  std::string last_error;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (open > 0) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      std::string d = "timed out after ";
      d += std::to_string(timeout.count());
      d += " ms with";
      for (const auto& s : parts) {
        if (s.done) continue;
        d += " partition ";
        d += std::to_string(s.range.partition);
        d += " at offset ";
        d += std::to_string(s.next);
        d += " of [";
        d += std::to_string(s.range.from);
        d += ", ";
        d += std::to_string(s.range.to);
        d += ")";
        if (s.end_seen >= 0) {
          d += " (its end is offset ";
          d += std::to_string(s.end_seen);
          d += ")";
        }
        d += ";";
      }
      if (last_error.empty()) {
        d += " the consumer reported no error";
      } else {
        d += " last error: ";
        d += last_error;
      }
      kafka_fail(ctx, what, d);
    }
    kafka_message m(rd_kafka_consumer_poll(consumer, kafka_timeout_ms(std::min(left, std::chrono::milliseconds(200)))));
    if (!m) continue;
    if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
      if (state* s = find(m->partition); s && !s->done) {
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
      state* s = find(m->partition);
      if (!s || s->done) continue;
      const std::int32_t p = s->range.partition;
      const std::int64_t from = s->next;
      std::string d = "topic '";
      d += topic;
      d += "' partition ";
      d += std::to_string(p);
      kafka_context quiet = ctx;  // partitions are assigned: serving would drop records
      quiet.serve_events = false;
      const kafka_watermarks w =
          query_watermarks(consumer, topic, p, std::max(left, std::chrono::milliseconds(1000)), quiet);
      if (w.low > from) {
        d += ": the records from offset ";
        d += std::to_string(from);
        d += " to ";
        d += std::to_string(w.low - 1);
        d += " are no longer in the topic (its first offset is ";
        d += std::to_string(w.low);
        d += ": retention removed them)";
        throw error(errc::source_data_lost, std::string(ctx.who), "", "", d);
      }
      d += ": the broker reported offset ";
      d += std::to_string(from);
      d += " out of range although the partition holds offsets [";
      d += std::to_string(w.low);
      d += ", ";
      d += std::to_string(w.high);
      d += ") (";
      d += rd_kafka_message_errstr(m.get());
      d += "); reading it again may succeed";
      kafka_fail(ctx, what, d);
    }
    if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) {
      last_error = rd_kafka_message_errstr(m.get());
      char fatal[512];
      if (const rd_kafka_resp_err_t fe = rd_kafka_fatal_error(consumer, fatal, sizeof fatal);
          fe != RD_KAFKA_RESP_ERR_NO_ERROR)
        kafka_fail(ctx, what, std::string("fatal error: ") + fatal);
      if (kafka_error_is_permanent(m->err)) kafka_fail(ctx, what, last_error);
      continue;
    }
    state* s = find(m->partition);
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
