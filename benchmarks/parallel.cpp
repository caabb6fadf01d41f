// What PipelineOptions::threads buys: one update() on 1 thread against the
// same update on 2 threads (and on every core, when the machine has more).
//
// What is measured (docs/benchmarks.md has the results):
//   two_flows   one update() of a pipeline with two independent REPLACE
//               USING flows (two MemorySources, two tables), each reading
//               one batch of N new rows: the flows run at the same time;
//   one_flow    one update() of one REPLACE USING flow reading one batch of
//               N rows: the batch is applied key-sharded over the threads;
//   two_cdc     two independent AUTO CDC (SCD type 1) flows, as two_flows.
// The rows: benchmarks/pipeline.cpp's (five int64 and a short string), keys
// uniform over 1e5, every row's sequence above all earlier ones; each table
// already holds every key (so a batch replaces rows, the common steady
// state). MemoryCheckpoint. Wall time (real_time), since the work is spread
// over threads: items_per_second = rows read by the update / wall second.
// The ratio threads:2 / threads:1 of the same row is the speed-up.
//
// Each iteration opens a gate (benchmarks/support/pipeline_rig.hpp) by one
// batch per source and runs one update(); when the appended rows run out,
// the read ones are discarded and the next run is appended, timer stopped.
//
// FLOWLIB_BENCH_SMOKE=1: tiny sizes; before the benchmarks run, each
// configuration runs the same updates with 1, 2 and 3 threads and the
// tables must hold the same rows under the same row ids; the program exits
// 1 otherwise.
#include <flowlib/checkpoint/memory.hpp>
#include <flowlib/flowlib.hpp>
#include <flowlib/pipeline.hpp>
#include <flowlib/source/memory.hpp>

#include "support/pipeline_rig.hpp"
#include "support/smoke.hpp"

#include <benchmark/benchmark.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace fl = flowlib;
namespace fb = flowlib_bench;

namespace bench {

struct Row {
  std::int64_t id;
  std::int64_t seq;
  std::int64_t a;
  std::int64_t b;
  std::int64_t c;
  std::string tag;  // short: fits the small-string buffer
  friend bool operator==(const Row&, const Row&) = default;
};
FLOWLIB_SCHEMA(Row, id, seq, a, b, c, tag);

using Replace = fl::ReplaceUsing<fl::Key<&Row::id>, fl::Seq<&Row::seq>>;
using Scd1 = fl::AutoCdc<fl::Key<&Row::id>, fl::Seq<&Row::seq>, fl::Scd1>;

enum class shape { two_flows, one_flow, two_cdc };

const char* to_string(shape s) {
  switch (s) {
    case shape::two_flows: return "two_flows";
    case shape::one_flow: return "one_flow";
    case shape::two_cdc: return "two_cdc";
  }
  return "?";
}

std::int64_t key_space() { return fb::smoke_mode() ? 2000 : 100000; }
std::int64_t batch_rows() { return fb::smoke_mode() ? 1500 : 100000; }
// Batches appended per refill: enough that the input is not cache-hot.
std::size_t run_batches() { return fb::smoke_mode() ? 3 : 6; }

/// One source and its table: the rows of each run, generated up front.
struct lane {
  explicit lane(std::uint64_t seed, std::string name)
      : source(name + "_feed"), gate(source), table(name) {
    std::mt19937_64 g(seed);
    static constexpr std::array<const char*, 4> tags = {"ios", "android", "web", "tv"};
    const auto make = [&](std::int64_t id, std::int64_t seq) {
      return Row{id, seq, static_cast<std::int64_t>(g() >> 1), static_cast<std::int64_t>(g() % 1000),
                 static_cast<std::int64_t>(g() % 7), tags[g() % tags.size()]};
    };
    for (std::int64_t k = 0; k < key_space(); ++k) initial.push_back(make(k, 0));
    std::uniform_int_distribution<std::int64_t> key(0, key_space() - 1);
    std::int64_t seq = 1;
    run.resize(run_batches() * static_cast<std::size_t>(batch_rows()));
    for (auto& r : run) r = make(key(g), seq++);
  }

  /// Appends the next run (sequences above every earlier one).
  void refill() {
    source.discard_before(gate.gate());
    std::vector<Row> copy = run;
    const auto shift = epoch * static_cast<std::int64_t>(run.size());
    for (auto& r : copy) r.seq += shift;
    source.append(std::move(copy));
    ++epoch;
  }

