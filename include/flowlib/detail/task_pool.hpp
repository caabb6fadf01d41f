// flowlib/detail/task_pool.hpp
//
// task_pool: a fixed set of worker threads for fork-join work inside one
// update (PipelineOptions::threads): run(n, f) calls f(0) .. f(n-1), spread
// over the workers and the calling thread, and returns when all are done.
//
// Contract:
//   - size() threads take part in a run(): size() - 1 workers and the
//     caller. A pool of size 1 has no workers and runs everything inline.
//   - One run() at a time uses the workers. A run() that finds them busy
//     (a flow running on a worker that itself asks for parallel work, or
//     two callers at once) runs its tasks inline on its own thread: nesting
//     never deadlocks, and the work is the same, only less parallel.
//   - If tasks throw, run() still waits for every task, then rethrows the
//     exception of the lowest index that threw, so a failure is reported
//     the same way whatever the scheduling.
// Tasks are claimed through one atomic counter: a run of n tasks costs n
// atomic increments plus two wake-ups per worker, so callers should give
// each task a sizeable piece of work (a shard, a flow). Internal.
#pragma once

#include <flowlib/detail/config.hpp>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace flowlib::detail {

class task_pool {
 public:
  /// A pool in which `threads` threads (at least 1, the caller included)
  /// take part in each run().
  FLOWLIB_DECL explicit task_pool(std::size_t threads);
  task_pool(const task_pool&) = delete;
  task_pool& operator=(const task_pool&) = delete;
  FLOWLIB_DECL ~task_pool();

  /// Threads that take part in a run(), the caller included.
  std::size_t size() const noexcept { return workers_.size() + 1; }

  /// Calls f(i) for every i in [0, n) and returns when all calls returned;
  /// see the header comment for threads, nesting and exceptions.
  template <class F>
  void run(std::size_t n, F&& f) {
    if (n == 0) return;
    // Claims the workers; a run that finds them claimed (by another caller,
    // or by the task it runs within) runs inline.
    bool idle = false;
    if (workers_.empty() || n == 1 || !busy_.compare_exchange_strong(idle, true, std::memory_order_acquire)) {
      run_inline(n, f);
      return;
    }
    struct release {
      std::atomic<bool>& flag;
      ~release() { flag.store(false, std::memory_order_release); }
    } claimed{busy_};
    job j;
    j.n = n;
    j.task = [&f](std::size_t i) { f(i); };
    {
      std::lock_guard lock(mutex_);
      job_ = &j;
      ++generation_;
    }
    wake_.notify_all();
    drain(j);
    {
      // Wait until every worker left the job (so `j` may go) and every
      // task finished.
      std::unique_lock lock(mutex_);
      done_.wait(lock, [&] { return j.finished == n && j.inside == 0; });
      job_ = nullptr;
    }
    if (j.error) std::rethrow_exception(j.error);
  }

 private:
  struct job {
    std::size_t n = 0;
    std::function<void(std::size_t)> task;
    std::atomic<std::size_t> next{0};
    std::size_t finished = 0;  // under mutex_
    std::size_t inside = 0;    // workers in drain(); under mutex_
    std::exception_ptr error;  // of the lowest failing index; under mutex_
    std::size_t error_index = 0;
  };

  template <class F>
  static void run_inline(std::size_t n, F& f) {
    std::exception_ptr first;
    for (std::size_t i = 0; i < n; ++i) {
      try {
        f(i);
      } catch (...) {
        if (!first) first = std::current_exception();
      }
    }
    if (first) std::rethrow_exception(first);
  }

  // Claims and runs tasks of `j` until none is left.
  FLOWLIB_DECL void drain(job& j);

  FLOWLIB_DECL void work();

  std::atomic<bool> busy_{false};  // a run() uses the workers
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  job* job_ = nullptr;
  std::uint64_t generation_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
};

/// The threads a pool should have by default: the machine's cores (at
/// least 1).
FLOWLIB_DECL std::size_t default_threads() noexcept;

}  // namespace flowlib::detail

#if !defined(FLOWLIB_SEPARATE_COMPILATION)
#include <flowlib/detail/impl/task_pool.ipp>
#endif
