// tests/storage/durable/suite.hpp
//
// The runner of the reopen suite: each case is templated on a durable
// configuration (support/durable_configs.hpp) and runs four ways:
//   memory            MemoryStorage tables + MemoryCheckpoint, in one
//                     Pipeline (the reference);
//   memory, new pipelines  the same tables and checkpoint, a new Pipeline
//                     after every batch;
//   durable           the configuration's tables and checkpoint, in one
//                     Pipeline;
//   durable reopened  the same, closing and reopening between every two
//                     batches: the pipeline, the tables and the checkpoint
//                     are destroyed and built again from the database or
//                     directory (a restart of the program).
// All four must give the rows each rule says, so they are equal to each
// other, and an update after the last batch must find nothing to do
// (R-EXACT-2). The durable runs take a snapshot every 1 to 3 batches at most,
// by seed (FileStorage's records are deltas and snapshots in every mix).
// Randomised cases cut their input into batches with split().
#pragma once

#include <doctest/doctest.h>

#include <flowlib/checkpoint/memory.hpp>
#include <flowlib/flowlib.hpp>
#include <flowlib/pipeline.hpp>

#include <support/durable_configs.hpp>
#include <support/rows.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace storage_durable_suite {

namespace fl = flowlib;
using flowtest::sorted;

/// Tables and checkpoint in memory; reopening builds only a new Pipeline.
template <class Tables>
struct memory_env {
  fl::MemoryCheckpoint checkpoint_;
  Tables tables_;
  fl::checkpoint_store& checkpoint() { return checkpoint_; }
  Tables& tables() { return tables_; }
  void reopen() {}
};

/// Tables and checkpoint of `Config`; reopening destroys both and builds
/// them again from the place (the tables load at the next update).
template <class Config, class Tables>
struct durable_env {
  typename Config::place at{"flowlib_durable"};  // removed after close()
  std::unique_ptr<typename Config::checkpoint> checkpoint_;
  std::unique_ptr<Tables> tables_;
  durable_env() { open(); }
  ~durable_env() { close(); }
  durable_env(const durable_env&) = delete;
  durable_env& operator=(const durable_env&) = delete;
  fl::checkpoint_store& checkpoint() { return *checkpoint_; }
  Tables& tables() { return *tables_; }
  void reopen() {
    close();
    open();
  }

 private:
  void open() {
    checkpoint_ = Config::open(at);
    tables_ = std::make_unique<Tables>();
  }
  void close() {
    tables_.reset();  // the tables first: they use the checkpoint
    checkpoint_.reset();
  }
};

/// Declares the flows with `declare(pipeline, tables)`, then for each of
/// `batches` steps appends that step's rows (`feed(i)`) and updates; with
/// `reopen`, closes and reopens everything after every update. Returns
/// `result(tables)` after a last update that must find nothing new.
template <class Env, class Declare, class Feed, class Result>
auto run_case(std::size_t batches, bool reopen, const fl::PipelineOptions& options, Declare& declare,
              Feed& feed, Result& result) {
  Env env;
  std::unique_ptr<fl::Pipeline> p;
  const auto open = [&] {
    p = std::make_unique<fl::Pipeline>("durable", env.checkpoint(), options);
    declare(*p, env.tables());
  };
  open();
  for (std::size_t i = 0; i < batches; ++i) {
    feed(i);
    p->update();
    if (reopen) {
      p.reset();
      env.reopen();
      open();
    }
  }
  CHECK(p->update().batches() == 0);  // R-EXACT-2
  return result(env.tables());
}

/// The runs of every case.
constexpr int runs = 4;
constexpr const char* run_names[runs] = {"memory", "memory, a new pipeline after every update", "durable",
                                         "durable, reopened after every update"};

/// Runs a case the four ways on `Config`, with the tables
/// `TablesT<storage>` and fresh `Sources` for each run: `declare(pipeline,
/// tables, sources)`, then `batches` steps of `feed(i, sources)` and an
/// update. Checks each run's `result(tables)` with `check(result)`, and that
/// the other runs' results equal the first (memory) run's. The durable runs take a
/// snapshot every 1 + seed % 3 batches at most.
template <class Config, template <class> class TablesT, class Sources, class Declare, class Feed, class Result,
          class Check>
