// flowlib/flows/replace_using.hpp
//
// ReplaceUsing<Key, Seq>: keeps a target current from a stream of partial
// snapshots (docs/semantics.md#replace-using). Every batch carries the whole current
// set of rows for the keys it mentions; for each key only the rows with the
// batch's highest sequence count (R-USING-1), and they replace the target's
// rows of that key when their sequence is higher, join them when it is
// equal, and are ignored when it is lower (R-USING-2). Keys absent from the
// batch are untouched (R-USING-3), so any split and order of the input gives
// the same target (R-USING-4).
//
//   using Flow = flowlib::ReplaceUsing<flowlib::Key<&Event::region_id>,
//                                      flowlib::Seq<&Event::seq>>;
//   flowlib::StreamingTable<Event> events{"events"};
//   Flow flow{"events_flow"};
//   flowlib::BatchStats s = flow.apply(events, batch);            // any input range
//   flow.apply(events, batch, flowlib::expectations(...));        // with expectations
//
// Expectations declared on the target table (table_options().expect(...))
// apply too, after the flow's own: both run on every row before R-USING-1
// (R-USING-8), and the metrics list the flow's first, then the table's.
//
// All-or-nothing: a batch is read and validated into per-flow scratch space
// (expectations, null sequences, user exceptions all happen here), the
// target's storage is reserved, and only then is the batch committed, by
// operations that cannot fail. On any error the target and the flow's state
// are exactly as before the call.
//
// Performance: one hash per input row (reused for the target probe), no
// allocation per row in steady state (scratch rows are assigned into slots
// kept from earlier batches), one target probe per distinct key, with the
// probes and row writes software-prefetched a few groups ahead. A batch
// whose rows stay put (a container, any forward range of lvalues) is grouped
// by pointer, so only the rows that survive are copied, once; other batches
// are copied (or moved) into the scratch first. State is a flat hash map
// from key to {sequence, first row id, row count}; rows of a key with
// several rows are chained through a per-row array.
// benchmarks/replace_using.cpp measures it (docs/benchmarks/replace_using.md).
//
// Threads: apply_batch() with a pool (batch_info::pool, the pipeline's
// PipelineOptions::threads) spreads a batch of at least sharded_min_rows
// rows over the pool's threads, sharded by key hash: each shard groups,
// copies, probes and assigns the rows of its own keys, while the rows that
// take or free a row id (new keys, equal-sequence appends, a replace with
// another row count) are committed on the calling thread in the order the
// serial commit uses. The result is the serial one: the same rows under the
// same ids, index, BatchStats, errors (the first offending row in batch
// order decides) and journal records, all-or-nothing alike. It needs a
// store with prepared assigns (parallel_assign_row_store: the memory store,
// SqliteStorage, FileStorage); other stores, smaller batches and tables
// with expectations of their own take the serial path. apply() is serial.
// The sharded path is flows/using/detail/sharded.hpp.
//
// The flow object holds the target's index: apply it to one table for its
// whole life (R-USING-9 is enforced: the table accepts no other flow).
//
// Checkpoints (write_checkpoint / read_checkpoint, for the pipeline runtime):
// the index is not persisted. Every row of a key carries the key's sequence
// (R-USING-2), so the index (key -> sequence, row chain) is the table's rows
// grouped by key: the blobs hold only the format header and, in a delta,
// whether the apply reset the flow (a full refresh of its table), and
// read_checkpoint() rebuilds the index from the table's rows, checking that
// invariant (errc::checkpoint_mismatch names the key that breaks it).
#pragma once

#include <flowlib/columns.hpp>
#include <flowlib/detail/admit.hpp>
#include <flowlib/detail/batch.hpp>
#include <flowlib/detail/batch_grouping.hpp>
#include <flowlib/detail/flow_checkpoint.hpp>
#include <flowlib/detail/prefetch.hpp>
#include <flowlib/detail/target_binding.hpp>
#include <flowlib/detail/type_traits.hpp>
#include <flowlib/detail/key_index.hpp>
#include <flowlib/detail/task_pool.hpp>
#include <flowlib/error.hpp>
#include <flowlib/flows/contract.hpp>
#include <flowlib/flows/using/detail/sharded.hpp>
#include <flowlib/expect.hpp>
#include <flowlib/stats.hpp>
#include <flowlib/storage/row_store.hpp>
#include <flowlib/table.hpp>

