// flowlib/storage/memory.hpp
//
// MemoryStorage: the default storage policy. Rows live in slots addressed by
// a stable row id, in segments that never move; erased slots are reused. Not
// durable.
//
// It meets the row-store contract (storage/row_store.hpp) and has every
// optional hook listed there.
#pragma once

#include <flowlib/detail/prefetch.hpp>
#include <flowlib/error.hpp>
#include <flowlib/storage/row_store.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <new>
#include <optional>
#include <ranges>
#include <type_traits>
#include <utility>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

namespace flowlib {

namespace detail {

/// The memory store's row slots, addressed by row id.
///   - Slots live in segments of geometrically growing size (64, 128, 256,
///     ... slots), each allocated on a cache-line boundary (a row whose size
///     divides, or is a multiple of, 64 bytes never straddles lines). Growing
///     adds a segment and never moves a row: a table that gains rows batch
///     after batch pays neither the copies nor the transient double memory of
///     a reallocating array, and a row's address is stable until it is erased.
///     Finding a slot costs a bit scan and one load from a small table.
///   - A live slot holds a constructed Row; a dead slot holds no object, only
///     the id of the next dead slot (an intrusive free list, so erasing needs
///     no side array that would have to grow with the table).
///   - A byte per slot (after each segment's slots) says whether it is live.
///   - Rows are constructed in their slot (insert() moves once; the optional
///     emplace hooks build a row from its source without a temporary).
template <class Row>
class memory_row_store {
  static_assert(std::is_nothrow_move_constructible_v<Row> && std::is_nothrow_move_assignable_v<Row>,
                "flowlib::MemoryStorage: rows must be nothrow-movable (inserts and erases "
                "happen in a commit that cannot fail).");

  struct alignas(alignof(Row) > alignof(row_id) ? alignof(Row) : alignof(row_id)) slot {
    unsigned char bytes[sizeof(Row) > sizeof(row_id) ? sizeof(Row) : sizeof(row_id)];
  };
  static constexpr std::size_t slot_alignment = alignof(slot) > 64 ? alignof(slot) : 64;
  static constexpr row_id no_slot = std::numeric_limits<row_id>::max();
  // Segment s holds first_segment << s slots, for ids from
  // first_segment * (2^s - 1) on.
  static constexpr unsigned first_segment_log2 = 6;
  static constexpr std::uint64_t first_segment = std::uint64_t{1} << first_segment_log2;
  static constexpr unsigned max_segments = 33 - first_segment_log2;  // covers 2^32 ids

  struct segment {
    slot* slots = nullptr;
    unsigned char* live = nullptr;  // one byte per slot: 1 holds a live row
    void* raw = nullptr;            // the allocation both lie in
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
  using row_type = Row;
  static constexpr bool durable = false;

  memory_row_store() = default;
  memory_row_store(const memory_row_store&) = delete;  // a table's rows are not copied
  memory_row_store& operator=(const memory_row_store&) = delete;
  memory_row_store(memory_row_store&& o) noexcept { steal(o); }
  memory_row_store& operator=(memory_row_store&& o) noexcept {
    if (this != &o) {
      release();
      steal(o);
    }
    return *this;
  }
  ~memory_row_store() { release(); }

  /// Makes room for `extra` inserts: afterwards up to `extra` inserts (or
  /// emplaced rows) and any number of assigns and erases do not allocate
  /// (the all-or-nothing commit relies on it). Adds segments as needed.
  void reserve(std::size_t extra) {
    const std::size_t need = extra > free_count_ ? bound_ + (extra - free_count_) : bound_;
    if (need > no_slot) {
      throw error(errc::invalid_argument, "memory storage", "", "",
                  "a table cannot hold more than 2^32-1 rows");
    }
    // emplace_each() records the dead slots it fills, to undo them.
    const std::size_t reuse = extra < free_count_ ? extra : free_count_;
    if (undo_.capacity() < reuse) undo_.reserve(std::max(reuse, 2 * undo_.capacity()));
    while (capacity_ < need) add_segment();
  }

