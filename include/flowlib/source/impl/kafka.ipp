// flowlib/source/impl/kafka.ipp
//
// The definitions source/kafka.hpp declares: inline in header-only mode,
// compiled once by src/kafka.cpp under FLOWLIB_KAFKA_SEPARATE_COMPILATION
// (detail/config.hpp).
#pragma once

#include <flowlib/source/kafka.hpp>

#include <cinttypes>
#include <cstdio>

namespace flowlib::detail {

FLOWLIB_KAFKA_DECL kafka_source_core::kafka_source_core(std::string name,
                                                        kafka_source_settings settings,
                                                        std::string_view row_problem)
    : name_(std::move(name)), s_(std::move(settings)) {
  if (s_.topic.empty()) fail_argument("options.topic is empty: name the topic to read");
  if (s_.brokers.empty())
    fail_argument("options.brokers is empty: give the bootstrap servers, \"host:port,...\"");
  if (!row_problem.empty()) fail_argument(std::string(row_problem));
  for (const std::int32_t p : s_.partitions)
    if (p < 0) fail_argument("options.partitions holds a negative partition number");
  std::sort(s_.partitions.begin(), s_.partitions.end());
  if (std::adjacent_find(s_.partitions.begin(), s_.partitions.end()) != s_.partitions.end())
    fail_argument("options.partitions names a partition twice");

  const kafka_properties required = kafka_consumer_required();
  bool group_set = false;
  for (const auto& [key, value] : s_.config) {
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
  if (s_.commit_offsets_for_monitoring && !group_set)
    fail_argument("options.commit_offsets_for_monitoring needs a consumer group: set 'group.id' "
                  "in options.config to the group whose offsets the lag monitoring reads");

  kafka_properties props = kafka_consumer_defaults("flowlib.kafka_source");
  props.emplace_back("bootstrap.servers", s_.brokers);
  std::string client_id = "flowlib.";
  client_id += name_;
  props.emplace_back("client.id", std::move(client_id));
  for (const auto& kv : s_.config) props.push_back(kv);
  for (const auto& kv : required) props.push_back(kv);
  properties_ = std::move(props);
  connect();
}

FLOWLIB_KAFKA_DECL source_position kafka_source_core::start() const {
  std::lock_guard lock(mutex_);
  refresh_partitions();
  const auto low = query_offsets(consumer_.get(), s_.topic, partitions_, false, s_.request_timeout, ctx());
  note_.clear();  // the note holds the client's errors since the last call that succeeded
  source_position p;
  for (std::size_t i = 0; i < partitions_.size(); ++i)
    p.set(static_cast<source_position::partition_type>(partitions_[i]), to_offset(low[i]));
  return p;
}

FLOWLIB_KAFKA_DECL source_position kafka_source_core::latest() const {
  std::lock_guard lock(mutex_);
  refresh_partitions();
  const auto high = query_offsets(consumer_.get(), s_.topic, partitions_, true, s_.request_timeout, ctx());
  note_.clear();
  latest_ = source_position{};
  for (std::size_t i = 0; i < partitions_.size(); ++i)
    latest_.set(static_cast<source_position::partition_type>(partitions_[i]), to_offset(high[i]));
  have_latest_ = true;
  return latest_;
}

FLOWLIB_KAFKA_DECL source_position kafka_source_core::plan(
    const source_position& from, std::size_t limit) const {
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

FLOWLIB_KAFKA_DECL std::vector<std::int32_t> kafka_source_core::partitions() const {
  if (!s_.partitions.empty()) return s_.partitions;
  std::lock_guard lock(mutex_);
  return partitions_;
}

FLOWLIB_KAFKA_DECL std::vector<kafka_offset_range> kafka_source_core::begin_read(
    const source_position& from, const source_position& to, std::uint64_t& expected) const {
  if (partitions_.empty() || reconnect_ || metadata_due_) refresh_partitions();
  std::vector<kafka_offset_range> ranges;
  expected = 0;
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
  if (s_.commit_offsets_for_monitoring) mirror(from);
  return ranges;
}

FLOWLIB_KAFKA_DECL void kafka_source_core::end_read(const error* failed) const noexcept {
  if (failed == nullptr) {
    note_.clear();
    return;
  }
  // After a broker error the client may keep the partitions in an error
  // state (an authorization failure does, for good): the next call makes a
  // new consumer.
  if (failed->code() == errc::source_io || failed->code() == errc::source_data_lost) reconnect_ = true;
}

FLOWLIB_KAFKA_DECL KafkaRecord kafka_source_core::record_of(
    const rd_kafka_message_t& m, std::vector<KafkaHeader>& headers) const {
  KafkaRecord r;
  r.topic = s_.topic;
  r.partition = m.partition;
  r.offset = m.offset;
  if (m.key) r.key = std::string_view(static_cast<const char*>(m.key), m.key_len);
  if (m.payload) r.value = std::string_view(static_cast<const char*>(m.payload), m.len);
  rd_kafka_timestamp_type_t tstype = RD_KAFKA_TIMESTAMP_NOT_AVAILABLE;
  const std::int64_t ts = rd_kafka_message_timestamp(&m, &tstype);
  if (tstype != RD_KAFKA_TIMESTAMP_NOT_AVAILABLE && ts >= 0)
    r.timestamp = std::chrono::sys_time<std::chrono::milliseconds>(std::chrono::milliseconds(ts));
  headers.clear();
  rd_kafka_headers_t* hdrs = nullptr;
  if (rd_kafka_message_headers(&m, &hdrs) == RD_KAFKA_RESP_ERR_NO_ERROR && hdrs) {
    const char* hname = nullptr;
    const void* hvalue = nullptr;
    std::size_t hsize = 0;
    for (std::size_t i = 0; rd_kafka_header_get_all(hdrs, i, &hname, &hvalue, &hsize) == RD_KAFKA_RESP_ERR_NO_ERROR;
         ++i) {
      KafkaHeader h{hname, std::nullopt};
      if (hvalue) h.value = std::string_view(static_cast<const char*>(hvalue), hsize);
      headers.push_back(h);
    }
  }
  r.headers = headers;
  return r;
}

FLOWLIB_KAFKA_DECL void kafka_source_core::deserializer_failed(const rd_kafka_message_t& m,
                                                               std::string_view what) const {
  std::array<char, 64> buf;
  std::string d(where_of(m, buf));
  d += ": options.deserialize threw: ";
  d += what;
  throw error(errc::malformed_record, name_, "", "", d);
}

FLOWLIB_KAFKA_DECL std::string_view kafka_source_core::where_of(const rd_kafka_message_t& m,
                                                                std::array<char, 64>& buf) {
  const int n = std::snprintf(buf.data(), buf.size(), "partition %" PRId32 " offset %" PRId64, m.partition,
                              m.offset);
  return {buf.data(), static_cast<std::size_t>(std::clamp(n, 0, static_cast<int>(buf.size()) - 1))};
}

FLOWLIB_KAFKA_DECL void kafka_source_core::fail_argument(const std::string& detail) const {
  throw error(errc::invalid_argument, name_, "", "", detail);
}

FLOWLIB_KAFKA_DECL void kafka_source_core::connect() const {
  kafka_conf conf = make_kafka_conf(properties_, ctx());
  note_.install(conf.get());
  consumer_ = make_kafka_handle(RD_KAFKA_CONSUMER, std::move(conf), ctx());
}

FLOWLIB_KAFKA_DECL void kafka_source_core::refresh_partitions() const {
  if (reconnect_) {
    consumer_.reset();
    connect();
    reconnect_ = false;
    metadata_due_ = true;  // a new consumer learns the topic's leaders before it reads
  }
  const auto now = std::chrono::steady_clock::now();
  if (!s_.partitions.empty()) {
    if (!partitions_.empty() && !metadata_due_) return;
    const auto ids = topic_partition_ids(consumer_.get(), s_.topic, s_.request_timeout, ctx());
    for (const std::int32_t p : s_.partitions)
      if (!std::binary_search(ids.begin(), ids.end(), p)) {
        std::string d = "options.partitions names partition ";
        d += std::to_string(p);
        d += ", but topic '";
        d += s_.topic;
        d += "' has ";
        d += std::to_string(ids.size());
        d += ids.size() == 1 ? " partition" : " partitions";
        fail_argument(d);
      }
    partitions_ = s_.partitions;
    metadata_due_ = false;
    return;
  }
  if (!partitions_.empty() && !metadata_due_ && now - partitions_checked_ < s_.partition_refresh)
    return;
  auto ids = topic_partition_ids(consumer_.get(), s_.topic, s_.request_timeout, ctx());
  // Kafka never removes partitions; a shorter answer (metadata from a
  // broker that is behind) does not drop any already read.
  for (const std::int32_t p : partitions_)
    if (!std::binary_search(ids.begin(), ids.end(), p)) ids.insert(std::upper_bound(ids.begin(), ids.end(), p), p);
  partitions_ = std::move(ids);
  partitions_checked_ = now;
  metadata_due_ = false;
}

FLOWLIB_KAFKA_DECL void kafka_source_core::mirror(const source_position& from) const {
  std::vector<std::pair<std::int32_t, std::int64_t>> changed;
  for (const std::int32_t p : partitions_) {
    const auto o = from.offset(static_cast<source_position::partition_type>(p));
    if (mirrored_.offset(static_cast<source_position::partition_type>(p)) != o || !mirrored_any_)
      changed.emplace_back(p, static_cast<std::int64_t>(o));
  }
  if (changed.empty()) return;
  kafka_partitions list = make_kafka_partitions(changed.size());
  for (const auto& [p, o] : changed)
    rd_kafka_topic_partition_list_add(list.get(), s_.topic.c_str(), p)->offset = o;
  if (rd_kafka_commit(consumer_.get(), list.get(), 1) == RD_KAFKA_RESP_ERR_NO_ERROR) {
    for (const auto& [p, o] : changed)
      mirrored_.set(static_cast<source_position::partition_type>(p), static_cast<std::uint64_t>(o));
    mirrored_any_ = true;
  }
}

}  // namespace flowlib::detail
