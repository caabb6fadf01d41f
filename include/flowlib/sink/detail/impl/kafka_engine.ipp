// flowlib/sink/detail/impl/kafka_engine.ipp
//
// The definitions sink/detail/kafka_engine.hpp declares: inline in header-only
// mode, compiled once by src/kafka.cpp under
// FLOWLIB_KAFKA_SEPARATE_COMPILATION (detail/config.hpp).
#pragma once

#include <flowlib/sink/detail/kafka_engine.hpp>

#include <algorithm>
#include <charconv>
#include <exception>
#include <utility>

namespace flowlib::detail {

FLOWLIB_KAFKA_DECL std::string kafka_sink_excerpt(std::string_view s) {
  std::string out(s.substr(0, 80));
  if (s.size() > 80) out += "...";
  return out;
}

FLOWLIB_KAFKA_DECL bool kafka_sink_header(rd_kafka_headers_t* hdrs, std::string_view name,
                                          std::string_view& out) {
  const void* v = nullptr;
  std::size_t size = 0;
  const std::string n(name);
  if (!hdrs || rd_kafka_header_get_last(hdrs, n.c_str(), &v, &size) != RD_KAFKA_RESP_ERR_NO_ERROR)
    return false;
  out = v ? std::string_view(static_cast<const char*>(v), size) : std::string_view();
  return true;
}

FLOWLIB_KAFKA_DECL bool kafka_sink_number(std::string_view s, std::uint64_t& out) {
  const auto r = std::from_chars(s.data(), s.data() + s.size(), out);
  return !s.empty() && r.ec == std::errc() && r.ptr == s.data() + s.size();
}

FLOWLIB_KAFKA_DECL std::int32_t kafka_sink_engine::partition_count(std::string_view flow) {
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

FLOWLIB_KAFKA_DECL void kafka_sink_engine::write(std::string_view flow, std::uint64_t batch,
                                                 std::span<const kafka_sink_record> records,
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

FLOWLIB_KAFKA_DECL kafka_context kafka_sink_engine::context(std::string_view flow) const {
  return kafka_context{flow.empty() ? std::string_view(s_.topic) : flow, errc::sink_io};
}

FLOWLIB_KAFKA_DECL bool kafka_sink_engine::known(std::int32_t p) const {
  return static_cast<std::size_t>(p) < known_.size() && known_[static_cast<std::size_t>(p)] != 0;
}

FLOWLIB_KAFKA_DECL void kafka_sink_engine::mark_known(std::int32_t p) {
  if (known_.size() <= static_cast<std::size_t>(p)) known_.resize(static_cast<std::size_t>(p) + 1, 0);
  known_[static_cast<std::size_t>(p)] = 1;
}

FLOWLIB_KAFKA_DECL void kafka_sink_engine::forget_positions() {
  known_.clear();
  last_batch_.reset();
}

FLOWLIB_KAFKA_DECL void kafka_sink_engine::forget() {
  forget_positions();
  producer_.reset();
  partitions_ = 0;
}

FLOWLIB_KAFKA_DECL kafka_properties kafka_sink_engine::base_properties() const {
  kafka_properties props{{"bootstrap.servers", s_.brokers}};
  return props;
}

FLOWLIB_KAFKA_DECL void kafka_sink_engine::ensure_reader(const kafka_context& ctx) {
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

FLOWLIB_KAFKA_DECL void kafka_sink_engine::ensure_producer(const kafka_context& ctx) {
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

FLOWLIB_KAFKA_DECL void kafka_sink_engine::on_delivery(rd_kafka_t*, const rd_kafka_message_t* m,
                                                       void* opaque) {
  auto* self = static_cast<kafka_sink_engine*>(opaque);
  const auto i = reinterpret_cast<std::uintptr_t>(m->_private);
  if (i == 0 || i > self->reports_.size()) return;
  auto& r = self->reports_[i - 1];
  r.reported = true;
  r.err = m->err;
  if (m->err != RD_KAFKA_RESP_ERR_NO_ERROR) r.text = rd_kafka_err2str(m->err);
}

FLOWLIB_KAFKA_DECL void kafka_sink_engine::on_error(rd_kafka_t*, int err, const char* reason,
                                                    void* opaque) {
  auto* self = static_cast<kafka_sink_engine*>(opaque);
  self->last_error_ = rd_kafka_err2str(static_cast<rd_kafka_resp_err_t>(err));
  self->last_error_ += ": ";
  self->last_error_ += reason ? reason : "";
}

FLOWLIB_KAFKA_DECL std::uint64_t kafka_sink_engine::read_tails(
    const kafka_context& sink_ctx, std::uint64_t batch, std::span<const kafka_sink_record> records,
    std::span<const std::int32_t> parts, std::vector<char>& present) {
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

[[noreturn]] FLOWLIB_KAFKA_DECL void kafka_sink_engine::mismatch(
    const kafka_context& ctx, std::int32_t partition, std::int64_t offset,
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

FLOWLIB_KAFKA_DECL void kafka_sink_engine::produce(const kafka_context& ctx, std::uint64_t batch,
                                                   std::span<const kafka_sink_record> records,
                                                   const std::vector<char>& present,
                                                   KafkaSinkDelivery& report) {
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

}  // namespace flowlib::detail
