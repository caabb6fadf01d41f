// flowlib/detail/impl/kafka.ipp
//
// The definitions detail/kafka.hpp declares: inline in header-only mode,
// compiled once by src/kafka.cpp under FLOWLIB_KAFKA_SEPARATE_COMPILATION
// (detail/config.hpp).
#pragma once

#include <flowlib/detail/kafka.hpp>

namespace flowlib::detail {

FLOWLIB_KAFKA_DECL void kafka_error_note::install(rd_kafka_conf_t* conf) noexcept {
  rd_kafka_conf_set_opaque(conf, this);
  rd_kafka_conf_set_error_cb(conf, &kafka_error_note::on_error);
}

FLOWLIB_KAFKA_DECL std::string kafka_error_note::last() const {
  std::lock_guard lock(mutex_);
  return last_;
}

FLOWLIB_KAFKA_DECL void kafka_error_note::clear() {
  std::lock_guard lock(mutex_);
  last_.clear();
}

FLOWLIB_KAFKA_DECL void kafka_error_note::on_error(rd_kafka_t*, int err, const char* reason,
                                                   void* opaque) {
  auto* self = static_cast<kafka_error_note*>(opaque);
  if (!self) return;
  std::lock_guard lock(self->mutex_);
  self->last_ = reason && *reason ? reason : rd_kafka_err2str(static_cast<rd_kafka_resp_err_t>(err));
}

FLOWLIB_KAFKA_DECL void serve_kafka_events(rd_kafka_t* rk) noexcept {
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

[[noreturn]] FLOWLIB_KAFKA_DECL void kafka_fail(const kafka_context& ctx, std::string_view what,
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

[[noreturn]] FLOWLIB_KAFKA_DECL void kafka_fail(rd_kafka_t* rk, const kafka_context& ctx,
                                                std::string_view what, std::string_view text) {
  if (ctx.note && ctx.serve_events) serve_kafka_events(rk);
  kafka_fail(ctx, what, text);
}

FLOWLIB_KAFKA_DECL kafka_partitions make_kafka_partitions(std::size_t n) {
  return kafka_partitions(rd_kafka_topic_partition_list_new(static_cast<int>(std::max<std::size_t>(n, 1))));
}

FLOWLIB_KAFKA_DECL kafka_conf make_kafka_conf(const kafka_properties& props,
                                              const kafka_context& ctx) {
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

FLOWLIB_KAFKA_DECL kafka_properties kafka_consumer_required() {
  return {{"enable.auto.commit", "false"},
          {"enable.auto.offset.store", "false"},
          {"enable.partition.eof", "true"},
          {"auto.offset.reset", "error"}};
}

FLOWLIB_KAFKA_DECL kafka_properties kafka_consumer_defaults(std::string group_id) {
  return {{"group.id", std::move(group_id)},
          {"fetch.wait.max.ms", "1"},
          {"socket.nagle.disable", "true"}};
}

FLOWLIB_KAFKA_DECL kafka_properties kafka_consumer_settings(std::string group_id) {
  kafka_properties p = kafka_consumer_defaults(std::move(group_id));
  for (auto& kv : kafka_consumer_required()) p.push_back(std::move(kv));
  return p;
}

FLOWLIB_KAFKA_DECL kafka_handle make_kafka_handle(rd_kafka_type_t type, kafka_conf conf,
                                                  const kafka_context& ctx) {
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

FLOWLIB_KAFKA_DECL std::vector<std::int32_t> topic_partition_ids(
    rd_kafka_t* rk, const std::string& topic, std::chrono::milliseconds timeout,
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

FLOWLIB_KAFKA_DECL std::vector<std::int64_t> query_offsets(
    rd_kafka_t* rk, const std::string& topic, std::span<const std::int32_t> partitions, bool end,
    std::chrono::milliseconds timeout, const kafka_context& ctx) {
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

FLOWLIB_KAFKA_DECL kafka_watermarks query_watermarks(rd_kafka_t* rk, const std::string& topic,
                                                     std::int32_t partition,
                                                     std::chrono::milliseconds timeout,
                                                     const kafka_context& ctx) {
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

FLOWLIB_KAFKA_DECL bool kafka_error_is_permanent(rd_kafka_resp_err_t e) noexcept {
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

FLOWLIB_KAFKA_DECL void kafka_handle::reset() noexcept {
  if (!rk_) return;
  if (consumer_) rd_kafka_consumer_close(rk_);
  rd_kafka_destroy(rk_);
  rk_ = nullptr;
}

FLOWLIB_KAFKA_DECL std::vector<kafka_range_state> kafka_assign_ranges(
    rd_kafka_t* consumer, const std::string& topic, std::span<const kafka_offset_range> ranges,
    const kafka_context& ctx, std::string_view what) {
  std::vector<kafka_range_state> parts;
  parts.reserve(ranges.size());
  for (const auto& r : ranges)
    if (r.from < r.to) parts.push_back({r, r.from, -1, false});
  if (parts.empty()) return parts;
  std::sort(parts.begin(), parts.end(), [](const kafka_range_state& a, const kafka_range_state& b) {
    return a.range.partition < b.range.partition;
  });
  for (std::size_t i = 1; i < parts.size(); ++i)
    if (parts[i].range.partition == parts[i - 1].range.partition) {
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
  // Events left from an earlier read (an error for a partition it had)
  // must not count for this one.
  while (kafka_message stale{rd_kafka_consumer_poll(consumer, 0)}) {
  }
  if (const rd_kafka_resp_err_t e = rd_kafka_assign(consumer, list.get()); e != RD_KAFKA_RESP_ERR_NO_ERROR)
    kafka_fail(ctx, std::string(what) + " (assigning its partitions)", rd_kafka_err2str(e));
  return parts;
}

FLOWLIB_KAFKA_DECL void kafka_ranges_timed_out(const kafka_context& ctx, std::string_view what,
                                               std::chrono::milliseconds timeout,
                                               std::span<const kafka_range_state> parts,
                                               const std::string& last_error) {
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

FLOWLIB_KAFKA_DECL void kafka_range_out_of_range(rd_kafka_t* consumer, const std::string& topic,
                                                 const kafka_range_state& s,
                                                 const rd_kafka_message_t& m,
                                                 std::chrono::milliseconds left,
                                                 const kafka_context& ctx, std::string_view what) {
  const std::int32_t p = s.range.partition;
  const std::int64_t from = s.next;
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
  d += rd_kafka_message_errstr(&m);
  d += "); reading it again may succeed";
  kafka_fail(ctx, what, d);
}

FLOWLIB_KAFKA_DECL void kafka_range_error(rd_kafka_t* consumer, const rd_kafka_message_t& m,
                                          std::string& last_error, const kafka_context& ctx,
                                          std::string_view what) {
  last_error = rd_kafka_message_errstr(&m);
  char fatal[512];
  if (const rd_kafka_resp_err_t fe = rd_kafka_fatal_error(consumer, fatal, sizeof fatal);
      fe != RD_KAFKA_RESP_ERR_NO_ERROR)
    kafka_fail(ctx, what, std::string("fatal error: ") + fatal);
  if (kafka_error_is_permanent(m.err)) kafka_fail(ctx, what, last_error);
}

}  // namespace flowlib::detail