#include <absl/container/flat_hash_map.h>
#include <absl/container/flat_hash_set.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <ranges>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace flowlib {


/// @brief REPLACE USING (Key) SEQUENCE BY (Seq). See the header comment.
template <key_extractor K, sequence_extractor S>
class ReplaceUsing {
  static_assert(std::is_same_v<typename K::row_type, typename S::row_type>,
                "flowlib::ReplaceUsing<Key, Seq>: the key and the sequence must be columns "
                "of the same row type.");

 public:
  using key_policy = K;
  using sequence_policy = S;
  using row_type = typename K::row_type;
  using key_type = typename K::value_type;
  using sequence_type = typename S::value_type;
  static constexpr std::string_view kind = "REPLACE USING";

  ReplaceUsing() : ReplaceUsing(std::string("replace_using")) {}
  explicit ReplaceUsing(std::string name, K key = K{}, S seq = S{})
      : name_(std::move(name)), key_(std::move(key)), seq_(std::move(seq)) {}
  /// A moved flow keeps writing its table (its claim and index move with
  /// it); the moved-from flow cannot write that table any more.
  ReplaceUsing(ReplaceUsing&&) noexcept = default;
  ReplaceUsing& operator=(ReplaceUsing&&) noexcept = default;

  const std::string& name() const noexcept { return name_; }

  /// Applies one batch (R-USING-1..3). All-or-nothing; see the header.
  template <class Table, class R>
    requires batch_of<R, row_type>
  BatchStats apply(Table& target, R&& batch) {
    return apply(target, std::forward<R>(batch), NoExpectations{});
  }

  /// The flow contract's batch (flows/contract.hpp): apply(), with the
  /// rows written as upserted and the rows a higher sequence replaced as
  /// deleted.
  /// With a pool (batch_info::pool), a batch of at least sharded_min_rows
  /// rows is spread over the pool's threads (see "Threads" in the header
  /// comment), with the result the calling thread alone gives.
  template <class Table, class... P>
  BatchStats apply_batch(Table& target, std::vector<row_type>& rows, const Expectations<P...>& checks,
                         const batch_info& info) {
    BatchStats stats;
    if constexpr (parallel_assign_row_store<std::remove_cvref_t<decltype(target.store())>>) {
      if (shardable(target, rows, info)) {
        if (!sharded_) sharded_ = std::make_unique<detail::using_sharded<ReplaceUsing>>();
        stats = sharded_->apply(*this, target, rows, checks, *info.pool);
      } else {
        stats = apply(target, rows, checks);
      }
    } else {
      stats = apply(target, rows, checks);
    }
    stats.upserted_rows = stats.applied_rows;
    stats.deleted_rows = stats.replaced_rows;
    return stats;
  }

  /// The smallest batch apply_batch() spreads over a pool's threads: below
  /// it, the threads' start and the serial merge cost more than they save.
  static constexpr std::size_t sharded_min_rows = std::size_t{1} << 14;

  /// Applies one batch after the expectations (R-USING-8): a dropped row is
  /// as if the source never produced it.
  template <class Table, class R, class... P>
    requires batch_of<R, row_type>
  BatchStats apply(Table& target, R&& batch, const Expectations<P...>& checks) {
    check_target<Table>();
    begin_apply(target);
    if (!target.table_expectation_sets().empty()) {
      return apply_with_table_expectations(target, batch, checks);
    }
    BatchStats stats;
    stage(batch, checks, stats);
    auto& store = target.store();
    reserve_commit(store);
    // The claim's identity moves with the flow (and its index): a moved flow
    // keeps its target, and a moved-from one (which lost the index) cannot
    // write it (detail/target_binding.hpp).
    binding_.claim(target, kind, name_, /*exclusive=*/true);
    commit(store, stats);
    return stats;
  }

