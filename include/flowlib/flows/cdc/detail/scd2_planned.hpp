// flowlib/flows/cdc/detail/scd2_planned.hpp
//
// AUTO CDC, SCD type 2, the planned path of cdc_flow::scd2_engine
// (engine.hpp; R-CDC-4, R-CDC-5..7): the batch is grouped by key (staging.hpp); a key's changes
// after all of its stored ones continue from its current version, a late
// one re-derives its versions from the version in effect at its sequence
// (in segments that stop where the re-derivation meets the stored versions
// again); storage is reserved, and only then is it committed by operations
// that cannot fail. It holds only its per-batch scratch; the engine hands
// it the staging and the SCD2 state. The one pass (scd2_one_pass.hpp) plans
// the changes it sets aside with it too. Internal.
#pragma once

#include <flowlib/detail/prefetch.hpp>
#include <flowlib/detail/target_binding.hpp>
#include <flowlib/expect.hpp>
#include <flowlib/flows/cdc/detail/flow.hpp>
#include <flowlib/flows/cdc/detail/scd2_state.hpp>
#include <flowlib/flows/cdc/detail/staging.hpp>
#include <flowlib/flows/cdc/detail/target_scratch.hpp>
#include <flowlib/stats.hpp>
#include <flowlib/storage/memory.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

namespace flowlib::detail {

/// The planned path of the SCD2 engine.
template <class K, class S, class Scd, class... Options>
class cdc_flow<K, S, Scd, Options...>::scd2_planned {
  // --- per-batch plans -----------------------------------------------------------

  // A key's plan, or one segment of it: a key with several late changes in
  // a batch may have a plan per stretch of its history (plan_segment);
  // its plans are consecutive in plans_ and committed last to first.
  struct key_plan {
    scd2_entry* hit;             // nullptr: a new key
    std::uint32_t group;
    std::uint32_t new_begin, new_end;   // new events (indices into stage.order), by sequence
    std::uint32_t tie_begin, tie_end; // ties with stored events (into stored_ties_)
    std::uint32_t from;          // first version replaced
    std::uint32_t v_begin, v_end;  // derived versions (target scratch rows)
    std::uint32_t events_from;       // first stored event at or after the re-derivation's start
    std::uint32_t hist_size;     // the key's stored events (before this batch)
    std::uint32_t close;         // batch row whose sequence closes the stored current
                                 // version in place, or npos
    bool append;                 // new events all after the stored ones
    std::uint32_t derived_begin, derived_end;  // compact history: the key's events from
                                         // events_from on, as re-derived (into derived_events_)
    // Compact history, a late change: where its re-derivation converged with
    // the stored versions (see plan_segment), or npos. The derived
    // versions then replace the stored ones from `from` up to keep_versions, the
    // derived events replace the stored ones from events_from up to keep_events, and
    // the stored versions and events from there on stay (the events'
    // version indices shifted by the difference).
    std::uint32_t keep_versions, keep_events;
    bool converged() const noexcept { return keep_versions != npos; }
  };
  struct stored_tie {
    std::uint32_t pos;  // index in the key's history
    std::uint32_t row;  // batch row that replaces it
  };



 public:
  /// Applies a batch: stage, plan, reserve, claim the target, commit.
  template <class Table, class Store, class Target, class R, class... P>
  void apply(staging& stage, scd2_state& state, Table& target, Store& store,
             cdc_target_scratch<Target>& ts, R& batch, const Expectations<P...>& checks,
             BatchStats& stats, target_binding& binding, std::string_view kind) {
    stage.stage_batch(batch, checks, stats, std::optional<sequence_type>{});
    plan(stage, state, store, ts, stats);
    reserve(store);
    copy_events(stage);  // undone by undo_copied_events on a later error
    try {
      binding.claim(target, kind, stage.name, /*exclusive=*/true);  // the last fallible step
    } catch (...) {
      undo_copied_events(stage, plans_.size());
      throw;
    }
    commit(stage, state, store, ts);
  }

  /// Frees the per-batch scratch (a later batch allocates it again).
  void release() noexcept { *this = scd2_planned{}; }

