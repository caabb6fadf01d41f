// KafkaSink in a pipeline (R-SINK-1 with R-EXACT-1 and R-EXACT-4): a fault
// at every step of a batch (the pipeline's fault hook: before the sink's
// writes, inside them through the sink's own hook, after them and before
// the commit, after the commit), each followed by a retry in the same
// pipeline or by a new pipeline and sink over the same checkpoint (a
// restart); the topic must hold every row once, the batches whole, in the
// source's order. Expectations drop rows before they are written.
#include <flowlib/checkpoint/memory.hpp>
#include <flowlib/flowlib.hpp>
#include <flowlib/pipeline.hpp>
#include <flowlib/sink/kafka.hpp>
#include <flowlib/source/memory.hpp>

#include "kafka/sink/sink_support.hpp"
#include "support/kafka_mock.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace kafka_sink_pipeline {

namespace fl = flowlib;
using kafka_sink_support::fresh_topic;
using kafka_sink_support::read_topic;
using kafka_sink_support::sink_options;
using kafka_sink_support::topic_record;

struct Sale {
  std::int64_t id = 0;
  std::string region;
  std::int64_t amount = 0;
};
FLOWLIB_SCHEMA(Sale, id, region, amount);

static_assert(fl::sink<fl::KafkaSink<Sale>>, "a pipeline flow ends in a KafkaSink");

struct fault : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// The topic's records of one writer and flow, checked as whole batches:
/// each batch's indices are 0..count-1, each once; each partition in
/// (batch, index) order. Returns the rows' ids in (batch, index) order.
std::vector<std::int64_t> batches_in_order(const std::vector<topic_record>& got, const std::string& writer,
                                           const std::string& flow, std::size_t& batch_count) {
  std::map<std::pair<std::uint64_t, std::uint64_t>, std::int64_t> by_position;
  std::map<std::uint64_t, std::uint64_t> counts;
  std::map<std::int32_t, std::pair<std::uint64_t, std::uint64_t>> last;
  for (const auto& r : got) {
    if (r.header(fl::kafka_sink_headers::writer) != writer || r.header(fl::kafka_sink_headers::flow) != flow) continue;
    const auto at = std::make_pair(r.number(fl::kafka_sink_headers::batch), r.number(fl::kafka_sink_headers::index));
    INFO("batch " << at.first << " index " << at.second << " at partition " << r.partition << " offset " << r.offset);
    CHECK_MESSAGE(by_position.count(at) == 0, "written twice");
    by_position[at] = nlohmann::json::parse(r.value)["id"].get<std::int64_t>();
    const auto count = r.number(fl::kafka_sink_headers::count);
    if (const auto c = counts.find(at.first); c != counts.end()) CHECK(c->second == count);
    counts[at.first] = count;
    CHECK(at.second < count);
    if (const auto l = last.find(r.partition); l != last.end()) CHECK(l->second < at);
    last[r.partition] = at;
  }
  std::size_t records = 0;
  for (const auto& [batch, count] : counts) records += count;
  CHECK_MESSAGE(by_position.size() == records, "a batch is missing records");
  batch_count = counts.size();
  std::vector<std::int64_t> ids;
  for (const auto& [at, id] : by_position) ids.push_back(id);
  return ids;
}

struct world {
  fl::MemoryCheckpoint checkpoint;
  fl::MemorySource<Sale> sales{"sales"};
  std::string topic;
  std::optional<std::pair<std::uint64_t, std::size_t>> sink_fault;  // (batch, record index)
  std::optional<std::pair<fl::fault_point, std::uint64_t>> step_fault;
  std::unique_ptr<fl::Pipeline> pipeline;

  explicit world(std::string t) : topic(std::move(t)) {}