 private:
  template <class Table>
  static constexpr void check_target() {
    static_assert(!is_managed_table_v<Table>,
                  "MANAGED_TABLE_DOES_NOT_SUPPORT_CDC: a flowlib::ManagedTable accepts only "
                  "append flows (INSERT BY NAME); write REPLACE USING into a "
                  "flowlib::StreamingTable instead (R-TABLE-1).");
    static_assert(std::is_same_v<typename Table::row_type, row_type>,
                  "flowlib::ReplaceUsing::apply: the target table's row type must be the "
                  "flow's row type (the row type of its Key and Seq columns).");
  }

 public:
  /// @brief Writes the flow's state for a checkpoint: the whole state
  /// (`snapshot`) or what changed since the previous call (`delta`). For
  /// the pipeline runtime; programs that checkpoint by hand may use it too.
  /// The index is derived from the table (see the header comment): a blob
  /// is a header of 7 bytes and a flags byte (bit 0: the flow reset its
  /// state since the previous call, in a delta). O(1).
  void write_checkpoint(byte_writer& out, checkpoint_scope scope) const {
    detail::write_checkpoint_header(out, checkpoint_tag, checkpoint_version, scope);
    out.integer<std::uint8_t>(scope == checkpoint_scope::delta && reset_pending_ ? 1 : 0);
    reset_pending_ = false;
  }