  template <class Store, class Target>
  void plan(staging& stage, scd2_state& state, Store& store, cdc_target_scratch<Target>& ts,
            BatchStats& stats, const scd2_pass_context& ctx = {}) {
    scratch_type& sc = *stage.scratch;
    const std::size_t n = sc.groups.size();
    state.index.reserve(state.index.size() + n);  // as in SCD1: plans point into the index
    stage.order.clear();
    plans_.clear();
    plans_.reserve(n);
    stored_ties_.clear();
    derived_events_.clear();
    new_keys_.clear();
    new_entries_.clear();
    rows_to_insert_ = 0;
    stage.probe_all(state.index, group_entries_);
    for (std::size_t g = 0; g < n; ++g) {
      // The entries were probed above; now their arrays (history and
      // versions) and then the current version's row are prefetched ahead,
      // each step reading what the previous one brought in.
      if (g + 2 * staging::entry_prefetch_distance < n) {
        if (const scd2_entry* a = group_entries_[g + 2 * staging::entry_prefetch_distance]) {
          prefetch_object(a);
        }
      }
      if (g + staging::entry_prefetch_distance < n) {
        if (const scd2_entry* a = group_entries_[g + staging::entry_prefetch_distance]) {
          if (!a->history.empty()) prefetch(&a->history.back());
          if (!a->versions.empty()) prefetch(&a->versions.back());
        }
      }
      if (g + staging::row_prefetch_distance < n) {
        stage.prefetch_group_rows(g + staging::row_prefetch_distance);
        if (const scd2_entry* a = group_entries_[g + staging::row_prefetch_distance];
            a && !a->versions.empty()) {
          prefetch_row(store, a->versions.back());
        }
      }
      const auto& grp = sc.groups[g];
      const std::uint32_t b = static_cast<std::uint32_t>(stage.order.size());
      const std::uint32_t e = stage.sort_group(grp, stats);
      scd2_entry* hit = group_entries_[g];
      for (std::uint32_t k = b; k < e; ++k) {
        ++(stage.ops[stage.order[k]] == op::remove ? stats.deleted_rows : stats.upserted_rows);
      }
      // The key's changes are planned in segments, one plan each: a late
      // change's walk that converges with the stored versions before the
      // key's next new change stops there, and the next segment starts at
      // that change (see plan_segment). Room for the commit over all
      // of them:
      std::size_t vers_grow = 0;  // versions inserted, over the segments
      std::size_t hist_grow = 0;  // events added, over the segments
      for (std::uint32_t sb = b; sb < e;) {  // sb: the segment's first new change (in stage.order)
        key_plan plan{hit, static_cast<std::uint32_t>(g), sb, e,
                       static_cast<std::uint32_t>(stored_ties_.size()), 0, 0, 0, 0, 0,
                       hit ? static_cast<std::uint32_t>(hit->history.size()) : 0,
                       npos, true,
                       static_cast<std::uint32_t>(derived_events_.size()), 0, npos, 0};
        sb = plan_segment(stage, store, ts, stats, plan, ctx);
        // What the commit of this segment adds to the key's versions and
        // events (a compact history may shrink: a kept change can come to
        // open or close a version; after a cut, the stored versions and
        // events from keep_versions and keep_events on stay). Staged by reference, ties
        // are appended too before they replace the stored events
        // (copy_events).
        const std::size_t derived = plan.v_end - plan.v_begin;
        const bool cut = plan.converged();
        const std::size_t n_vers = hit ? hit->versions.size() : 0;
        const std::size_t replaced_v = (cut ? plan.keep_versions : n_vers) - plan.from;
        const std::size_t replaced_e =
            scd2_compact_history ? (cut ? plan.keep_events : plan.hist_size) - plan.events_from
                            : (sc.by_ref ? 0 : plan.tie_end - plan.tie_begin);
        const std::size_t added_e = scd2_compact_history ? plan.derived_end - plan.derived_begin
                                                    : plan.new_end - plan.new_begin;
        if (derived > replaced_v) vers_grow += derived - replaced_v;
        if (added_e > replaced_e) hist_grow += added_e - replaced_e;
        plans_.push_back(plan);
      }
      // Room for the commit, made while the entry is in cache (growing a
      // capacity changes no state, so it may happen before a later error).
      // The segments are committed last to first, each inserting at most
      // its own growth: the sums bound every intermediate size. (A new key
      // has one plan, and every version it derives is inserted.)
      rows_to_insert_ += vers_grow;
      if (stage.changes.tracking) stage.changes.touched.push_back(stage.key(sc.row(grp.head)));
      if (hit == nullptr) {
        new_keys_.push_back(stage.key(sc.row(grp.head)));
        scd2_entry fresh;
        fresh.history.reserve(hist_grow);
        fresh.versions.reserve(vers_grow);
        new_entries_.push_back(std::move(fresh));
      } else {
        cdc_reserve_grow(hit->history, hit->history.size() + hist_grow);
        cdc_reserve_grow(hit->versions, hit->versions.size() + vers_grow);
      }
    }
  }

