// The global allocation functions of a test program that uses
// support/failing_allocator.hpp (one definition per program).
#include "failing_allocator.hpp"

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
