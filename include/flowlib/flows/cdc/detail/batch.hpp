// flowlib/flows/cdc/detail/batch.hpp
//
// The per-batch scratch of the change-feed flows: the batch's rows grouped by
// key (each key's row indices, contiguous and in source order, once
// group_rows() has run), with one hash per row reused for the probe of the
// flow's own index. Kept by the flow across
// batches, so that row slots (and the buffers of their strings) are reused
// and steady state does not allocate per row. A batch whose rows stay put
// while it is applied (a forward range of lvalues) can be staged by
// reference instead (reset(n, true), add_ref): no row is copied.
//
// It follows the scratch memory policy of every flow's batch grouping (the
// top of detail/batch_grouping.hpp): row slots, reference, group and member
// arrays are kept at their high-water mark and reused (rule 1); the index is
// sized for expected_groups(rows, last batch's keys), not for the rows
// (rule 2), and its array is kept and emptied by prefix (rule 3: a vector,
// which clear() does not free). Its code is its own, not keyed_batch_scratch:
// AUTO CDC keeps every change of a key (grouped by a counting pass, not
// chained), and its probe reads no row for small keys. Internal.
#pragma once

#include <flowlib/columns.hpp>
#include <flowlib/detail/batch_grouping.hpp>
#include <flowlib/detail/prefetch.hpp>
#include <flowlib/detail/type_traits.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>
#include <vector>

namespace flowlib::detail {

/// A row with its precomputed key hash, for heterogeneous index lookups.
template <class Row>
struct cdc_probe {
  const Row* row;
  std::size_t hash;
};

template <key_extractor K>
struct cdc_batch {
  using Row = typename K::row_type;
  using probe = cdc_probe<Row>;

  struct group {
    std::size_t hash;     // the key's hash
    std::uint32_t head;   // first row (index into rows), in source order
    std::uint32_t count;  // rows of the group
    std::uint32_t first;  // its rows are members[first, first + count) (after group_rows)
  };

  // The index: open addressing with linear probing over a power-of-two
  // array of {hash tag, group number} slots (8 bytes), at most half full. It
  // is flowlib's own rather than an absl set because it is rebuilt for every
  // batch: clearing it is one fill of the kept array (absl's clear() frees
  // large arrays, so every batch would allocate them again), and a probe
  // compares the stored hash tag before it touches a group's row.
  //
  // A small, trivially copyable key (an integer, say) is kept in the slot
  // itself instead of the hash tag: a probe then never reads a batch row,
  // which for a large batch is a cache miss.
  using key_type = typename K::value_type;
  static constexpr bool key_in_slot = std::is_trivially_copyable_v<key_type> &&
                                      std::is_default_constructible_v<key_type> &&
                                      sizeof(key_type) <= 16;
  struct tagged_slot {
    std::uint32_t tag;    // the key hash's upper half (any value)
    std::uint32_t group;  // npos: empty
  };
  struct keyed_slot {
    key_type key;
    std::uint32_t group;  // npos: empty
  };
  using slot = std::conditional_t<key_in_slot, keyed_slot, tagged_slot>;
  static slot empty_slot() noexcept {
    if constexpr (key_in_slot) {
      return slot{key_type{}, npos};
    } else {
      return slot{0, npos};
    }
  }

  explicit cdc_batch(const K& k) : key(k) {}
  cdc_batch(const cdc_batch&) = delete;
  cdc_batch& operator=(const cdc_batch&) = delete;

  /// Forgets the previous batch, keeping the row slots and the index array.
  /// With `refer`, the batch's rows are staged by add_ref (they must outlive
  /// the batch's use).
  void reset(std::size_t expected_rows, bool refer = false) {
    const std::size_t last_groups = groups.size();  // the previous batch's keys
    used = 0;
    by_ref = refer;
    groups.clear();
    if (expected_rows != 0) groups.reserve(expected_rows);
    // Sized for the keys the batch is expected to carry (at most half full);
    // a batch with more keys grows it (grow_if_full).
    const std::size_t expected = expected_groups(expected_rows, last_groups);
    std::size_t cap = 16;
    while (cap < 2 * expected) cap *= 2;
    // A much larger array than this batch needs (left by a large batch) is
    // kept, but only its first `cap` slots are used and cleared.
    if (slots.size() < cap) {
      slots.assign(cap, empty_slot());
    } else {
      std::fill_n(slots.begin(), cap, empty_slot());
    }
    mask = cap - 1;
  }

