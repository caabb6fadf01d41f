// flowlib/detail/flat_index.hpp
//
// The AUTO CDC flow's key index: an open-addressing hash map from key to
// entry, probed like key_index (with a batch row and its precomputed hash),
// with what absl::flat_hash_map does not give:
//
//  - strong exception safety when it grows: the new array is allocated, and
//    the elements moved into it, before anything changes, so running out of
//    memory in reserve(), emplace() or try_emplace() leaves the map as it
//    was (the Abseil release Debian 12 ships sets its capacity before it
//    allocates, and a failure leaves that map unusable);
//  - generation(): it changes exactly when elements move. (Abseil also
//    rehashes in place, at the same capacity, to drop erased slots, so its
//    capacity() does not tell when pointers to elements went stale.)
//  - prefetch_match(): once a key's control bytes are cached, prefetches the
//    slot its lookup will compare (Abseil's prefetch takes the slot where
//    the probe starts, which holds another key whenever the key was placed
//    further along).
//
// Layout (the SwissTable scheme, written for this use): `capacity` slots in
// groups of 8, one control byte per slot (empty, deleted, or 7 bits of the
// key's hash), matched a group at a time (SSE2 where there is SSE2, else
// 64-bit word arithmetic). A key's probe visits groups from (hash >> 7) on
// by triangular steps, which cover every group of a power-of-two count, and
// stops at the first group with an empty byte. At most 7/8 of the slots are
// full or deleted. Internal.
#pragma once

#include <flowlib/detail/prefetch.hpp>
#include <flowlib/detail/slot_iterator.hpp>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <type_traits>
#include <utility>

#if defined(__SSE2__) && !defined(FLOWLIB_FLAT_INDEX_PORTABLE)
#include <emmintrin.h>
#endif

namespace flowlib::detail {

/// A stored element: the key and its entry (`first`, `second`, as in a map).
template <class Key, class Value>
struct flat_index_slot {
  Key first;
  Value second;
};

template <class Key, class Value, class Hash, class Eq>
class flat_index {
 public:
  using key_type = Key;
  using mapped_type = Value;
  using value_type = flat_index_slot<Key, Value>;
  using hasher = Hash;
  using key_equal = Eq;
  using size_type = std::size_t;

 private:
  using ctrl_t = std::uint8_t;
  static constexpr ctrl_t empty_ctrl = 0x80;
  static constexpr ctrl_t deleted_ctrl = 0xfe;
  static constexpr std::size_t group_width = 8;
  static constexpr std::size_t slot_align = alignof(value_type) > 64 ? alignof(value_type) : 64;

  // The group of an empty map (no allocation): every lookup ends in it.
  alignas(group_width) static constexpr ctrl_t empty_group[group_width] = {
      empty_ctrl, empty_ctrl, empty_ctrl, empty_ctrl, empty_ctrl, empty_ctrl, empty_ctrl, empty_ctrl};

  // A group's bytes are matched 8 at a time: with SSE2, one bit per byte
  // (a compare and a movemask); elsewhere in a 64-bit word, 0x80 per byte.
#if defined(__SSE2__) && !defined(FLOWLIB_FLAT_INDEX_PORTABLE)
  using group_t = __m128i;
  using mask_t = std::uint32_t;
  static group_t load_group(const ctrl_t* g) noexcept {
    return _mm_loadl_epi64(reinterpret_cast<const __m128i*>(g));
  }
  static mask_t bytes_equal(group_t w, ctrl_t c) noexcept {
    const auto m = _mm_movemask_epi8(_mm_cmpeq_epi8(w, _mm_set1_epi8(static_cast<char>(c))));
    return static_cast<mask_t>(m) & 0xffu;
  }
  /// The bytes equal to h2.
  static mask_t match(group_t w, std::uint8_t h2) noexcept { return bytes_equal(w, h2); }
  static mask_t match_empty(group_t w) noexcept { return bytes_equal(w, empty_ctrl); }
  static mask_t match_free(group_t w) noexcept {  // empty or deleted: the high bit set
    return static_cast<mask_t>(_mm_movemask_epi8(w)) & 0xffu;
  }
  static std::size_t lane(mask_t m) noexcept { return static_cast<std::size_t>(std::countr_zero(m)); }
#else
  using group_t = std::uint64_t;
  using mask_t = std::uint64_t;
  static constexpr std::uint64_t lsbs = 0x0101010101010101ULL;
  static constexpr std::uint64_t msbs = 0x8080808080808080ULL;
  static group_t load_group(const ctrl_t* g) noexcept {
    std::uint64_t w;
    std::memcpy(&w, g, sizeof w);
    if constexpr (std::endian::native == std::endian::big) w = __builtin_bswap64(w);
    return w;  // byte i of the group is bits 8i..8i+7
  }
  /// The bytes equal to h2 (0x80 in their lane). May also flag a full byte
  /// next to a match: the caller compares keys anyway.
  static mask_t match(group_t w, std::uint8_t h2) noexcept {
    const std::uint64_t x = w ^ (lsbs * h2);
    return (x - lsbs) & ~x & msbs;
  }
  static mask_t match_empty(group_t w) noexcept { return w & (~w << 6) & msbs; }
  static mask_t match_free(group_t w) noexcept { return w & msbs; }  // empty or deleted
  static std::size_t lane(mask_t m) noexcept {
    return static_cast<std::size_t>(std::countr_zero(m)) / 8;
  }
#endif
  static std::uint8_t h2_of(std::size_t h) noexcept { return static_cast<std::uint8_t>(h & 0x7f); }

