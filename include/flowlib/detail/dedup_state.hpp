// flowlib/detail/dedup_state.hpp
//
// The state of DedupWithinWatermark (ops/dedup_within_watermark.hpp): the
// identities it remembers, each with its expiry, and the structures that
// find and expire them. Internal.
//
//   slab      {key, expires_at} entries; evicted positions are listed in
//             `free` and reused
//   index     an absl::flat_hash_set of 32-bit slab positions, probed with a
//             row and its precomputed hash (row_probe: no key is built for a
//             duplicate), a key (key_probe) or a known position (slot_probe)
//   buckets   the expiry queue: slab positions filed by
//             floor(expires_at / granule), granule = delay/32, in a std::map;
//             eviction visits only the buckets the watermark passed, plus
//             the one it stands in (evict), and recycles emptied vectors
//   added     the current batch's new identities: the undo log rollback()
//             replays if the batch throws
//
// The operator fills the state row by row (DedupWithinWatermark::accept);
// what this header adds are the parts that do not touch rows: filing,
// lookup, eviction (R-DEDUP-4), the undo of a failed batch, and accounting.
// The checkpoint encoding of the state is detail/dedup_checkpoint.hpp.
#pragma once

#include <flowlib/columns.hpp>
#include <flowlib/detail/key_hash.hpp>
#include <flowlib/detail/prefetch.hpp>

#include <absl/container/flat_hash_set.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace flowlib::detail {

/// Copies the key of `r` into `out`, reusing `out`'s buffers (a string key
/// column is copy-assigned, so a recycled slot allocates nothing).
template <class K>
struct key_assign {
  static void assign(const K& k, const typename K::row_type& r, typename K::value_type& out) {
    out = k(r);
  }
};
template <auto... Ms>
struct key_assign<Key<Ms...>> {
  using K = Key<Ms...>;
  static void assign(const K&, const typename K::row_type& r, typename K::value_type& out) {
    if constexpr (sizeof...(Ms) == 1) {
      out = r.*K::first_member;
    } else {
      out = std::tie(r.*Ms...);
    }
  }
};

/// Whether an event-time representation (a delay) is negative.
template <class Rep>
constexpr bool is_negative_rep(Rep v) noexcept {
  if constexpr (std::is_signed_v<Rep>) {
    return v < Rep{0};
  } else {
    return false;
  }
}

/// The identities of a DedupWithinWatermark<K, T> with their expiry, in the
/// event time's integer representation `Rep`. Heap-allocated by the operator
/// so that the index's functors may point into it and the operator stays
/// movable.
template <class K, class Rep>
struct dedup_state {
  using rep = Rep;
  using row_type = typename K::row_type;
  using key_type = typename K::value_type;
  using traits = key_traits<K>;

  struct entry {
    key_type key;
    rep expires;
  };
  struct added_entry {
    std::uint32_t slot;
    std::size_t hash;
  };
  struct row_probe {
    const row_type* row;
    std::size_t hash;
  };
  struct key_probe {
    const key_type* key;
    std::size_t hash;
  };
  struct slot_probe {  // a known slot (erasure): compared by position, never by key
    std::uint32_t slot;
    std::size_t hash;
  };

  struct hasher {
    using is_transparent = void;
    const dedup_state* s;
    std::size_t operator()(std::uint32_t slot) const {
      return key_hash<key_type>{}(s->slab[slot].key);
    }
    std::size_t operator()(const row_probe& p) const noexcept { return p.hash; }
    std::size_t operator()(const key_probe& p) const noexcept { return p.hash; }
    std::size_t operator()(const slot_probe& p) const noexcept { return p.hash; }
  };
  struct equal {
    using is_transparent = void;
    const dedup_state* s;
    bool operator()(std::uint32_t a, std::uint32_t b) const {
      return a == b || s->slab[a].key == s->slab[b].key;
    }
    bool operator()(std::uint32_t a, const row_probe& p) const {
      return traits::equal(s->key, *p.row, s->slab[a].key);
    }
    bool operator()(std::uint32_t a, const key_probe& p) const { return s->slab[a].key == *p.key; }
    bool operator()(std::uint32_t a, const slot_probe& p) const noexcept { return a == p.slot; }
    template <class P>
    bool operator()(const P& p, std::uint32_t a) const {
      return (*this)(a, p);
    }
  };
  using index_type = absl::flat_hash_set<std::uint32_t, hasher, equal>;