  /// A new pipeline and sink (a restarted process) over the same checkpoint.
  void open(bool with_expectation = false) {
    pipeline.reset();
    fl::PipelineOptions po;
    po.fault_hook = [this](fl::fault_point p, std::string_view, std::uint64_t batch) {
      if (step_fault && step_fault->first == p && step_fault->second == batch) {
        step_fault.reset();
        throw fault(fl::to_string(p));
      }
    };
    pipeline = std::make_unique<fl::Pipeline>("shop", checkpoint, std::move(po));
    auto o = sink_options<Sale>(flowtest::shared_kafka_mock(), topic, "shop");
    o.key = [](const Sale& s) { return std::optional<std::string>(s.region); };
    o.fault_hook = [this](std::uint64_t batch, std::size_t index) {
      if (sink_fault && sink_fault->first == batch && sink_fault->second == index) {
        sink_fault.reset();
        throw fault("inside the sink's writes");
      }
    };
    fl::KafkaSink<Sale> sink{std::move(o)};
    if (with_expectation) {
      pipeline->flow("export")
          .from(sales)
          .expect(fl::expectations(fl::expect_or_drop("positive", [](const Sale& s) { return s.amount > 0; })))
          .max_rows_per_batch(6)
          .into(std::move(sink));
    } else {
      pipeline->flow("export").from(sales).max_rows_per_batch(6).into(std::move(sink));
    }
  }

  /// update() until nothing is left; a fault thrown is retried (restarting
  /// first when `restart_after_fault`).
  std::size_t run(bool restart_after_fault, bool with_expectation = false) {
    std::size_t faults = 0;
    for (;;) {
      try {
        if (pipeline->update().batches() == 0) return faults;
      } catch (const fault&) {
        ++faults;
        if (restart_after_fault) open(with_expectation);
      }
    }
  }
};

TEST_CASE("R-SINK-1: a pipeline's KafkaSink, a fault at every step of a batch: every row once, whole batches") {
  // (A sink keeps no state: its batches have no state_saving step.)
  const fl::fault_point steps[] = {fl::fault_point::positions_recorded, fl::fault_point::before_table_write,
                                   fl::fault_point::between_table_writes, fl::fault_point::after_table_write,
                                   fl::fault_point::before_commit, fl::fault_point::after_commit};
  std::mt19937_64 rng(21);
  for (const bool restart : {false, true}) {
    // Every step, and every record of a batch inside the sink's writes.
    std::vector<std::pair<std::optional<fl::fault_point>, std::size_t>> faults;
    for (const auto s : steps) faults.push_back({s, 0});
    for (std::size_t i = 0; i < 6; ++i) faults.push_back({std::nullopt, i});
    for (const auto& [step, index] : faults) {
      const std::string where = step ? std::string(fl::to_string(*step)) : "record " + std::to_string(index);
      CAPTURE(restart);
      CAPTURE(where);
      world w(fresh_topic(flowtest::shared_kafka_mock(), 3));
      std::vector<std::int64_t> want;
      for (std::int64_t id = 0; id < 22; ++id) {
        const std::string regions[] = {"north", "south", "east", "west", "centre"};
        w.sales.append(Sale{id, regions[rng() % 5], static_cast<std::int64_t>(rng() % 100)});
        want.push_back(id);
      }
      w.open();
      // The fault hits batch 1 (rows 6..11).
      if (step) {
        w.step_fault = std::make_pair(*step, std::uint64_t{1});
      } else {
        w.sink_fault = std::make_pair(std::uint64_t{1}, index);
      }
      CHECK(w.run(restart) == 1);
      std::size_t batches = 0;
      CHECK(batches_in_order(read_topic(flowtest::shared_kafka_mock(), w.topic), "shop", "export", batches) == want);
      CHECK(batches == 4);
      // Nothing new: an update writes nothing, a restarted one neither.
      w.open();
      CHECK(w.pipeline->update().batches() == 0);
      CHECK(read_topic(flowtest::shared_kafka_mock(), w.topic).size() == want.size());
    }
  }
}

TEST_CASE("R-SINK-1: rows an expectation drops are not written; indices count the rows written") {
  world w(fresh_topic(flowtest::shared_kafka_mock(), 2));
  std::vector<std::int64_t> want;
  for (std::int64_t id = 0; id < 30; ++id) {
    const std::int64_t amount = id % 4 == 0 ? 0 : id;
    w.sales.append(Sale{id, "r" + std::to_string(id % 3), amount});
    if (amount > 0) want.push_back(id);
  }
  w.open(true);
  w.sink_fault = std::make_pair(std::uint64_t{2}, std::size_t{2});
  CHECK(w.run(true, true) == 1);
  std::size_t batches = 0;
  CHECK(batches_in_order(read_topic(flowtest::shared_kafka_mock(), w.topic), "shop", "export", batches) == want);
  CHECK(batches == 5);
}

}  // namespace kafka_sink_pipeline