  /// A batch staged by reference: appends a copy of every new change
  /// (ties included) to its key's history, after the stored events, in the
  /// order of stage.order (room was reserved while planning). Copying may throw:
  /// then every history is restored to its stored events, and the error
  /// propagates. commit puts the copies in place.
  void copy_events(const staging& stage) {
    if constexpr (!scd2_compact_history) {  // compact events are written at commit
      scratch_type& sc = *stage.scratch;
      if (!sc.by_ref) return;
      std::size_t q = 0;
      std::size_t next_new = 0;
      const std::size_t n = plans_.size();
      std::size_t ahead = 0;  // batch rows (in stage.order) prefetched so far
      try {
        for (; q < n; ++q) {
          const key_plan& p = plans_[q];
          // As in commit: the entries and the histories' ends, then the
          // changes (scattered over the batch) are prefetched ahead.
          prefetch_entries_ahead(q, /*versions=*/false);
          for (const std::size_t to = std::min<std::size_t>(
                   p.new_end + staging::commit_prefetch_distance, stage.order.size());
               ahead < to; ++ahead) {
            staging::prefetch_change(sc.row(stage.order[ahead]));
          }
          scd2_entry& e = p.hit != nullptr ? *p.hit : new_entries_[next_new++];
          for (std::uint32_t k = p.new_begin; k < p.new_end; ++k) {
            const std::uint32_t c = stage.order[k];
            e.history.push_back(scd2_event{stage.seqs[c], stage.ops[c] == op::remove,
                                      stage.after_tied_delete(c), sc.row(c)});
          }
        }
      } catch (...) {
        undo_copied_events(stage, q + 1);
        throw;
      }
    }
  }
  /// Undoes copy_events for the first `count` plans (fresh entries
  /// are scratch: they are rebuilt by the next batch).
  void undo_copied_events(const staging& stage, std::size_t count) noexcept {
    if (scd2_compact_history || !stage.scratch->by_ref) return;
    for (std::size_t q = 0; q < count && q < plans_.size(); ++q) {
      const key_plan& p = plans_[q];
      if (p.hit == nullptr) continue;
      while (p.hit->history.size() > p.hist_size) p.hit->history.pop_back();
    }
  }

  template <class Store>
  void reserve(Store& store) {
    // The keys' own arrays were grown while planning.
    reserve_rows(store, rows_to_insert_);
  }

