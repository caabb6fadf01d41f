// flowlib/flows/cdc/detail/scd1_one_pass.hpp
//
// AUTO CDC, SCD type 1, the one-pass path of cdc_flow::scd1_engine
// (engine.hpp). It holds only its per-batch scratch (undo records, the pass
// log); the engine hands it the staging, the SCD1 state and the planned
// path, whose scratch it frees once it has taken over.
//
// A batch for a target the flow already maintains is applied in one pass
// over the changes, in source order, straight into the target, as a
// hand-written loop would: the highest sequence wins, so source order
// within the batch does not change the outcome (R-CDC-1). It stays
// all-or-nothing through an undo record per key touched: the key's first
// applied change copies its entry and moves the stored row's values aside
// before overwriting them; a later upsert of the key into a row that
// exists is only noted, and the last one noted is written once every
// change has passed (a key changed many times costs one write); a delete
// parks the stored row (it is erased only once every change has passed,
// and clears a noted upsert); on any error the records restore
// every key, erase the rows the pass inserted and leave the store as it
// was. The metrics are those of the planned path, which applies a key's
// changes in sequence order: a key whose changes arrived out of order in
// the batch is recounted at the end, from a log of the pass.
//
// Not used where the planned path needs the whole batch first:
// ignore_null_updates (a late change still fills columns), strict_sequence
// (a tie between two superseded changes must be found) and a batch with a
// truncate (the pass stops, is undone, and the batch is planned); nor for
// the first batch (planning claims the target only once it cannot fail),
// input ranges whose rows do not stay put, or stores without mutable rows. Internal.
#pragma once

#include <flowlib/detail/admit.hpp>
#include <flowlib/detail/prefetch.hpp>
#include <flowlib/expect.hpp>
#include <flowlib/flows/cdc/detail/flow.hpp>
#include <flowlib/flows/cdc/detail/scd1_planned.hpp>
#include <flowlib/flows/cdc/detail/scd1_state.hpp>
#include <flowlib/flows/cdc/detail/staging.hpp>
#include <flowlib/flows/cdc/detail/target_scratch.hpp>
#include <flowlib/stats.hpp>
#include <flowlib/storage/memory.hpp>

#include <algorithm>
#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>
#include <ranges>
#include <type_traits>
#include <utility>
#include <vector>

namespace flowlib::detail {

/// The one-pass path of the SCD1 engine.
template <class K, class S, class Scd, class... Options>
class cdc_flow<K, S, Scd, Options...>::scd1_one_pass {
  using entry = typename scd1_state::entry;

  // SCD1 in one pass: how a stored row takes its key's last upsert. When
  // every mapped column's assignment can be made unable to throw ahead of
  // time (mapping::preparable: numbers, std::strings and nullable ones, ...),
  // the pass only prepares the row and writes it after everything that can
  // fail (write_due, last), so it keeps no copy of the stored values (a
  // copy per key touched would slow the pass markedly). Otherwise the
  // stored values are moved aside before the first write, for undo.
  template <class Target>
  static constexpr bool write_last = mapping<Target>::preparable;

  struct undo_record {
    const change_type* src;   // a change of the key: finds its entry again
    entry old;           // the entry before the pass (when `existed`)
    std::uint32_t saved;      // target scratch row with the stored row's values, or npos
                              // (always npos with write_last: the row is written last)
    // (Bit-fields keep the record in one cache line for an int64 sequence.)
    bool existed : 1;         // the key had an entry
    bool have : 1;            // ... whose sequence counts (not a collected tombstone)
    bool tomb : 1;            // the key is a tombstone now
    bool parked : 1;          // its stored row is deleted, erased at the end
    bool tie : 1;             // recount: a change below the key's batch maximum ties
    std::uint32_t last_log;   // the key's latest change in pass_log_
    std::uint32_t last_max;   // ... that was not superseded (pass_log_entry::none: none)
    std::uint32_t last_sup;   // the key's latest superseded change in superseded_, or npos
    std::uint32_t due;        // the key's pending write in due_writes_, or npos
  };
  struct nulled_column {      // a stored row's null column that prepare made an empty string
    row_id row;
    std::uint32_t column;     // among the mapped columns
  };
  struct due_write {          // an upsert written once the pass is through
    const change_type* change;  // null: cancelled by a later delete
    row_id row;
  };
  struct superseded_change {  // a change that arrived below its key's batch maximum
    sequence_type seq;
    std::uint32_t prev;       // the key's previous one in superseded_, or npos
  };
  struct pass_log_entry {           // an applied change (16 bytes for an int64 sequence)
    sequence_type seq;        // a copy: reading it never touches the batch again
    std::uint32_t prev;       // the key's previous change in pass_log_, or npos
    std::uint32_t prev_max : 31;  // the key's previous change that was not superseded
    std::uint32_t remove : 1;     // a delete (else an upsert)
    static constexpr std::uint32_t none = 0x7fffffff;  // prev_max: no such change
  };
  static constexpr std::size_t max_one_pass_rows = pass_log_entry::none;