  // How many rows (or entries) ahead the batch loop and eviction prefetch
  // their index probes.
  static constexpr std::size_t prefetch_distance = 8;

  /// About 32 buckets per delay: eviction touches the buckets the watermark
  /// passed plus one partial bucket (about 1/32 of the state), and a state
  /// spanning (watermark, max event + delay] has about 64 buckets.
  static rep granule_for(rep delay) noexcept {
    return std::max<rep>(rep{1}, static_cast<rep>(delay / 32));
  }

  dedup_state(const K& k, rep delay)
      : key(k), granule(granule_for(delay)), index(0, hasher{this}, equal{this}) {}
  dedup_state(const dedup_state&) = delete;
  dedup_state& operator=(const dedup_state&) = delete;

  K key;
  rep granule = 1;                 // bucket width in event-time ticks
  std::vector<entry> slab;         // identities; free positions are listed in `free`
  std::vector<std::uint32_t> free; // reusable slab positions (evicted identities)
  index_type index;                // slab positions of live identities
  std::map<rep, std::vector<std::uint32_t>> buckets;  // floor(expires/granule) -> positions
  std::vector<std::vector<std::uint32_t>> spares;     // emptied bucket vectors, for reuse
  std::vector<added_entry> added;  // this batch's new identities (the undo log)
  // The bucket the last identity was filed into (most arrive in order).
  rep cached_id{};
  std::vector<std::uint32_t>* cached = nullptr;

  rep bucket_id(rep expires) const noexcept {
    rep q = static_cast<rep>(expires / granule);
    if constexpr (std::is_signed_v<rep>) {
      if (expires % granule != 0 && expires < rep{0}) --q;  // floor division
    }
    return q;
  }
  /// The bucket of `expires`, created (from a spare vector) if needed. May throw.
  std::vector<std::uint32_t>& bucket_for(rep expires) {
    const rep id = bucket_id(expires);
    if (cached != nullptr && cached_id == id) return *cached;
    auto it = buckets.find(id);
    if (it == buckets.end()) {
      std::vector<std::uint32_t> v;
      if (!spares.empty()) v = std::move(spares.back());
      // If this throws, the spare's buffer is freed with v: nothing observable changes.
      it = buckets.emplace(id, std::move(v)).first;
      if (!spares.empty() && spares.back().capacity() == 0) spares.pop_back();
    }
    cached_id = id;
    cached = &it->second;
    return it->second;
  }

  // --- Lookup and accounting ------------------------------------------------------

  /// The entry of identity `k`, or nullptr.
  const entry* find(const key_type& k) const {
    auto it = index.find(key_probe{&k, key_hash<key_type>{}(k)});
    if (it == index.end()) return nullptr;
    return &slab[*it];
  }

  /// The identities, sorted.
  std::vector<key_type> sorted_keys() const {
    std::vector<key_type> out;
    out.reserve(index.size());
    for (const auto& [id, slots] : buckets)
      for (std::uint32_t s : slots) out.push_back(slab[s].key);
    std::sort(out.begin(), out.end());
    return out;
  }

  /// Bytes the containers occupy (capacities, not sizes; the heap buffers of
  /// long string keys are not included).
  std::size_t memory_bytes() const noexcept {
    std::size_t b = slab.capacity() * sizeof(entry) + free.capacity() * sizeof(std::uint32_t);
    // absl's flat_hash_set: one slot and one control byte per capacity, plus
    // a group of cloned control bytes.
    b += index.capacity() * (sizeof(std::uint32_t) + 1) + 16;
    for (const auto& [id, v] : buckets) b += v.capacity() * sizeof(std::uint32_t) + 64;
    for (const auto& v : spares) b += v.capacity() * sizeof(std::uint32_t) + sizeof(v);
    b += added.capacity() * sizeof(added_entry);
    return b;
  }