  /// The key's history after the batch (room was reserved while planning;
  /// nothing here throws).
  void commit_history(staging& stage, scd2_entry& e, const key_plan& p) noexcept {
    if constexpr (scd2_compact_history) {
      // The events from events_from on (up to keep_events after a cut), as the
      // planning walk re-derived them.
      const std::size_t to = p.converged() ? p.keep_events : e.history.size();
      if (p.converged()) {
        // The events that stay refer to versions from keep_versions on, which move
        // to where the derived versions end.
        const std::uint32_t moved_to = p.from + (p.v_end - p.v_begin);
        for (std::size_t k = to; k < e.history.size(); ++k) {
          scd2_ref_event& ev = e.history[k];
          if (!ev.remove) ev.version = ev.version - p.keep_versions + moved_to;
        }
      }
      e.history.erase(e.history.begin() + p.events_from,
                      e.history.begin() + static_cast<std::ptrdiff_t>(to));
      e.history.insert(e.history.begin() + p.events_from, derived_events_.begin() + p.derived_begin,
                       derived_events_.begin() + p.derived_end);
    } else {
      // Ties replace stored changes; the others are merged in.
      scratch_type& sc = *stage.scratch;
      const std::size_t old_size = p.hist_size;
      std::uint32_t r = p.tie_begin;
      if (sc.by_ref) {
        // The new events were copied in after the stored ones, in the
        // order of stage.order: move the ties onto the events they replace and
        // close the gaps they leave.
        std::size_t w = old_size;
        std::size_t j = old_size;
        for (std::uint32_t k = p.new_begin; k < p.new_end; ++k, ++j) {
          if (r < p.tie_end && stored_ties_[r].row == stage.order[k]) {
            e.history[stored_ties_[r].pos] = std::move(e.history[j]);
            ++r;
            continue;
          }
          if (w != j) e.history[w] = std::move(e.history[j]);
          ++w;
        }
        while (e.history.size() > w) e.history.pop_back();
      } else {
        for (std::uint32_t k = p.new_begin; k < p.new_end; ++k) {
          const std::uint32_t c = stage.order[k];
          if (r < p.tie_end && stored_ties_[r].row == c) {
            scd2_event& ev = e.history[stored_ties_[r].pos];
            ev.remove = stage.ops[c] == op::remove;
            ev.after_delete = stage.after_tied_delete(c);
            ev.row = std::move(sc.rows[c]);
            ++r;
            continue;
          }
          e.history.push_back(scd2_event{std::move(stage.seqs[c]), stage.ops[c] == op::remove,
                                    stage.after_tied_delete(c), std::move(sc.rows[c])});
        }
      }
      if (!p.append && p.events_from < old_size && old_size != e.history.size()) {
        // Only the tail from the re-derivation's start can be out of order.
        std::inplace_merge(e.history.begin() + static_cast<std::ptrdiff_t>(p.events_from),
                           e.history.begin() + static_cast<std::ptrdiff_t>(old_size),
                           e.history.end(),
                           [](const scd2_event& a, const scd2_event& b) { return a.seq < b.seq; });
      }
    }
  }

  template <class Store, class Target>
  void commit(staging& stage, scd2_state& state, Store& store,
              cdc_target_scratch<Target>& ts) noexcept {
    scratch_type& sc = *stage.scratch;
    std::size_t next_new = 0;
    const std::size_t n = plans_.size();
    std::size_t ahead = 0;  // batch rows (in stage.order) prefetched so far
    for (std::size_t q = 0; q < n; ++q) {
      // A key's plans (its segments, see plan) are consecutive.
      std::size_t last = q;
      while (last + 1 < n && plans_[last + 1].group == plans_[q].group) ++last;
      // The changes moved into histories, in key order: scattered over the batch.
      for (const std::size_t to = std::min<std::size_t>(
               plans_[last].new_end + staging::commit_prefetch_distance, stage.order.size());
           ahead < to; ++ahead) {
        if (!sc.by_ref) staging::prefetch_change(sc.rows[stage.order[ahead]]);
      }
      // What planning brought in has been evicted since (a batch touches
      // more than the cache holds): prefetch again, in the same three steps.
      prefetch_entries_ahead(last, /*versions=*/true);
      if (last + staging::commit_prefetch_distance / 2 < n) {
        if (const scd2_entry* a = plans_[last + staging::commit_prefetch_distance / 2].hit;
            a && !a->versions.empty()) {
          prefetch_row(store, a->versions.back());
        }
      }
      scd2_entry* e = plans_[q].hit;
      if (e == nullptr) {  // a new key: one plan
        e = &state.index.emplace(std::move(new_keys_[next_new]), std::move(new_entries_[next_new]))
                 .first->second;
        ++next_new;
      }
      // Last segment first: each replaces versions and events at or after
      // where the one before it stops (keep_versions, keep_events), so the positions an
      // earlier segment refers to are still the stored ones when it commits.
      for (std::size_t x = last + 1; x-- > q;) commit_plan(stage, store, ts, *e, plans_[x]);
      q = last;
    }
  }

  /// Prefetches what committing the plans after q reads: their entries 2d
  /// ahead, then the ends of their histories (and with `versions`, of their
  /// version lists) d ahead (d: commit_prefetch_distance).
  void prefetch_entries_ahead(std::size_t q, bool versions) const noexcept {
    constexpr std::size_t d = staging::commit_prefetch_distance;
    const std::size_t n = plans_.size();
    if (q + 2 * d < n) {
      if (const scd2_entry* a = plans_[q + 2 * d].hit) prefetch_object(a);
    }
    if (q + d < n) {
      if (const scd2_entry* a = plans_[q + d].hit) {
        prefetch(a->history.data() + a->history.size());
        if (versions && !a->versions.empty()) prefetch(&a->versions.back());
      }
    }
  }

