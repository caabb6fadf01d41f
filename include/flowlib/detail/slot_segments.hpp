// flowlib/detail/slot_segments.hpp
//
// The memory of MemoryStorage's rows: raw slots addressed by a dense id, with
// a flag byte per slot. Internal.
//
//   - Slots live in segments of geometrically growing size (64, 128, 256,
//     ... slots), each allocated on a cache-line boundary (a slot whose size
//     divides, or is a multiple of, 64 bytes never straddles lines). Growing
//     adds a segment and never moves a slot: a table that gains rows batch
//     after batch pays neither the copies nor the transient double memory of
//     a reallocating array, and a row's address is stable. Finding a slot
//     costs a bit scan and one load from a small table.
//   - Each segment's flag bytes follow its slots, in the same allocation.
//     What the slots and flags hold is the owner's business: this class
//     constructs and destroys nothing.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <utility>

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

namespace flowlib::detail {

template <class Slot>
class slot_segments {
  // Segment s holds first_segment << s slots, for ids from
  // first_segment * (2^s - 1) on.
  static constexpr unsigned first_segment_log2 = 6;
  static constexpr std::uint64_t first_segment = std::uint64_t{1} << first_segment_log2;
  static constexpr unsigned max_segments = 33 - first_segment_log2;  // covers 2^32 ids
  static constexpr std::size_t alignment = alignof(Slot) > 64 ? alignof(Slot) : 64;

  struct segment {
    Slot* slots = nullptr;
    unsigned char* flags = nullptr;  // one byte per slot
    void* raw = nullptr;             // the allocation both lie in
  };
  struct place {
    unsigned seg;
    std::size_t off;
  };
  static place locate(std::size_t id) noexcept {
    const std::uint64_t x = static_cast<std::uint64_t>(id) + first_segment;
    const unsigned s = static_cast<unsigned>(std::bit_width(x)) - 1 - first_segment_log2;
    return {s, static_cast<std::size_t>(x - (first_segment << s))};
  }
  static constexpr std::size_t segment_size(unsigned s) noexcept {
    return static_cast<std::size_t>(first_segment << s);
  }

 public:
  slot_segments() = default;
  slot_segments(const slot_segments&) = delete;
  slot_segments& operator=(const slot_segments&) = delete;
  slot_segments(slot_segments&& o) noexcept
      : segs_(std::exchange(o.segs_, {})),
        nsegs_(std::exchange(o.nsegs_, 0)),
        capacity_(std::exchange(o.capacity_, 0)) {}
  slot_segments& operator=(slot_segments&& o) noexcept {
    if (this != &o) {
      release();
      segs_ = std::exchange(o.segs_, {});
      nsegs_ = std::exchange(o.nsegs_, 0);
      capacity_ = std::exchange(o.capacity_, 0);
    }
    return *this;
  }
  ~slot_segments() { release(); }

  /// Slots held, ids [0, capacity()).
  std::size_t capacity() const noexcept { return capacity_; }

  /// Adds segments until capacity() >= n. Throws std::bad_alloc, adding
  /// nothing more.
  void grow_to(std::size_t n) {
    while (capacity_ < n) {
      const unsigned s = nsegs_;
      const std::size_t size = segment_size(s);
      // The slots are aligned by hand inside a plain allocation (glibc
      // serves over-aligned requests less well).
      void* raw = ::operator new(size * sizeof(Slot) + size + alignment);
      const auto addr = reinterpret_cast<std::uintptr_t>(raw);
      Slot* slots = reinterpret_cast<Slot*>((addr + alignment - 1) & ~(alignment - 1));
      auto* flags = reinterpret_cast<unsigned char*>(slots + size);
      std::memset(flags, 0, size);
      segs_[s] = {slots, flags, raw};
      ++nsegs_;
      capacity_ += size;
    }
  }

  /// Slot `id` (below capacity()).
  Slot* slot(std::size_t id) const noexcept {
    const place p = locate(id);
    return segs_[p.seg].slots + p.off;
  }
  /// Slot `id`'s flag byte.
  unsigned char& flags(std::size_t id) const noexcept {
    const place p = locate(id);
    return segs_[p.seg].flags[p.off];
  }

  /// The consecutive slots from `id` to the end of its segment:
  /// `slots[off]` is slot `id`, `slots[end - 1]` the segment's last.
  struct run {
    Slot* slots;
    std::size_t off, end;
  };
  run run_at(std::size_t id) const noexcept {
    const place p = locate(id);
    return {segs_[p.seg].slots, p.off, segment_size(p.seg)};
  }

  /// Sets the flag bytes of ids [from, to) to `value`.
  void set_flags(std::size_t from, std::size_t to, unsigned char value) noexcept {
    while (from < to) {
      const place p = locate(from);
      const std::size_t n = std::min(to - from, segment_size(p.seg) - p.off);
      std::memset(segs_[p.seg].flags + p.off, value, n);
      from += n;
    }
  }
  /// Clears every flag byte.
  void clear_flags() noexcept {
    for (unsigned s = 0; s < nsegs_; ++s) std::memset(segs_[s].flags, 0, segment_size(s));
  }

  /// Maps in now, on Linux, the memory of slots [from, to) (below
  /// capacity()), with one system call per segment, instead of one page
  /// fault per page as they are first written. Pages already mapped are
  /// left as they are; elsewhere the mapping is left to the faults.
  void populate(std::size_t from, std::size_t to) const noexcept {
#if defined(__linux__) && defined(MADV_POPULATE_WRITE)
    static const std::uintptr_t page = [] {
      const long v = ::sysconf(_SC_PAGESIZE);
      return v > 0 ? static_cast<std::uintptr_t>(v) : std::uintptr_t{4096};
    }();
    while (from < to) {
      const run r = run_at(from);
      const std::size_t n = std::min(to - from, r.end - r.off);
      const auto a = reinterpret_cast<std::uintptr_t>(r.slots + r.off);
      const std::uintptr_t b = a + n * sizeof(Slot);
      // Whole pages only: the partial ones at either end stay with the faults.
      const std::uintptr_t first = (a + page - 1) & ~(page - 1), last = b & ~(page - 1);
      if (first < last) {
        (void)::madvise(reinterpret_cast<void*>(first), last - first, MADV_POPULATE_WRITE);
      }
      from += n;
    }
#else
    (void)from;
    (void)to;
#endif
  }

 private:
  void release() noexcept {
    for (unsigned s = 0; s < nsegs_; ++s) ::operator delete(segs_[s].raw);
    segs_ = {};
    nsegs_ = 0;
    capacity_ = 0;
  }

  std::array<segment, max_segments> segs_{};
  unsigned nsegs_ = 0;
  std::size_t capacity_ = 0;
};

}  // namespace flowlib::detail