  // The iteration protocol of slot_iterator.
  template <class, class, bool>
  friend class slot_iterator;
  value_type& slot_value(std::size_t i) const noexcept { return slots_[i]; }

 public:
  using iterator = slot_iterator<flat_index, value_type, false>;
  using const_iterator = slot_iterator<flat_index, value_type, true>;

  explicit flat_index(std::size_t capacity_hint = 0, const Hash& h = Hash{}, const Eq& eq = Eq{})
      : hash_(h), eq_(eq) {
    if (capacity_hint > 0) reserve(capacity_hint);
  }
  flat_index(const flat_index& o) : hash_(o.hash_), eq_(o.eq_) {
    if (o.size_ == 0) return;
    table t = allocate(o.capacity_);
    std::size_t i = 0;
    try {
      for (; i < o.capacity_; ++i) {
        if (is_full(o.ctrl_[i])) ::new (static_cast<void*>(t.slots + i)) value_type(o.slots_[i]);
      }
    } catch (...) {
      for (std::size_t j = 0; j < i; ++j) {
        if (is_full(o.ctrl_[j])) t.slots[j].~value_type();
      }
      deallocate(t);
      throw;
    }
    std::memcpy(t.ctrl, o.ctrl_, o.capacity_);
    adopt(t, o.capacity_, o.size_, o.growth_left_);
  }
  flat_index(flat_index&& o) noexcept : hash_(o.hash_), eq_(o.eq_) { steal(o); }
  flat_index& operator=(const flat_index& o) {
    if (this != &o) {
      flat_index t(o);
      swap(t);
    }
    return *this;
  }
  flat_index& operator=(flat_index&& o) noexcept {
    if (this != &o) {
      release();
      hash_ = o.hash_;
      eq_ = o.eq_;
      steal(o);
    }
    return *this;
  }
  ~flat_index() { release(); }

  void swap(flat_index& o) noexcept {
    using std::swap;
    swap(hash_, o.hash_);
    swap(eq_, o.eq_);
    swap(block_, o.block_);
    swap(ctrl_, o.ctrl_);
    swap(slots_, o.slots_);
    swap(capacity_, o.capacity_);
    swap(group_mask_, o.group_mask_);
    swap(size_, o.size_);
    swap(growth_left_, o.growth_left_);
    swap(generation_, o.generation_);
  }

  std::size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  /// Slots in the array (0 before the first insert).
  std::size_t capacity() const noexcept { return capacity_; }
  /// Changes exactly when the elements move (a rehash, also one at the same
  /// capacity that drops deleted slots): pointers to elements taken before
  /// stay valid while it does not change.
  std::uint64_t generation() const noexcept { return generation_; }

  iterator begin() noexcept { return {this, next_occupied(0)}; }
  iterator end() noexcept { return {this, capacity_}; }
  const_iterator begin() const noexcept { return {this, next_occupied(0)}; }
  const_iterator end() const noexcept { return {this, capacity_}; }

  /// The element whose key equals `k` (a key, or anything Hash and Eq take).
  template <class K>
  iterator find(const K& k) {
    return {this, find_index(k, hash_(k))};
  }
  template <class K>
  const_iterator find(const K& k) const {
    return {this, find_index(k, hash_(k))};
  }

  /// First stage of a lookup ahead of time: the control bytes of k's group.
  template <class K>
  void prefetch(const K& k) const noexcept {
    const ctrl_t* p = ctrl_ + group_of(hash_(k)) * group_width;
    detail::prefetch(p);
    asm volatile("" : : "r"(p));  // see prefetch_match
  }
  /// Second stage, once those are cached: the slot of k's first candidate
  /// in its group (the slot a lookup of a present key nearly always
  /// compares, and the only one it touches), both its cache lines.
  template <class K>
  void prefetch_match(const K& k) const noexcept {
    const std::size_t h = hash_(k);
    const std::size_t g = group_of(h);
    const mask_t m = match(load_group(ctrl_ + g * group_width), h2_of(h));
    if (m == 0) return;
    const char* p = reinterpret_cast<const char*>(slots_ + g * group_width + lane(m));
    prefetch_straddling<access::write>(p, sizeof(value_type));
    // GCC takes a function that only reads memory and prefetches for pure,
    // and drops calls to it whose result is unused: this keeps the call.
    asm volatile("" : : "r"(p));
  }

