// flowlib/flows/cdc/detail/scd1_planned.hpp
//
// AUTO CDC, SCD type 1, the planned path of cdc_flow::scd1_engine
// (engine.hpp; R-CDC-2, R-CDC-3, R-CDC-5..7): the batch is grouped by key (staging.hpp), every
// key's outcome planned in scratch space in sequence order, storage
// reserved, and only then committed by operations that cannot fail. It
// holds only its per-batch scratch; the engine hands it the staging and the
// SCD1 state. Internal.
#pragma once

#include <flowlib/detail/prefetch.hpp>
#include <flowlib/detail/target_binding.hpp>
#include <flowlib/expect.hpp>
#include <flowlib/flows/cdc/detail/flow.hpp>
#include <flowlib/flows/cdc/detail/scd1_state.hpp>
#include <flowlib/flows/cdc/detail/staging.hpp>
#include <flowlib/flows/cdc/detail/target_scratch.hpp>
#include <flowlib/stats.hpp>
#include <flowlib/storage/memory.hpp>

#include <absl/container/flat_hash_set.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

namespace flowlib::detail {

/// The planned path of the SCD1 engine.
template <class K, class S, class Scd, class... Options>
class cdc_flow<K, S, Scd, Options...>::scd1_planned {
 public:
  /// Applies a batch: stage, plan, reserve, claim the target, commit.
  template <class Table, class Store, class Target, class R, class... P>
  void apply(staging& stage, scd1_state& state, Table& target, Store& store,
             cdc_target_scratch<Target>& ts, R& batch, const Expectations<P...>& checks,
             BatchStats& stats, target_binding& binding, std::string_view kind) {
    stage.stage_batch(batch, checks, stats, state.floor);
    plan(stage, state, store, ts, stats);
    reserve(stage, state, store);
    binding.claim(target, kind, stage.name, /*exclusive=*/true);  // the last fallible step
    commit(stage, state, store, ts, stats);
  }

  /// Frees the per-batch scratch (a later planned batch allocates it again).
  void release() noexcept { *this = scd1_planned{}; }

 private:
  using entry = typename scd1_state::entry;
  static constexpr bool ignore_active = scd1_state::ignore_active;

  enum class outcome : std::uint8_t { none, row, tombstone };
  struct key_plan {
    entry* hit;           // the key's entry, or nullptr for a new key
    std::uint32_t group;  // the key's group in the batch scratch
    outcome result;
    std::uint32_t slot;   // target scratch row when result == row
    entry state;          // the entry after the batch (row filled at commit)
  };

