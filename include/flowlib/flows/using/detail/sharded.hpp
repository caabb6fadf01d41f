// flowlib/flows/using/detail/sharded.hpp
//
// REPLACE USING's batch spread over threads (ReplaceUsing::apply_batch with
// a pool; flows/replace_using.hpp, "Threads"): using_sharded<Flow>, the
// shards' scratch, kept across batches, and the apply that uses it. It is
// a friend of its flow: it groups, probes and commits through the flow's
// own index, row chains and per-group steps, so that the result is the
// serial one. Internal.
//
// Key-sharded: shard s holds the keys whose hash's top bits (above those
// the hash tables use for slots and control bytes) fall in its share. The
// phases, each a pool.run() over the shards (or over chunks of the batch)
// with serial steps between:
//   1. expectations, in row order, on the calling thread (only when the
//      flow has any: the first offending row decides, as in the serial
//      stage());
//   2. per chunk of the batch: the rows' hashes, their shards, and the
//      first null sequence (R-USING-7; the lowest one is thrown);
//   3. per shard: its rows grouped (R-USING-1) into its own scratch, in
//      batch order, the survivors copied;
//   4. the index reserved for every group (serially: no rehash follows),
//      then per shard: its groups probed (read-only) and classified;
//   5. the store reserved for the inserts, and the shards' groups that
//      insert or erase rows (new keys, equal sequences, a replace with
//      another row count), in the order of one scratch (by `first`),
//      committed on the calling thread, so every row id is the one the
//      serial commit gives; under a journal, the one-for-one replaces are
//      recorded here too (prepare_assign), in that same order;
//   6. per shard: the replaces that keep the key's row count (assigns
//      only, no id changes hands) and the late groups.
// Phases 1-4 may throw and change nothing in the target; 5 and 6 cannot.
#pragma once

#include <flowlib/detail/admit.hpp>
#include <flowlib/detail/prefetch.hpp>
#include <flowlib/detail/task_pool.hpp>
#include <flowlib/detail/type_traits.hpp>
#include <flowlib/expect.hpp>
#include <flowlib/stats.hpp>
#include <flowlib/storage/row_store.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

namespace flowlib::detail {

/// The sharded apply of a REPLACE USING flow `Flow` and its scratch; see
/// the header comment.
template <class Flow>
class using_sharded {
  using row_type = typename Flow::row_type;
  using scratch_type = typename Flow::scratch_type;  // one shard's grouped rows
  using probe = typename Flow::probe;
  using entry = typename Flow::entry;  // a key's index entry