  /// One plan of commit (cannot fail: room was reserved).
  template <class Store, class Target>
  void commit_plan(staging& stage, Store& store, cdc_target_scratch<Target>& ts, scd2_entry& e,
                        const key_plan& p) noexcept {
    if constexpr (scd2_state::template close_in_place<Store, Target>) {
      if (p.close != npos) {  // before its sequence is moved into the history
        end_col<Target>::get(store.get(e.versions.back())) = stage.seqs[p.close];
      }
    }
    commit_history(stage, e, p);
    // Versions: the derived ones replace those from p.from on (up to
    // keep_versions after a cut; room for those inserted was reserved).
    auto& vs = e.versions;
    const std::size_t stop = p.converged() ? p.keep_versions : vs.size();
    std::size_t v = p.from;
    std::uint32_t j = p.v_begin;
    for (; j < p.v_end && v < stop; ++j, ++v) store.assign(vs[v], std::move(ts.rows[j]));
    for (; j < p.v_end; ++j, ++v) {
      vs.insert(vs.begin() + static_cast<std::ptrdiff_t>(v), store.insert(std::move(ts.rows[j])));
    }
    if (v < stop) {
      for (std::size_t x = v; x < stop; ++x) store.erase(vs[x]);
      vs.erase(vs.begin() + static_cast<std::ptrdiff_t>(v),
               vs.begin() + static_cast<std::ptrdiff_t>(stop));
    }
  }

