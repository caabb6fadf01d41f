// flowlib/flows/cdc/detail/scd2_one_pass.hpp
//
// AUTO CDC, SCD type 2, the one-pass path of cdc_flow::scd2_engine
// (engine.hpp), for a large target the engine already maintains. It holds only its per-batch
// scratch (undo records, the changes it sets aside); the engine hands it
// the staging, the SCD2 state and the planned path, which plans the
// set-aside changes.
//
// With a compact history (see compact_history), a batch for a target the
// flow already maintains is applied in one pass over the changes, in
// source order: a change that follows every stored change of its key (the
// common case) closes the key's open version in place and opens a new
// one, or extends the open one when its values are the same (R-CDC-4);
// only the changes that open or close no version are written to the
// history (see compact_history). A change at or below its key's latest
// stored change (late, or a tie) would re-derive the key's history: it is
// set aside and planned after the pass, over the state the pass left
// (the planner sees the changes applied by the pass as stored ones); the
// key's later changes that follow all of its stored ones still go through
// the pass (see the step below). The outcome is the planned path's: a
// key's changes in sequence order, the later in source order winning a
// tie (R-CDC-1, R-CDC-5); so are the metrics, once a tie with a change of
// the same pass is counted as the planned path counts a tie within the
// batch (scd2_pass_context).
//
// All-or-nothing: an undo record per key touched holds the sizes of its
// history and versions before the pass, and whether the pass closed its
// stored open version; on any error (null sequence, expectation `fail`,
// a throwing predicate or copy, planning the set-aside changes) the
// records restore every key, erase the rows the pass inserted and drop
// the keys it created. Internal.
#pragma once

#include <flowlib/detail/admit.hpp>
#include <flowlib/detail/prefetch.hpp>
#include <flowlib/expect.hpp>
#include <flowlib/flows/cdc/detail/flow.hpp>
#include <flowlib/flows/cdc/detail/scd2_planned.hpp>
#include <flowlib/flows/cdc/detail/scd2_state.hpp>
#include <flowlib/flows/cdc/detail/staging.hpp>
#include <flowlib/flows/cdc/detail/target_scratch.hpp>
#include <flowlib/stats.hpp>
#include <flowlib/storage/memory.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <ranges>
#include <type_traits>
#include <vector>

namespace flowlib::detail {

/// The one-pass path of the SCD2 engine.
template <class K, class S, class Scd, class... Options>
class cdc_flow<K, S, Scd, Options...>::scd2_one_pass {
 public:
  /// Whether a batch of type R for a Store of Target rows can take the pass:
  /// with a compact history, where every change of a key that follows all
  /// of its stored ones is applied straight into the target.
  template <class Store, class Target, class R>
  static constexpr bool applies = scd2_compact_history &&
                                  scd2_state::template close_in_place<Store, Target> &&
                                  cdc_one_pass_batch<R, change_type, Target>;

  /// Whether the pass takes a batch it applies to: for a target with at
  /// least CdcEngineOptions::scd2_one_pass_min_keys keys (below, planning
  /// is faster).
  static bool takes(const staging& stage, const scd2_state& state) noexcept {
    return state.index.size() >= stage.settings.tuning.scd2_one_pass_min_keys;
  }