  // --- A batch's end: undo or eviction --------------------------------------------

  /// Undoes a batch that threw, in reverse: the first `filed` bucket filings
  /// of the undo log, its index insertions, and the slab's growth past
  /// `slab_before`.
  void rollback(std::size_t filed, std::size_t slab_before) {
    while (filed > 0) {
      --filed;
      const added_entry& a = added[filed];
      auto it = buckets.find(bucket_id(slab[a.slot].expires));
      it->second.pop_back();
    }
    for (const added_entry& a : added) index.erase(slot_probe{a.slot, a.hash});
    added.clear();
    slab.erase(slab.begin() + static_cast<std::ptrdiff_t>(slab_before), slab.end());
  }

  /// Makes evict(wm) infallible: room for every position it may free (with
  /// `free_used` free positions about to be taken) and for every bucket
  /// vector it may retire. May throw.
  void reserve_eviction(rep wm, std::size_t free_used) {
    const rep bw = bucket_id(wm);
    std::size_t slots = 0;
    std::size_t vectors = 0;
    for (auto it = buckets.begin(); it != buckets.end() && it->first <= bw; ++it) {
      slots += it->second.size();
      ++vectors;
    }
    const std::size_t free_left = free.size() - free_used;
    if (free.capacity() < free_left + slots) free.reserve(free_left + slots);
    if (spares.capacity() < spares.size() + vectors) spares.reserve(spares.size() + vectors);
  }

  /// Evicts every identity with expires <= wm (R-DEDUP-4); returns how many.
  /// Capacity for the freed positions and retired vectors was reserved
  /// (reserve_eviction).
  ///
  /// Always inlined into the operator's batch function, its only caller: GCC
  /// otherwise keeps it out of line, and the batch loop then runs measurably
  /// slower with large state (bench_dedup, 1e6 identities within the delay).
  [[gnu::always_inline]] std::uint64_t evict(rep wm) noexcept {
    const rep bw = bucket_id(wm);
    std::uint64_t evicted = 0;
    auto drop = [&](std::uint32_t slot) {
      index.erase(slot_probe{slot, key_hash<key_type>{}(slab[slot].key)});
      free.push_back(slot);
      ++evicted;
    };
    for (auto it = buckets.begin(); it != buckets.end() && it->first <= bw;) {
      std::vector<std::uint32_t>& v = it->second;
      if (it->first < bw) {  // the whole bucket expired
        // Two-stage prefetch: slab entries 2d ahead, their index groups d ahead.
        const std::size_t n = v.size();
        constexpr std::size_t d = prefetch_distance;
        constexpr std::size_t ring = 16;
        static_assert(ring > d);
        std::size_t hashes[ring];
        const auto prime = [&](std::size_t j) {
          hashes[j % ring] = key_hash<key_type>{}(slab[v[j]].key);
          index.prefetch(slot_probe{v[j], hashes[j % ring]});
        };
        for (std::size_t j = 0; j < std::min(n, 2 * d); ++j) detail::prefetch(&slab[v[j]]);
        for (std::size_t j = 0; j < std::min(n, d); ++j) prime(j);
        for (std::size_t i = 0; i < n; ++i) {
          if (i + 2 * d < n) detail::prefetch(&slab[v[i + 2 * d]]);
          if (i + d < n) prime(i + d);
          index.erase(slot_probe{v[i], hashes[i % ring]});
          free.push_back(v[i]);
        }
        evicted += n;
      } else {  // the bucket the watermark stands in: keep the later entries
        std::size_t kept = 0;
        for (std::uint32_t slot : v) {
          if (slab[slot].expires <= wm) {
            drop(slot);
          } else {
            v[kept++] = slot;
          }
        }
        v.resize(kept);
        if (kept != 0) break;
      }
      v.clear();
      if (cached == &v) cached = nullptr;
      if (v.capacity() != 0) spares.push_back(std::move(v));  // reserved
      it = buckets.erase(it);
    }
    return evicted;
  }
};

}  // namespace flowlib::detail
