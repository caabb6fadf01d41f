// tests/support/kafka_mock.hpp
//
// flowtest::kafka_mock: librdkafka's in-process mock cluster, owned. The
// cluster runs on a handle of its own (so clients under test can come and
// go); clients connect to bootstraps(). What the mock of librdkafka 2.0.2
// does: produce (with delivery reports), watermarks, fetches, consumer
// groups, the idempotent producer, brokers going down and up, injected
// request errors. What it does not: transactions, DeleteRecords. It keeps
// at most 5 MiB per partition and drops the oldest records beyond that (the
// low watermark moves up: the way to test retention).
//
//   flowtest::kafka_mock mock;                 // 1 broker (id 1)
//   mock.create_topic("orders", 4);
//   mock.produce("orders", {{.partition = 0, .key = "k", .value = "{...}"}});
//   fl::KafkaSource<Order> src{"orders", {.brokers = mock.bootstraps(), ...}};
//
// Clients must be destroyed before the mock (declare the mock first).
// shared_kafka_mock() is one cluster for all test cases of a program.
// Failures throw std::runtime_error (the header does not depend on a test
// framework, so crash-test children can use it too).
#pragma once

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace flowtest {

/// One record to produce. partition -1 (RD_KAFKA_PARTITION_UA) lets the
/// producer's partitioner choose by key.
struct mock_record {
  std::int32_t partition = 0;
  std::optional<std::string> key{};
  std::optional<std::string> value{};  // nullopt: a tombstone
  std::vector<std::pair<std::string, std::string>> headers{};
  std::int64_t timestamp_ms = 0;  // 0: the producer's clock
};

/// Where a produced record went.
struct mock_delivery {
  std::int32_t partition = 0;
  std::int64_t offset = 0;
};

class kafka_mock {
 public:
  /// A cluster of `brokers` brokers (ids 1..brokers). Throws when librdkafka
  /// cannot make it.
  explicit kafka_mock(int brokers = 1) {
    char err[512];
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "log_level", "0", err, sizeof err);
    rd_kafka_conf_set(conf, "socket.nagle.disable", "true", err, sizeof err);
    owner_ = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (!owner_) {
      rd_kafka_conf_destroy(conf);
      throw std::runtime_error(text({"kafka_mock: rd_kafka_new: ", err}));
    }
    cluster_ = rd_kafka_mock_cluster_new(owner_, brokers);
    if (!cluster_) {
      rd_kafka_destroy(owner_);
      throw std::runtime_error("kafka_mock: rd_kafka_mock_cluster_new failed");
    }
    bootstraps_ = rd_kafka_mock_cluster_bootstraps(cluster_);
  }
  kafka_mock(const kafka_mock&) = delete;
  kafka_mock& operator=(const kafka_mock&) = delete;
  /// Destroys the test producer, then the cluster, then its handle.
  ~kafka_mock() {
    if (producer_) rd_kafka_destroy(producer_);
    rd_kafka_mock_cluster_destroy(cluster_);
    rd_kafka_destroy(owner_);
  }

  /// The "host:port,..." list clients put in bootstrap.servers.
  const std::string& bootstraps() const noexcept { return bootstraps_; }
  /// The raw cluster, for rd_kafka_mock_* calls this class does not wrap.
  rd_kafka_mock_cluster_t* cluster() const noexcept { return cluster_; }

  /// Creates `topic` with `partitions` partitions (replication factor 1).
  void create_topic(const std::string& topic, int partitions) {
    check(rd_kafka_mock_topic_create(cluster_, topic.c_str(), partitions, 1), "create_topic");
  }

  /// Produces `records` to `topic` in order (one partition's records keep
  /// their order) and waits for every delivery report; returns where each
  /// went, in the order given. Throws naming the first record whose
  /// delivery failed, or when reports do not arrive within `timeout`.
  std::vector<mock_delivery> produce(const std::string& topic, const std::vector<mock_record>& records,
                                     std::chrono::milliseconds timeout = std::chrono::seconds(30)) {
    rd_kafka_t* p = producer();
    warm_up(topic);
    std::vector<report> reports(records.size());
    for (std::size_t i = 0; i < records.size(); ++i) {
      const mock_record& r = records[i];
      rd_kafka_headers_t* hdrs = nullptr;
      if (!r.headers.empty()) {
        hdrs = rd_kafka_headers_new(r.headers.size());
        for (const auto& [n, v] : r.headers)
          rd_kafka_header_add(hdrs, n.data(), static_cast<ssize_t>(n.size()), v.data(),
                              static_cast<ssize_t>(v.size()));
      }
      const void* key = r.key ? r.key->data() : nullptr;
      const std::size_t key_len = r.key ? r.key->size() : 0;
      void* value = r.value ? const_cast<char*>(r.value->data()) : nullptr;
      const std::size_t value_len = r.value ? r.value->size() : 0;
      while (true) {
        const rd_kafka_resp_err_t e = rd_kafka_producev(
            p, RD_KAFKA_V_TOPIC(topic.c_str()), RD_KAFKA_V_PARTITION(r.partition),
            RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
            RD_KAFKA_V_KEY(key, key_len), RD_KAFKA_V_VALUE(value, value_len),
            RD_KAFKA_V_TIMESTAMP(r.timestamp_ms), RD_KAFKA_V_HEADERS(hdrs),
            RD_KAFKA_V_OPAQUE(&reports[i]), RD_KAFKA_V_END);
        if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
          rd_kafka_poll(p, 10);
          continue;
        }
        if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
          if (hdrs) rd_kafka_headers_destroy(hdrs);
          rd_kafka_flush(p, 10000);
          throw std::runtime_error(text({"kafka_mock: produce record ", std::to_string(i), ": ",
                                         rd_kafka_err2str(e)}));
        }
        break;  // the headers are the message's now
      }
    }
    if (rd_kafka_flush(p, static_cast<int>(timeout.count())) != RD_KAFKA_RESP_ERR_NO_ERROR)
      throw std::runtime_error("kafka_mock: produce: delivery reports did not arrive in time");
    std::vector<mock_delivery> out;
    out.reserve(records.size());
    for (std::size_t i = 0; i < reports.size(); ++i) {
      if (!reports[i].reported || reports[i].err != RD_KAFKA_RESP_ERR_NO_ERROR)
        throw std::runtime_error(
            text({"kafka_mock: produce record ", std::to_string(i), " failed: ",
                  reports[i].reported ? rd_kafka_err2str(reports[i].err) : "no report"}));
      out.push_back({reports[i].partition, reports[i].offset});
    }
    return out;
  }

  /// Produces one record to `partition` and returns its offset.
  std::int64_t produce_one(const std::string& topic, std::int32_t partition,
                           std::optional<std::string> key, std::optional<std::string> value) {
    return produce(topic, {mock_record{partition, std::move(key), std::move(value), {}, 0}})[0].offset;
  }

  /// Takes broker `id` down (its connections close, it accepts none) / up.
  void broker_down(std::int32_t id = 1) { check(rd_kafka_mock_broker_set_down(cluster_, id), "broker_down"); }
  void broker_up(std::int32_t id = 1) { check(rd_kafka_mock_broker_set_up(cluster_, id), "broker_up"); }

  /// The next errors.size() requests of API `api_key` (e.g. 1 = Fetch,
  /// 2 = ListOffsets, 3 = Metadata, 0 = Produce) to any broker fail with
  /// these errors, in order.
  void push_request_errors(std::int16_t api_key, const std::vector<rd_kafka_resp_err_t>& errors) {
    rd_kafka_mock_push_request_errors_array(cluster_, api_key, errors.size(), errors.data());
  }
  /// Forgets the errors still queued for `api_key`.
  void clear_request_errors(std::int16_t api_key) { rd_kafka_mock_clear_request_errors(cluster_, api_key); }

  /// Every request to `topic` fails with `err` (NO_ERROR clears it).
  void set_topic_error(const std::string& topic, rd_kafka_resp_err_t err) {
    rd_kafka_mock_topic_set_error(cluster_, topic.c_str(), err);
  }

 private:
  struct report {
    bool reported = false;
    rd_kafka_resp_err_t err = RD_KAFKA_RESP_ERR_NO_ERROR;
    std::int32_t partition = -1;
    std::int64_t offset = -1;
  };

  static void on_delivery(rd_kafka_t*, const rd_kafka_message_t* m, void*) {
    auto* r = static_cast<report*>(m->_private);
    if (!r) return;
    r->reported = true;
    r->err = m->err;
    r->partition = m->partition;
    r->offset = m->offset;
  }

  // Asks for the topic's metadata once: a producer that learns of a topic
  // from its first message waits for a periodic metadata refresh (about a
  // second); asking first is immediate.
  void warm_up(const std::string& topic) {
    for (const auto& t : warm_)
      if (t == topic) return;
    rd_kafka_topic_t* t = rd_kafka_topic_new(producer_, topic.c_str(), nullptr);
    const rd_kafka_metadata_t* md = nullptr;
    if (t && rd_kafka_metadata(producer_, 0, t, &md, 5000) == RD_KAFKA_RESP_ERR_NO_ERROR) {
      rd_kafka_metadata_destroy(md);
      warm_.push_back(topic);
    }
    if (t) rd_kafka_topic_destroy(t);
  }

  // The producer for produce(), made on first use and kept.
  rd_kafka_t* producer() {
    if (producer_) return producer_;
    char err[512];
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    const std::pair<const char*, const char*> props[] = {
        {"bootstrap.servers", bootstraps_.c_str()},
        {"linger.ms", "0"},
        {"socket.nagle.disable", "true"},
        {"queue.buffering.max.messages", "1000000"},
        {"queue.buffering.max.kbytes", "1048576"},
        {"log_level", "0"},
    };
    for (const auto& [n, v] : props)
      if (rd_kafka_conf_set(conf, n, v, err, sizeof err) != RD_KAFKA_CONF_OK) {
        rd_kafka_conf_destroy(conf);
        throw std::runtime_error(text({"kafka_mock: producer property ", n, ": ", err}));
      }
    rd_kafka_conf_set_dr_msg_cb(conf, &kafka_mock::on_delivery);
    producer_ = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (!producer_) {
      rd_kafka_conf_destroy(conf);
      throw std::runtime_error(text({"kafka_mock: producer: ", err}));
    }
    return producer_;
  }

  static std::string text(std::initializer_list<std::string_view> parts) {
    std::string s;
    for (const auto p : parts) s += p;
    return s;
  }

  static void check(rd_kafka_resp_err_t e, const char* what) {
    if (e != RD_KAFKA_RESP_ERR_NO_ERROR)
      throw std::runtime_error(text({"kafka_mock: ", what, ": ", rd_kafka_err2str(e)}));
  }

  rd_kafka_t* owner_ = nullptr;
  rd_kafka_mock_cluster_t* cluster_ = nullptr;
  rd_kafka_t* producer_ = nullptr;
  std::string bootstraps_;
  std::vector<std::string> warm_;  // topics whose metadata the producer has
};

/// The cluster the test cases of one program share: made on first use,
/// destroyed at exit (destroying a mock cluster can take a second, which
/// adds up over many test cases). Give each test case topics of its own
/// there; take brokers down or inject errors only on a kafka_mock of the
/// test case's own.
inline kafka_mock& shared_kafka_mock() {
  static kafka_mock mock;
  return mock;
}

}  // namespace flowtest
