// flowlib/flows/cdc/scd1.hpp
//
// AUTO CDC, SCD type 1, planned (R-CDC-2, R-CDC-3, R-CDC-5..7): the batch is
// grouped by key (cdc/staging.hpp), every key's outcome planned in scratch
// space in sequence order, storage reserved, and only then committed by
// operations that cannot fail. Also the SCD1 state the one-pass engine
// (cdc/scd1_one_pass.hpp) shares: the key index with its per-key entries,
// tombstones and their GC queue, and the truncate floor. Internal.
#pragma once

#include <flowlib/detail/cdc_batch.hpp>
#include <flowlib/detail/flat_index.hpp>
#include <flowlib/detail/key_index.hpp>
#include <flowlib/flows/cdc/staging.hpp>
#include <flowlib/storage/memory.hpp>

#include <absl/container/flat_hash_set.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

namespace flowlib::detail {

/// SCD1, planned; the base of the SCD1 engine (cdc_scd1).
template <class K, class S, class Scd, class... Options>
class cdc_scd1_planned : public cdc_staging<K, S, Scd, Options...> {
  using base = cdc_staging<K, S, Scd, Options...>;

 public:
  using base::base;
  using typename base::sequence_type;

  /// Keys the engine holds state for (target keys and tombstones).
  std::size_t key_count() const noexcept { return index_.size(); }
  /// Tombstones currently kept.
  std::size_t tombstone_count() const noexcept { return tombstones_; }
  /// Changes below this sequence are ignored (the highest truncate applied).
  const std::optional<sequence_type>& truncate_floor() const noexcept { return floor_; }

  /// As new (R-EXACT-5): no keys, tombstones or floor; the index and the
  /// scratch are freed (the ONCE marker is the facade's target_binding).
  void reset_state() noexcept {
    index_ = index_type{0, typename index_type::hasher{}, typename index_type::key_equal{key_}};
    floor_.reset();
    tombstones_ = 0;
    gc_queue_ = {};
    gc_head_ = 0;
    release_planned_scratch();
    this->reset_staging();
    changes_.on_reset();
  }

  /// Applies a staged batch: plan, reserve, claim the target, commit.
  template <class Table, class Store, class Target, class R, class... P>
  void apply_planned(Table& target, Store& store, cdc_target_scratch<Target>& ts, R& batch,
                     const Expectations<P...>& checks, BatchStats& stats, target_binding& binding,
                     std::string_view kind) {
    stage_batch(batch, checks, stats, floor_);
    plan_batch(store, ts, stats);
    reserve_planned(store);
    binding.claim(target, kind, name_, /*exclusive=*/true);  // the last fallible step
    commit_planned(store, ts, stats);
  }

 protected:
  template <class>
  friend struct cdc_checkpoint;
  using typename base::opts;
  using typename base::change_type;
  using typename base::key_type;
  using typename base::traits;
  using typename base::op;
  using typename base::probe;
  using typename base::scratch_type;
  using typename base::ignored_cols;
  template <class T>
  using mapping = typename base::template mapping<T>;
  template <class T>
  using start_col = typename base::template start_col<T>;
  template <class T>
  using end_col = typename base::template end_col<T>;
  using base::n_ignored;
  using base::no_row;
  using base::probe_prefetch_distance;
  using base::entry_prefetch_distance;
  using base::row_prefetch_distance;
  using base::commit_prefetch_distance;
  using base::target_scratch;
  using base::classify;
  using base::same_change;
  using base::throw_tie;
  using base::stage_batch;
  using base::sort_group;
  using base::probe_all;
  using base::prefetch_group_rows;
  using base::prefetch_change;
  using base::release_staging;
  using base::reset_staging;
  using base::name_;
  using base::settings_;
  using base::options_;
  using base::key_;
  using base::seq_;
  using base::scratch_;
  using base::seqs_;
  using base::ops_;
  using base::order_;
  using base::batch_floor_;
  using base::changes_;
  static constexpr bool ignore_active = n_ignored > 0;

  // --- per-key state -----------------------------------------------------------