 private:
  /// One segment of a key's plan (see plan): derives the key's versions
  /// and events from the segment's first new change, plan.new_begin (in
  /// stage.order), on. Returns where the next segment starts: the key's end
  /// (plan.new_end as given) when the walk ran through its new changes, else
  /// the change the walk stopped before, which plan.new_end is set to.
  template <class Store, class Target>
  std::uint32_t plan_segment(staging& stage, Store& store,
                             cdc_target_scratch<Target>& ts, BatchStats& stats, key_plan& plan,
                             const scd2_pass_context& ctx) {
    using Map = mapping<Target>;
    scratch_type& sc = *stage.scratch;
    scd2_entry* const hit = plan.hit;
    const auto* hist = hit ? &hit->history : nullptr;
    const std::uint32_t sb = plan.new_begin;
    const std::uint32_t e = plan.new_end;
    std::uint32_t next_segment = e;  // where the next segment starts (e: none)
    // Compact history: keeps a change the walk just applied unless the
    // versions show it (`visible`: it opened or closed a version); an
    // upsert refers to the version now open (derived rows map one to one,
    // in order, onto the key's versions from plan.from on).
    const auto record = [&](const sequence_type& s, bool remove, std::uint32_t cur,
                            bool visible) {
      if constexpr (scd2_compact_history) {
        if (!visible) {
          derived_events_.push_back(
              scd2_ref_event{s, remove ? 0 : plan.from + (cur - plan.v_begin), remove});
        }
      } else {
        (void)s, (void)remove, (void)cur, (void)visible;
      }
    };
    const sequence_type& first = stage.seqs[stage.order[sb]];
    const sequence_type* latest = hit ? scd2_state::latest_seq(store, *hit) : nullptr;
    plan.append = latest == nullptr || *latest < first;
    plan.v_begin = static_cast<std::uint32_t>(ts.used);
    if (plan.append) {
      plan.events_from = hist ? static_cast<std::uint32_t>(hist->size()) : 0;
      // Continue from the current version (if the key is open).
      std::uint32_t cur = npos;
      std::uint32_t k = sb;
      plan.from = hit ? static_cast<std::uint32_t>(hit->versions.size()) : 0;
      if (hit && !hit->versions.empty() &&
          !end_col<Target>::get(store.get(hit->versions.back())).has_value()) {
        const Target& stored = std::as_const(store).get(hit->versions.back());
        const std::uint32_t c = stage.order[sb];
        if constexpr (scd2_state::template close_in_place<Store, Target>) {
          // The common case: the first new change closes the stored
          // version (a delete, or an upsert with other tracked values),
          // which is then closed in place at commit instead of being
          // copied into scratch and written back whole.
          if (stage.ops[c] == op::remove) {
            plan.close = c;
            record(stage.seqs[c], true, cur, true);
            k = sb + 1;
          } else if constexpr (opts::ignore_mode == 0) {
            cur = ts.alloc();
            Target& t = ts.rows[cur];
            Map::assign(t, sc.row(c));
            start_col<Target>::get(t) = stage.seqs[c];
            end_col<Target>::get(t).reset();
            const bool opens = !Map::tracked_equal(stored, t);
            if (opens) {
              plan.close = c;
            } else {  // updated in place, keeping its start
              start_col<Target>::get(t) = start_col<Target>::get(stored);
              --plan.from;
            }
            record(stage.seqs[c], false, cur, opens);
            k = sb + 1;
          }
        }
        if (k == sb) {  // the general case: continue from a copy of the version
          cur = ts.alloc();
          ts.rows[cur] = stored;
          --plan.from;
        }
      }
      for (; k < e; ++k) {
        const std::uint32_t c = stage.order[k];
        const bool remove = stage.ops[c] == op::remove;
        record(stage.seqs[c], remove, cur,
               scd2_state::template walk_step<Target>(ts, cur, stage.seqs[c], remove, sc.row(c),
                                                stage.after_tied_delete(c)));
      }
    } else {
      // A late change: re-derive the key's history from the last version
      // that starts at or before the earliest new change. The state
      // before that version's opening change is known without replaying
      // what precedes it: the version before it, as stored, if it was
      // still open then (it ends where this one starts; no change
      // between them), else no open version. Changes at or after the
      // opening one are merged with the new ones (a new change replaces
      // a stored one of equal sequence: a tie, R-CDC-5). With a compact
      // history the stored changes are the kept ones merged with those
      // the versions show (see compact_history), from that version on.
      const auto& vs = hit->versions;
      const auto after = partition_point_from_back(  // the first starting after it
          vs.begin(), vs.end(),
          [&](row_id id) { return !(first < start_col<Target>::get(store.get(id))); });
      std::uint32_t cur = npos;
      std::size_t i = 0;
      std::size_t w = 0;  // compact history: the version whose changes are shown next
      plan.from = 0;
      if (after != vs.begin()) {
        const auto v = static_cast<std::size_t>(after - vs.begin()) - 1;
        const sequence_type& start = start_col<Target>::get(store.get(vs[v]));
        i = static_cast<std::size_t>(
            partition_point_from_back(hist->begin(), hist->end(),
                                      [&](const scd2_event& ev) { return ev.seq < start; }) -
            hist->begin());
        w = v;
        plan.from = static_cast<std::uint32_t>(v);
        if (v > 0) {
          const Target& prev = std::as_const(store).get(vs[v - 1]);
          const auto& prev_end = end_col<Target>::get(prev);
          if (prev_end.has_value() && !(*prev_end < start) && !(start < *prev_end)) {
            cur = ts.alloc();
            ts.rows[cur] = prev;
            end_col<Target>::get(ts.rows[cur]).reset();
            plan.from = static_cast<std::uint32_t>(v - 1);
          }
        }
      }
      plan.events_from = static_cast<std::uint32_t>(i);
      bool w_closed = false;  // ... its opening (false) or its closing delete (true)
      std::uint32_t k = sb;
      for (;;) {
        // The next stored change: hist[i], or one the versions show.
        const sequence_type* os = i < hist->size() ? &(*hist)[i].seq : nullptr;
        bool oremove = os != nullptr && (*hist)[i].remove;
        bool shown = false;
        if constexpr (scd2_compact_history) {
          if (const sequence_type* d = scd2_state::shown_change(store, vs, w, w_closed);
              d != nullptr && (os == nullptr || *d < *os)) {
            os = d;
            oremove = w_closed;
            shown = true;
          }
        }
        const std::uint32_t c = k < e ? stage.order[k] : npos;
        if (os == nullptr && c == npos) break;
        // Past the stored change (replayed or replaced).
        const auto next_stored = [&] {
          if (!shown) {
            ++i;
          } else if (w_closed) {
            ++w;
            w_closed = false;
          } else {
            w_closed = true;
          }
        };
        if (c != npos && (os == nullptr || !(*os < stage.seqs[c]))) {
          if (os != nullptr && !(stage.seqs[c] < *os)) {  // tie with a stored change
            ++stats.tied_rows;
            if constexpr (scd2_compact_history) {
              // A change the one-pass apply of this batch applied: a tie
              // within the batch, whose loser the planned path never counts.
              if (ctx.pass != 0 && hit->pass == ctx.pass) {
                const auto& u = ctx.records[hit->rec];
                const bool by_pass =
                    shown ? w >= u.vers_size || (oremove && u.closed && w + 1 == u.vers_size)
                          : i >= u.hist_size;
                if (by_pass) ++(*ctx.lost_ties)[oremove ? 1 : 0];
              }
            }
            if constexpr (opts::strict) {
              const scd2_event& old = (*hist)[i];
              if (!stage.same_change(old.remove ? op::remove : op::upsert, old.row, stage.ops[c],
                               sc.row(c))) {
                stage.throw_tie(sc.row(c), "as a stored change");
              }
            }
            if constexpr (staging::merge_tied_upserts) {
              // The stored one came earlier in source order (R-CDC-5), so
              // an upsert inherits from it as from a tied change of its own
              // batch (merge_tied), unless a delete came between them
              // within the batch: then it already inherits nothing.
              const scd2_event& old = (*hist)[i];
              if (stage.ops[c] == op::upsert && !stage.after_tied_delete(c)) {
                if (old.remove) {
                  stage.after_delete[c] = 1;
                } else {
                  staging::merge_tied_values(sc.rows[c], old.row);
                  if (old.after_delete) stage.after_delete[c] = 1;
                }
              }
            }
            if constexpr (!scd2_compact_history) {
              stored_ties_.push_back({static_cast<std::uint32_t>(i), c});
            }
            next_stored();
          }
          const bool remove = stage.ops[c] == op::remove;
          record(stage.seqs[c], remove, cur,
                 scd2_state::template walk_step<Target>(ts, cur, stage.seqs[c], remove, sc.row(c),
                                                  stage.after_tied_delete(c)));
          ++k;
        } else {
          if constexpr (scd2_compact_history) {
            bool visible;
            if (oremove) {
              visible = scd2_state::template walk_delete<Target>(ts, cur, *os);
            } else {
              const std::size_t holder = shown ? w : (*hist)[i].version;
              visible =
                  scd2_state::template walk_upsert<Target>(ts, cur, *os, store.get(vs[holder]));
            }
            if (shown && !oremove && visible &&
                (k == e || scd2_state::resumes_after(store, vs, w, stage.seqs[stage.order[k]]))) {
              // Converged: the opening of stored version w opened a
              // version again, a copy of it (walk_upsert copies the stored
              // row; its end is set later), and every new change before it
              // is applied. The state is the stored one after that
              // opening, so the walk would re-derive the stored versions
              // and events unchanged up to the next new change: they stay
              // (keep_versions, keep_events), and w's copy is dropped. A late change
              // then writes a few versions however long its key's history,
              // not every later one. The key's next new change, if any,
              // starts a segment of its own at the version it falls in,
              // after w (resumes_after), so the segments replace disjoint
              // ranges of versions and events. (Each segment applies a new
              // change at least: its first falls in a version before w.)
              plan.keep_versions = static_cast<std::uint32_t>(w);
              plan.keep_events = static_cast<std::uint32_t>(i);
              plan.new_end = k;
              next_segment = k;
              --ts.used;  // cur, the last derived row
              break;
            }
            record(*os, oremove, cur, visible);
          } else {
            scd2_state::template walk_step<Target>(ts, cur, *os, oremove, (*hist)[i].row,
                                             (*hist)[i].after_delete);
          }
          next_stored();
        }
      }
    }
    plan.v_end = static_cast<std::uint32_t>(ts.used);
    plan.tie_end = static_cast<std::uint32_t>(stored_ties_.size());
    plan.derived_end = static_cast<std::uint32_t>(derived_events_.size());
    return next_segment;
  }

  // Per batch (kept across batches).
  std::vector<key_plan> plans_;
  std::vector<stored_tie> stored_ties_;
  std::vector<scd2_event> derived_events_;  // compact history: re-derived events (plan.derived_*)
  std::vector<key_type> new_keys_;
  std::vector<scd2_entry> new_entries_;
  std::vector<scd2_entry*> group_entries_;  // per group: its entry, or nullptr
  std::size_t rows_to_insert_ = 0;     // rows the commit inserts
};

}  // namespace flowlib::detail