 public:
  /// Whether a batch of type R for a Store of Target rows can take the pass.
  template <class Store, class Target, class R>
  static constexpr bool applies =
      !scd1_state::ignore_active && !opts::strict && cdc_one_pass_batch<R, change_type, Target> &&
      std::is_nothrow_move_assignable_v<sequence_type> && requires(Store& s, row_id id) {
        { s.get(id) } -> std::same_as<Target&>;
      };

  /// Whether the pass takes a batch it applies to: always (a batch for a
  /// target the flow already maintains).
  static constexpr bool takes(const staging&, const scd1_state&) noexcept { return true; }

  /// Applies the batch in one pass. Returns false, with everything undone,
  /// when the batch holds a truncate; throws, with everything undone, on an
  /// error. Once through, it frees the planned path's scratch (a later
  /// planned batch allocates it again).
  template <class Store, class Target, class R, class... P>
  bool apply(staging& stage, scd1_state& state, scd1_planned& planned, Store& store,
             cdc_target_scratch<Target>& ts, R& batch, const Expectations<P...>& checks,
             BatchStats& stats) {
    undo_records_.clear();
    pass_log_.clear();
    nulled_columns_.clear();
    pass_ = cdc_next_pass(pass_, state.index);
    const bool gc = stage.settings.tombstone_gc_threshold.has_value();
    state.read_clock(stage.settings);
    if (gc) state.compact_gc_queue(stage.changes);
    const std::size_t gc_size = state.gc_queue.size();
    std::ptrdiff_t tomb_delta = 0;
    bool ties = false;  // some key's metrics need recounting
    superseded_.clear();
    keys_with_superseded_.clear();
    due_writes_.clear();
    // The admit step, row by row inside the pass (R-CDC-5): its counts reach
    // `stats` only once the pass is through.
    admit_sequenced<K, S, P...> admit{checks, stage.key, stage.seq, stage.name,
                                      null_sequence_rule::cdc5};

    // One change; false on a truncate. `e` is the key's entry when the
    // caller found it already (nullptr: look it up).
    const auto step = [&](const change_type& r, std::size_t h, entry* e) -> bool {
      std::optional<sequence_type> so = admit(r);
      if (!so) return true;  // dropped by an expectation
      const sequence_type& s = *so;
      const op o = stage.classify(r);
      if (o == op::truncate) return false;
      if (state.floor && s < *state.floor) {  // below an earlier truncate
        ++stats.ignored_late_rows;
        return true;
      }
      const probe p{&r, h};
      if (e == nullptr) {
        auto it = state.index.find(p);
        if (it != state.index.end()) e = &it->second;
      }
      undo_record* u;
      bool first = false;
      if (e != nullptr && e->pass == pass_) {
        u = &undo_records_[e->rec];
        if (u->have && s < u->old.seq) {  // older than the stored change (R-CDC-2)
          ++stats.ignored_late_rows;
          return true;
        }
      } else {
        const bool have =
            e != nullptr && !(e->row == cdc_no_row && state.expired(stage.settings, *e));
        if (have && s < e->seq) {
          ++stats.ignored_late_rows;
          return true;
        }
        // The key's first applied change in this pass: its undo record.
        first = true;
        const auto ri = static_cast<std::uint32_t>(undo_records_.size());
        if (e != nullptr) {
          undo_records_.push_back({&r, *e, npos, true, have, e->row == cdc_no_row, false, false,
                                   npos, pass_log_entry::none, npos, npos});
        } else {
          key_type k = stage.key(r);
          undo_records_.push_back({&r, entry{}, npos, false, false, false, false, false, npos,
                                   pass_log_entry::none, npos, npos});
          const std::uint64_t gen = state.index.generation();
          entry fresh{};
          fresh.seq = s;
          e = &state.index.emplace(std::move(k), std::move(fresh)).first->second;
          if (state.index.generation() != gen) {
            lookahead_entries_.fill(nullptr);  // rehashed: lookahead is stale
          }
        }
        e->pass = pass_;
        e->rec = ri;
        u = &undo_records_.back();
      }
      const auto li = static_cast<std::uint32_t>(pass_log_.size());
      if (li == max_one_pass_rows) {
        throw error(errc::invalid_argument, stage.name, "", "",
                    "a batch cannot hold more than 2^31-1 changes");
      }
      pass_log_.push_back({s, u->last_log, u->last_max, o == op::remove});
      u->last_log = li;
      // The metrics of the planned path (see find_superseded_ties).
      const bool valid = !first || u->have;
      if (valid && s < e->seq) {  // below the key's batch maximum: superseded
        ++(o == op::remove ? stats.deleted_rows : stats.upserted_rows);
        if (u->have && !(u->old.seq < s)) {
          u->tie = ties = true;  // equal to the stored change
        } else {
          // Equal to an earlier batch maximum of the key? Those decrease
          // along the chain, so the walk stops at the first not above s
          // (usually at once: late changes are seldom far behind).
          std::uint32_t j = u->last_max;
          while (j != pass_log_entry::none && s < pass_log_[j].seq) j = pass_log_[j].prev_max;
          if (j != pass_log_entry::none && !(pass_log_[j].seq < s)) u->tie = ties = true;
          // Ties among superseded changes: found at the end.
          if (u->last_sup != npos && superseded_[u->last_sup].prev == npos) {
            keys_with_superseded_.push_back(e->rec);  // the key's second
          }
          superseded_.push_back({s, u->last_sup});
          u->last_sup = static_cast<std::uint32_t>(superseded_.size() - 1);
        }
        return true;
      }
      u->last_max = li;
      if (valid && !(e->seq < s)) {  // a tie: the later change wins (R-CDC-5)
        ++stats.tied_rows;
        if (!first) --(e->row == cdc_no_row ? stats.deleted_rows : stats.upserted_rows);
      }
      ++(o == op::remove ? stats.deleted_rows : stats.upserted_rows);

      e->seq = s;
      if (o == op::remove) {
        if (u->due != npos) due_writes_[u->due].change = nullptr;
        if (e->row != cdc_no_row) {
          if (u->existed && e->row == u->old.row) {
            u->parked = true;  // erased once the pass has succeeded
          } else {
            store.erase(e->row);  // inserted by this pass
          }
          e->row = cdc_no_row;
        }
        e->deleted_at = state.now;
        if (!u->tomb) ++tomb_delta;
        u->tomb = true;
        return true;
      }
      if (e->row == cdc_no_row && u->parked) {  // deleted earlier in the pass: back
        e->row = u->old.row;
        u->parked = false;
      }
      if (e->row != cdc_no_row) {
        Target& t = store.get(e->row);
        if constexpr (write_last<Target>) {
          // A stored row's null made an empty string is logged for the undo
          // (a row this pass inserted is erased by it).
          const bool stored = u->existed && e->row == u->old.row;
          mapping<Target>::prepare(t, r, [&](std::uint32_t col) {
            if (stored) nulled_columns_.push_back({e->row, col});
          });
        } else if (u->existed && e->row == u->old.row && u->saved == npos) {
          const std::uint32_t slot = ts.alloc();
          ts.rows[slot] = std::move(t);
          u->saved = slot;
        }
        if (!write_last<Target> && first) {
          mapping<Target>::assign(t, r);
        } else if (u->due == npos) {  // written once the pass is through
          u->due = static_cast<std::uint32_t>(due_writes_.size());
          due_writes_.push_back({&r, e->row});
        } else {
          due_writes_[u->due] = {&r, e->row};
        }
      } else {
        store.reserve(1);
        Target t{};
        mapping<Target>::assign(t, r);
        e->row = store.insert(std::move(t));
      }
      if (u->tomb) --tomb_delta;
      u->tomb = false;
      return true;
    };

    bool complete = true;
    try {
      const auto records_or_rows = [&](const entry& a) {
        // (A key this pass touched already has its row cached; its later
        // upserts are not written until the end anyway.)
        if (a.pass == pass_) {
          prefetch(&undo_records_[a.rec]);
        } else if (!write_last<Target> && a.row != cdc_no_row) {
          prefetch_row(store, a.row);
        }
      };
      const auto none = [](const entry&) noexcept {};
      complete = stage.one_pass_over(batch, state.index, lookahead_entries_, step, none,
                                     records_or_rows, none);
      if (complete) {
        if (!keys_with_superseded_.empty() && find_superseded_ties()) ties = true;
        if (ties) recount_ties(stats);
        if (gc) {
          for (const undo_record& u : undo_records_) {
            if (u.tomb) state.gc_queue.push_back({stage.key(*u.src), state.now});
          }
        }
        if (stage.changes.tracking) {  // a checkpoint lists the keys changed
          for (const undo_record& u : undo_records_)
            stage.changes.touched.push_back(stage.key(*u.src));
        }
        admit.finish(stats);
        write_due(store);  // last: with write_last, it cannot throw
      }
    } catch (...) {
      undo(stage, state, store, ts, gc_size);
      throw;
    }
    if (!complete) {
      undo(stage, state, store, ts, gc_size);
      return false;
    }
    // Commit: erase the parked rows; nothing here can fail.
    for (const undo_record& u : undo_records_) {
      if (u.parked) store.erase(u.old.row);
    }
    state.tombstones =
        static_cast<std::size_t>(static_cast<std::ptrdiff_t>(state.tombstones) + tomb_delta);
    if (gc) state.collect_tombstones(stage.settings);
    if (stage.scratch) {
      stage.release_staging();
      planned.release();
    }
    return true;
  }

