// flowlib/detail/batch_grouping.hpp
//
// Keyed batch grouping: a batch's rows grouped by key, in per-flow scratch
// kept across batches (ReplaceUsing's keyed_batch_scratch). Internal.
//
// Scratch memory policy, for every flow's per-batch grouping (REPLACE USING
// here, AUTO CDC's flows/cdc/detail/batch.hpp):
//
//   1. Nothing is allocated per row in steady state, and at most a constant
//      number of times per batch. Row slots (and the buffers of their
//      strings), candidate, chain and group arrays are kept between batches
//      at their high-water mark, reused by assignment, and only freed with
//      the flow.
//   2. The key index is emptied at the start of every batch and sized for
//      the keys the batch is expected to carry, not for its rows nor for the
//      largest batch seen: expected_groups(rows, last_groups) below (the
//      batch's rows when no earlier batch tells better, else the last
//      batch's keys plus a quarter plus 16, capped by the rows). Batches of
//      a stream tend to carry as many distinct keys as the previous one, and
//      an index sized for many more keys than it holds spreads them over
//      many cache lines. A batch with more keys grows it (amortised rehash).
//   3. The index's array is kept when the container can be emptied in place
//      (a fill of its control words); an array larger than the expected
//      keys need is then used only for its first part, which alone is
//      emptied. A container that frees its array when emptied (absl's
//      flat_hash_set/map clear() frees arrays above 127 slots, and this
//      absl offers no in-place emptying of a large table) is reserved again
//      for the expected keys right after clear(): one allocation per batch,
//      never a regrowth through every rehash.
//
// ReplaceUsing follows all three (its index is an absl set, rule 3's second
// case), in its one scratch and in each shard's scratch of a batch spread
// over threads (one keyed_batch_scratch per shard, each grouping the keys
// whose hash falls in its shard; `group::first` puts the shards' groups
// back in the order of one scratch). AUTO CDC's cdc_batch follows all three too (its own open-addressing
// index, sized with expected_groups(), kept and emptied by prefix).
#pragma once

#include <flowlib/columns.hpp>
#include <flowlib/detail/batch.hpp>
#include <flowlib/detail/prefetch.hpp>
#include <flowlib/detail/type_traits.hpp>

#include <absl/container/flat_hash_set.h>

#include <cstddef>
#include <cstdint>
#include <ranges>
#include <type_traits>
#include <utility>
#include <vector>

namespace flowlib {

namespace detail {

/// The keys a batch is expected to carry (rule 2 of the policy above):
/// `rows` is the batch's size hint (0: unknown), `last_groups` the previous
/// batch's distinct keys (0: none). 0 when nothing is known.
constexpr std::size_t expected_groups(std::size_t rows, std::size_t last_groups) noexcept {
  std::size_t expected = rows;
  if (last_groups != 0) {
    const std::size_t guess = last_groups + last_groups / 4 + 16;
    if (expected == 0 || guess < expected) expected = guess;
  }
  return expected;
}

/// Puts `v` at position i of an array kept across batches (rule 1 of the
/// policy above): assigned over the slot an earlier batch left there, or
/// appended (i is at most the size). Copied, or moved when `Move`.
template <bool Move = false, class Vec, class In>
void put_slot(Vec& vec, std::size_t i, In&& v) {
  if (i < vec.size()) {
    if constexpr (Move) {
      vec[i] = std::move(v);
    } else {
      vec[i] = v;
    }
  } else {
    if constexpr (Move) {
      vec.push_back(std::move(v));
    } else {
      vec.push_back(v);
    }
  }
}

/// A row with its precomputed key hash, used for heterogeneous lookups.
template <class Row>
struct row_probe {
  const Row* row;
  std::size_t hash;
};

/// Whether the elements of R stay where they are for a whole apply() call,
/// so that a flow may point at them instead of copying them: R is a forward
/// range (multi-pass, so no element lives inside an iterator) of lvalues.
template <class R>
inline constexpr bool stable_elements = [] {
  if constexpr (std::ranges::input_range<R>) {  // range-v3 only when std does not apply
    return std::ranges::forward_range<R> && std::is_lvalue_reference_v<batch_reference_t<R>>;
  } else {
    return ranges::forward_range<R> && std::is_lvalue_reference_v<batch_reference_t<R>>;
  }
}();

/// Per-batch scratch of a keyed flow: the batch's candidate rows grouped by
/// key. Heap-allocated once per flow so that the hash functors may point
/// into it and the flow stays movable.
///
/// If staging throws, the scratch may be left half-built (an index slot
/// without its group); nothing reads it before reset() at the next batch.
///
/// Candidates are pointers to rows that stay put while the batch is staged:
/// the caller's rows when the batch is a container or another stable range
/// (nothing is copied for a row that a later row of its key supersedes), or
/// rows owned here (`rows`) for a single-pass or moved-from batch. Before the
/// commit, every candidate is an owned row (keep_candidates), so that the
/// commit only moves.
template <class K, class SeqValue>
struct keyed_batch_scratch {
  using Row = typename K::row_type;
  using key_type = typename K::value_type;
  using traits = key_traits<K>;
  using probe = row_probe<Row>;

  struct group {
    SeqValue seq;         // the batch's maximum sequence for this key so far
    std::size_t hash;     // the key's hash
    std::uint32_t head;   // first candidate (index into cand and next)
    std::uint32_t tail;   // last candidate
    std::uint32_t count;  // candidates in the chain
    std::uint32_t first;  // batch position of the key's first row (orders a sharded batch's groups)
  };

