// PipelineOptions::threads gives what threads = 1 gives. Random pipelines
// of 2 to 6 flows (tests/threads/random_pipeline.hpp: independent flows,
// flows reading another's table through a TableSource, two append flows
// into one table, a source read by two flows, a quarantine table written
// by two flows, a DedupWithinWatermark stage, now and then a REPLACE WHERE
// flow), random batch sizes, several updates with appends between them,
// run with threads = 1 and then with 2, 3 and 8 over the same script.
// After every run, against the threads = 1 run: every table's rows under
// their row ids and its append log, every checkpoint record (committed
// positions, offsets, state), each update's summary per flow, each flow's
// event-log events and on_progress calls, and the (step, batch) pairs each
// flow reached in the fault hook (in any order: with threads a flow into
// tables reaches positions_recorded after its table steps). During every
// run: flows that share a source or a table (or REPLACE WHERE) never ran
// at the same time and kept their threads = 1 order (from the spans of
// their fault-hook calls), the fault hook and on_progress were never
// called at the same time, and some calls came from other threads than the
// caller's (the flows did run on workers).
#include "random_pipeline.hpp"

#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <random>

namespace threads_equivalence {

using namespace threadtest;

TEST_CASE("R-EXACT-7: every update of a random pipeline gives what threads = 1 gives (tables, row ids, checkpoint records, summaries, events, progress), with threads 2, 3 and 8") {
  std::size_t foreign = 0;
  std::size_t calls = 0;
  std::size_t batches = 0;
  for (std::uint64_t seed = 1; seed <= 16; ++seed) {
    CAPTURE(seed);
    std::mt19937_64 rng(seed);
    const pipeline_spec spec = random_spec(rng);
    const auto script = random_script(seed, 5);
    CAPTURE(spec.describe());
    const auto ref = run_script(spec, script, 1);
    CHECK(ref->o.guard.foreign == 0);  // threads = 1: everything on the caller's thread
    for (const auto& s : ref->o.summaries)
      for (const auto& [f, fs] : s) batches += fs.batches;
    for (const std::size_t threads : {2, 3, 8}) {
      CAPTURE(threads);
      const auto got = run_script(spec, script, threads);
      compare_runs(*ref, *got);
      foreign += got->o.guard.foreign;
      calls += got->o.guard.calls;
    }
  }
  MESSAGE(batches << " batches per thread count; " << foreign << " of " << calls
                  << " callback calls came from worker threads");
  CHECK(batches > 300);
  // The flows did run on the workers: with a pool, some of them.
  CHECK(foreign > 0);
}

}  // namespace threads_equivalence
