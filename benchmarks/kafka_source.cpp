// KafkaSource (flowlib/source/kafka.hpp) reading a topic of JSON records
// from librdkafka's in-process mock cluster, against a bare librdkafka
// consumer doing the same work by hand.
//
// What is measured (docs/kafka-source.md, "Performance", has the results):
// rows per second (`items_per_second`) of reading a whole topic of JSON
// records (2e5 records over 8 partitions, about 70 bytes each) into rows:
//   bare      a librdkafka consumer: assign() every partition at offset 0,
//             poll until each partition's high watermark, parse each value
//             with simdjson (on demand, fields by name, after a copy into a
//             padded buffer) into a row pushed onto a std::vector;
//   read      KafkaSource::read(start(), latest(), rows) into a
//             std::vector<Row> (the default JSON decoding);
//   pipeline  one Pipeline::update() of an Append flow from the source into
//             a memory table with a MemoryCheckpoint (one batch: the whole
//             topic; checkpoint, table and pipeline are made anew for each
//             iteration with the timer stopped).
// The consumers are made once and reused by every iteration, as KafkaSource
// reuses its own. Rates are per wall-clock second (UseRealTime): librdkafka
// fetches on threads of its own, so the calling thread's CPU time would
// leave that work out. The CPU column is the whole process's
// (MeasureProcessCPUTime), which includes the mock cluster's thread: the
// same broker work in all three.
//
// FLOWLIB_BENCH_SMOKE=1: a tiny topic; before the benchmarks run, the three
// must read the same rows; the program exits 1 otherwise.
#include <flowlib/checkpoint/memory.hpp>
#include <flowlib/flowlib.hpp>
#include <flowlib/pipeline.hpp>
#include <flowlib/source/kafka.hpp>

#include "../tests/support/kafka_mock.hpp"
#include "support/smoke.hpp"

#include <benchmark/benchmark.h>
#include <librdkafka/rdkafka.h>
#include <simdjson.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

namespace fl = flowlib;
namespace fb = flowlib_bench;
using namespace std::chrono_literals;

namespace bench {

struct Sale {
  std::int64_t id = 0;
  std::string user;
  double amount = 0;
  std::int64_t qty = 0;
  friend auto operator<=>(const Sale&, const Sale&) = default;
};
FLOWLIB_SCHEMA(Sale, id, user, amount, qty);

constexpr int partitions = 8;
const std::string topic = "sales";

std::size_t topic_rows() { return fb::smoke_mode() ? 400 : 200000; }

// The cluster and its topic, made once.
flowtest::kafka_mock& cluster() {
  static flowtest::kafka_mock mock;
  static const bool filled = [] {
    mock.create_topic(topic, partitions);
    std::mt19937_64 g(42);
    std::vector<flowtest::mock_record> recs;
    const std::size_t n = topic_rows();
    for (std::size_t i = 0; i < n; ++i) {
      char value[160];
      const int len = std::snprintf(value, sizeof value, R"({"id":%zu,"user":"user%04u","amount":%u.%02u,"qty":%u})",
                                    i, static_cast<unsigned>(g() % 10000), static_cast<unsigned>(g() % 1000),
                                    static_cast<unsigned>(g() % 100), static_cast<unsigned>(1 + g() % 9));
      recs.push_back({static_cast<std::int32_t>(i % partitions), std::nullopt, std::string(value, static_cast<std::size_t>(len)), {}, 0});
    }
    mock.produce(topic, recs, std::chrono::minutes(5));
    return true;
  }();
  (void)filled;
  return mock;
}

fl::KafkaSourceOptions<Sale> source_options() {
  fl::KafkaSourceOptions<Sale> o;
  o.brokers = cluster().bootstraps();
  o.topic = topic;
  o.config = {{"log_level", "3"}};
  o.read_timeout = 5min;
  return o;
}

// --- The bare consumer -----------------------------------------------------------

class bare_consumer {
 public:
  bare_consumer() {
    char err[512];
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    for (const auto& [k, v] : std::vector<std::pair<std::string, std::string>>{
             {"bootstrap.servers", cluster().bootstraps()},
             {"group.id", "bench.bare"},
             {"enable.auto.commit", "false"},
             {"enable.auto.offset.store", "false"},
             {"enable.partition.eof", "true"},
             {"auto.offset.reset", "error"},
             {"fetch.wait.max.ms", "1"},
             {"socket.nagle.disable", "true"},
             {"log_level", "3"}})
      fb::require(rd_kafka_conf_set(conf, k.c_str(), v.c_str(), err, sizeof err) == RD_KAFKA_CONF_OK, err);
    rk_ = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
    fb::require(rk_ != nullptr, err);
    rd_kafka_poll_set_consumer(rk_);
    // Learn the topic's leaders before the first assign().
    rd_kafka_topic_t* t = rd_kafka_topic_new(rk_, topic.c_str(), nullptr);
    const rd_kafka_metadata_t* md = nullptr;
    fb::require(rd_kafka_metadata(rk_, 0, t, &md, 10000) == RD_KAFKA_RESP_ERR_NO_ERROR, "metadata");
    rd_kafka_metadata_destroy(md);
    rd_kafka_topic_destroy(t);
    for (int p = 0; p < partitions; ++p) {
      std::int64_t low = 0, high = 0;
      fb::require(rd_kafka_query_watermark_offsets(rk_, topic.c_str(), p, &low, &high, 10000) ==
                      RD_KAFKA_RESP_ERR_NO_ERROR,
                  "watermarks");
      fb::require(low == 0, "the mock kept every record");
      high_.push_back(high);
    }
  }
  bare_consumer(const bare_consumer&) = delete;
  bare_consumer& operator=(const bare_consumer&) = delete;
  ~bare_consumer() {
    rd_kafka_consumer_close(rk_);
    rd_kafka_destroy(rk_);
  }

