// flowlib/flows/cdc/detail/scd2_state.hpp
//
// AUTO CDC, SCD type 2: the state the engine keeps between batches (a
// member of cdc_flow::scd2_engine, engine.hpp), which both of its apply
// paths read and write: the key index, each key's versions and the changes its versions do
// not show (compact_history); the derivation of versions from changes
// (walk_*) both paths share; and what the planner is told about a one pass
// that ran before it. checkpoint.hpp persists it. Internal.
#pragma once

#include <flowlib/detail/flat_index.hpp>
#include <flowlib/detail/key_index.hpp>
#include <flowlib/flows/cdc/detail/flow.hpp>
#include <flowlib/flows/cdc/detail/staging.hpp>
#include <flowlib/flows/cdc/detail/target_scratch.hpp>
#include <flowlib/storage/row_store.hpp>

#include <absl/container/inlined_vector.h>

#include <algorithm>
#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <type_traits>
#include <utility>
#include <vector>

namespace flowlib::detail {

/// std::partition_point over [first, last) (pred holds on a prefix),
/// searched from the back: 1, 2, 4, ... elements back from `last` until one
/// where pred holds, then by bisection within that step. O(log d) probes, d
/// the answer's distance from the end: a late change usually falls among
/// its key's last versions, and each probe may be a cache miss.
template <std::random_access_iterator It, class Pred>
It partition_point_from_back(It first, It last, Pred pred) {
  It hi = last;  // pred fails on [hi, last)
  std::iter_difference_t<It> step = 1;
  while (hi != first) {
    const It probe = hi - std::min(step, hi - first);
    if (pred(*probe)) return std::partition_point(probe + 1, hi, pred);
    hi = probe;
    step *= 2;
  }
  return first;
}

// SCD2 keeps every change of a key, to re-derive its versions when a late
// change arrives. When every selected column is tracked and none ignores
// nulls (cdc_flow::scd2_compact_history), the versions themselves show most
// changes: each version was opened by an upsert at its __START_AT with its
// values, and one that ends where no version starts was closed by a delete
// at its __END_AT (an upsert that closes a version opens the next at its own
// sequence). The history then keeps only the other changes, those that
// opened or closed no version (an upsert with the open version's values, a
// delete with none open), each referring to the version holding its values
// (its index among the key's versions): 16 bytes for an int64 sequence, the
// first one inline (scd2_ref_event). Most keys keep none, so a change in
// order reads and writes no history (a miss saved per change on a target
// larger than the cache), and the history's memory is that of the changes
// the versions do not show. Otherwise every change is kept with its columns
// (scd2_full_event); strict_sequence keeps a copy of every change, because a
// tie is checked against every column of the stored change.

/// A kept change with its columns.
template <class K, class S, class Scd, class... Options>
struct cdc_flow<K, S, Scd, Options...>::scd2_full_event {
  sequence_type seq;
  bool remove;
  // With ignore_null_updates: an upsert that followed a delete of the key
  // at the same sequence (a tie, R-CDC-5); it inherits no value when it is
  // replayed (walk_upsert). Always false otherwise.
  bool after_delete;
  change_type row;
};

/// A kept change of a compact history.
template <class K, class S, class Scd, class... Options>
struct cdc_flow<K, S, Scd, Options...>::scd2_ref_event {
  sequence_type seq;
  std::uint32_t version;  // upserts: the version holding its values (index in versions)
  bool remove;
};

/// One-pass apply (compact history only, so other modes pay no memory for
/// it): the pass that last touched the key, and its undo record there.
struct scd2_pass_mark {
  std::uint32_t pass = 0;
  std::uint32_t rec = 0;
};
struct scd2_no_pass_mark {};

/// A key's entry in the SCD2 index.
template <class K, class S, class Scd, class... Options>
struct cdc_flow<K, S, Scd, Options...>::scd2_entry
    : std::conditional_t<scd2_compact_history, scd2_pass_mark, scd2_no_pass_mark> {
  // The key's changes by sequence (ties replaced); with a compact history,
  // only those its versions do not show.
  std::conditional_t<scd2_compact_history, absl::InlinedVector<scd2_ref_event, 1>,
                     std::vector<scd2_full_event>>
      history;
  // The key's target rows, by __START_AT. Up to four are held in the entry
  // itself (the size of a std::vector): most keys have few versions, and a
  // key touched then costs no allocation and no miss on a separate array.
  absl::InlinedVector<row_id, 4> versions;
};

/// A key the SCD2 one pass touched: what its undo restores, and what the
/// planner run after the pass reads to tell the pass's changes apart.
template <class K, class S, class Scd, class... Options>
struct cdc_flow<K, S, Scd, Options...>::scd2_pass_record {
  const change_type* src;   // a change of the key: finds its entry again
  std::uint32_t hist_size;  // the key's history before the pass
  std::uint32_t vers_size;  // ... and its versions
  bool existed;             // the key had an entry
  bool closed;              // the pass closed the key's stored open version
};

/// What the SCD2 planner needs to know of a one pass that applied part of
/// the same batch just before (it plans the changes the pass set aside):
/// a tie with a change that pass applied is a tie within the batch, whose
/// loser the planned path never counts.
template <class K, class S, class Scd, class... Options>
struct cdc_flow<K, S, Scd, Options...>::scd2_pass_context {
  std::uint32_t pass = 0;                      // that pass (0: none)
  const scd2_pass_record* records = nullptr;   // its records, by entry
  std::array<std::uint64_t, 2>* lost_ties = nullptr;  // out: its upserts, deletes that lost a tie
};

/// The SCD2 state (K, S, Scd, Options as in flowlib::AutoCdc).
template <class K, class S, class Scd, class... Options>
struct cdc_flow<K, S, Scd, Options...>::scd2_state {
  using entry = scd2_entry;  // (the checkpoint's names)
  static constexpr bool compact_history = scd2_compact_history;