  /// Optional hook: the next `extra` inserts are about to be made one at a
  /// time. Makes room for them as reserve() does and, on Linux, maps in now
  /// the memory of the fresh slots they will take, with one system call per
  /// segment, instead of one page fault per page as rows are written (a
  /// table that grows by a version per change spent a sixth of its time in
  /// those faults). Pages already mapped are left as they are; elsewhere the
  /// mapping is left to the faults.
  void reserve_fresh(std::size_t extra) {
    reserve(extra);
#if defined(__linux__) && defined(MADV_POPULATE_WRITE)
    if (extra <= free_count_) return;
    static const std::uintptr_t page = [] {
      const long v = ::sysconf(_SC_PAGESIZE);
      return v > 0 ? static_cast<std::uintptr_t>(v) : std::uintptr_t{4096};
    }();
    std::size_t from = bound_;
    const std::size_t to = bound_ + (extra - free_count_);  // within capacity_ (reserved)
    while (from < to) {
      const place p = locate(from);
      const std::size_t n = std::min(to - from, segment_size(p.seg) - p.off);
      const auto a = reinterpret_cast<std::uintptr_t>(segs_[p.seg].slots + p.off);
      const std::uintptr_t b = a + n * sizeof(slot);
      // Whole pages only: the partial ones at either end stay with the faults.
      const std::uintptr_t first = (a + page - 1) & ~(page - 1), last = b & ~(page - 1);
      if (first < last) {
        (void)::madvise(reinterpret_cast<void*>(first), last - first, MADV_POPULATE_WRITE);
      }
      from += n;
    }
#endif
  }

  /// Inserts a row (a moved-in row; capacity reserved by reserve()).
  row_id insert(Row&& r) noexcept {
    const row_id id = take_slot();
    const place p = locate(id);
    ::new (static_cast<void*>(segs_[p.seg].slots[p.off].bytes)) Row(std::move(r));
    segs_[p.seg].live[p.off] = 1;
    ++live_;
    return id;
  }

  /// Optional hook: inserts the row `make()` returns, constructed in its
  /// slot (no temporary, no move). If make() throws the store is unchanged.
  /// Capacity must be reserved, as for insert().
  template <class Make>
  row_id emplace_with(Make&& make) {
    const bool reuse = free_head_ != no_slot;
    const row_id id = reuse ? free_head_ : static_cast<row_id>(bound_);
    const row_id next = reuse ? link(id) : no_slot;
    const place p = locate(id);
    try {
      ::new (static_cast<void*>(segs_[p.seg].slots[p.off].bytes)) Row(std::forward<Make>(make)());
    } catch (...) {
      if (reuse) set_link(id, next);  // a failed constructor may have written over it
      throw;
    }
    if (reuse) {
      free_head_ = next;
      --free_count_;
    } else {
      ++bound_;
    }
    segs_[p.seg].live[p.off] = 1;
    ++live_;
    return id;
  }

  /// Optional hook: inserts `make(x)` for every element x of `batch`
  /// (forwarded as the range yields it), each row constructed in its slot,
  /// and returns how many. Capacity for the whole batch must be reserved;
  /// a batch that yields more rows than that is an error. All or nothing: if
  /// iterating the batch or make() throws, every row this call inserted is
  /// erased again (which cannot fail) and the exception propagates.
  template <class R, class Make>
  std::size_t emplace_each(R&& batch, Make&& make) {
    auto it = std::ranges::begin(batch);
    const auto last = std::ranges::end(batch);
    const std::size_t bound_before = bound_;
    undo_.clear();
    std::size_t b = bound_;
    try {
      // Dead slots first (a table that also erases): one by one.
      for (; free_head_ != no_slot && it != last; ++it) {
        undo_.push_back(emplace_with([&]() -> Row { return make(*it); }));  // capacity reserved
      }
      // Then the never used slots, segment by segment, with locals only (so
      // that writing a row's columns cannot be taken to alias the store's
      // counters).
      while (it != last) {
        if (b == capacity_) {
          throw error(errc::invalid_argument, "memory storage", "", "",
                      "a batch yielded more rows than were reserved for it (its size() was "
                      "wrong); nothing of it was written");
        }
        const place p = locate(b);
        slot* const s = segs_[p.seg].slots;
        const std::size_t end = segment_size(p.seg);
        // b counts every row built, so that the handler below destroys
        // them all if the next one throws.
        for (std::size_t off = p.off; off < end && it != last; ++it, ++off, ++b) {
          ::new (static_cast<void*>(s[off].bytes)) Row(make(*it));
        }
      }
    } catch (...) {
      for (std::size_t i = b; i-- > bound_before;) row(static_cast<row_id>(i)).~Row();
      for (std::size_t i = undo_.size(); i-- > 0;) erase(undo_[i]);
      undo_.clear();
      throw;
    }
    mark_live(bound_before, b);
    const std::size_t added = b - bound_before;
    bound_ = b;
    live_ += added;
    const std::size_t n = undo_.size() + added;
    undo_.clear();
    return n;
  }