  /// @brief Replaces the flow's state by the one `blobs` hold and binds the
  /// flow to `target` (claiming it, at its current generation). For the
  /// pipeline runtime; programs that checkpoint by hand may use it too.
  /// The blobs are validated (errc::checkpoint_corrupt), then the index is
  /// rebuilt from the target's rows, which must carry one sequence per key
  /// (R-USING-2; errc::checkpoint_mismatch names the key). On either error
  /// nothing changed. The rows are re-inserted so that the flow learns
  /// their ids (detail/flow_checkpoint.hpp): the table holds the same rows.
  /// Empty blobs give the state of a fresh flow that wrote `target` as it is.
  template <class Table>
  void read_checkpoint(Table& target, const checkpoint_blobs& blobs) {
    static_assert(!is_managed_table_v<Table> &&
                      std::is_same_v<typename Table::row_type, row_type>,
                  "flowlib::ReplaceUsing::read_checkpoint: the target must be the flow's "
                  "StreamingTable of its row type.");
    if (blobs.snapshot) read_blob(*blobs.snapshot, checkpoint_scope::snapshot);
    for (std::string_view d : blobs.deltas) read_blob(d, checkpoint_scope::delta);

    // Rebuild by position in a copy of the rows (may throw; nothing changed).
    auto& store = target.store();
    auto rows = detail::rows_by_position(store);
    index_type index{rows.size(), typename index_type::hasher{},
                     typename index_type::key_equal{key_}};
    std::vector<row_id> chain(rows.size(), detail::npos);  // by position
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const row_type& r = rows[i];
      std::optional<sequence_type> s = seq_(r);
      if (!s) {
        throw error(errc::checkpoint_mismatch, name_, seq_.name(), key_.describe(r),
                    "the target holds a row with a null sequence, which REPLACE USING never "
                    "writes (R-USING-7): the table is not this flow's; the flow's state is "
                    "unchanged");
      }
      const auto pos = static_cast<row_id>(i);
      auto [it, fresh] = index.try_emplace(key_(r), entry{*s, pos, 1});
      if (fresh) continue;
      if (!(it->second.seq == *s)) {
        throw error(errc::checkpoint_mismatch, name_, seq_.name(), key_.describe(r),
                    "the target holds rows of this key with different sequences; REPLACE "
                    "USING keeps one sequence per key (R-USING-2): the table is not this "
                    "flow's; the flow's state is unchanged");
      }
      chain[i] = it->second.head;
      it->second.head = pos;
      ++it->second.count;
    }
    if constexpr (!detail::row_store_with_ids<std::remove_cvref_t<decltype(store)>>) {
      store.reserve(rows.size());  // the reload's inserts cannot fail after this
    }
    binding_.restore(target, kind, name_, /*exclusive=*/true, /*done=*/false,
                     "a flow keeps the index of exactly one target (R-USING-9)");
    const std::vector<row_id>& ids = detail::ids_of(store, rows);
    std::vector<row_id> next(store.id_bound(), detail::npos);
    for (std::size_t i = 0; i < ids.size(); ++i) {
      next[ids[i]] = chain[i] == detail::npos ? detail::npos : ids[chain[i]];
    }
    for (auto& [k, e] : index) e.head = ids[e.head];
    index_ = std::move(index);
    next_ = std::move(next);
    reset_pending_ = false;
  }

  /// Number of distinct keys in the target.
  std::size_t key_count() const noexcept { return index_.size(); }

  /// The sequence stored for `key` in the target, if the key is present.
  std::optional<sequence_type> sequence_of(const key_type& key) const {
    auto it = index_.find(key);
    if (it == index_.end()) return std::nullopt;
    return it->second.seq;
  }

 private:
  // R-USING-8 with expectations declared on the table: the flow's
  // expectations, then the table's, run on every row before R-USING-1. The
  // table's are evaluated over a contiguous batch, so the rows that pass the
  // flow's are first copied (moved, from an rvalue range) into scratch that
  // is kept across batches; the survivors are then applied as a batch of
  // their own. A `fail` throws before anything is committed.
  template <class Table, class R, class... P>
  BatchStats apply_with_table_expectations(Table& target, R& batch,
                                           const Expectations<P...>& checks) {
    BatchStats outer;
    std::vector<row_type>& rows = checked_rows_;
    rows.clear();
    // The flow's expectations only: a null sequence is found (in the same
    // row order) when the survivors are staged below.
    detail::admit_rows<row_type, detail::describe_key<K>, P...> admit{
        checks, name_, detail::describe_key<K>{&key_}};
    constexpr bool move = detail::movable_elements<R>;
    for (auto&& in : batch) {
      const row_type& r = in;
      if (!admit(r)) continue;
      if constexpr (move) {
        rows.push_back(std::move(in));
      } else {
        rows.push_back(r);
      }
    }
    admit.finish(outer);
    rows.resize(detail::apply_table_expectations(target.table_expectation_sets(), rows,
                                                 rows.size(), keep_, outer, name_));

    BatchStats stats;
    stage(rows, NoExpectations{}, stats);
    auto& store = target.store();
    reserve_commit(store);
    binding_.claim(target, kind, name_, /*exclusive=*/true);
    commit(store, stats);
    stats.input_rows = outer.input_rows;
    stats.dropped_rows = outer.dropped_rows;
    stats.expectations = std::move(outer.expectations);
    return stats;
  }

  using traits = detail::key_traits<K>;
  using scratch_type = detail::keyed_batch_scratch<K, sequence_type>;
  using probe = detail::row_probe<row_type>;

  struct entry {
    sequence_type seq;
    row_id head;          // first target row of the key
    std::uint32_t count;  // rows of the key (chained through next_)
  };
  using index_type = detail::key_index<K, probe, entry>;

  // How many groups ahead the probe and commit loops prefetch. The probe
  // loop does little per group, so it looks further ahead to cover a miss.
  static constexpr std::size_t probe_prefetch_distance = 16;
  static constexpr std::size_t stage_prefetch_distance = 16;
  static constexpr std::size_t commit_prefetch_distance = 8;

  // A group's target entry, found by reserve_commit for commit; `head`
  // repeats entry->head so that commit can prefetch the row without
  // first loading the entry.
  struct hit {
    entry* e;     // nullptr: a key new to the target
    row_id head;
  };

  static constexpr char checkpoint_tag[5] = "FLRU";
  static constexpr std::uint16_t checkpoint_version = 1;

  // Validates one blob (it carries no state: see the header comment).
  void read_blob(std::string_view blob, checkpoint_scope scope) const {
    detail::byte_reader r = detail::checkpoint_reader(blob, name_);
    detail::read_checkpoint_header(r, checkpoint_tag, checkpoint_version, kind, scope);
    const auto flags = r.integer<std::uint8_t>();
    if (flags > (scope == checkpoint_scope::delta ? 1 : 0)) r.fail("unknown flags");
    detail::expect_checkpoint_end(r);
  }

  // Checks that `target` is the flow's one table; after a full refresh of
  // it, forgets every key (the table is empty: R-EXACT-5).
  template <class Table>
  void begin_apply(const Table& target) {
    if (binding_.begin_apply(target, name_,
                             "a flow keeps the index of exactly one target (R-USING-9)")) {
      index_.clear();
      next_.clear();
      reset_pending_ = true;
    }
  }

  // Phase 1: read the batch into scratch (may throw; changes no target state).
  template <class R, class... P>
  void stage(R& batch, const Expectations<P...>& checks, BatchStats& stats) {
    if (!scratch_) scratch_ = std::make_unique<scratch_type>(key_);
    scratch_type& sc = *scratch_;
    sc.reset(detail::size_hint(batch));
    // Expectations (R-USING-8) then the null-sequence check (R-USING-7), row
    // by row, so that the first offending row decides the error.
    detail::admit_sequenced<K, S, P...> admit{checks, key_, seq_, name_,
                                              detail::null_sequence_rule::using7};

    if constexpr (detail::stable_elements<R>) {
      // The caller's rows stay put: group pointers to them, then copy only
      // the rows that survive.
      if constexpr (std::ranges::random_access_range<R> && std::ranges::sized_range<R>) {
        // A large index misses the caches on most probes: prefetch the
        // probe of the row a few places ahead.
        const std::size_t n = static_cast<std::size_t>(std::ranges::size(batch));
        const auto first = std::ranges::begin(batch);
        const bool lookahead = sc.index_is_large();
        for (std::size_t i = 0; i < n; ++i) {
          if (lookahead && i + stage_prefetch_distance < n) {
            const row_type& a = first[static_cast<std::ptrdiff_t>(i + stage_prefetch_distance)];
            sc.index.prefetch(probe{&a, traits::hash(key_, a)});
          }
          const row_type& r = first[static_cast<std::ptrdiff_t>(i)];
          if (std::optional<sequence_type> s = admit(r)) group_row(sc, r, std::move(*s), traits::hash(key_, r));
        }
      } else {
        for (const row_type& r : batch) {
          if (std::optional<sequence_type> s = admit(r)) group_row(sc, r, std::move(*s), traits::hash(key_, r));
        }
      }
      sc.count_candidates();
      sc.keep_candidates();
    } else {
      // Single-pass or moved-from rows: own them first (moving when the
      // range yields rvalues), then group pointers to the owned rows.
      constexpr bool move = detail::movable_elements<R>;
      for (auto&& in : batch) {
        if (admit(in)) sc.template own<move>(std::forward<decltype(in)>(in));
      }
      for (std::size_t i = 0; i < sc.owned; ++i) {
        const row_type& r = sc.rows[i];
        group_row(sc, r, std::move(*seq_(r)), traits::hash(key_, r));
      }
      sc.count_candidates();
    }
    // Every admitted row is a candidate now or was superseded (R-USING-1).
    admit.finish(stats);
    stats.superseded_rows = stats.input_rows - stats.dropped_rows - sc.candidates;
  }

  // Adds `r` (which stays put until the commit) with sequence `s` and key
  // hash `hash` to its key's group (R-USING-1); `first` is the row's batch
  // position (kept for a sharded batch only).
  void group_row(scratch_type& sc, const row_type& r, sequence_type&& s, std::size_t hash,
                 std::uint32_t first = 0) {
    const probe p{&r, hash};
    bool fresh = false;
    const auto next_group = static_cast<std::uint32_t>(sc.groups.size());
    const typename scratch_type::slot created = [&] {
      if constexpr (scratch_type::inline_key) {
        return typename scratch_type::slot{key_(r), next_group};
      } else {
        return typename scratch_type::slot{&r, next_group};
      }
    }();
    auto it = sc.index.lazy_emplace(p, [&](const auto& ctor) {
      fresh = true;
      ctor(created);
    });
    if (fresh) {
      const std::uint32_t c = sc.add_candidate(&r);
      sc.groups.push_back({std::move(s), p.hash, c, c, 1, first});
      return;
    }
    auto& g = sc.groups[it->group];
    if (g.seq < s) {  // a higher sequence: the group restarts with this row
      sc.cand[g.head] = &r;
      sc.next[g.head] = detail::npos;
      g.tail = g.head;
      g.count = 1;
      g.seq = std::move(s);
    } else if (!(s < g.seq)) {  // same sequence: kept beside the others (R-USING-2)
      const std::uint32_t c = sc.add_candidate(&r);
      sc.next[g.tail] = c;
      g.tail = c;
      ++g.count;
    }  // else below the batch maximum: superseded (R-USING-1)
  }

  // Phase 2a: make the commit infallible. Reserves the index for the worst
  // case, finds every group's entry (pointers stay valid: the reservation
  // rules out a rehash), copies the keys of new groups, and reserves the
  // store for exactly the inserts the commit will make.
  template <class Store>
  void reserve_commit(Store& store) {
    scratch_type& sc = *scratch_;
    const std::size_t n = sc.groups.size();
    index_.reserve(index_.size() + n);
    hits_.resize(n);
    new_keys_.clear();
    std::size_t inserts = 0;  // exactly the store inserts commit() will make
    for (std::size_t g = 0; g < n; ++g) {
      if (g + probe_prefetch_distance < n) {
        const auto& ahead = sc.groups[g + probe_prefetch_distance];
        index_.prefetch(probe{&sc.row(ahead.head), ahead.hash});
      }
      const auto& grp = sc.groups[g];
      const probe p{&sc.row(grp.head), grp.hash};
      auto it = index_.find(p);
      if (it == index_.end()) {
        hits_[g] = {nullptr, detail::npos};
        new_keys_.push_back(key_(sc.row(grp.head)));
        inserts += grp.count;
      } else {
        const entry& e = it->second;
        hits_[g] = {&it->second, e.head};
        if (e.seq < grp.seq) {
          inserts += grp.count > e.count ? grp.count - e.count : 0;  // slots are reused
        } else if (!(grp.seq < e.seq)) {
          inserts += grp.count;
        }
      }
    }
    // Reserving the exact need (not the batch's candidate count) keeps a
    // table whose batches mostly replace rows from growing its slab.
    store.reserve(inserts);
    if (next_.size() < store.id_bound() + inserts) {
      next_.resize(store.id_bound() + inserts, detail::npos);
    }
  }

  // Phase 2b: apply every group (R-USING-2). Nothing here can throw.
  template <class Store>
  void commit(Store& store, BatchStats& stats) noexcept {
    scratch_type& sc = *scratch_;
    const std::size_t n = sc.groups.size();
    std::size_t next_new_key = 0;
    for (std::size_t g = 0; g < n; ++g) {
      if (g + commit_prefetch_distance < n) {
        const hit& ahead = hits_[g + commit_prefetch_distance];
        if (ahead.e != nullptr) {
          detail::prefetch<detail::access::write>(ahead.e);
          detail::prefetch_row(store, ahead.head);
        }
      }
      entry* e = hits_[g].e;
      commit_group(store, sc, sc.groups[g], e, e == nullptr ? &new_keys_[next_new_key++] : nullptr,
                   stats);
    }
  }

  // Applies one group of `sc` (R-USING-2): `e` is its key's entry, or null
  // for a key new to the target, whose copy `new_key` then is. Inlined into
  // the commit loops: a call per group costs the prefetching loop about a
  // fifth of its speed.
  template <class Store>
  [[gnu::always_inline]] void commit_group(Store& store, scratch_type& sc, typename scratch_type::group& grp, entry* e,
                    key_type* new_key, BatchStats& stats) noexcept {
    if (e == nullptr) {  // a key new to the target
      const row_id head = insert_chain(store, sc, grp.head, detail::npos);
      index_.emplace(std::move(*new_key), entry{std::move(grp.seq), head, grp.count});
      stats.applied_rows += grp.count;
      stats.inserted_rows += grp.count;
    } else if (e->seq < grp.seq) {  // higher sequence: replace the key's rows
      stats.replaced_rows += e->count;
      stats.applied_rows += grp.count;
      if (e->count == 1 && grp.count == 1) {  // the common case: one row for one
        store.assign(e->head, std::move(sc.row(grp.head)));  // next_[head] stays npos
      } else {
        e->head = replace_chain(store, sc, e->head, grp.head);
      }
      e->count = grp.count;
      e->seq = std::move(grp.seq);
    } else if (grp.seq < e->seq) {  // older than the target: ignored
      stats.ignored_late_rows += grp.count;
    } else {  // same sequence: append beside the stored rows
      e->head = insert_chain(store, sc, grp.head, e->head);
      e->count += grp.count;
      stats.applied_rows += grp.count;
      stats.appended_rows += grp.count;
    }
  }

  // Inserts the candidate chain of `sc` starting at `c`, linked in front of
  // `tail`; returns the new head.
  template <class Store>
  row_id insert_chain(Store& store, scratch_type& sc, std::uint32_t c, row_id tail) noexcept {
    row_id head = detail::npos;
    row_id prev = detail::npos;
    for (; c != detail::npos; c = sc.next[c]) {
      const row_id id = store.insert(std::move(sc.row(c)));
      next_[id] = detail::npos;
      if (prev == detail::npos) {
        head = id;
      } else {
        next_[prev] = id;
      }
      prev = id;
    }
    next_[prev] = tail;
    return head;
  }

  // Overwrites the target chain at `old` with the candidate chain at `c`,
  // reusing row slots; surplus old rows are erased, surplus new ones
  // inserted. Returns the new head.
  template <class Store>
  row_id replace_chain(Store& store, scratch_type& sc, row_id old, std::uint32_t c) noexcept {
    const row_id head = old;
    row_id prev = detail::npos;
    while (old != detail::npos && c != detail::npos) {
      store.assign(old, std::move(sc.row(c)));
      prev = old;
      old = next_[old];
      c = sc.next[c];
    }
    next_[prev] = detail::npos;
    while (old != detail::npos) {  // fewer new rows than old ones
      const row_id nxt = next_[old];
      store.erase(old);
      old = nxt;
    }
    if (c != detail::npos) next_[prev] = insert_chain(store, sc, c, detail::npos);
    return head;
  }

  // --- A batch spread over threads (apply_batch with a pool) -----------------
  // The phases are in flows/using/detail/sharded.hpp, whose using_sharded
  // works on this flow's index, row chains and per-group steps.

  friend class detail::using_sharded<ReplaceUsing>;

  template <class Table, class Rows>
  static bool shardable(Table& target, const Rows& rows, const batch_info& info) {
    return info.pool != nullptr && info.pool->size() >= 2 && rows.size() >= sharded_min_rows &&
           rows.size() < std::size_t{detail::npos} && target.table_expectation_sets().empty();
  }

  std::string name_;
  K key_;
  S seq_;
  detail::target_binding binding_;  // the one target, its generation, the claim
  index_type index_{0, typename index_type::hasher{}, typename index_type::key_equal{key_}};
  std::vector<row_id> next_;  // chain of a key's target rows, by row id
  std::unique_ptr<scratch_type> scratch_;
  std::vector<hit> hits_;            // reserve_commit -> commit
  std::vector<key_type> new_keys_;   // reserve_commit -> commit
  std::vector<row_type> checked_rows_;  // apply_with_table_expectations: the checked batch
  std::vector<unsigned char> keep_;     // ... and which of its rows the table keeps (or the flow's
                                        // expectations, in a sharded batch)
  // A batch spread over threads: the shards' scratch, kept across batches.
  std::unique_ptr<detail::using_sharded<ReplaceUsing>> sharded_;
  // A full refresh reset the state since the last write_checkpoint(), which
  // clears it (a checkpoint write is const to its callers).
  mutable bool reset_pending_ = false;
};

}  // namespace flowlib