  // SCD2 closes a stored version by writing its __END_AT in place when the
  // store hands out mutable rows and copying the sequence cannot throw (the
  // commit cannot fail); otherwise the version is rewritten whole.
  template <class Store, class Target>
  static constexpr bool close_in_place =
      std::is_nothrow_copy_assignable_v<sequence_type> &&
      requires(Store& s, row_id id) {
        { s.get(id) } -> std::same_as<Target&>;
      };

  // (Not key_index: see flat_index.hpp for what it adds.)
  using index_type = flat_index<key_type, entry, key_index_hash<K, probe>,
                                key_index_eq<K, probe>>;

  explicit scd2_state(const staging& stage)
      : index(stage.template empty_index<index_type>()) {}

  /// As new (R-EXACT-5): no keys; the index is freed.
  void reset(const staging& stage) noexcept { index = stage.template empty_index<index_type>(); }

  /// Compact history, a late change's walk converged at stored version w
  /// (see plan_segment): whether the key's next new change, of
  /// sequence s, may start a segment of its own. It may when it falls in a
  /// version after w: its segment then starts at w at the earliest (the
  /// version it falls in, or the one before), and replaces nothing the walk
  /// up to w does.
  template <class Store, class Versions>
  static bool resumes_after(const Store& store, const Versions& vs, std::size_t w,
                            const sequence_type& s) noexcept {
    using Target = typename Store::row_type;
    return w + 1 < vs.size() && !(s < start_col<Target>::get(store.get(vs[w + 1])));
  }

  /// The highest sequence among a key's stored changes (compact history:
  /// those kept and those its versions show), or nullptr if it has none.
  template <class Store>
  static const sequence_type* latest_seq(const Store& store, const entry& e) noexcept {
    const typename Store::row_type* last = nullptr;
    if constexpr (compact_history) {  // (otherwise the history holds every change)
      if (!e.versions.empty()) last = &store.get(e.versions.back());
    }
    return latest_seq(e, last);
  }
  /// The same, given the key's last version row (nullptr: it has none).
  template <class Target>
  static const sequence_type* latest_seq(const entry& e, const Target* last) noexcept {
    const sequence_type* m = e.history.empty() ? nullptr : &e.history.back().seq;
    if constexpr (compact_history) {
      if (last != nullptr) {  // its last version's end, or its start while open
        const auto& end = end_col<Target>::get(*last);
        const sequence_type* v = end.has_value() ? &*end : &start_col<Target>::get(*last);
        if (m == nullptr || *m < *v) m = v;
      }
    }
    return m;
  }

