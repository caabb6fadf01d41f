// flowlib/storage/memory.hpp
//
// MemoryStorage: the default storage policy. Rows live in a slab of slots
// addressed by a stable row id; erased slots are reused. Not durable.
//
// The row-store contract every storage policy meets (see `row_store`):
//   - ids are stable until the row is erased;
//   - every id handed out is below id_bound(), and one insert raises
//     id_bound() by at most one (flows keep per-row side arrays indexed by
//     id and size them by id_bound() plus the inserts to come);
//   - after reserve(n) succeeds, up to n inserts and any number of assign()
//     and erase() calls do not allocate and do not throw (given a row type
//     whose move operations are noexcept). Flows rely on this to stage a
//     batch, reserve, and then commit it without a failure point, so a batch
//     is applied all-or-nothing without an undo log.
#pragma once

#include <flowlib/error.hpp>

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <limits>
#include <new>
#include <optional>
#include <ranges>
#include <type_traits>
#include <utility>
#include <vector>

namespace flowlib {

/// @brief Stable identifier of a row inside a row store.
using row_id = std::uint32_t;

/// @brief The interface between tables (and the flows writing them) and a
/// storage policy's per-table row store.
template <class S>
concept row_store =
    requires { typename S::row_type; } &&
    requires(S& s, const S& cs, typename S::row_type&& r, row_id id, std::size_t n) {
      { s.insert(std::move(r)) } -> std::same_as<row_id>;
      s.assign(id, std::move(r));
      s.erase(id);
      s.reserve(n);
      s.clear();
      { cs.get(id) } -> std::same_as<const typename S::row_type&>;
      { cs.size() } -> std::convertible_to<std::size_t>;
      { cs.id_bound() } -> std::convertible_to<std::size_t>;
      { cs.rows() } -> std::ranges::forward_range;
    };

/// @brief A storage policy: `Policy::store<Row>` is its row store.
template <class Policy, class Row>
concept table_storage = row_store<typename Policy::template store<Row>>;

namespace detail {

/// Optional hook of a row store: `s.prefetch(id)` hints that row `id` is
/// about to be read or written. A no-op for stores without it.
template <class Store>
inline void prefetch_row(const Store& s, row_id id) noexcept {
  if constexpr (requires { s.prefetch(id); }) s.prefetch(id);
}

/// An allocator whose blocks start on a cache-line boundary, so that a row
/// whose size divides (or is a multiple of) 64 bytes never straddles lines.
template <class T>
struct cache_aligned_allocator {
  using value_type = T;
  static constexpr std::size_t alignment = alignof(T) > 64 ? alignof(T) : 64;

  cache_aligned_allocator() = default;
  template <class U>
  cache_aligned_allocator(const cache_aligned_allocator<U>&) noexcept {}

  T* allocate(std::size_t n) {
    if (n > std::numeric_limits<std::size_t>::max() / sizeof(T)) throw std::bad_array_new_length();
    return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{alignment}));
  }
  void deallocate(T* p, std::size_t n) noexcept {
    ::operator delete(p, n * sizeof(T), std::align_val_t{alignment});
  }
  template <class U>
  friend bool operator==(const cache_aligned_allocator&, const cache_aligned_allocator<U>&) noexcept {
    return true;
  }
};

/// The memory store's row slots. A slot holds a Row directly (no
/// std::optional around it: a 64-byte row then fills exactly one cache
/// line) and a separate byte says whether it is live. An erased slot keeps a
/// moved-from row until an insert reuses it.
template <class Row>
class memory_row_store {
  static_assert(std::is_nothrow_move_constructible_v<Row> && std::is_nothrow_move_assignable_v<Row>,
                "flowlib::MemoryStorage: rows must be nothrow-movable (inserts and erases "
                "happen in a commit that cannot fail).");

 public:
  using row_type = Row;
  static constexpr bool durable = false;

  /// Makes room for `extra` inserts: afterwards inserts, assigns and erases
  /// do not allocate (the all-or-nothing commit relies on it).
  void reserve(std::size_t extra) {
    const std::size_t reusable = free_.size();
    const std::size_t need = extra > reusable ? slots_.size() + (extra - reusable) : slots_.size();
    if (need > std::numeric_limits<row_id>::max()) {
      throw error(errc::invalid_argument, "memory storage", "", "",
                  "a table cannot hold more than 2^32-1 rows");
    }
    grow(slots_, need);
    grow(live_flags_, need);
    grow(free_, need);  // every slot may be freed before the next reserve()
  }

  row_id insert(Row&& r) noexcept {
    ++live_;
    if (!free_.empty()) {
      const row_id id = free_.back();
      free_.pop_back();
      slots_[id] = std::move(r);
      live_flags_[id] = 1;
      return id;
    }
    slots_.push_back(std::move(r));  // capacity reserved by reserve()
    live_flags_.push_back(1);
    return static_cast<row_id>(slots_.size() - 1);
  }
  void assign(row_id id, Row&& r) noexcept { slots_[id] = std::move(r); }
  void erase(row_id id) noexcept {
    { [[maybe_unused]] const Row gone(std::move(slots_[id])); }  // releases what it held
    live_flags_[id] = 0;
    free_.push_back(id);  // capacity reserved by reserve()
    --live_;
  }
  void clear() noexcept {
    slots_.clear();
    live_flags_.clear();
    free_.clear();
    live_ = 0;
  }

  const Row& get(row_id id) const noexcept { return slots_[id]; }
  Row& get(row_id id) noexcept { return slots_[id]; }
  /// Hint that row `id` is about to be read or written.
  void prefetch(row_id id) const noexcept {
    const char* p = reinterpret_cast<const char*>(slots_.data() + id);
    __builtin_prefetch(p, 1);
    if constexpr (sizeof(Row) > 1) {  // the last byte's line, when the row straddles two
      if ((reinterpret_cast<std::uintptr_t>(p) & 63) + sizeof(Row) > 64) {
        __builtin_prefetch(p + sizeof(Row) - 1, 1);
      }
    }
  }

  std::size_t size() const noexcept { return live_; }
  /// One past the largest id ever handed out (ids are dense below it).
  std::size_t id_bound() const noexcept { return slots_.size(); }

  /// The live rows, in slot order: a forward view of const Row&, valid while
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
      reference operator*() const noexcept { return s_->slots_[i_]; }
      pointer operator->() const noexcept { return &s_->slots_[i_]; }
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
    iterator end() const noexcept { return {s_, s_->slots_.size()}; }

   private:
    const memory_row_store* s_ = nullptr;
  };
  rows_view rows() const noexcept { return rows_view(this); }

 private:
  // Geometric growth: a table that gains a few rows per batch must not copy
  // all its slots on every batch.
  template <class V>
  static void grow(V& v, std::size_t need) {
    if (need > v.capacity()) v.reserve(std::max(need, v.capacity() + v.capacity() / 2));
  }
  std::size_t next_live(std::size_t i) const noexcept {
    while (i < live_flags_.size() && live_flags_[i] == 0) ++i;
    return i;
  }

  std::vector<Row, cache_aligned_allocator<Row>> slots_;
  std::vector<unsigned char> live_flags_;  // 1: slots_[i] holds a live row
  std::vector<row_id> free_;
  std::size_t live_ = 0;
};

}  // namespace detail

/// @brief The in-memory storage policy (the default). Fast, not durable.
struct MemoryStorage {
  template <class Row>
  using store = detail::memory_row_store<Row>;
};

}  // namespace flowlib