  /// Frees the pass's scratch (as new, for a full refresh of the target).
  void release() noexcept { *this = scd1_one_pass{}; }

 private:
  /// Writes each key's last pending upsert (see apply). With
  /// write_last the rows were prepared and this cannot throw; otherwise
  /// the stored rows' values are already aside.
  template <class Store>
  void write_due(Store& store) {
    using Target = std::remove_cvref_t<decltype(store.get(row_id{}))>;
    constexpr std::size_t ahead = 8;  // rows and changes are cold in a large batch
    const std::size_t n = due_writes_.size();
    for (std::size_t i = 0; i < n; ++i) {
      if (i + ahead < n && due_writes_[i + ahead].change != nullptr) {
        prefetch_row(store, due_writes_[i + ahead].row);
        staging::prefetch_change(*due_writes_[i + ahead].change);
      }
      if (due_writes_[i].change != nullptr) {
        mapping<Target>::assign(store.get(due_writes_[i].row), *due_writes_[i].change);
      }
    }
  }

  /// Restores every key the pass touched (see apply).
  template <class Store, class Target>
  void undo(const staging& stage, scd1_state& state, Store& store, cdc_target_scratch<Target>& ts,
                     std::size_t gc_size) noexcept {
    for (const nulled_column& n : nulled_columns_) {
      mapping<Target>::reset_null(store.get(n.row), n.column);
    }
    nulled_columns_.clear();
    for (undo_record& u : undo_records_) {
      auto it = state.index.find(probe{u.src, traits::hash(stage.key, *u.src)});
      if (it == state.index.end()) continue;  // a new key whose entry was never made
      entry& e = it->second;
      if (e.row != cdc_no_row && !(u.existed && e.row == u.old.row)) store.erase(e.row);
      if (u.saved != npos) store.get(u.old.row) = std::move(ts.rows[u.saved]);
      if (u.existed) {
        e = std::move(u.old);
      } else {
        state.index.erase(it);
      }
    }
    state.gc_queue.erase(state.gc_queue.begin() + static_cast<std::ptrdiff_t>(gc_size),
                         state.gc_queue.end());
    undo_records_.clear();
  }