  template <class Store, class Target>
  void plan(staging& stage, scd1_state& state, Store& store, cdc_target_scratch<Target>& ts,
                  BatchStats& stats) {
    using Map = mapping<Target>;
    scratch_type& sc = *stage.scratch;
    const std::size_t n = sc.groups.size();
    // Reserved first: the plans hold pointers into the index, which a
    // rehash would invalidate (new keys are inserted at commit).
    state.index.reserve(state.index.size() + n);
    stage.order.clear();
    plans_.clear();
    plans_.reserve(n);
    new_tombstones_ = 0;
    new_keys_.clear();
    gc_keys_.clear();
    const bool gc = stage.settings.tombstone_gc_threshold.has_value();
    const bool track = stage.changes.tracking;  // a checkpoint lists the keys changed
    state.read_clock(stage.settings);
    truncating_ =
        stage.batch_floor.has_value() && (!state.floor || *state.floor < *stage.batch_floor);
    stage.probe_all(state.index, group_entries_);

    for (std::size_t g = 0; g < n; ++g) {
      if (g + staging::row_prefetch_distance < n)
        stage.prefetch_group_rows(g + staging::row_prefetch_distance);
      if constexpr (ignore_active) {  // the stored row is read while planning
        if (g + staging::row_prefetch_distance < n) {
          if (const entry* a = group_entries_[g + staging::row_prefetch_distance];
              a && a->row != cdc_no_row) {
            prefetch_row(store, a->row);
          }
        }
      }
      const auto& grp = sc.groups[g];
      const std::uint32_t b = static_cast<std::uint32_t>(stage.order.size());
      entry* hit = group_entries_[g];
      // The key, copied before the last upsert's row is moved into the target row.
      std::optional<key_type> key;
      if (hit == nullptr || gc || track) key.emplace(stage.key(sc.row(grp.head)));

      // The working state of the key, from its entry.
      bool have = hit != nullptr;
      if (have && hit->row == cdc_no_row && state.expired(stage.settings, *hit))
        have = false;  // collected tombstone
      bool truncated = false;
      if (have && stage.batch_floor && hit->seq < *stage.batch_floor) {  // removed by a truncate
        have = false;
        truncated = true;
      }
      const sequence_type* late_below = nullptr;  // ties below it are late changes
      if constexpr (!ignore_active) {
        if (stage.batch_floor) late_below = &*stage.batch_floor;
        if (have && (late_below == nullptr || *late_below < hit->seq)) late_below = &hit->seq;
      }
      const std::uint32_t e = stage.sort_group(grp, stats, late_below);
      key_plan plan{hit, static_cast<std::uint32_t>(g), outcome::none, 0, {}};
      entry& w = plan.state;
      bool exists = false;  // the working state holds a row
      bool loaded = false;  // the working row is in plan.slot
      if (have) {
        w.seq = hit->seq;
        w.ign = hit->ign;
        exists = hit->row != cdc_no_row;
      } else if constexpr (ignore_active) {
        if (truncated) w.ign.since = stage.batch_floor;
      }
      bool changed = false;
      const auto load = [&] {
        if (!loaded) {
          plan.slot = ts.alloc();
          ts.rows[plan.slot] = store.get(hit->row);
          loaded = true;
        }
      };

      for (std::uint32_t k = b; k < e; ++k) {
        const std::uint32_t c = stage.order[k];
        const sequence_type& s = stage.seqs[c];
        const change_type& row = sc.row(c);
        const op o = stage.ops[c];
        if (stage.batch_floor && s < *stage.batch_floor) {  // below a truncate
          ++stats.ignored_late_rows;
          continue;
        }
        const bool known = have || changed;
        if (known && s < w.seq) {  // late (R-CDC-2)
          if constexpr (ignore_active) {
            if (exists && !(w.ign.since && s < *w.ign.since)) {
              // Still counts for the columns that ignore nulls (order independence).
              load();
              if (late_into_ignored<Target>(ts.rows[plan.slot], w, o, row, s)) changed = true;
              ++(o == op::remove ? stats.deleted_rows : stats.upserted_rows);
              continue;
            }
          }
          ++stats.ignored_late_rows;
          continue;
        }
        if (known && !(w.seq < s) && have && !changed) {  // equal to the stored sequence
          ++stats.tied_rows;
          if constexpr (opts::strict) {
            if (!same_as_stored<Target>(store, *hit, o, row))
              stage.throw_tie(row, "as a stored change");
          }
        }
        // The newest change of the key so far.
        if (o == op::remove) {
          ++stats.deleted_rows;
          exists = false;
          if constexpr (ignore_active) {
            w.ign.since = s;
            w.ign.colseq = {};
          }
        } else {
          ++stats.upserted_rows;
          if constexpr (ignore_active) {
            if (exists) {
              load();
              upsert_into_ignored<Target>(ts.rows[plan.slot], w, row, s);
            } else {
              if (!loaded) {
                plan.slot = ts.alloc();
                loaded = true;
              }
              Map::assign(ts.rows[plan.slot], row);
              set_colseqs(w, row, s);
            }
          } else {
            if (!loaded) {
              plan.slot = ts.alloc();
              loaded = true;
            }
            if (k + 1 == e) {  // only the last upsert's values matter
              if (sc.by_ref) {
                Map::assign(ts.rows[plan.slot], row);
              } else {
                Map::assign(ts.rows[plan.slot], std::move(sc.rows[c]));
              }
            }
          }
          exists = true;
        }
        w.seq = s;
        changed = true;
      }
      if (truncated && hit->row != cdc_no_row && changed) ++stats.truncated_rows;
      if (!changed) continue;
      if (track) stage.changes.touched.push_back(*key);
      if (exists) {
        plan.result = outcome::row;
      } else {
        plan.result = outcome::tombstone;
        w.deleted_at = state.now;
        ++new_tombstones_;
        if (gc) gc_keys_.push_back(*key);
      }
      if (hit == nullptr) new_keys_.push_back(std::move(*key));
      plans_.push_back(std::move(plan));
    }
    if constexpr (ignore_active) {
      if (truncating_) plan_truncate_ignored(stage, state, store, ts);
    }
  }