 public:
  /// Applies `rows` to `target` for flow `f`, spread over `pool`, with the
  /// result the serial apply gives (the caller checked that the batch is
  /// shardable).
  template <class Table, class... P>
  BatchStats apply(Flow& f, Table& target, std::vector<row_type>& rows, const Expectations<P...>& checks,
                   task_pool& pool) {
    f.template check_target<Table>();
    f.begin_apply(target);
    using store_type = std::remove_cvref_t<decltype(target.store())>;
    store_type& store = target.store();
    const std::size_t n = rows.size();
    const std::size_t ns = pool.size();
    while (shards_.size() < ns) shards_.push_back(std::make_unique<shard>(f.key_));
    if (lists_.size() < ns * ns) lists_.resize(ns * ns);
    null_at_.assign(ns, npos);
    hashes_.resize(n);
    done_.assign(ns, 0);
    cursor_.assign(ns, 0);

    // 1. Expectations (R-USING-8), in row order.
    BatchStats stats;
    const unsigned char* keep = nullptr;
    if constexpr (sizeof...(P) > 0) {
      admit_sequenced<typename Flow::key_policy, typename Flow::sequence_policy, P...> admit{
          checks, f.key_, f.seq_, f.name_, null_sequence_rule::using7};
      f.keep_.resize(n);
      for (std::size_t i = 0; i < n; ++i) f.keep_[i] = admit(rows[i]).has_value() ? 1 : 0;
      admit.finish(stats);
      keep = f.keep_.data();
    } else {
      (void)checks;
      stats.input_rows = n;
    }

    // 2. Hashes and shards, by chunk; the first null sequence.
    pool.run(ns, [&](std::size_t c) {
      std::vector<std::uint32_t>* lists = &lists_[c * ns];
      for (std::size_t s = 0; s < ns; ++s) lists[s].clear();
      const std::size_t lo = n * c / ns, hi = n * (c + 1) / ns;
      for (std::size_t i = lo; i < hi; ++i) {
        if (keep != nullptr && keep[i] == 0) continue;
        const row_type& r = rows[i];
        if constexpr (sizeof...(P) == 0) {  // (admit() checked them above otherwise)
          if (!f.seq_(r)) [[unlikely]] {
            null_at_[c] = i;
            return;
          }
        }
        const std::size_t h = Flow::traits::hash(f.key_, r);
        hashes_[i] = h;
        lists[shard_of(h, ns)].push_back(static_cast<std::uint32_t>(i));
      }
    });
    for (std::size_t c = 0; c < ns; ++c) {
      if (null_at_[c] != npos) {  // the lowest chunk holds the first one
        const row_type& r = rows[null_at_[c]];
        throw_null_sequence(f.name_, f.seq_.name(), f.key_.describe(r), null_sequence_rule::using7);
      }
    }

    // 3. Each shard groups its rows (R-USING-1), in batch order.
    pool.run(ns, [&](std::size_t s) {
      scratch_type& sc = shards_[s]->sc;
      std::size_t mine = 0;
      for (std::size_t c = 0; c < ns; ++c) mine += lists_[c * ns + s].size();
      sc.reset(mine);
      const bool lookahead = sc.index_is_large();
      for (std::size_t c = 0; c < ns; ++c) {
        const std::vector<std::uint32_t>& list = lists_[c * ns + s];
        const std::size_t m = list.size();
        for (std::size_t j = 0; j < m; ++j) {
          if (lookahead && j + Flow::stage_prefetch_distance < m) {
            const std::uint32_t a = list[j + Flow::stage_prefetch_distance];
            sc.index.prefetch(probe{&rows[a], hashes_[a]});
          }
          const std::uint32_t i = list[j];
          const row_type& r = rows[i];
          f.group_row(sc, r, std::move(*f.seq_(r)), hashes_[i], i);
        }
      }
      sc.count_candidates();
      sc.keep_candidates();
    });
    std::size_t groups = 0, candidates = 0;
    for (std::size_t s = 0; s < ns; ++s) {
      groups += shards_[s]->sc.groups.size();
      candidates += shards_[s]->sc.candidates;
    }
    stats.superseded_rows = stats.input_rows - stats.dropped_rows - candidates;

    // 4. The index reserved for the worst case (no rehash from here on, so
    // entry pointers stay valid), then each shard probes it read-only.
    f.index_.reserve(f.index_.size() + groups);
    bool journaling = false;
    if constexpr (requires { store.journaling(); }) journaling = store.journaling();
    pool.run(ns, [&](std::size_t s) { probe_shard(f, *shards_[s], journaling); });
    std::size_t inserts = 0, assigns = 0, visits = 0;
    for (std::size_t s = 0; s < ns; ++s) {
      inserts += shards_[s]->inserts;
      assigns += shards_[s]->assigns;
      visits += shards_[s]->visit.size();
    }

    // 5. Reserve, merge the shards' groups back into batch order, claim.
    store.reserve(inserts);
    if (f.next_.size() < store.id_bound() + inserts) f.next_.resize(store.id_bound() + inserts, npos);
    if (journaling) store.prepare_assigns(assigns);
    merge_visits(visits);
    f.binding_.claim(target, Flow::kind, f.name_, /*exclusive=*/true);
    // From here on nothing can fail.
    for (const auto& [s, g] : order_) {
      shard& sh = *shards_[s];
      auto& grp = sh.sc.groups[g];
      if (sh.kinds[g] == group_kind::assigns) {  // (under a journal) record, in commit order
        row_id old = sh.hits[g].head;
        for (std::uint32_t c = grp.head; c != npos; c = sh.sc.next[c]) {
          sh.tickets[c] = store.prepare_assign(old);
          old = f.next_[old];
        }
      } else {
        entry* e = sh.hits[g].e;
        f.commit_group(store, sh.sc, grp, e, e == nullptr ? &sh.new_keys[sh.new_key_next++] : nullptr, stats);
      }
    }

    // 6. The replaces that keep their row count, by shard.
    const auto assign_shard = [&](std::size_t s) noexcept {
      commit_assigns(f, store, *shards_[s], journaling);
      done_[s] = 1;
    };
    try {
      pool.run(ns, assign_shard);
    } catch (...) {  // the pool failed to start (tasks cannot throw): finish here
      for (std::size_t s = 0; s < ns; ++s) {
        if (done_[s] == 0) assign_shard(s);
      }
    }
    store.finish_assigns();
    for (std::size_t s = 0; s < ns; ++s) {
      const BatchStats& t = shards_[s]->stats;
      stats.applied_rows += t.applied_rows;
      stats.replaced_rows += t.replaced_rows;
      stats.ignored_late_rows += t.ignored_late_rows;
    }
    return stats;
  }

