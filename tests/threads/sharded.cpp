// A REPLACE USING flow whose batches are large enough to be applied
// key-sharded over the pipeline's threads (flows/replace_using.hpp:
// sharded_min_rows rows or more, no table expectations), in a wave of its
// own, beside flows of other waves: every table, row id, checkpoint record,
// summary and event equal to threads = 1 (compare_runs()), with 2 and 3
// threads.
#include "random_pipeline.hpp"

#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace threads_sharded {

using namespace threadtest;

TEST_CASE("R-EXACT-7: a REPLACE USING batch large enough to be spread over the threads, beside flows of other waves, gives what threads = 1 gives") {
  // cur0 shares s0 with app0, so it runs in a wave of its own, where its
  // batches of 16384 rows or more (flows/replace_using.hpp's
  // sharded_min_rows) may be applied key-sharded; ind and cur1 run beside
  // app0.
  pipeline_spec spec;
  spec.flows = {{app0, 0}, {cur0, 0}, {ind, 0}, {cur1, 0}};
  spec.snapshot_interval = 2;
  std::vector<chunk> script(3);
  std::mt19937_64 rng(77);
  std::int64_t seq = 0;
  for (std::size_t u = 0; u < script.size(); ++u) {
    const std::size_t n = u == 1 ? 300 : 17000 + rng() % 2000;
    for (std::size_t i = 0; i < n; ++i) {
      Ev e;
      e.id = static_cast<std::int64_t>(rng() % 9000);
      e.seq = ++seq;
      e.day = day0;
      e.v = tagged("v", static_cast<std::int64_t>(rng() % 7));
      e.amount = static_cast<std::int64_t>(rng() % 50) - 2;
      script[u].rows.emplace_back(0, static_cast<std::uint32_t>(e.id % 2), e);
      if (i % 50 == 0) script[u].rows.emplace_back(1, 0, e);
      if (i % 80 == 0) script[u].rows.emplace_back(3, 0, e);
    }
  }
  const auto ref = run_script(spec, script, 1);
  REQUIRE(ref->w.cur0.size() > 8000);
  for (const std::size_t threads : {2, 3}) {
    CAPTURE(threads);
    const auto got = run_script(spec, script, threads);
    compare_runs(*ref, *got);
  }
}

}  // namespace threads_sharded
