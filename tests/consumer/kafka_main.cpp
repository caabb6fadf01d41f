// A downstream program that links flowlib::kafka: a KafkaSource read by a
// pipeline, on librdkafka's in-process mock cluster (no broker needed).
#include <flowlib/checkpoint/memory.hpp>
#include <flowlib/flowlib.hpp>
#include <flowlib/source/kafka.hpp>

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace shop {
struct Order {
  std::int64_t id = 0;
  std::string status;
};
FLOWLIB_SCHEMA(Order, id, status);
}  // namespace shop

int main() {
  namespace fl = flowlib;
  char err[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  rd_kafka_conf_set(conf, "log_level", "0", err, sizeof err);
  rd_kafka_t* owner = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
  if (!owner) return 1;
  rd_kafka_mock_cluster_t* mock = rd_kafka_mock_cluster_new(owner, 1);
  if (!mock || rd_kafka_mock_topic_create(mock, "orders", 1, 1) != RD_KAFKA_RESP_ERR_NO_ERROR) return 1;
  const std::string brokers = rd_kafka_mock_cluster_bootstraps(mock);

  // Two records through a producer of its own.
  conf = rd_kafka_conf_new();
  rd_kafka_conf_set(conf, "bootstrap.servers", brokers.c_str(), err, sizeof err);
  rd_kafka_conf_set(conf, "log_level", "0", err, sizeof err);
  rd_kafka_t* producer = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
  if (!producer) return 1;
  for (const char* value : {R"({"id":1,"status":"placed"})", R"({"id":1,"status":"paid"})"})
    rd_kafka_producev(producer, RD_KAFKA_V_TOPIC("orders"), RD_KAFKA_V_PARTITION(0),
                      RD_KAFKA_V_VALUE(const_cast<char*>(value), std::char_traits<char>::length(value)),
                      RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
  const bool flushed = rd_kafka_flush(producer, 10000) == RD_KAFKA_RESP_ERR_NO_ERROR;
  rd_kafka_destroy(producer);

  bool ok = false;
  {
    fl::KafkaSource<shop::Order> orders{"orders", {.brokers = brokers, .topic = "orders",
                                                   .config = {{"log_level", "0"}}}};
    fl::MemoryCheckpoint checkpoint;
    fl::StreamingTable<shop::Order> log{"order_log"};
    fl::Pipeline pipeline{"shop", checkpoint};
    pipeline.flow("order_log").from(orders).into(log, fl::Append{"order_log"});
    pipeline.update();
    const auto rows = log.sorted_rows();
    ok = flushed && rows.size() == 2 && rows[0].status == "paid" && rows[1].status == "placed";
  }
  rd_kafka_mock_cluster_destroy(mock);
  rd_kafka_destroy(owner);
  std::puts(ok ? "kafka consumer ok" : "kafka consumer FAILED");
  return ok ? 0 : 1;
}
