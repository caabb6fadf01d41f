// Allocation that fails on demand: after arm(n), the n+1-th allocation
// throws std::bad_alloc, until disarm(). A test program that uses it links
// support/failing_allocator.cpp, which replaces the program's global
// allocation functions (tests/CMakeLists.txt: FAILING_ALLOCATOR); disarmed,
// they allocate with malloc.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <new>

namespace failing_allocator {
inline long allocations_left = -1;  // < 0: allocations do not fail

inline void arm(long n) { allocations_left = n; }
inline void disarm() { allocations_left = -1; }

inline void* allocate(std::size_t n, std::size_t align) {
  if (allocations_left == 0) throw std::bad_alloc();
  if (allocations_left > 0) --allocations_left;
  if (n == 0) n = 1;
  void* p = align <= alignof(std::max_align_t)
                ? std::malloc(n)
                : std::aligned_alloc(align, (n + align - 1) / align * align);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}
}  // namespace failing_allocator
