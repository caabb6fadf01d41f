// flowlib/detail/cdc_batch.hpp
//
// The per-batch scratch of the change-feed flows: the batch's rows grouped by
// key (a chain of row indices per key, in source order), with one hash per
// row reused for the probe of the flow's own index. Kept by the flow across
// batches, so that row slots (and the buffers of their strings) are reused
// and steady state does not allocate per row. A batch whose rows stay put
// while it is applied (a forward range of lvalues) can be staged by
// reference instead (reset(n, true), add_ref): no row is copied. Internal.
#pragma once

#include <flowlib/columns.hpp>

#include <absl/container/flat_hash_set.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

namespace flowlib::detail {

/// "No index" for 32-bit row and slot indices.
inline constexpr std::uint32_t cdc_npos = std::numeric_limits<std::uint32_t>::max();

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
    std::uint32_t tail;   // last row
    std::uint32_t count;  // rows in the chain
  };

  // The index holds group numbers; a group is compared through its first row.
  struct hasher {
    using is_transparent = void;
    const cdc_batch* b;
    std::size_t operator()(std::uint32_t g) const noexcept { return b->groups[g].hash; }
    std::size_t operator()(const probe& p) const noexcept { return p.hash; }
  };
  struct equal {
    using is_transparent = void;
    const cdc_batch* b;
    bool operator()(std::uint32_t x, std::uint32_t y) const noexcept { return x == y; }
    bool operator()(std::uint32_t g, const probe& p) const {
      return key_traits<K>::equal(b->key, *p.row, b->row(b->groups[g].head));
    }
    bool operator()(const probe& p, std::uint32_t g) const { return (*this)(g, p); }
  };

  explicit cdc_batch(const K& k) : key(k), index(0, hasher{this}, equal{this}) {}
  cdc_batch(const cdc_batch&) = delete;
  cdc_batch& operator=(const cdc_batch&) = delete;

  /// Forgets the previous batch, keeping the row slots. With `refer`, the
  /// batch's rows are staged by add_ref (they must outlive the batch's use).
  void reset(std::size_t expected_rows, bool refer = false) {
    used = 0;
    by_ref = refer;
    groups.clear();
    index.clear();  // frees large arrays: reserve again for this batch
    if (expected_rows != 0) {
      index.reserve(expected_rows);
      groups.reserve(expected_rows);
    }
  }

  /// Stores `r` (copied, or moved when `Move`) in a free slot and chains it
  /// to its key's group (`p` is its probe, computed before the move).
  template <bool Move, class R>
  std::uint32_t add(R&& r, const probe& p) {
    auto it = index.find(p);
    const auto i = static_cast<std::uint32_t>(used);
    if (used < rows.size()) {
      if constexpr (Move) {
        rows[used] = std::move(r);
      } else {
        rows[used] = r;
      }
      next[used] = cdc_npos;
    } else {
      if constexpr (Move) {
        rows.push_back(std::move(r));
      } else {
        rows.push_back(r);
      }
      next.push_back(cdc_npos);
    }
    ++used;
    link(it, p, i);
    return i;
  }

  /// Chains the row `r` (not copied: it must outlive the batch's use) to
  /// its key's group; only after reset(n, true).
  std::uint32_t add_ref(const Row& r, const probe& p) {
    auto it = index.find(p);
    const auto i = static_cast<std::uint32_t>(used);
    if (used < refs.size()) {
      refs[used] = &r;
      next[used] = cdc_npos;
    } else {
      refs.push_back(&r);
      next.push_back(cdc_npos);
    }
    ++used;
    link(it, p, i);
    return i;
  }

  /// Row i of the batch (a slot, or the caller's row when staged by reference).
  const Row& row(std::uint32_t i) const noexcept { return by_ref ? *refs[i] : rows[i]; }

  /// Whether a row with p's key is already in the batch.
  bool contains(const probe& p) const { return index.find(p) != index.end(); }

  template <class It>
  void link(It it, const probe& p, std::uint32_t i) {
    if (it == index.end()) {
      const auto g = static_cast<std::uint32_t>(groups.size());
      groups.push_back({p.hash, i, i, 1});
      index.insert(g);
    } else {
      group& grp = groups[*it];
      next[grp.tail] = i;
      grp.tail = i;
      ++grp.count;
    }
  }

  K key;
  std::vector<Row> rows;            // [0, used) belong to this batch (unless by_ref)
  std::vector<const Row*> refs;     // [0, used): the batch's rows, when by_ref
  bool by_ref = false;
  std::vector<std::uint32_t> next;  // chain of a group's rows
  std::size_t used = 0;
  std::vector<group> groups;        // in order of first appearance
  absl::flat_hash_set<std::uint32_t, hasher, equal> index;
};

}  // namespace flowlib::detail