  struct null_state {};
  struct ignore_state {
    std::optional<sequence_type> since;  // the latest delete at or below seq
    std::array<std::optional<sequence_type>, n_ignored> colseq{};  // who set each column
  };
  struct scd1_entry {
    sequence_type seq;          // the latest change applied (upsert or delete)
    row_id row = no_row;        // no_row: a tombstone
    std::uint32_t pass = 0;     // one-pass apply: the pass that last touched the key
    cdc_clock::time_point deleted_at{};
    std::uint32_t rec = 0;      // ... and the key's undo record in that pass
    [[no_unique_address]] std::conditional_t<ignore_active, ignore_state, null_state> ign{};
  };
  using entry = scd1_entry;
  // (Not key_index: see flat_index.hpp for what it adds.)
  using index_type = flat_index<key_type, entry, key_index_hash<K, probe>, key_index_eq<K, probe>>;

  // --- per-batch plans -----------------------------------------------------------

  enum class outcome : std::uint8_t { none, row, tombstone };
  struct scd1_plan {
    scd1_entry* hit;      // the key's entry, or nullptr for a new key
    std::uint32_t group;  // the key's group in the batch scratch
    outcome result;
    std::uint32_t slot;   // target scratch row when result == row
    scd1_entry state;     // the entry after the batch (row filled at commit)
  };