  /// Inserts {k, v} unless k is present. Strong guarantee: if growing or
  /// building the element fails, the elements are as they were (the array
  /// may have grown: see generation()).
  template <class K, class V>
  std::pair<iterator, bool> emplace(K&& k, V&& v) {
    static_assert(std::is_same_v<std::remove_cvref_t<K>, Key> &&
                      std::is_same_v<std::remove_cvref_t<V>, Value>,
                  "flat_index::emplace takes a key and an entry");
    return emplace_with(std::forward<K>(k), [&]() -> Value { return Value(std::forward<V>(v)); });
  }
  /// Inserts {k, Value()} unless k is present. Strong guarantee.
  template <class K>
  std::pair<iterator, bool> try_emplace(K&& k) {
    static_assert(std::is_same_v<std::remove_cvref_t<K>, Key>, "flat_index::try_emplace takes a key");
    return emplace_with(std::forward<K>(k), [] { return Value(); });
  }

  /// Removes the element. Other iterators stay valid (nothing moves).
  void erase(const_iterator it) noexcept {
    const std::size_t i = it.slot();
    slots_[i].~value_type();
    --size_;
    // A group that has an empty byte stops every probe, so no key was
    // placed past it (a group once full keeps no empty byte until a
    // rehash: its erased slots are marked deleted): the slot can become
    // empty. Otherwise a probe may have to go on past it: marked deleted.
    const std::size_t g = i / group_width;
    if (match_empty(load_group(ctrl_ + g * group_width)) != 0) {
      ctrl_[i] = empty_ctrl;
      ++growth_left_;
    } else {
      ctrl_[i] = deleted_ctrl;
    }
  }
  void erase(iterator it) noexcept { erase(const_iterator(it)); }

  /// Afterwards, up to n elements in all can be held without rehashing.
  /// Strong guarantee.
  void reserve(std::size_t n) {
    if (n <= size_ + growth_left_) return;
    rehash_to(std::max(capacity_for(n), capacity_));
  }

 private:
  struct table {
    void* block;
    ctrl_t* ctrl;
    value_type* slots;
  };

  static bool is_full(ctrl_t c) noexcept { return (c & 0x80) == 0; }
  static std::size_t max_load(std::size_t cap) noexcept { return cap - cap / 8; }
  static std::size_t capacity_for(std::size_t n) {
    std::size_t cap = group_width;
    while (max_load(cap) < n) {
      if (cap > (std::size_t{1} << (sizeof(std::size_t) * 8 - 2)) / sizeof(value_type)) {
        throw std::bad_alloc();
      }
      cap *= 2;
    }
    return cap;
  }
  static std::size_t slots_offset(std::size_t cap) noexcept {
    return (cap + slot_align - 1) / slot_align * slot_align;
  }

  static table allocate(std::size_t cap) {
    const std::size_t bytes = slots_offset(cap) + cap * sizeof(value_type);
    void* b = ::operator new(bytes, std::align_val_t{slot_align});
    auto* c = static_cast<ctrl_t*>(b);
    std::memset(c, empty_ctrl, cap);
    return {b, c, reinterpret_cast<value_type*>(static_cast<char*>(b) + slots_offset(cap))};
  }
  static void deallocate(const table& t) noexcept {
    ::operator delete(t.block, std::align_val_t{slot_align});
  }
  std::size_t group_of(std::size_t h) const noexcept { return (h >> 7) & group_mask_; }

  template <class K>
  std::size_t find_index(const K& k, std::size_t h) const {
    const std::uint8_t h2 = h2_of(h);
    std::size_t g = group_of(h);
    for (std::size_t step = 1;; ++step) {
      const group_t w = load_group(ctrl_ + g * group_width);
      for (mask_t m = match(w, h2); m != 0; m &= m - 1) {
        const std::size_t i = g * group_width + lane(m);
        if (eq_(slots_[i].first, k)) return i;
      }
      if (match_empty(w) != 0) return capacity_;
      g = (g + step) & group_mask_;
    }
  }

  /// Inserts {k, make()} unless k is present; the entry is built in its
  /// slot (no temporary).
  template <class K, class Make>
  std::pair<iterator, bool> emplace_with(K&& k, Make&& make) {
    const std::size_t h = hash_(k);
    if (const std::size_t i = find_index(k, h); i != capacity_) return {{this, i}, false};
    const std::size_t i = free_slot(h);  // may grow; nothing changed if it throws
    ::new (static_cast<void*>(slots_ + i)) value_type{Key(std::forward<K>(k)), make()};
    // Taken only once the element is built: if building it threw, the slot
    // is still free.
    if (ctrl_[i] == empty_ctrl) --growth_left_;
    ctrl_[i] = h2_of(h);
    ++size_;
    return {{this, i}, true};
  }