  template <class Target, class Store>
  static bool same_as_stored(const Store& store, const entry& e, op o, const change_type& row) {
    if (o == op::remove) return e.row == cdc_no_row;
    if (e.row == cdc_no_row) return false;
    const Target& t = std::as_const(store).get(e.row);
    bool same = true;
    mapping<Target>::for_each([&](auto tc, auto cc) {
      using TC = decltype(tc);
      using CC = decltype(cc);
      if constexpr (cdc_rules<opts>::template ignores_null<typename TC::value_type>(
                        TC::name)) {
        if (!CC::get(row).has_value()) return;
      }
      if (same && !(TC::get(t) == CC::get(row))) same = false;
    });
    return same;
  }

  // ignore_null_updates (R-CDC-6), kept order-independent (R-CDC-1): each
  // column that ignores nulls remembers the sequence of the change that set
  // it, so a late change can still fill it when it is newer than that.
  static void set_colseqs(entry& w, const change_type& row, const sequence_type& s) {
    schema_of<change_type>::for_each([&](auto cc) {
      using CC = decltype(cc);
      if constexpr (ignored_cols::template is_ignored<CC>()) {
        constexpr std::size_t i = ignored_cols::index(CC::name);
        if (CC::get(row).has_value()) {
          w.ign.colseq[i] = s;
        } else {
          w.ign.colseq[i].reset();
        }
      }
    });
  }
  template <class Target>
  static void upsert_into_ignored(Target& t, entry& w, const change_type& row,
                           const sequence_type& s) {
    mapping<Target>::for_each([&](auto tc, auto cc) {
      using TC = decltype(tc);
      using CC = decltype(cc);
      if constexpr (ignored_cols::template is_ignored<CC>()) {
        constexpr std::size_t i = ignored_cols::index(CC::name);
        if (!CC::get(row).has_value()) return;  // keeps the stored value
        w.ign.colseq[i] = s;
      }
      TC::get(t) = CC::get(row);
    });
  }
  template <class Target>
  static bool late_into_ignored(Target& t, entry& w, op o, const change_type& row,
                         const sequence_type& s) {
    bool changed = false;
    if (o == op::remove) {  // values set before the delete are gone
      w.ign.since = s;
      changed = true;
    }
    mapping<Target>::for_each([&](auto tc, auto cc) {
      using TC = decltype(tc);
      using CC = decltype(cc);
      if constexpr (ignored_cols::template is_ignored<CC>()) {
        constexpr std::size_t i = ignored_cols::index(CC::name);
        auto& cs = w.ign.colseq[i];
        // Equal sequences: the change applied later (source order) wins.
        if (o == op::remove) {
          if (cs && !(s < *cs)) {
            cs.reset();
            TC::get(t).reset();
          }
        } else if (CC::get(row).has_value() && (!cs || !(s < *cs))) {
          cs = s;
          TC::get(t) = CC::get(row);
          changed = true;
        }
      }
    });
    return changed;
  }

  template <class Store>
  void reserve(const staging& stage, scd1_state& state, Store& store) {
    std::size_t inserts = 0;
    for (const key_plan& p : plans_) {
      if (p.result == outcome::row && (p.hit == nullptr || p.hit->row == cdc_no_row)) ++inserts;
    }
    store.reserve(inserts);
    if (stage.settings.tombstone_gc_threshold && new_tombstones_ != 0) {
      state.compact_gc_queue(stage.changes);
      cdc_reserve_grow(state.gc_queue, state.gc_queue.size() + new_tombstones_);
    }
  }