  /// Marks the keys where two superseded changes (arrived below their
  /// key's batch maximum) have equal sequences. With the ties found during
  /// the pass (a superseded change equal to the stored change, or to an
  /// earlier batch maximum), these are all the pass's counting misses: a
  /// change that arrives at or above the maximum is counted as the planned
  /// path counts it, and one equal to a superseded change is superseded too.
  /// Returns whether it marked any.
  ///
  /// Each key's superseded changes are chained, and only the keys with two
  /// or more are visited, each sorting its own few (one sort of the whole
  /// list costs far more, mostly in mispredicted branches).
  bool find_superseded_ties() {
    bool any = false;
    for (const std::uint32_t ri : keys_with_superseded_) {
      undo_record& u = undo_records_[ri];
      superseded_seqs_.clear();
      for (std::uint32_t i = u.last_sup; i != npos; i = superseded_[i].prev) {
        superseded_seqs_.push_back(&superseded_[i].seq);
      }
      std::sort(superseded_seqs_.begin(), superseded_seqs_.end(),
                [](const auto* a, const auto* b) { return *a < *b; });
      for (std::size_t k = 1; k < superseded_seqs_.size(); ++k) {
        if (!(*superseded_seqs_[k - 1] < *superseded_seqs_[k])) {
          u.tie = any = true;
          break;
        }
      }
    }
    return any;
  }