  std::vector<Row> initial;
  std::vector<Row> run;
  std::int64_t epoch = 0;
  fl::MemorySource<Row> source;
  fb::gated_source<fl::MemorySource<Row>> gate;
  fl::StreamingTable<Row> table;
};

/// A pipeline of one configuration: its lanes, filled with every key.
struct rig {
  rig(shape s, std::size_t threads) : pipeline("parallel", checkpoint, options(threads)) {
    const std::size_t lanes_n = s == shape::one_flow ? 1 : 2;
    for (std::size_t i = 0; i < lanes_n; ++i) {
      lanes.push_back(std::make_unique<lane>(0x5eed + i, "t" + std::to_string(i)));
      lane& l = *lanes.back();
      auto flow = pipeline.flow("f" + std::to_string(i)).from(l.gate);
      if (s == shape::two_cdc) {
        std::move(flow).into(l.table, Scd1{"f" + std::to_string(i)});
      } else {
        std::move(flow).into(l.table, Replace{"f" + std::to_string(i)});
      }
      l.source.append(l.initial);
      l.gate.open(l.initial.size());
    }
    pipeline.update();
    for (auto& l : lanes) l->refill();
  }
  static fl::PipelineOptions options(std::size_t threads) {
    fl::PipelineOptions o;
    o.threads = threads;
    return o;
  }
  bool needs_refill() const {
    return lanes.front()->gate.hidden() < static_cast<std::uint64_t>(batch_rows());
  }
  void refill() {
    for (auto& l : lanes) l->refill();
  }
  /// One update over one batch per lane; the rows it read.
  std::uint64_t step() {
    for (auto& l : lanes) l->gate.open(static_cast<std::uint64_t>(batch_rows()));
    const fl::UpdateSummary s = pipeline.update();
    return s.input_rows();
  }

  fl::MemoryCheckpoint checkpoint;
  fl::Pipeline pipeline;
  std::vector<std::unique_ptr<lane>> lanes;
};

void bm_update(benchmark::State& state, shape s, std::size_t threads) {
  static std::unique_ptr<rig> current;
  static std::pair<shape, std::size_t> made{};
  if (!current || made != std::pair{s, threads}) {
    current.reset();
    current = std::make_unique<rig>(s, threads);
    made = {s, threads};
  }
  rig& r = *current;
  std::uint64_t rows = 0;
  for (auto _ : state) {
    if (r.needs_refill()) {
      state.PauseTiming();
      r.refill();
      state.ResumeTiming();
    }
    rows += r.step();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(rows));
}

// Smoke: the same updates on 1, 2 and 3 threads end with the same rows
// under the same ids.
void check_same_results() {
  for (shape s : {shape::two_flows, shape::one_flow, shape::two_cdc}) {
    std::vector<std::vector<std::vector<std::pair<fl::row_id, Row>>>> results;
    for (std::size_t threads : {1, 2, 3}) {
      rig r(s, threads);
      for (int i = 0; i < 5; ++i) {
        if (r.needs_refill()) r.refill();
        fb::require(r.step() == r.lanes.size() * static_cast<std::uint64_t>(batch_rows()),
                    "an update read one batch per source");
      }
      std::vector<std::vector<std::pair<fl::row_id, Row>>> tables;
      for (auto& l : r.lanes) {
        std::vector<std::pair<fl::row_id, Row>> rows;
        l->table.store().for_each_row([&](fl::row_id id, const Row& row) { rows.emplace_back(id, row); });
        tables.push_back(std::move(rows));
      }
      results.push_back(std::move(tables));
    }
    for (std::size_t i = 1; i < results.size(); ++i) {
      fb::require(results[i] == results[0],
                  std::string(to_string(s)) + ": the tables differ between 1 thread and more");
    }
  }
}

void register_all() {
  std::vector<std::size_t> counts = {1, 2};
  const unsigned cores = std::thread::hardware_concurrency();
  if (cores > 2) counts.push_back(cores);
  for (shape s : {shape::two_flows, shape::one_flow, shape::two_cdc}) {
    for (std::size_t t : counts) {
      const std::string name = std::string("parallel/") + to_string(s) + "/rows:" +
                               std::to_string(batch_rows()) + "/threads:" + std::to_string(t);
      benchmark::RegisterBenchmark(name.c_str(), [s, t](benchmark::State& st) { bm_update(st, s, t); })
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond)
          ->MinTime(fb::smoke_mode() ? 0.001 : 1.0);
    }
  }
}

}  // namespace bench

int main(int argc, char** argv) {
  if (fb::smoke_mode()) bench::check_same_results();
  bench::register_all();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