  /// Applies the batch in one pass (the changes it sets aside planned after
  /// it) and returns true; throws, with everything undone, on an error.
  template <class Store, class Target, class R, class... P>
  bool apply(staging& stage, scd2_state& state, scd2_planned& planned,
             Store& store, cdc_target_scratch<Target>& ts, R& batch,
             const Expectations<P...>& checks, BatchStats& stats) {
    using Map = mapping<Target>;
    pass_records_.clear();
    deferred_.clear();
    pass_ = cdc_next_pass(pass_, state.index);
    // The admit step, row by row inside the pass (R-CDC-5): its counts reach
    // `stats` only once the pass is through.
    admit_sequenced<K, S, P...> admit{checks, stage.key, stage.seq, stage.name,
                                      null_sequence_rule::cdc5};
    std::size_t n_changes = 4096;  // (a bound for the chunks of fresh rows)
    if constexpr (std::ranges::sized_range<R>) {
      n_changes = static_cast<std::size_t>(std::ranges::size(batch));
    }
    std::size_t fresh_rows = 0;  // rows reserved but not yet inserted

    // One change. `e` is the key's entry when the caller found it already
    // (nullptr: look it up).
    const auto step = [&](const change_type& r, std::size_t h, scd2_entry* e) {
      std::optional<sequence_type> so = admit(r);
      if (!so) return;  // dropped by an expectation
      const sequence_type& s = *so;
      const bool remove = stage.classify(r) == op::remove;
      if (e == nullptr) {
        auto it = state.index.find(probe{&r, h});
        if (it != state.index.end()) e = &it->second;
      }
      scd2_pass_record* u;
      if (e != nullptr && e->pass == pass_) {
        u = &pass_records_[e->rec];
      } else {  // the key's first change in this pass: its undo record
        const auto ri = static_cast<std::uint32_t>(pass_records_.size());
        if (e != nullptr) {
          pass_records_.push_back({&r, static_cast<std::uint32_t>(e->history.size()),
                            static_cast<std::uint32_t>(e->versions.size()), true, false});
        } else {
          key_type k = stage.key(r);
          pass_records_.push_back({&r, 0, 0, false, false});
          const std::uint64_t gen = state.index.generation();
          e = &state.index.try_emplace(std::move(k)).first->second;
          if (state.index.generation() != gen) {
            lookahead_entries_.fill(nullptr);  // rehashed: lookahead is stale
          }
        }
        e->pass = pass_;
        e->rec = ri;
        u = &pass_records_.back();
      }
      auto& hist = e->history;  // only the changes the versions do not show
      auto& vs = e->versions;
      // The key's last version, looked up once; it is closed before room is
      // made for a new version, so a store whose reserve or insert moves
      // rows is no concern.
      Target* const last = vs.empty() ? nullptr : &store.get(vs.back());
      const bool open = last != nullptr && !end_col<Target>::get(*last).has_value();
      // A late or tied change is set aside and planned after the pass. The
      // key's later changes still apply here when they are in order: each
      // is above the key's latest sequence, so above every change of the
      // key set aside before it, and ties none of them. The planned path's
      // result depends on arrival order only through ties, and a set-aside
      // change tied with a change the pass applied came later in the source
      // and wins (as the planner counts it, scd2_pass_context).
      if (const sequence_type* latest = scd2_state::latest_seq(*e, last);
          latest != nullptr && !(*latest < s)) {
        deferred_.push_back(&r);
        return;
      }
      ++(remove ? stats.deleted_rows : stats.upserted_rows);
      const auto close = [&] {  // the open version ends at s
        if (vs.size() == u->vers_size) u->closed = true;  // a stored one, closed in place
        end_col<Target>::get(*last) = s;
      };
      // A change that opens or closes no version is kept in the history
      // (room first: the push cannot fail).
      const auto keep = [&](std::uint32_t version) {
        cdc_reserve_grow(hist, hist.size() + 1);
        hist.push_back(scd2_ref_event{s, version, remove});
      };
      if (remove) {
        if (open) {
          close();
        } else {
          keep(0);
        }
        return;
      }
      if (open && Map::tracked_equal(*last, r)) {  // same values: no new version
        keep(static_cast<std::uint32_t>(vs.size() - 1));
        return;
      }
      // (Closed first, while `last` is valid: if making room for the new
      // version or building it throws, the undo restores it.)
      if (open) close();
      cdc_reserve_grow(vs, vs.size() + 1);
      // Room for the new versions, a chunk at a time: where the store maps
      // their memory in at once (reserve_rows), one system call per chunk
      // replaces a page fault per page, and at most a chunk is left unused.
      if (fresh_rows == 0) {
        fresh_rows = std::clamp<std::size_t>(n_changes, 1, 4096);
        reserve_rows(store, fresh_rows);
      }
      // The new version is built in its slot, not aside and moved in.
      const row_id id = insert_made(store, [&]() -> Target {
        Target t{};
        Map::assign(t, r);
        start_col<Target>::get(t) = s;
        end_col<Target>::get(t).reset();
        return t;
      });
      --fresh_rows;
      vs.push_back(id);
    };

    try {
      // The read-ahead of SCD1's pass, with one more stage: 2 ahead the
      // entry's version list and last event are prefetched, 1 ahead its open
      // version's row (a key with more than four versions keeps the list on
      // the heap); an entry found 4 ahead is prefetched whole (with
      // prefetch_match's first and last line of the slot, this covers a slot
      // over three lines).
      stage.one_pass_over(
          batch, state.index, lookahead_entries_, step,
          [&](const scd2_entry& a) {  // its version row, once the version list is in cache
            if (!a.versions.empty()) prefetch_row(store, a.versions.back());
          },
          [&](const scd2_entry& a) {  // what the entry, found and prefetched earlier, points to
            if (!a.versions.empty()) prefetch(&a.versions.back());
            if (a.history.size() > 1) prefetch(&a.history.back());
            if (a.pass == pass_) prefetch(&pass_records_[a.rec]);
          },
          [](const scd2_entry& a) { prefetch_object(&a); });
      if (!deferred_.empty()) {
        // The set-aside changes, planned over what the pass applied (their
        // rows were counted, checked and validated by the pass).
        const auto deref = [](const change_type* c) -> const change_type& { return *c; };
        auto rows = deferred_ | std::views::transform(deref);
        BatchStats late;
        std::array<std::uint64_t, 2> lost_ties{0, 0};  // see scd2_pass_context
        ts.used = 0;
        stage.stage_batch(rows, NoExpectations{}, late, std::optional<sequence_type>{});
        planned.plan(stage, state, store, ts, late,
                     scd2_pass_context{pass_, pass_records_.data(), &lost_ties});
        planned.reserve(store);
        stats.upserted_rows += late.upserted_rows - lost_ties[0];
        stats.deleted_rows += late.deleted_rows - lost_ties[1];
        stats.tied_rows += late.tied_rows;
      }
      if (stage.changes.tracking) {  // a checkpoint lists the keys changed
        for (const scd2_pass_record& u : pass_records_)
          stage.changes.touched.push_back(stage.key(*u.src));
      }
      admit.finish(stats);
    } catch (...) {
      undo(stage, state, store);
      throw;
    }
    if (!deferred_.empty()) planned.commit(stage, state, store, ts);  // cannot fail
    return true;
  }

  /// Frees the pass's scratch (as new, for a full refresh of the target).
  void release() noexcept { *this = scd2_one_pass{}; }

 private:
  template <class Store>
  void undo(const staging& stage, scd2_state& state, Store& store) noexcept {
    using Target = typename Store::row_type;
    for (const scd2_pass_record& u : pass_records_) {
      auto it = state.index.find(probe{u.src, traits::hash(stage.key, *u.src)});
      if (it == state.index.end()) continue;  // a new key whose entry was never made
      scd2_entry& e = it->second;
      while (e.history.size() > u.hist_size) e.history.pop_back();
      while (e.versions.size() > u.vers_size) {
        store.erase(e.versions.back());
        e.versions.pop_back();
      }
      if (u.closed) end_col<Target>::get(store.get(e.versions.back())).reset();
      if (!u.existed) state.index.erase(it);
    }
    pass_records_.clear();
  }

  std::uint32_t pass_ = 0;  // passes so far (0: none)
  std::vector<scd2_pass_record> pass_records_;  // per key touched
  std::vector<const change_type*> deferred_;    // changes planned after the pass
  std::array<scd2_entry*, 4> lookahead_entries_{};   // read-ahead: the entries of the next rows
};

}  // namespace flowlib::detail