  void assign(row_id id, Row&& r) noexcept { row(id) = std::move(r); }
  void erase(row_id id) noexcept {
    row(id).~Row();
    set_link(id, free_head_);
    free_head_ = id;
    ++free_count_;
    const place p = locate(id);
    segs_[p.seg].live[p.off] = 0;
    --live_;
  }
  /// Removes every row; the segments are kept.
  void clear() noexcept {
    destroy_live();
    for (unsigned s = 0; s < nsegs_; ++s) std::memset(segs_[s].live, 0, segment_size(s));
    bound_ = 0;
    live_ = 0;
    free_head_ = no_slot;
    free_count_ = 0;
  }

  const Row& get(row_id id) const noexcept { return row(id); }
  Row& get(row_id id) noexcept { return row(id); }
  /// Hint that row `id` is about to be read or written.
  void prefetch(row_id id) const noexcept {
    // The last byte's line too, when the row straddles two.
    prefetch_straddling_exact<access::write>(slot_at(id), sizeof(slot));
  }

  std::size_t size() const noexcept { return live_; }
  /// One past the largest id ever handed out (ids are dense below it).
  std::size_t id_bound() const noexcept { return bound_; }
  /// Rows the store holds without allocating.
  std::size_t capacity() const noexcept { return capacity_; }

  /// The live rows, in id order: a forward view of const Row&, valid while
  /// the store lives (it sees rows inserted after it was made).
  class rows_view : public std::ranges::view_interface<rows_view> {
   public:
    class iterator {
     public:
      using iterator_concept = std::forward_iterator_tag;
      using iterator_category = std::forward_iterator_tag;
      using value_type = Row;
      using difference_type = std::ptrdiff_t;
      using pointer = const Row*;
      using reference = const Row&;

      iterator() = default;
      reference operator*() const noexcept { return s_->row(i_); }
      pointer operator->() const noexcept { return &s_->row(i_); }
      iterator& operator++() noexcept {
        i_ = s_->next_live(i_ + 1);
        return *this;
      }
      iterator operator++(int) noexcept {
        iterator old = *this;
        ++*this;
        return old;
      }
      friend bool operator==(const iterator& a, const iterator& b) noexcept { return a.i_ == b.i_; }

     private:
      friend class rows_view;
      iterator(const memory_row_store* s, std::size_t i) noexcept : s_(s), i_(i) {}
      const memory_row_store* s_ = nullptr;
      std::size_t i_ = 0;
    };

    rows_view() = default;
    explicit rows_view(const memory_row_store* s) noexcept : s_(s) {}
    iterator begin() const noexcept { return {s_, s_->next_live(0)}; }
    iterator end() const noexcept { return {s_, s_->bound_}; }

   private:
    const memory_row_store* s_ = nullptr;
  };
  rows_view rows() const noexcept { return rows_view(this); }

