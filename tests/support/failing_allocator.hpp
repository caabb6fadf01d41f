// Replaces the global allocation functions of the test program that
// includes it (one translation unit per program): after arm(n), the n+1-th
// allocation throws std::bad_alloc, until disarm().
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

void* operator new(std::size_t n) {
  return failing_allocator::allocate(n, alignof(std::max_align_t));
}
void* operator new(std::size_t n, std::align_val_t a) {
  return failing_allocator::allocate(n, static_cast<std::size_t>(a));
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