void all_runs(unsigned seed, std::size_t batches, Declare&& declare, Feed&& feed, Result&& result,
              Check&& check) {
  CAPTURE(seed);
  std::optional<decltype(result(std::declval<TablesT<fl::MemoryStorage>&>()))> memory_result;
  for (int run = 0; run < runs; ++run) {
    INFO(run_names[run]);
    Sources sources;
    auto declare_run = [&](fl::Pipeline& p, auto& t) { declare(p, t, sources); };
    auto feed_run = [&](std::size_t i) { feed(i, sources); };
    const bool reopen = run % 2 == 1;
    fl::PipelineOptions options;
    if (run >= 2) options.snapshot_interval = 1 + seed % 3;
    const auto got =
        run < 2 ? run_case<memory_env<TablesT<fl::MemoryStorage>>>(batches, reopen, options, declare_run, feed_run,
                                                                    result)
                : run_case<durable_env<Config, TablesT<typename Config::storage>>>(batches, reopen, options,
                                                                                   declare_run, feed_run, result);
    check(got);
    if (memory_result) {
      CHECK(got == *memory_result);
    } else {
      memory_result = got;
    }
  }
}

/// Cuts `rows` into random consecutive pieces of at least one row: about
/// 1..max_batches of them, now and then a few more.
template <class T>
std::vector<std::vector<T>> split(const std::vector<T>& rows, std::mt19937& rng, std::size_t max_batches = 8) {
  std::vector<std::vector<T>> out;
  std::size_t i = 0;
  const std::size_t target = std::uniform_int_distribution<std::size_t>(1, max_batches)(rng);
  while (i < rows.size()) {
    const std::size_t left = rows.size() - i;
    const std::size_t pieces_left = target > out.size() ? target - out.size() : 1;
    const std::size_t most = pieces_left <= 1 ? left : std::max<std::size_t>(1, 2 * left / pieces_left);
    const std::size_t len = std::uniform_int_distribution<std::size_t>(1, std::min(left, most))(rng);
    out.emplace_back(rows.begin() + static_cast<std::ptrdiff_t>(i),
                     rows.begin() + static_cast<std::ptrdiff_t>(i + len));
    i += len;
  }
  return out;
}

#if defined(__SANITIZE_ADDRESS__)
constexpr unsigned seeds = 4;
#else
constexpr unsigned seeds = 10;
#endif

using ms_time = std::chrono::sys_time<std::chrono::milliseconds>;
const ms_time t0{std::chrono::milliseconds(1'760'000'000'000)};

/// A row with a column of every kind the SQL mapping and the row codec
/// encode.
struct Rec {
  std::int64_t k = 0;
  std::int64_t seq = 0;
  std::string v;
  std::optional<double> x;
  std::chrono::sys_days day{};
  ms_time at{};
  bool flag = false;
  friend bool operator==(const Rec&, const Rec&) = default;
  friend auto operator<=>(const Rec&, const Rec&) = default;
};
FLOWLIB_SCHEMA(Rec, k, seq, v, x, day, at, flag);

/// Random records: keys 0..5, sequences 0..7 (ties on purpose), values that
/// exercise every column type, NULL included.
inline std::vector<Rec> random_recs(std::mt19937& rng, int n) {
  std::uniform_int_distribution<int> key(0, 5), seq(0, 7), pct(0, 99), day(-400, 400);
  std::vector<Rec> out;
  for (int i = 0; i < n; ++i) {
    Rec r;
    r.k = key(rng);
    r.seq = seq(rng);
    r.v = pct(rng) < 10 ? std::string("") : "value " + std::to_string(pct(rng)) + (pct(rng) < 10 ? " it's \"quoted\"" : "");
    if (pct(rng) < 70) r.x = static_cast<double>(pct(rng)) / 3.0 - 10.0;
    r.day = std::chrono::sys_days{std::chrono::January / 1 / 2026} + std::chrono::days(day(rng));
    r.at = t0 + std::chrono::milliseconds(i * 1000 + pct(rng));
    r.flag = pct(rng) < 50;
    out.push_back(r);
  }
  return out;
}

/// `n` random records, and the same cut into batches.
struct random_input {
  std::vector<Rec> rows;
  std::vector<std::vector<Rec>> batches;
  random_input(std::mt19937& rng, int n) : rows(random_recs(rng, n)), batches(split(rows, rng)) {}
};

}  // namespace storage_durable_suite