  template <class Store, class Target>
  void commit(const staging& stage, scd1_state& state, Store& store, cdc_target_scratch<Target>& ts,
              BatchStats& stats) noexcept {
    std::size_t next_new_key = 0;
    std::size_t next_gc_key = 0;
    const bool gc = stage.settings.tombstone_gc_threshold.has_value();
    const std::size_t n = plans_.size();
    for (std::size_t q = 0; q < n; ++q) {
      // The target rows are first touched here (entries were, while
      // planning, but may have been evicted since).
      if (q + 2 * staging::commit_prefetch_distance < n) {
        if (const entry* a = plans_[q + 2 * staging::commit_prefetch_distance].hit) {
          prefetch(a);
        }
      }
      if (q + staging::commit_prefetch_distance < n) {
        const key_plan& a = plans_[q + staging::commit_prefetch_distance];
        if (a.hit != nullptr && a.hit->row != cdc_no_row) prefetch_row(store, a.hit->row);
      }
      key_plan& p = plans_[q];
      entry* e = p.hit;
      if (e == nullptr) {
        e = &state.index.emplace(std::move(new_keys_[next_new_key++]), std::move(p.state))
                 .first->second;
        e->row = cdc_no_row;
      } else {
        const row_id old = e->row;
        *e = std::move(p.state);
        e->row = old;
        if (old == cdc_no_row) --state.tombstones;
      }
      if (p.result == outcome::row) {
        if (e->row == cdc_no_row) {
          e->row = store.insert(std::move(ts.rows[p.slot]));
        } else {
          store.assign(e->row, std::move(ts.rows[p.slot]));
        }
      } else {
        if (e->row != cdc_no_row) store.erase(e->row);
        e->row = cdc_no_row;
        ++state.tombstones;
        if (gc) state.gc_queue.push_back({std::move(gc_keys_[next_gc_key++]), e->deleted_at});
      }
    }
    if (truncating_) {  // R-CDC-3: every row below the truncate's sequence goes
      state.floor = stage.batch_floor;
      for (auto it = state.index.begin(); it != state.index.end();) {
        if (it->second.seq < *state.floor) {
          if (it->second.row != cdc_no_row) {
            store.erase(it->second.row);
            ++stats.truncated_rows;
          } else {
            --state.tombstones;
          }
          state.index.erase(it++);
        } else {
          ++it;
        }
      }
    }
    if (gc) state.collect_tombstones(stage.settings);
  }

  /// A row that survives a truncate at f with ignore_null_updates: its
  /// columns set below f are made null (see scd1_state::clear_below).
  template <class Target>
  static void clear_below(Target& t, entry& e, const sequence_type& f) {
    mapping<Target>::for_each([&](auto tc, auto cc) {
      using CC = decltype(cc);
      if constexpr (ignored_cols::template is_ignored<CC>()) {
        const auto& cs = e.ign.colseq[ignored_cols::index(CC::name)];
        if (cs && *cs < f) decltype(tc)::get(t).reset();
      }
    });
    scd1_state::clear_below(e, f);
  }
  template <class Store, class Target>
  void plan_truncate_ignored(const staging& stage, scd1_state& state, Store& store,
                             cdc_target_scratch<Target>& ts) {
    const sequence_type& f = *stage.batch_floor;
    absl::flat_hash_set<const entry*> planned;  // rare path: only when a truncate arrives
    for (key_plan& p : plans_) {
      if (p.hit != nullptr) planned.insert(p.hit);
      if (p.result == outcome::row) clear_below(ts.rows[p.slot], p.state, f);
    }
    for (auto& [k, e] : state.index) {
      if (e.row == cdc_no_row || e.seq < f || planned.contains(&e) || !scd1_state::kept_below(e, f))
        continue;
      key_plan p{&e, 0, outcome::row, ts.alloc(), e};
      ts.rows[p.slot] = store.get(e.row);
      clear_below(ts.rows[p.slot], p.state, f);
      plans_.push_back(std::move(p));
    }
  }

  std::vector<key_plan> plans_;
  std::vector<key_type> new_keys_;
  std::vector<key_type> gc_keys_;
  std::vector<entry*> group_entries_;  // per group: its entry, or nullptr
  bool truncating_ = false;
  std::size_t new_tombstones_ = 0;
};

}  // namespace flowlib::detail
