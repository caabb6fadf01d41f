// detail::task_pool, the fork-join pool behind PipelineOptions::threads:
// every task runs exactly once, nested and concurrent runs fall back to
// running inline, and the exception of the lowest failing index is the one
// rethrown, after every task finished.
#include <flowlib/detail/task_pool.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <cstddef>
#include <numeric>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace threads_task_pool {

namespace fd = flowlib::detail;

TEST_CASE("task_pool: every task runs exactly once, on the pool's threads and the caller") {
  for (std::size_t threads : {1u, 2u, 3u, 5u}) {
    CAPTURE(threads);
    fd::task_pool pool(threads);
    CHECK(pool.size() == threads);
    for (std::size_t n : {0u, 1u, 2u, 7u, 64u, 1000u}) {
      CAPTURE(n);
      std::vector<std::atomic<int>> hits(n);
      pool.run(n, [&](std::size_t i) { hits[i].fetch_add(1); });
      for (std::size_t i = 0; i < n; ++i) CHECK(hits[i].load() == 1);
    }
  }
}

TEST_CASE("task_pool: a run inside a task, and runs from two callers at once, run every task once") {
  fd::task_pool pool(3);
  std::atomic<std::size_t> inner{0};
  std::atomic<std::size_t> outer{0};
  for (int round = 0; round < 50; ++round) {
    pool.run(4, [&](std::size_t) {
      outer.fetch_add(1);
      pool.run(5, [&](std::size_t) { inner.fetch_add(1); });  // busy: inline
    });
  }
  CHECK(outer.load() == 200);
  CHECK(inner.load() == 1000);

  std::atomic<std::size_t> total{0};
  std::thread other([&] {
    for (int round = 0; round < 50; ++round) pool.run(8, [&](std::size_t) { total.fetch_add(1); });
  });
  for (int round = 0; round < 50; ++round) pool.run(8, [&](std::size_t) { total.fetch_add(1); });
  other.join();
  CHECK(total.load() == 800);
}

TEST_CASE("task_pool: the lowest failing index is rethrown, after every task ran") {
  for (std::size_t threads : {1u, 2u, 4u}) {
    CAPTURE(threads);
    fd::task_pool pool(threads);
    for (int round = 0; round < 20; ++round) {
      std::atomic<std::size_t> ran{0};
      std::string what;
      try {
        pool.run(40, [&](std::size_t i) {
          ran.fetch_add(1);
          if (i % 7 == 3) throw std::runtime_error("task " + std::to_string(i));
        });
      } catch (const std::runtime_error& e) {
        what = e.what();
      }
      CHECK(what == "task 3");
      CHECK(ran.load() == 40);
    }
  }
}

}  // namespace threads_task_pool
