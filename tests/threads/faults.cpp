// Exactly once through faults with threads (R-EXACT-1, PipelineOptions::
// threads = 2): random pipelines (tests/threads/random_pipeline.hpp) run a
// script of appends and updates while the fault hook throws at random
// (step, flow, batch); after each fault the same Pipeline updates again,
// or a new one does (on durable stores: over tables and a checkpoint
// opened again from the files, as after a crash), until the update
// succeeds. The tables must end equal to a threads = 1 run without faults,
// and each flow's committed end position equal to that run's. During the
// runs: the error an update reports is that of the first, in dependency
// order (the order threads = 1 runs them), of the flows that failed in it;
// after a flow failed, neither it nor a flow that shares a source or a
// table with it (nor a REPLACE WHERE flow) is called again in that update;
// the fault hook is never called twice at once.
// Memory tables and checkpoint over many seeds; FileStorage +
// FileCheckpoint and SqliteStorage + SqliteCheckpoint over three seeds each
// (their files in /dev/shm when there is one).
#include "random_pipeline.hpp"

#include <support/temp_files.hpp>

#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <system_error>
#include <thread>
#include <tuple>
#include <type_traits>
#include <vector>

namespace threads_faults {

using namespace threadtest;

struct injected {
  std::string flow;
  fl::fault_point at;
  std::uint64_t batch;
};

/// Throws at a (step, flow, batch, how many times that step was reached)
/// with probability permille / 1000, decided by a hash of those and the
/// seed (not by the order of the calls, which threads change).
struct fault_plan {
  std::uint64_t seed = 0;
  unsigned permille = 0;
  std::mutex m;
  callback_guard guard;
  std::map<std::tuple<int, std::string, std::uint64_t>, std::uint64_t> seen;
  std::vector<std::string> failed;  // flows that failed in the running update, in order
  std::size_t late_calls = 0;       // calls of a flow sharing something with a failed one
  std::string late_example;
  std::size_t total = 0;
  std::map<std::string, std::size_t> by_step;