  /// Compact history: the sequence of the next change the versions show,
  /// from version w on (its opening upsert, or with `closed` the delete that
  /// closed it), or nullptr past the last; advances w and `closed` to it. A
  /// version a delete closed is one that ends where no version starts (an
  /// upsert that closes a version opens the next at its own sequence).
  template <class Store, class Versions>
  static const sequence_type* shown_change(const Store& store, const Versions& vs,
                                           std::size_t& w, bool& closed) noexcept {
    using Target = typename Store::row_type;
    for (; w < vs.size(); ++w, closed = false) {
      const Target& row = std::as_const(store).get(vs[w]);
      if (!closed) return &start_col<Target>::get(row);
      const auto& end = end_col<Target>::get(row);
      if (!end.has_value()) continue;
      if (w + 1 == vs.size()) return &*end;
      const sequence_type& next = start_col<Target>::get(store.get(vs[w + 1]));
      if (next < *end || *end < next) return &*end;
    }
    return nullptr;
  }

  // One change of the SCD2 derivation (R-CDC-4). `cur` is the open version
  // (a scratch row) or npos; new versions are appended to the scratch
  // rows. Returns whether the versions show the change (see scd2_compact_history).
  // `after_delete`: an upsert tied after a delete (full_event::after_delete).
  template <class Target>
  static bool walk_step(cdc_target_scratch<Target>& ts, std::uint32_t& cur,
                 const sequence_type& s, bool remove, const change_type& row,
                 bool after_delete = false) {
    if (remove) return walk_delete<Target>(ts, cur, s);
    return walk_upsert<Target>(ts, cur, s, row, after_delete);
  }
  /// A delete closes the current version. Returns whether there was one.
  template <class Target>
  static bool walk_delete(cdc_target_scratch<Target>& ts, std::uint32_t& cur,
                          const sequence_type& s) {
    if (cur == npos) return false;
    end_col<Target>::get(ts.rows[cur]) = s;
    cur = npos;
    return true;
  }
  /// An upsert whose values are a change row, or (compact history) those of
  /// a stored version. Returns whether it opened a version. With
  /// ignore_null_updates its null columns keep the open version's values,
  /// unless it follows a tied delete (`after_delete`, R-CDC-5): the delete
  /// left nothing to keep, so it is written as it is (and, as any upsert,
  /// updates the open version in place when its tracked values are equal).
  template <class Target, class Values>
  static bool walk_upsert(cdc_target_scratch<Target>& ts, std::uint32_t& cur,
                   const sequence_type& s, const Values& values, bool after_delete = false) {
    using Map = mapping<Target>;
    const bool open = cur != npos;
    const std::uint32_t cand = ts.alloc();
    Target& t = ts.rows[cand];
    if constexpr (std::is_same_v<Values, Target>) {
      (void)after_delete;
      t = values;
    } else if (open && opts::ignore_mode != 0 && !after_delete) {
      t = ts.rows[cur];
      Map::assign_keeping_ignored_nulls(t, values);
    } else {
      Map::assign(t, values);
    }
    start_col<Target>::get(t) = s;
    end_col<Target>::get(t).reset();
    if (open && Map::tracked_equal(ts.rows[cur], t)) {
      // Same tracked values: the version is updated in place, keeping its start.
      start_col<Target>::get(t) = start_col<Target>::get(ts.rows[cur]);
      std::swap(ts.rows[cur], t);
      --ts.used;  // cand was the last slot
      return false;
    }
    if (open) end_col<Target>::get(ts.rows[cur]) = s;  // closes the current version
    cur = cand;
    return true;
  }

  index_type index;
};

}  // namespace flowlib::detail