 private:
  // What phase 4 decides for a group, and so which phase commits it.
  enum class group_kind : unsigned char { late, assigns, serial };

  struct shard {
    explicit shard(const typename Flow::key_policy& k) : sc(k) {}
    scratch_type sc;
    std::vector<typename Flow::hit> hits;           // per group
    std::vector<group_kind> kinds;                  // per group
    std::vector<std::uint32_t> visit;               // groups phase 5 commits or records, in group order
    std::vector<typename Flow::key_type> new_keys;  // copies of the new groups' keys, in group order
    std::vector<std::size_t> tickets;               // per candidate: its prepared assign (under a journal)
    std::size_t inserts = 0;                        // store inserts of its serial groups
    std::size_t assigns = 0;                        // rows its assign groups overwrite
    std::size_t new_key_next = 0;
    BatchStats stats;                               // of phase 6
  };

  // The shard of a key hash: its top 24 bits, scaled (absl's tables use
  // the low 7 bits for control bytes and the bits from 7 up for slots).
  static std::size_t shard_of(std::size_t hash, std::size_t shards) noexcept {
    return static_cast<std::size_t>(((static_cast<std::uint64_t>(hash) >> 40) * shards) >> 24);
  }

  // Phase 4 for one shard: finds every group's entry and sorts the groups
  // into the phases that commit them (see group_kind).
  static void probe_shard(Flow& f, shard& sh, bool journaling) {
    scratch_type& sc = sh.sc;
    const std::size_t n = sc.groups.size();
    sh.hits.resize(n);
    sh.kinds.resize(n);
    sh.visit.clear();
    sh.new_keys.clear();
    if (journaling && sh.tickets.size() < sc.used) sh.tickets.resize(sc.used);
    sh.inserts = 0;
    sh.assigns = 0;
    sh.new_key_next = 0;
    sh.stats = BatchStats{};
    sh.visit.reserve(n);
    for (std::size_t g = 0; g < n; ++g) {
      if (g + Flow::probe_prefetch_distance < n) {
        const auto& ahead = sc.groups[g + Flow::probe_prefetch_distance];
        f.index_.prefetch(probe{&sc.row(ahead.head), ahead.hash});
      }
      const auto& grp = sc.groups[g];
      const auto it = f.index_.find(probe{&sc.row(grp.head), grp.hash});
      group_kind k = group_kind::serial;
      if (it == f.index_.end()) {
        sh.hits[g] = {nullptr, npos};
        sh.new_keys.push_back(f.key_(sc.row(grp.head)));
        sh.inserts += grp.count;
      } else {
        entry& e = it->second;
        sh.hits[g] = {&e, e.head};
        if (e.seq < grp.seq) {
          if (grp.count == e.count) {
            k = group_kind::assigns;
            sh.assigns += e.count;
          } else {
            sh.inserts += grp.count > e.count ? grp.count - e.count : 0;
          }
        } else if (grp.seq < e.seq) {
          k = group_kind::late;
        } else {
          sh.inserts += grp.count;
        }
      }
      sh.kinds[g] = k;
      if (k == group_kind::serial || (k == group_kind::assigns && journaling)) {
        sh.visit.push_back(static_cast<std::uint32_t>(g));
      }
    }
  }