  // Every record of the topic into `out` (arrival order).
  void read_all(std::vector<Sale>& out) {
    rd_kafka_topic_partition_list_t* list = rd_kafka_topic_partition_list_new(partitions);
    for (int p = 0; p < partitions; ++p) rd_kafka_topic_partition_list_add(list, topic.c_str(), p)->offset = 0;
    rd_kafka_assign(rk_, list);
    rd_kafka_topic_partition_list_destroy(list);
    std::vector<std::int64_t> next(partitions, 0);
    int open = 0;
    for (int p = 0; p < partitions; ++p) open += next[static_cast<std::size_t>(p)] < high_[static_cast<std::size_t>(p)];
    while (open > 0) {
      rd_kafka_message_t* m = rd_kafka_consumer_poll(rk_, 1000);
      if (!m) continue;
      if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
        auto& n = next[static_cast<std::size_t>(m->partition)];
        const auto high = high_[static_cast<std::size_t>(m->partition)];
        if (m->offset >= n && m->offset < high) {
          n = m->offset + 1;
          out.push_back(parse(static_cast<const char*>(m->payload), m->len));
          if (n == high) --open;
        }
      } else {
        fb::require(m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF, rd_kafka_message_errstr(m));
      }
      rd_kafka_message_destroy(m);
    }
    rd_kafka_assign(rk_, nullptr);
  }

 private:
  Sale parse(const char* data, std::size_t len) {
    if (buffer_.size() < len + simdjson::SIMDJSON_PADDING) buffer_.resize(len + simdjson::SIMDJSON_PADDING);
    std::copy(data, data + len, buffer_.begin());
    simdjson::ondemand::document doc = parser_.iterate(buffer_.data(), len, buffer_.size()).value();
    simdjson::ondemand::object o = doc.get_object().value();
    Sale s;
    s.id = o["id"].get_int64().value();
    s.user = std::string_view(o["user"].get_string().value());
    s.amount = o["amount"].get_double().value();
    s.qty = o["qty"].get_int64().value();
    return s;
  }

  rd_kafka_t* rk_ = nullptr;
  std::vector<std::int64_t> high_;
  std::vector<char> buffer_;
  simdjson::ondemand::parser parser_;
};

// --- Benchmarks ----------------------------------------------------------------------

void bm_bare(benchmark::State& state) {
  bare_consumer c;
  std::vector<Sale> rows;
  rows.reserve(topic_rows());
  for (auto _ : state) {
    rows.clear();
    c.read_all(rows);
    benchmark::DoNotOptimize(rows.data());
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * topic_rows()));
}

void bm_read(benchmark::State& state) {
  fl::KafkaSource<Sale> src{"sales", source_options()};
  const auto from = src.start();
  const auto to = src.latest();
  std::vector<Sale> rows;
  rows.reserve(topic_rows());
  for (auto _ : state) {
    rows.clear();
    src.read(from, to, rows);
    benchmark::DoNotOptimize(rows.data());
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * topic_rows()));
}

void bm_pipeline(benchmark::State& state) {
  fl::KafkaSource<Sale> src{"sales", source_options()};
  (void)src.latest();
  for (auto _ : state) {
    state.PauseTiming();
    auto ckpt = std::make_unique<fl::MemoryCheckpoint>();
    auto table = std::make_unique<fl::StreamingTable<Sale>>("sales");
    auto p = std::make_unique<fl::Pipeline>("bench", *ckpt);
    p->flow("sales").from(src).into(*table, fl::Append{"sales"});
    state.ResumeTiming();
    p->update();
    benchmark::DoNotOptimize(table->size());
    state.PauseTiming();
    p.reset();
    table.reset();
    ckpt.reset();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * topic_rows()));
}

// Smoke check: the three read the same rows.
void check() {
  std::vector<Sale> bare, read;
  bare_consumer c;
  c.read_all(bare);
  fl::KafkaSource<Sale> src{"sales", source_options()};
  src.read(src.start(), src.latest(), read);
  fl::MemoryCheckpoint ckpt;
  fl::StreamingTable<Sale> table{"sales"};
  fl::Pipeline p{"bench", ckpt};
  p.flow("sales").from(src).into(table, fl::Append{"sales"});
  p.update();
  fb::require(bare.size() == topic_rows(), "the bare consumer read every record");
  std::sort(bare.begin(), bare.end());
  std::sort(read.begin(), read.end());
  fb::require(bare == read, "KafkaSource::read and the bare consumer agree");
  fb::require(table.sorted_rows() == read, "the pipeline's table holds the same rows");
}

}  // namespace bench

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  bench::cluster();
  if (fb::smoke_mode()) {
    bench::check();
    std::printf("smoke checks passed: the bare consumer, KafkaSource and the pipeline agree\n");
  }
  const auto reg = [](const char* name, void (*fn)(benchmark::State&)) {
    benchmark::RegisterBenchmark(name, fn)->UseRealTime()->MeasureProcessCPUTime()->Unit(benchmark::kMillisecond);
  };
  reg("kafka_source/bare", bench::bm_bare);
  reg("kafka_source/read", bench::bm_read);
  reg("kafka_source/pipeline", bench::bm_pipeline);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