  // The index maps a key to its group. Small trivially copyable keys
  // (integers, small structs of them) are kept in the slot, so that a lookup
  // reads one slot and no row; other keys (strings, ...) would cost an
  // allocation per new key if copied, so their slot points at a row of the
  // group, which stays put while the batch is staged.
  static constexpr bool inline_key =
      std::is_trivially_copyable_v<key_type> && sizeof(key_type) <= 16;
  struct slot {
    std::conditional_t<inline_key, key_type, const Row*> key;
    std::uint32_t group;
  };
  struct hasher {
    using is_transparent = void;
    const K* k;
    std::size_t operator()(const slot& s) const {
      if constexpr (inline_key) {
        return traits::hash(*k, s.key);
      } else {
        return traits::hash(*k, *s.key);
      }
    }
    std::size_t operator()(const probe& p) const noexcept { return p.hash; }
  };
  struct equal {
    using is_transparent = void;
    const K* k;
    bool operator()(const slot& a, const slot& b) const noexcept { return a.group == b.group; }
    bool operator()(const slot& a, const probe& p) const {
      if constexpr (inline_key) {
        return traits::equal(*k, *p.row, a.key);
      } else {
        return traits::equal(*k, *p.row, *a.key);
      }
    }
    bool operator()(const probe& p, const slot& a) const { return (*this)(a, p); }
  };

  explicit keyed_batch_scratch(const K& k)
      : key(k), index(0, hasher{&key}, equal{&key}) {}
  keyed_batch_scratch(const keyed_batch_scratch&) = delete;
  keyed_batch_scratch& operator=(const keyed_batch_scratch&) = delete;

  /// Forgets the previous batch, keeping the owned rows (and their buffers).
  void reset(std::size_t expected_rows) {
    const std::size_t last_groups = groups.size();
    owned = 0;
    used = 0;
    candidates = 0;
    groups.clear();
    // absl's clear() frees arrays above 127 slots: reserve again for the
    // keys this batch is expected to carry (see the policy above).
    index.clear();
    const std::size_t groups_expected = expected_groups(expected_rows, last_groups);
    if (groups_expected != 0) index.reserve(groups_expected);
    if (expected_rows != 0) {
      groups.reserve(expected_rows);
      if (cand.size() < expected_rows) {
        cand.resize(expected_rows);
        next.resize(expected_rows);
      }
    }
  }

  /// Stores a row of a batch whose elements do not stay put (copied, or
  /// moved when `Move`) in the next owned slot.
  template <bool Move, class In>
  void own(In&& in) {
    put_slot<Move>(rows, owned, in);
    ++owned;
  }

  std::uint32_t add_candidate(const Row* r) {
    if (used < cand.size()) {
      cand[used] = r;
      next[used] = npos;
    } else {
      cand.push_back(r);
      next.push_back(npos);
    }
    return static_cast<std::uint32_t>(used++);
  }

  /// Ends the grouping: counts the candidates that survived.
  void count_candidates() noexcept {
    candidates = 0;
    for (const group& g : groups) candidates += g.count;
  }

  /// Copies the candidates that point into the caller's batch into owned
  /// slots, in group order (the order the commit reads them in).
  void keep_candidates() {
    rows.reserve(candidates);  // no reallocation below: the pointers stay valid
    // The surviving rows lie anywhere in the batch, which no longer sits in
    // the caches of a large batch: prefetch them (and, further ahead, their
    // candidate entries) a few groups ahead.
    constexpr std::size_t row_ahead = 8;
    constexpr std::size_t cand_ahead = 2 * row_ahead;
    const std::size_t n = groups.size();
    std::size_t j = 0;
    for (std::size_t gi = 0; gi < n; ++gi) {
      if (gi + cand_ahead < n) prefetch(&cand[groups[gi + cand_ahead].head]);
      if (gi + row_ahead < n) {
        prefetch_object(cand[groups[gi + row_ahead].head]);
      }
      const group& g = groups[gi];
      for (std::uint32_t c = g.head; c != npos; c = next[c], ++j) {
        put_slot(rows, j, *cand[c]);
        cand[c] = &rows[j];
      }
    }
  }

  /// Whether the index is too large to stay in a core's caches (its slots
  /// exceed 256 KiB, half an L2 of today's server cores): staging then
  /// prefetches its probes.
  bool index_is_large() const noexcept {
    return index.capacity() * sizeof(slot) > (std::size_t{256} << 10);
  }

  /// Candidate `c` for the commit to move from: after staging, every
  /// candidate points at an owned (non-const) row.
  Row& row(std::uint32_t c) noexcept { return const_cast<Row&>(*cand[c]); }
  const Row& row(std::uint32_t c) const noexcept { return *cand[c]; }

  K key;
  std::vector<Row> rows;            // owned rows; [0, owned) or [0, candidates) in use
  std::size_t owned = 0;
  std::vector<const Row*> cand;     // candidates; [0, used) belong to this batch
  std::vector<std::uint32_t> next;  // chain of candidates within a group
  std::size_t used = 0;
  std::size_t candidates = 0;       // candidates chained in some group (count_candidates)
  std::vector<group> groups;        // in order of first appearance
  absl::flat_hash_set<slot, hasher, equal> index;
};

}  // namespace detail

}  // namespace flowlib