  /// A free slot (empty or deleted) for a key known absent, in its probe
  /// sequence; grows first when no empty slot may be taken.
  std::size_t free_slot(std::size_t h) {
    if (growth_left_ == 0) {
      // Mostly deleted slots: rehash at the same size; else double.
      const std::size_t want = size_ + 1 <= max_load(capacity_) / 2 ? capacity_ : 2 * capacity_;
      rehash_to(std::max(capacity_for(size_ + 1), want));
    }
    std::size_t g = group_of(h);
    for (std::size_t step = 1;; ++step) {
      const mask_t m = match_free(load_group(ctrl_ + g * group_width));
      if (m != 0) return g * group_width + lane(m);
      g = (g + step) & group_mask_;
    }
  }

  /// Moves every element into a new array of `cap` slots. Allocates first,
  /// and copies elements whose move may throw (std::move_if_noexcept): if
  /// anything throws, nothing changed.
  void rehash_to(std::size_t cap) {
    table t = allocate(cap);
    const std::size_t mask = cap / group_width - 1;
    try {
      for (std::size_t i = 0; i < capacity_; ++i) {
        if (!is_full(ctrl_[i])) continue;
        const std::size_t h = hash_(slots_[i].first);
        std::size_t g = (h >> 7) & mask;
        for (std::size_t step = 1;; ++step) {
          const mask_t m = match_free(load_group(t.ctrl + g * group_width));
          if (m != 0) {
            const std::size_t j = g * group_width + lane(m);
            ::new (static_cast<void*>(t.slots + j)) value_type(std::move_if_noexcept(slots_[i]));
            t.ctrl[j] = h2_of(h);
            break;
          }
          g = (g + step) & mask;
        }
      }
    } catch (...) {
      for (std::size_t j = 0; j < cap; ++j) {
        if (is_full(t.ctrl[j])) t.slots[j].~value_type();
      }
      deallocate(t);
      throw;
    }
    if constexpr (!std::is_trivially_destructible_v<value_type>) {
      for (std::size_t i = 0; i < capacity_; ++i) {
        if (is_full(ctrl_[i])) slots_[i].~value_type();
      }
    }
    if (block_ != nullptr) deallocate({block_, ctrl_, slots_});
    adopt(t, cap, size_, max_load(cap) - size_);
    ++generation_;
  }

  std::size_t next_occupied(std::size_t i) const noexcept {
    while (i < capacity_ && !is_full(ctrl_[i])) ++i;
    return i;
  }

  void release() noexcept {
    if (block_ == nullptr) return;
    if constexpr (!std::is_trivially_destructible_v<value_type>) {
      for (std::size_t i = 0; i < capacity_; ++i) {
        if (is_full(ctrl_[i])) slots_[i].~value_type();
      }
    }
    deallocate({block_, ctrl_, slots_});
    reset();
  }
  void reset() noexcept {
    block_ = nullptr;
    ctrl_ = const_cast<ctrl_t*>(empty_group);
    slots_ = nullptr;
    capacity_ = 0;
    group_mask_ = 0;
    size_ = 0;
    growth_left_ = 0;
  }
  /// Takes `t`, an array of `cap` slots (cap > 0) holding `size` elements.
  void adopt(const table& t, std::size_t cap, std::size_t size, std::size_t growth_left) noexcept {
    block_ = t.block;
    ctrl_ = t.ctrl;
    slots_ = t.slots;
    capacity_ = cap;
    group_mask_ = cap / group_width - 1;
    size_ = size;
    growth_left_ = growth_left;
  }
  void steal(flat_index& o) noexcept {
    if (o.block_ == nullptr) {
      reset();
      return;
    }
    adopt({o.block_, o.ctrl_, o.slots_}, o.capacity_, o.size_, o.growth_left_);
    generation_ = o.generation_;
    o.reset();
  }

  [[no_unique_address]] Hash hash_;
  [[no_unique_address]] Eq eq_;
  void* block_ = nullptr;
  // The empty map reads the shared empty group and never writes it (an
  // insert grows first).
  ctrl_t* ctrl_ = const_cast<ctrl_t*>(empty_group);
  value_type* slots_ = nullptr;
  std::size_t capacity_ = 0;
  std::size_t group_mask_ = 0;
  std::size_t size_ = 0;
  std::size_t growth_left_ = 0;
  std::uint64_t generation_ = 0;
};

}  // namespace flowlib::detail
