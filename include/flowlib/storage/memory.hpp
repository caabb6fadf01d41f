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
#include <limits>
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

template <class Row>
class memory_row_store {
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
    grow(free_, need);  // every slot may be freed before the next reserve()
  }

  row_id insert(Row&& r) noexcept {
    static_assert(std::is_nothrow_move_constructible_v<Row>);
    ++live_;
    if (!free_.empty()) {
      const row_id id = free_.back();
      free_.pop_back();
      slots_[id].emplace(std::move(r));
      return id;
    }
    slots_.emplace_back(std::move(r));  // capacity reserved by reserve()
    return static_cast<row_id>(slots_.size() - 1);
  }
  void assign(row_id id, Row&& r) noexcept { *slots_[id] = std::move(r); }
  void erase(row_id id) noexcept {
    slots_[id].reset();
    free_.push_back(id);  // capacity reserved by reserve()
    --live_;
  }
  void clear() noexcept {
    slots_.clear();
    free_.clear();
    live_ = 0;
  }

  const Row& get(row_id id) const noexcept { return *slots_[id]; }
  Row& get(row_id id) noexcept { return *slots_[id]; }
  /// Hint that row `id` is about to be read or written.
  void prefetch(row_id id) const noexcept {
    // A slot may straddle two cache lines: fetch both.
    const char* p = reinterpret_cast<const char*>(slots_.data() + id);
    __builtin_prefetch(p, 1);
    __builtin_prefetch(p + sizeof(std::optional<Row>) - 1, 1);
  }

  std::size_t size() const noexcept { return live_; }
  /// One past the largest id ever handed out (ids are dense below it).
  std::size_t id_bound() const noexcept { return slots_.size(); }

  /// The live rows, in slot order (a forward range of const Row&).
  auto rows() const {
    return slots_ | std::views::filter([](const std::optional<Row>& s) { return s.has_value(); }) |
           std::views::transform([](const std::optional<Row>& s) -> const Row& { return *s; });
  }

 private:
  // Geometric growth: a table that gains a few rows per batch must not copy
  // all its slots on every batch.
  template <class V>
  static void grow(V& v, std::size_t need) {
    if (need > v.capacity()) v.reserve(std::max(need, v.capacity() + v.capacity() / 2));
  }

  std::vector<std::optional<Row>> slots_;
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
