// flowlib/detail/impl/task_pool.ipp
//
// The definitions detail/task_pool.hpp declares: inline in header-only mode,
// compiled once by src/flowlib.cpp under FLOWLIB_SEPARATE_COMPILATION
// (detail/config.hpp).
#pragma once

#include <flowlib/detail/task_pool.hpp>

namespace flowlib::detail {

FLOWLIB_DECL task_pool::task_pool(std::size_t threads) {
  const std::size_t workers = threads > 1 ? threads - 1 : 0;
  workers_.reserve(workers);
  for (std::size_t i = 0; i < workers; ++i) workers_.emplace_back([this] { work(); });
}

FLOWLIB_DECL task_pool::~task_pool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

FLOWLIB_DECL void task_pool::drain(job& j) {
  std::size_t done = 0;
  std::exception_ptr error;
  std::size_t error_index = 0;
  for (std::size_t i; (i = j.next.fetch_add(1, std::memory_order_relaxed)) < j.n;) {
    try {
      j.task(i);
    } catch (...) {
      if (!error || i < error_index) {
        error = std::current_exception();
        error_index = i;
      }
    }
    ++done;
  }
  std::lock_guard lock(mutex_);
  j.finished += done;
  if (error && (!j.error || error_index < j.error_index)) {
    j.error = error;
    j.error_index = error_index;
  }
}

FLOWLIB_DECL void task_pool::work() {
  std::uint64_t seen = 0;
  for (;;) {
    job* j = nullptr;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || (job_ != nullptr && generation_ != seen); });
      if (stopping_) return;
      seen = generation_;
      j = job_;
      ++j->inside;
    }
    drain(*j);
    {
      std::lock_guard lock(mutex_);
      --j->inside;
    }
    done_.notify_all();
  }
}

FLOWLIB_DECL std::size_t default_threads() noexcept {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : n;
}

}  // namespace flowlib::detail