  void hook(fl::fault_point at, std::string_view flow, std::uint64_t batch) {
    callback_guard::scope s(guard);
    std::lock_guard lock(m);
    for (const auto& f : failed) {
      if (conflict(kind_of(f), kind_of(flow))) {
        ++late_calls;
        late_example = std::string(flow) + " at " + fl::to_string(at) + " after " + f + " failed";
      }
    }
    std::uint64_t& n = seen[{static_cast<int>(at), std::string(flow), batch}];
    const std::uint64_t h = mix(seed ^ mix(static_cast<std::uint64_t>(at) + 16 * batch) ^
                                mix(std::hash<std::string_view>{}(flow)) ^ mix(7919 + n++));
    if (h % 1000 < permille) {
      failed.emplace_back(flow);
      ++total;
      ++by_step[fl::to_string(at)];
      throw injected{std::string(flow), at, batch};
    }
  }
};

struct run_counts {
  std::size_t faults = 0;
  std::size_t reopened = 0;
  std::size_t retried = 0;
};

/// Runs `script` over the world `w`, with threads = 2 and faults from `f`
/// (nullptr: none, threads = 1); after half of the faults a new Pipeline
/// takes over, and `open` (when set) first makes the world again from its
/// files. Returns the counts.
template <class W>
run_counts run(sources& s, std::unique_ptr<W>& w, const std::function<std::unique_ptr<W>()>& open,
               const pipeline_spec& spec, const std::vector<chunk>& script, fault_plan* f) {
  fl::PipelineOptions options;
  options.threads = f != nullptr ? 2 : 1;
  options.max_rows_per_batch = spec.default_max_rows;
  options.snapshot_interval = spec.snapshot_interval;
  options.retain_batches = 2;
  if (f != nullptr) {
    f->guard.updater = std::this_thread::get_id();
    options.fault_hook = [f](fl::fault_point at, std::string_view flow, std::uint64_t batch) {
      f->hook(at, flow, batch);
    };
  }
  const auto make = [&] {
    auto p = std::make_unique<fl::Pipeline>("threads", w->checkpoint, options);
    declare(*p, s, *w, spec);
    return p;
  };
  auto p = make();
  std::mt19937_64 coin(f != nullptr ? f->seed : 0);
  run_counts c;
  for (std::size_t u = 0; u < script.size(); ++u) {
    feed(s, script[u]);
    for (;;) {
      if (f != nullptr) {
        std::lock_guard lock(f->m);
        f->failed.clear();
      }
      try {
        p->update(at_update(u));
        break;
      } catch (const injected& e) {
        REQUIRE(f != nullptr);
        ++c.faults;
        {
          std::lock_guard lock(f->m);
          REQUIRE(!f->failed.empty());
          const auto order = spec.run_order();
          std::string first = f->failed.front();
          for (const auto& name : f->failed)
            if (order.at(name) < order.at(first)) first = name;
          CAPTURE(u);
          CHECK_MESSAGE(e.flow == first, "the update reported " << e.flow << "'s failure, but " << first
                                                                << " (before it in dependency order) failed too");
        }
        if (coin() % 2 == 0) {
          ++c.retried;
        } else {
          ++c.reopened;
          p.reset();
          if (open) {
            w.reset();
            w = open();
          }
          p = make();
        }
      }
    }
  }
  if (f != nullptr) f->permille = 0;
  // R-EXACT-2 (REPLACE WHERE recomputes its window every time).
  for (const auto& fs : p->update(at_update(script.size() - 1)).flows)
    if (fs.flow != "totals") CHECK(fs.batches == 0);
  return c;
}

/// Compares the tables (sorted rows) and each flow's committed end.
template <class A, class B>
void compare_with_reference(A& got, B& ref, const pipeline_spec& spec) {
  for_each_table(got, ref, [](const auto& a, const auto& b, const char* name) {
    INFO("table " << std::string(name));
    CHECK(a.sorted_rows() == b.sorted_rows());
  });
  const fl::detail::checkpoint_log lg(got.checkpoint);
  const fl::detail::checkpoint_log lr(ref.checkpoint);
  for (const auto& c : spec.flows) {
    // REPLACE WHERE's positions count its runs (flows/where/detail/
    // pipeline_flow.hpp), and a failed update's retry runs it again.
    if (c.kind == totals) continue;
    const char* flow = flow_names[static_cast<std::size_t>(c.kind)];
    INFO("flow " << std::string(flow));
    const auto a = lg.last_commit(flow);
    const auto b = lr.last_commit(flow);
    CHECK(a.has_value() == b.has_value());
    if (a && b) CHECK_MESSAGE(a->end == b->end, a->end.to_string() << " vs " << b->end.to_string());
  }
}

/// One seed: the reference (memory, threads = 1, no faults), then the run
/// with faults over a world that `open` makes (and makes again from its
/// files at restarts), or over one memory world when `open` is empty.
template <class W>
run_counts one_seed(std::uint64_t seed, const std::function<std::unique_ptr<W>()>& open, fault_plan& f) {
  std::mt19937_64 rng(seed * 31 + 5);
  const pipeline_spec spec = random_spec(rng);
  const auto script = random_script(seed, 4, 16);
  CAPTURE(spec.describe());

  sources ref_sources;
  auto ref = std::make_unique<memory_world>();
  const auto none = run<memory_world>(ref_sources, ref, {}, spec, script, nullptr);
  REQUIRE(none.faults == 0);

  sources s;
  std::unique_ptr<W> w;
  if constexpr (std::is_default_constructible_v<W>) {
    w = open ? open() : std::make_unique<W>();
  } else {
    w = open();
  }
  f.seed = seed;
  const auto counts = run<W>(s, w, open, spec, script, &f);
  compare_with_reference(*w, *ref, spec);
  CHECK(f.late_calls == 0);
  if (f.late_calls != 0) MESSAGE(f.late_example);
  CHECK(f.guard.overlaps == 0);
  if (open) {  // opened again from its files, the world still holds the same
    w.reset();
    w = open();
    fl::PipelineOptions options;
    options.threads = 2;
    options.max_rows_per_batch = spec.default_max_rows;
    options.snapshot_interval = spec.snapshot_interval;
    options.retain_batches = 2;
    fl::Pipeline p{"threads", w->checkpoint, options};
    declare(p, s, *w, spec);
    p.update(at_update(script.size() - 1));  // opens: loads the tables
    compare_with_reference(*w, *ref, spec);
  }
  return counts;
}

TEST_CASE("R-EXACT-1, R-EXACT-7 with threads = 2: faults at random (step, flow, batch), each followed by another update of the same or a new Pipeline, end with the tables of a threads = 1 run without faults (memory tables and checkpoint)") {
  run_counts total;
  std::map<std::string, std::size_t> by_step;
  std::size_t foreign = 0;
  for (std::uint64_t seed = 1; seed <= 24; ++seed) {
    CAPTURE(seed);
    fault_plan f;
    f.permille = 40;
    // A restart keeps the memory tables and checkpoint and builds a new
    // Pipeline over them.
    const auto c = one_seed<memory_world>(seed, {}, f);
    total.faults += c.faults;
    total.reopened += c.reopened;
    total.retried += c.retried;
    foreign += f.guard.foreign;
    for (const auto& [k, v] : f.by_step) by_step[k] += v;
  }
  MESSAGE(total.faults << " faults; after " << total.reopened << " a new Pipeline updated, after "
                       << total.retried << " the same; " << foreign << " hook calls on workers");
  CHECK(total.faults >= 50);
  for (const char* step : {"positions_recorded", "before_table_write", "after_table_write", "state_saving",
                           "before_commit", "after_commit"}) {
    CAPTURE(step);
    CHECK(by_step[step] > 0);
  }
  CHECK(foreign > 0);
}

/// A directory for a durable world's files: in /dev/shm when there is one
/// (the checkpoint syncs every commit), removed at the end.
struct shm_dir {
  std::filesystem::path path;
  explicit shm_dir(std::string_view stem) : path(flowtest::fresh_temp_path(stem)) {
    std::error_code ec;
    if (std::filesystem::is_directory("/dev/shm", ec)) path = std::filesystem::path("/dev/shm") / path.filename();
    std::filesystem::remove_all(path, ec);
    std::filesystem::create_directories(path);
  }
  shm_dir(const shm_dir&) = delete;
  shm_dir& operator=(const shm_dir&) = delete;
  ~shm_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

template <class W, class Open>
void durable_case(const Open& open_at, const char* stem) {
  run_counts total;
  for (std::uint64_t seed = 101; seed <= 103; ++seed) {
    CAPTURE(seed);
    const shm_dir dir{stem};
    fault_plan f;
    f.permille = 50;
    const auto c = one_seed<W>(seed, [&] { return open_at(dir.path); }, f);
    total.faults += c.faults;
    total.reopened += c.reopened;
  }
  MESSAGE(total.faults << " faults; after " << total.reopened << " the tables and checkpoint were opened again");
  CHECK(total.faults >= 3);
  CHECK(total.reopened >= 1);
}

TEST_CASE("R-EXACT-1, R-EXACT-7, R-DURABLE-1 with threads = 2: faults at random, each followed by another update or a restart from the files, end with the tables of a threads = 1 run without faults (FileStorage + FileCheckpoint)") {
  using W = world<fl::FileStorage, fl::FileCheckpoint>;
  durable_case<W>([](const std::filesystem::path& dir) { return std::make_unique<W>(dir / "ck"); },
                  "flowlib_threads_file");
}

TEST_CASE("R-EXACT-1, R-EXACT-7, R-DURABLE-1 with threads = 2: faults at random, each followed by another update or a restart from the database, end with the tables of a threads = 1 run without faults (SqliteStorage + SqliteCheckpoint)") {
  using W = world<fl::SqliteStorage, fl::SqliteCheckpoint>;
  durable_case<W>([](const std::filesystem::path& dir) { return std::make_unique<W>((dir / "db.sqlite").string()); },
                  "flowlib_threads_sqlite");
}

}  // namespace threads_faults