  /// The slot of p's key: its group's, or the empty one where it would go.
  slot& find_slot(const probe& p) {
    const auto tag = static_cast<std::uint32_t>(std::uint64_t{p.hash} >> 32);
    for (std::size_t i = p.hash & mask;; i = (i + 1) & mask) {
      slot& s = slots[i];
      if (s.group == npos) return s;
      if constexpr (key_in_slot) {
        if (key_traits<K>::equal(key, *p.row, s.key)) return s;
      } else {
        if (s.tag == tag && key_traits<K>::equal(key, *p.row, row(groups[s.group].head))) return s;
      }
    }
  }
  /// Hint that p's key is about to be looked up.
  void prefetch(const probe& p) const noexcept { detail::prefetch(&slots[p.hash & mask]); }
  const slot& find_slot(const probe& p) const {
    return const_cast<cdc_batch*>(this)->find_slot(p);
  }

  /// Stores `r` (copied, or moved when `Move`) in a free slot and adds it
  /// to its key's group (`p` is its probe, computed before the move).
  template <bool Move, class R>
  std::uint32_t add(R&& r, const probe& p) {
    grow_if_full();
    slot& it = find_slot(p);
    const auto i = static_cast<std::uint32_t>(used);
    put_slot<Move>(rows, used, r);
    ++used;
    link(it, p, i);
    return i;
  }

  /// Adds the row `r` (not copied: it must outlive the batch's use) to its
  /// key's group; only after reset(n, true).
  std::uint32_t add_ref(const Row& r, const probe& p) {
    grow_if_full();
    slot& it = find_slot(p);
    const auto i = static_cast<std::uint32_t>(used);
    put_slot(refs, used, &r);
    ++used;
    link(it, p, i);
    return i;
  }

  /// Row i of the batch (a slot, or the caller's row when staged by reference).
  const Row& row(std::uint32_t i) const noexcept { return by_ref ? *refs[i] : rows[i]; }

  /// Whether a row with p's key is already in the batch.
  bool contains(const probe& p) const { return find_slot(p).group != npos; }

  /// Adds row i to the group of slot s (a new group when s is empty).
  void link(slot& s, const probe& p, std::uint32_t i) {
    std::uint32_t g = s.group;
    if (g == npos) {
      g = static_cast<std::uint32_t>(groups.size());
      groups.push_back({p.hash, i, 1, 0});
      s = make_slot(g, p.hash, row(i));  // the stored row: p's may have been moved from
    } else {
      ++groups[g].count;
    }
    put_slot(group_of, i, g);
  }

  /// Lays out the rows of every group contiguously in `members` (in source
  /// order within a group) and sets each group's `first`: one sequential
  /// pass, so that a group's rows are then read without chasing a chain of
  /// indices scattered over the batch. Call once the batch is staged.
  void group_rows() {
    members.resize(used);
    std::uint32_t off = 0;
    for (group& g : groups) {
      g.first = off;
      off += g.count;
    }
    for (std::size_t i = 0; i < used; ++i) {
      members[groups[group_of[i]].first++] = static_cast<std::uint32_t>(i);
    }
    for (group& g : groups) g.first -= g.count;
  }

  K key;
  std::vector<Row> rows;            // [0, used) belong to this batch (unless by_ref)
  std::vector<const Row*> refs;     // [0, used): the batch's rows, when by_ref
  bool by_ref = false;
  std::vector<std::uint32_t> group_of;  // [0, used): each row's group
  std::vector<std::uint32_t> members;   // the rows, group by group (group_rows)
  std::size_t used = 0;
  std::vector<group> groups;        // in order of first appearance
  std::vector<slot> slots;          // the index; [0, mask] in use
  std::size_t mask = 0;

 private:
  slot make_slot(std::uint32_t g, std::size_t hash, const Row& r) const {
    if constexpr (key_in_slot) {
      return slot{key(r), g};
    } else {
      return slot{static_cast<std::uint32_t>(std::uint64_t{hash} >> 32), g};
    }
  }
  // Keeps the index at most half full (a batch without a size hint, or
  // larger than its hint, grows it here, before anything is added).
  void grow_if_full() {
    if (2 * (groups.size() + 1) <= mask + 1) return;
    const std::size_t cap = 2 * (mask + 1);
    std::vector<slot> bigger(std::max(cap, slots.size()), empty_slot());
    for (std::size_t g = 0; g < groups.size(); ++g) {
      for (std::size_t i = groups[g].hash & (cap - 1);; i = (i + 1) & (cap - 1)) {
        if (bigger[i].group == npos) {
          bigger[i] = make_slot(static_cast<std::uint32_t>(g), groups[g].hash, row(groups[g].head));
          break;
        }
      }
    }
    slots.swap(bigger);
    mask = cap - 1;
  }
};
}  // namespace flowlib::detail