  /// Keys marked by find_superseded_ties: the pass counted their changes in
  /// source order; count them as the planned path does (in sequence order,
  /// the last of equals wins, R-CDC-5, R-CDC-7) instead.
  void recount_ties(BatchStats& stats) {
    const auto count_op = [](std::uint64_t& up, std::uint64_t& del, op o, std::uint64_t d) {
      (o == op::remove ? del : up) += d;
    };
    for (const undo_record& u : undo_records_) {
      if (!u.tie) continue;
      recount_order_.clear();  // (sequence, log position), in source order once reversed
      for (std::uint32_t i = u.last_log; i != npos; i = pass_log_[i].prev) {
        recount_order_.emplace_back(pass_log_[i].seq, i);
      }
      std::reverse(recount_order_.begin(), recount_order_.end());
      // As the pass counted: source order.
      std::uint64_t up = 0, del = 0, tied = 0;
      {
        bool valid = u.have, from_batch = false;
        const sequence_type* cur = u.have ? &u.old.seq : nullptr;
        op cur_op = op::upsert;
        for (const auto& [s, i] : recount_order_) {
          const op o = pass_log_[i].remove ? op::remove : op::upsert;
          if (valid && s < *cur) {
            count_op(up, del, o, 1);
            continue;
          }
          if (valid && !(*cur < s)) {
            ++tied;
            if (from_batch) count_op(up, del, cur_op, ~std::uint64_t{0});  // minus one
          }
          count_op(up, del, o, 1);
          cur = &s;
          cur_op = o;
          from_batch = valid = true;
        }
      }
      // As the planned path counts: sequence order, the last of equals wins.
      std::sort(recount_order_.begin(), recount_order_.end(), [](const auto& x, const auto& y) {
        return x.first < y.first || (!(y.first < x.first) && x.second < y.second);
      });
      std::uint64_t p_up = 0, p_del = 0, p_tied = 0;
      for (std::size_t k = 0; k < recount_order_.size(); ++k) {
        const sequence_type& s = recount_order_[k].first;
        if (k + 1 < recount_order_.size() && !(s < recount_order_[k + 1].first)) {
          ++p_tied;
          continue;
        }
        count_op(p_up, p_del, pass_log_[recount_order_[k].second].remove ? op::remove : op::upsert,
                 1);
        if (u.have && !(u.old.seq < s) && !(s < u.old.seq)) ++p_tied;  // equals the stored change
      }
      stats.upserted_rows += p_up - up;  // modular: the totals stay exact
      stats.deleted_rows += p_del - del;
      stats.tied_rows += p_tied - tied;
    }
  }

  std::uint32_t pass_ = 0;  // passes so far (0: none)
  std::vector<undo_record> undo_records_;  // per key touched
  std::vector<pass_log_entry> pass_log_;   // per change applied, in source order
  std::vector<superseded_change> superseded_;  // chained per key (undo_record::last_sup)
  std::vector<std::uint32_t> keys_with_superseded_;  // records of keys with two or more of them
  std::vector<due_write> due_writes_;  // one per key with an upsert not written yet
  std::vector<nulled_column> nulled_columns_;  // write_last: made null again by the undo
  std::vector<const sequence_type*> superseded_seqs_;  // find_superseded_ties: one key's
  std::vector<std::pair<sequence_type, std::uint32_t>> recount_order_;  // recount_ties
  std::array<entry*, 4> lookahead_entries_{};  // read-ahead: the entries of the next rows
};

}  // namespace flowlib::detail