 private:
  slot* slot_at(std::size_t id) const noexcept {
    const place p = locate(id);
    return segs_[p.seg].slots + p.off;
  }
  Row& row(row_id id) noexcept { return *std::launder(reinterpret_cast<Row*>(slot_at(id)->bytes)); }
  const Row& row(row_id id) const noexcept {
    return *std::launder(reinterpret_cast<const Row*>(slot_at(id)->bytes));
  }
  bool is_live(std::size_t id) const noexcept {
    const place p = locate(id);
    return segs_[p.seg].live[p.off] != 0;
  }
  row_id link(row_id id) const noexcept {
    row_id next;
    std::memcpy(&next, slot_at(id)->bytes, sizeof next);
    return next;
  }
  void set_link(row_id id, row_id next) noexcept { std::memcpy(slot_at(id)->bytes, &next, sizeof next); }
  // A slot for one insert: a dead one, else the next never used one.
  row_id take_slot() noexcept {
    if (free_head_ != no_slot) {
      const row_id id = free_head_;
      free_head_ = link(id);
      --free_count_;
      return id;
    }
    return static_cast<row_id>(bound_++);
  }
  // Marks ids [from, to) live (consecutive, possibly over several segments).
  void mark_live(std::size_t from, std::size_t to) noexcept {
    while (from < to) {
      const place p = locate(from);
      const std::size_t n = std::min(to - from, segment_size(p.seg) - p.off);
      std::memset(segs_[p.seg].live + p.off, 1, n);
      from += n;
    }
  }
  std::size_t next_live(std::size_t i) const noexcept {
    while (i < bound_ && !is_live(i)) ++i;
    return i;
  }

  // Adds the next segment. The slab is aligned by hand inside a plain
  // allocation (glibc serves over-aligned requests less well).
  void add_segment() {
    const unsigned s = nsegs_;
    const std::size_t n = segment_size(s);
    void* raw = ::operator new(n * sizeof(slot) + n + slot_alignment);
    const auto addr = reinterpret_cast<std::uintptr_t>(raw);
    slot* slots = reinterpret_cast<slot*>((addr + slot_alignment - 1) & ~(slot_alignment - 1));
    auto* live = reinterpret_cast<unsigned char*>(slots + n);
    std::memset(live, 0, n);
    segs_[s] = {slots, live, raw};
    ++nsegs_;
    capacity_ += n;
  }
  void destroy_live() noexcept {
    if constexpr (!std::is_trivially_destructible_v<Row>) {
      for (std::size_t i = 0; i < bound_; ++i) {
        if (is_live(i)) row(static_cast<row_id>(i)).~Row();
      }
    }
  }
  void release() noexcept {
    destroy_live();
    for (unsigned s = 0; s < nsegs_; ++s) ::operator delete(segs_[s].raw);
    segs_ = {};
    nsegs_ = 0;
    capacity_ = bound_ = live_ = free_count_ = 0;
    free_head_ = no_slot;
  }
  void steal(memory_row_store& o) noexcept {
    segs_ = std::exchange(o.segs_, {});
    nsegs_ = std::exchange(o.nsegs_, 0);
    capacity_ = std::exchange(o.capacity_, 0);
    bound_ = std::exchange(o.bound_, 0);
    live_ = std::exchange(o.live_, 0);
    free_head_ = std::exchange(o.free_head_, no_slot);
    free_count_ = std::exchange(o.free_count_, 0);
    undo_ = std::move(o.undo_);
  }

  std::array<segment, max_segments> segs_{};
  unsigned nsegs_ = 0;
  std::size_t capacity_ = 0;        // slots in the segments
  std::size_t bound_ = 0;           // [0, bound_) were handed out
  std::size_t live_ = 0;
  row_id free_head_ = no_slot;      // first dead slot below bound_
  std::size_t free_count_ = 0;
  std::vector<row_id> undo_;        // emplace_each(): the dead slots it filled
};

}  // namespace detail

/// @brief The in-memory storage policy (the default). Fast, not durable.
struct MemoryStorage {
  template <class Row>
  using store = detail::memory_row_store<Row>;
};

}  // namespace flowlib