  // Phase 5's order: the shards' visited groups merged by their first row's
  // batch position (each shard's are in that order already), which is the
  // order of the groups of one scratch.
  void merge_visits(std::size_t visits) {
    const std::size_t ns = cursor_.size();
    auto& heap = heap_;
    auto& out = order_;
    out.clear();
    out.reserve(visits);
    heap.clear();
    heap.reserve(ns);
    const auto first_of = [&](std::size_t s) {
      const shard& sh = *shards_[s];
      return sh.sc.groups[sh.visit[cursor_[s]]].first;
    };
    const auto later = [](const auto& a, const auto& b) { return a.first > b.first; };
    for (std::size_t s = 0; s < ns; ++s) {
      if (!shards_[s]->visit.empty()) heap.push_back({first_of(s), static_cast<std::uint32_t>(s)});
    }
    std::make_heap(heap.begin(), heap.end(), later);
    while (!heap.empty()) {
      std::pop_heap(heap.begin(), heap.end(), later);
      const std::uint32_t s = heap.back().second;
      heap.pop_back();
      const shard& sh = *shards_[s];
      out.push_back({s, sh.visit[cursor_[s]]});  // capacity reserved
      if (++cursor_[s] < sh.visit.size()) {
        heap.push_back({first_of(s), s});
        std::push_heap(heap.begin(), heap.end(), later);
      }
    }
  }

  // Phase 6 for one shard: its replaces that keep the key's row count are
  // assigns over the key's rows, which no other shard touches; the late
  // groups are counted.
  template <class Store>
  static void commit_assigns(Flow& f, Store& store, shard& sh, bool journaling) noexcept {
    scratch_type& sc = sh.sc;
    const std::size_t n = sc.groups.size();
    for (std::size_t g = 0; g < n; ++g) {
      if (g + Flow::commit_prefetch_distance < n && sh.kinds[g + Flow::commit_prefetch_distance] == group_kind::assigns) {
        const auto& ahead = sh.hits[g + Flow::commit_prefetch_distance];
        prefetch<access::write>(ahead.e);
        prefetch_row(store, ahead.head);
      }
      auto& grp = sc.groups[g];
      if (sh.kinds[g] == group_kind::late) {
        sh.stats.ignored_late_rows += grp.count;
        continue;
      }
      if (sh.kinds[g] != group_kind::assigns) continue;
      entry* e = sh.hits[g].e;
      sh.stats.replaced_rows += e->count;
      sh.stats.applied_rows += grp.count;
      row_id old = e->head;
      for (std::uint32_t c = grp.head; c != npos; c = sc.next[c]) {
        store.assign_prepared(journaling ? sh.tickets[c] : no_assign_ticket, old, std::move(sc.row(c)));
        old = f.next_[old];
      }
      e->seq = std::move(grp.seq);
    }
  }

  std::vector<std::unique_ptr<shard>> shards_;
  std::vector<std::vector<std::uint32_t>> lists_;  // [chunk * shards + shard]: the chunk's rows of it
  std::vector<std::size_t> null_at_;               // per chunk: its first null sequence, or npos
  std::vector<std::size_t> hashes_;                // per row
  std::vector<std::pair<std::uint32_t, std::uint32_t>> heap_;   // merging: (first, shard)
  std::vector<std::pair<std::uint32_t, std::uint32_t>> order_;  // phase 5: (shard, group)
  std::vector<std::size_t> cursor_;                // per shard, merging
  std::vector<unsigned char> done_;                // per shard, phase 6
};

}  // namespace flowlib::detail
