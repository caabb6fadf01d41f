// flowlib/detail/prefetch.hpp
//
// Software prefetch hints, one definition for every flow, operator and store.
// A prefetch never faults and never changes what a program computes; it only
// asks the core to start loading a cache line early. Hot loops issue them a
// fixed distance ahead of the element they are working on (each loop keeps
// its own distance, tuned with its benchmark).
//
//   prefetch(p)                        the line holding byte p, for reading
//   prefetch<access::write>(p)         ... for writing (the line is fetched
//                                      exclusive, saving an upgrade later)
//   prefetch_straddling(p, n)          both lines an object of n bytes at p
//                                      may occupy: those of its first and its
//                                      last byte (the same line, then, when it
//                                      does not straddle a boundary; the
//                                      second hint is then nearly free)
//   prefetch_straddling_exact(p, n)    the same, but the second hint only
//                                      when the object does straddle (a
//                                      branch instead of a redundant hint;
//                                      the memory store's row hint)
//   prefetch_object(ptr)               prefetch_straddling(ptr, sizeof *ptr)
//
// The GCC/Clang builtin is used where available; elsewhere these are no-ops.
// Internal.
#pragma once

#include <cstddef>
#include <cstdint>

namespace flowlib::detail {

/// The cache line size the prefetch helpers assume (x86-64 and most ARM
/// server cores).
inline constexpr std::size_t cache_line_bytes = 64;

/// What the prefetched line is about to be used for.
enum class access : int { read = 0, write = 1 };

/// Hint that the cache line holding `p` is about to be read (or written).
template <access A = access::read>
inline void prefetch(const void* p) noexcept {
#if defined(__GNUC__) || defined(__clang__)
  __builtin_prefetch(p, static_cast<int>(A));
#else
  (void)p;
#endif
}

/// Hint for an object of `bytes` bytes at `p` that may straddle two cache
/// lines: prefetches the lines of its first and of its last byte.
template <access A = access::read>
inline void prefetch_straddling(const void* p, std::size_t bytes) noexcept {
  const char* c = static_cast<const char*>(p);
  prefetch<A>(c);
  if (bytes > 1) prefetch<A>(c + bytes - 1);
}

/// As prefetch_straddling, but the last byte's line is hinted only when it
/// is another line than the first byte's.
template <access A = access::read>
inline void prefetch_straddling_exact(const void* p, std::size_t bytes) noexcept {
  const char* c = static_cast<const char*>(p);
  prefetch<A>(c);
  if (bytes > 1 && (reinterpret_cast<std::uintptr_t>(c) & (cache_line_bytes - 1)) + bytes >
                       cache_line_bytes) {
    prefetch<A>(c + bytes - 1);
  }
}

/// prefetch_straddling for the object `*p`.
template <access A = access::read, class T>
inline void prefetch_object(const T* p) noexcept {
  prefetch_straddling<A>(p, sizeof(T));
}

}  // namespace flowlib::detail