  template <class Store, class Target>
  void plan_batch(Store& store, cdc_target_scratch<Target>& ts, BatchStats& stats) {
    using Map = mapping<Target>;
    scratch_type& sc = *scratch_;
    const std::size_t n = sc.groups.size();
    // Reserved first: the plans hold pointers into the index, which a
    // rehash would invalidate (new keys are inserted at commit).
    index_.reserve(index_.size() + n);
    order_.clear();
    plans_.clear();
    plans_.reserve(n);
    new_tombstones_ = 0;
    new_keys_.clear();
    gc_keys_.clear();
    const bool gc = settings_.tombstone_gc_threshold.has_value();
    const bool track = changes_.tracking;  // a checkpoint lists the keys changed
    now_ = settings_.tombstone_gc_threshold ? read_clock() : cdc_clock::time_point{};
    truncating_ = batch_floor_.has_value() && (!floor_ || *floor_ < *batch_floor_);
    probe_all(index_, group_entries_);

    for (std::size_t g = 0; g < n; ++g) {
      if (g + row_prefetch_distance < n) prefetch_group_rows(g + row_prefetch_distance);
      if constexpr (ignore_active) {  // the stored row is read while planning
        if (g + row_prefetch_distance < n) {
          if (const scd1_entry* a = group_entries_[g + row_prefetch_distance];
              a && a->row != no_row) {
            prefetch_row(store, a->row);
          }
        }
      }
      const auto& grp = sc.groups[g];
      const std::uint32_t b = static_cast<std::uint32_t>(order_.size());
      scd1_entry* hit = group_entries_[g];
      // The key, copied before the last upsert's row is moved into the target row.
      std::optional<key_type> key;
      if (hit == nullptr || gc || track) key.emplace(key_(sc.row(grp.head)));

      // The working state of the key, from its entry.
      bool have = hit != nullptr;
      if (have && hit->row == no_row && expired(*hit)) have = false;  // collected tombstone
      bool truncated = false;
      if (have && batch_floor_ && hit->seq < *batch_floor_) {  // removed by a truncate
        have = false;
        truncated = true;
      }
      const sequence_type* late_below = nullptr;  // ties below it are late changes
      if constexpr (!ignore_active) {
        if (batch_floor_) late_below = &*batch_floor_;
        if (have && (late_below == nullptr || *late_below < hit->seq)) late_below = &hit->seq;
      }
      const std::uint32_t e = sort_group(grp, stats, late_below);
      scd1_plan plan{hit, static_cast<std::uint32_t>(g), outcome::none, 0, {}};
      scd1_entry& w = plan.state;
      bool exists = false;  // the working state holds a row
      bool loaded = false;  // the working row is in plan.slot
      if (have) {
        w.seq = hit->seq;
        w.ign = hit->ign;
        exists = hit->row != no_row;
      } else if constexpr (ignore_active) {
        if (truncated) w.ign.since = batch_floor_;
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
        const std::uint32_t c = order_[k];
        const sequence_type& s = seqs_[c];
        const change_type& row = sc.row(c);
        const op o = ops_[c];
        if (batch_floor_ && s < *batch_floor_) {  // below a truncate
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
            if (!same_as_stored<Target>(store, *hit, o, row)) throw_tie(row, "as a stored change");
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
      if (truncated && hit->row != no_row && changed) ++stats.truncated_rows;
      if (!changed) continue;
      if (track) changes_.touched.push_back(*key);
      if (exists) {
        plan.result = outcome::row;
      } else {
        plan.result = outcome::tombstone;
        w.deleted_at = now_;
        ++new_tombstones_;
        if (gc) gc_keys_.push_back(*key);
      }
      if (hit == nullptr) new_keys_.push_back(std::move(*key));
      plans_.push_back(std::move(plan));
    }
    if constexpr (ignore_active) {
      if (truncating_) plan_truncate_ignored(store, ts);
    }
  }

  cdc_clock::time_point read_clock() const {
    return settings_.clock ? settings_.clock() : cdc_clock::now();
  }
  bool expired(const scd1_entry& e) const noexcept {
    return settings_.tombstone_gc_threshold &&
           e.deleted_at + *settings_.tombstone_gc_threshold <= now_;
  }

  template <class Target, class Store>
  bool same_as_stored(const Store& store, const scd1_entry& e, op o, const change_type& row) const {
    if (o == op::remove) return e.row == no_row;
    if (e.row == no_row) return false;
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
  void set_colseqs(scd1_entry& w, const change_type& row, const sequence_type& s) const {
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
  void upsert_into_ignored(Target& t, scd1_entry& w, const change_type& row,
                           const sequence_type& s) const {
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
  bool late_into_ignored(Target& t, scd1_entry& w, op o, const change_type& row,
                         const sequence_type& s) const {
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
  void reserve_planned(Store& store) {
    std::size_t inserts = 0;
    for (const scd1_plan& p : plans_) {
      if (p.result == outcome::row && (p.hit == nullptr || p.hit->row == no_row)) ++inserts;
    }
    store.reserve(inserts);
    if (settings_.tombstone_gc_threshold && new_tombstones_ != 0) {
      if (gc_head_ > gc_queue_.size() / 2) {  // compact the queue (moves only)
        note_collected();
        gc_queue_.erase(gc_queue_.begin(),
                        gc_queue_.begin() + static_cast<std::ptrdiff_t>(gc_head_));
        gc_head_ = 0;
      }
      cdc_reserve_grow(gc_queue_, gc_queue_.size() + new_tombstones_);
    }
  }

  template <class Store, class Target>
  void commit_planned(Store& store, cdc_target_scratch<Target>& ts, BatchStats& stats) noexcept {
    std::size_t next_new_key = 0;
    std::size_t next_gc_key = 0;
    const bool gc = settings_.tombstone_gc_threshold.has_value();
    const std::size_t n = plans_.size();
    for (std::size_t q = 0; q < n; ++q) {
      // The target rows are first touched here (entries were, while
      // planning, but may have been evicted since).
      if (q + 2 * commit_prefetch_distance < n) {
        if (const scd1_entry* a = plans_[q + 2 * commit_prefetch_distance].hit) {
          prefetch(a);
        }
      }
      if (q + commit_prefetch_distance < n) {
        const scd1_plan& a = plans_[q + commit_prefetch_distance];
        if (a.hit != nullptr && a.hit->row != no_row) prefetch_row(store, a.hit->row);
      }
      scd1_plan& p = plans_[q];
      scd1_entry* e = p.hit;
      if (e == nullptr) {
        e = &index_.emplace(std::move(new_keys_[next_new_key++]), std::move(p.state))
                 .first->second;
        e->row = no_row;
      } else {
        const row_id old = e->row;
        *e = std::move(p.state);
        e->row = old;
        if (old == no_row) --tombstones_;
      }
      if (p.result == outcome::row) {
        if (e->row == no_row) {
          e->row = store.insert(std::move(ts.rows[p.slot]));
        } else {
          store.assign(e->row, std::move(ts.rows[p.slot]));
        }
      } else {
        if (e->row != no_row) store.erase(e->row);
        e->row = no_row;
        ++tombstones_;
        if (gc) gc_queue_.push_back({std::move(gc_keys_[next_gc_key++]), e->deleted_at});
      }
    }
    if (truncating_) {  // R-CDC-3: every row below the truncate's sequence goes
      floor_ = batch_floor_;
      for (auto it = index_.begin(); it != index_.end();) {
        if (it->second.seq < *floor_) {
          if (it->second.row != no_row) {
            store.erase(it->second.row);
            ++stats.truncated_rows;
          } else {
            --tombstones_;
          }
          index_.erase(it++);
        } else {
          ++it;
        }
      }
    }
    if (gc) collect_tombstones();
  }

  // With ignore_null_updates, a truncate acts on a row that survives it as a
  // delete at the truncate's sequence would: values that columns ignoring
  // nulls kept from changes below it are gone (R-CDC-1 with R-CDC-3, R-CDC-6).
  static bool kept_below(const scd1_entry& e, const sequence_type& f) {
    for (const auto& cs : e.ign.colseq) {
      if (cs && *cs < f) return true;
    }
    return false;
  }
  template <class Target>
  static void clear_below(Target& t, scd1_entry& e, const sequence_type& f) {
    if (!e.ign.since || *e.ign.since < f) e.ign.since = f;
    mapping<Target>::for_each([&](auto tc, auto cc) {
      using CC = decltype(cc);
      if constexpr (ignored_cols::template is_ignored<CC>()) {
        auto& cs = e.ign.colseq[ignored_cols::index(CC::name)];
        if (cs && *cs < f) {
          cs.reset();
          decltype(tc)::get(t).reset();
        }
      }
    });
  }
  template <class Store, class Target>
  void plan_truncate_ignored(Store& store, cdc_target_scratch<Target>& ts) {
    const sequence_type& f = *batch_floor_;
    absl::flat_hash_set<const scd1_entry*> planned;  // rare path: only when a truncate arrives
    for (scd1_plan& p : plans_) {
      if (p.hit != nullptr) planned.insert(p.hit);
      if (p.result == outcome::row) clear_below(ts.rows[p.slot], p.state, f);
    }
    for (auto& [k, e] : index_) {
      if (e.row == no_row || e.seq < f || planned.contains(&e) || !kept_below(e, f)) continue;
      scd1_plan p{&e, 0, outcome::row, ts.alloc(), e};
      ts.rows[p.slot] = store.get(e.row);
      clear_below(ts.rows[p.slot], p.state, f);
      plans_.push_back(std::move(p));
    }
  }

  // Tombstone GC (R-CDC-2): tombstones older than the threshold go, oldest
  // first; a queue entry whose key was changed since is stale and skipped.
  void collect_tombstones() noexcept {
    while (gc_head_ < gc_queue_.size()) {
      auto& [key, at] = gc_queue_[gc_head_];
      if (at + *settings_.tombstone_gc_threshold > now_) break;
      auto it = index_.find(key);
      if (it != index_.end() && it->second.row == no_row && it->second.deleted_at == at) {
        index_.erase(it);
        --tombstones_;
      }
      ++gc_head_;
    }
  }

  /// Before the GC queue drops its examined entries: a checkpoint that
  /// follows lists their keys (cdc/checkpoint.hpp).
  void note_collected() {
    if (!changes_.tracking) return;
    for (std::size_t i = changes_.gc_from; i < gc_head_; ++i) {
      changes_.touched.push_back(gc_queue_[i].first);
    }
    changes_.gc_from = 0;
  }

  /// Frees the planned path's scratch (the one-pass engine calls it once it
  /// takes over; a later planned batch allocates it again).
  void release_planned_scratch() noexcept {
    if (!scratch_) return;
    release_staging();
    plans_ = {};
    new_keys_ = {};
    gc_keys_ = {};
    group_entries_ = {};
  }

  index_type index_{0, typename index_type::hasher{}, typename index_type::key_equal{key_}};
  std::optional<sequence_type> floor_;  // highest truncate applied
  std::size_t tombstones_ = 0;
  std::vector<std::pair<key_type, cdc_clock::time_point>> gc_queue_;  // by deletion time
  std::size_t gc_head_ = 0;
  cdc_clock::time_point now_{};  // the batch's time (tombstone GC)

  // Per batch (kept across batches).
  std::vector<scd1_plan> plans_;
  std::vector<key_type> new_keys_;
  std::vector<key_type> gc_keys_;
  std::vector<entry*> group_entries_;  // per group: its entry, or nullptr
  bool truncating_ = false;
  std::size_t new_tombstones_ = 0;
};

}  // namespace flowlib::detail
