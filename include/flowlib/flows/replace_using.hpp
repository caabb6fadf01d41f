// flowlib/flows/replace_using.hpp
//
// ReplaceUsing<Key, Seq>: keeps a target current from a stream of partial
// snapshots (SEMANTICS.md section 1). Every batch carries the whole current
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
// All-or-nothing: a batch is read and validated into per-flow scratch space
// (expectations, null sequences, user exceptions all happen here), the
// target's storage is reserved, and only then is the batch committed, by
// operations that cannot fail. On any error the target and the flow's state
// are exactly as before the call.
//
// Performance: one hash per input row (reused for the target probe), no
// allocation per row in steady state (scratch rows are assigned into slots
// kept from earlier batches), one target probe per distinct key, with the
// probes and row writes software-prefetched a few groups ahead. State is a
// flat hash map from key to {sequence, first row id, row count}; rows of a
// key with several rows are chained through a per-row array.
//
// The flow object holds the target's index: apply it to one table for its
// whole life (R-USING-9 is enforced: the table accepts no other flow).
#pragma once

#include <flowlib/columns.hpp>
#include <flowlib/detail/batch.hpp>
#include <flowlib/error.hpp>
#include <flowlib/expect.hpp>
#include <flowlib/stats.hpp>
#include <flowlib/table.hpp>

#include <absl/container/flat_hash_map.h>
#include <absl/container/flat_hash_set.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace flowlib {

namespace detail {

inline constexpr std::uint32_t npos32 = std::numeric_limits<std::uint32_t>::max();

/// A row with its precomputed key hash, used for heterogeneous lookups.
template <class Row>
struct row_probe {
  const Row* row;
  std::size_t hash;
};

/// Per-batch scratch of a keyed flow: the batch's candidate rows grouped by
/// key. Heap-allocated once per flow so that the hash functors may point
/// into it and the flow stays movable.
template <class K, class SeqValue>
struct keyed_batch_scratch {
  using Row = typename K::row_type;
  using probe = row_probe<Row>;

  struct group {
    SeqValue seq;         // the batch's maximum sequence for this key so far
    std::size_t hash;     // the key's hash
    std::uint32_t head;   // first candidate row (index into rows)
    std::uint32_t tail;   // last candidate row
    std::uint32_t count;  // candidate rows in the chain
  };

  struct hasher {
    using is_transparent = void;
    const keyed_batch_scratch* s;
    std::size_t operator()(std::uint32_t g) const noexcept { return s->groups[g].hash; }
    std::size_t operator()(const probe& p) const noexcept { return p.hash; }
  };
  struct equal {
    using is_transparent = void;
    const keyed_batch_scratch* s;
    bool operator()(std::uint32_t a, std::uint32_t b) const noexcept { return a == b; }
    bool operator()(std::uint32_t g, const probe& p) const {
      return key_traits<K>::equal(s->key, *p.row, s->rows[s->groups[g].head]);
    }
    bool operator()(const probe& p, std::uint32_t g) const { return (*this)(g, p); }
  };

  explicit keyed_batch_scratch(const K& k)
      : key(k), index(0, hasher{this}, equal{this}) {}
  keyed_batch_scratch(const keyed_batch_scratch&) = delete;
  keyed_batch_scratch& operator=(const keyed_batch_scratch&) = delete;

  /// Forgets the previous batch, keeping the row slots (and their buffers).
  void reset(std::size_t expected_rows) {
    used = 0;
    candidates = 0;
    groups.clear();
    index.clear();  // frees large arrays: reserve again for this batch
    if (expected_rows != 0) {
      index.reserve(expected_rows);
      groups.reserve(expected_rows);
    }
  }

  /// Stores `r` (copied, or moved when `Move`) in a free slot; returns it.
  template <bool Move, class R>
  std::uint32_t push(R&& r) {
    if (used < rows.size()) {
      if constexpr (Move) {
        rows[used] = std::move(r);
      } else {
        rows[used] = r;
      }
      next[used] = npos32;
    } else {
      if constexpr (Move) {
        rows.push_back(std::move(r));
      } else {
        rows.push_back(r);
      }
      next.push_back(npos32);
    }
    return static_cast<std::uint32_t>(used++);
  }

  K key;
  std::vector<Row> rows;             // candidate rows; [0, used) belong to this batch
  std::vector<std::uint32_t> next;   // chain of candidate rows within a group
  std::size_t used = 0;
  std::size_t candidates = 0;        // rows currently chained in some group
  std::vector<group> groups;         // in order of first appearance
  absl::flat_hash_set<std::uint32_t, hasher, equal> index;
};

}  // namespace detail

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

  const std::string& name() const noexcept { return name_; }

  /// Applies one batch (R-USING-1..3). All-or-nothing; see the header.
  template <class Table, class R>
    requires batch_of<R, row_type>
  BatchStats apply(Table& target, R&& batch) {
    return apply(target, std::forward<R>(batch), NoExpectations{});
  }

  /// Applies one batch after the expectations (R-USING-8): a dropped row is
  /// as if the source never produced it.
  template <class Table, class R, class... P>
    requires batch_of<R, row_type>
  BatchStats apply(Table& target, R&& batch, const Expectations<P...>& checks) {
    static_assert(std::is_same_v<typename Table::row_type, row_type>,
                  "flowlib::ReplaceUsing::apply: the target table's row type must be the "
                  "flow's row type (the row type of its Key and Seq columns).");
    check_target(target);
    BatchStats stats;
    stage(batch, checks, stats);
    auto& store = target.store();
    reserve_commit(store);
    target.claim(this, kind, name_, /*exclusive=*/true);
    target_ = &target;
    commit(store, stats);
    return stats;
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
  using traits = detail::key_traits<K>;
  using scratch_type = detail::keyed_batch_scratch<K, sequence_type>;
  using probe = detail::row_probe<row_type>;

  struct entry {
    sequence_type seq;
    row_id head;          // first target row of the key
    std::uint32_t count;  // rows of the key (chained through next_)
  };
  struct index_hash {
    using is_transparent = void;
    std::size_t operator()(const key_type& k) const { return absl::Hash<key_type>{}(k); }
    std::size_t operator()(const probe& p) const noexcept { return p.hash; }
  };
  struct index_eq {
    using is_transparent = void;
    K key;
    bool operator()(const key_type& a, const key_type& b) const { return a == b; }
    bool operator()(const key_type& a, const probe& p) const {
      return traits::equal(key, *p.row, a);
    }
    bool operator()(const probe& p, const key_type& a) const { return (*this)(a, p); }
  };
  using index_type = absl::flat_hash_map<key_type, entry, index_hash, index_eq>;

  // How many groups ahead the probe and commit loops prefetch.
  static constexpr std::size_t prefetch_distance = 8;

  template <class Table>
  void check_target(const Table& target) const {
    if (target_ != nullptr && target_ != &target) {
      throw error(errc::invalid_target, name_, "", "",
                  "this flow already maintains table '" +
                      static_cast<const Table*>(target_)->name() +
                      "'; a flow keeps the index of exactly one target (R-USING-9)");
    }
  }

  // Phase 1: read the batch into scratch (may throw; changes no target state).
  template <class R, class... P>
  void stage(R& batch, const Expectations<P...>& checks, BatchStats& stats) {
    if (!scratch_) scratch_ = std::make_unique<scratch_type>(key_);
    scratch_type& sc = *scratch_;
    sc.reset(detail::size_hint(batch));
    typename Expectations<P...>::counts_type counts;
    const auto describe = [this](const row_type& r) { return key_.describe(r); };

    for (auto&& in : batch) {
      const row_type& r = in;
      ++stats.input_rows;
      if constexpr (sizeof...(P) > 0) {
        if (!checks.check(r, counts, name_, describe)) {
          ++stats.dropped_rows;
          continue;
        }
      }
      std::optional<sequence_type> s = seq_(r);
      if (!s) {
        throw error(errc::null_sequence, name_, seq_.name(), key_.describe(r),
                    "the row's sequence is null; nothing of the batch was applied and the "
                    "source position does not advance (R-USING-7)");
      }
      constexpr bool move = detail::movable_elements<R>;
      const probe p{&r, traits::hash(key_, r)};
      auto it = sc.index.find(p);
      if (it == sc.index.end()) {
        const std::uint32_t i = sc.template push<move>(std::forward<decltype(in)>(in));
        const auto g = static_cast<std::uint32_t>(sc.groups.size());
        sc.groups.push_back({std::move(*s), p.hash, i, i, 1});
        sc.index.insert(g);
        ++sc.candidates;
        continue;
      }
      auto& g = sc.groups[*it];
      if (g.seq < *s) {  // a higher sequence: the group restarts with this row
        stats.superseded_rows += g.count;
        sc.candidates -= g.count - 1;
        if constexpr (move) {
          sc.rows[g.head] = std::move(in);
        } else {
          sc.rows[g.head] = r;
        }
        sc.next[g.head] = detail::npos32;
        g.tail = g.head;
        g.count = 1;
        g.seq = std::move(*s);
      } else if (*s < g.seq) {  // below the batch maximum: discarded (R-USING-1)
        ++stats.superseded_rows;
      } else {  // same sequence: kept beside the others (R-USING-2)
        const std::uint32_t i = sc.template push<move>(std::forward<decltype(in)>(in));
        sc.next[g.tail] = i;
        g.tail = i;
        ++g.count;
        ++sc.candidates;
      }
    }
    if constexpr (sizeof...(P) > 0) checks.report(counts, stats.expectations);
  }

  // Phase 2a: make the commit infallible. Reserves the index and the store
  // for the worst case, then finds every group's entry (pointers stay valid:
  // the reservation rules out a rehash) and copies the keys of new groups.
  template <class Store>
  void reserve_commit(Store& store) {
    scratch_type& sc = *scratch_;
    const std::size_t n = sc.groups.size();
    index_.reserve(index_.size() + n);
    store.reserve(sc.candidates);
    if (next_.size() < store.id_bound() + sc.candidates) {
      next_.resize(store.id_bound() + sc.candidates, detail::npos32);
    }
    hits_.resize(n);
    new_keys_.clear();
    for (std::size_t g = 0; g < n; ++g) {
      if (g + prefetch_distance < n) {
        const auto& ahead = sc.groups[g + prefetch_distance];
        index_.prefetch(probe{&sc.rows[ahead.head], ahead.hash});
      }
      const auto& grp = sc.groups[g];
      const probe p{&sc.rows[grp.head], grp.hash};
      auto it = index_.find(p);
      if (it == index_.end()) {
        hits_[g] = nullptr;
        new_keys_.push_back(key_(sc.rows[grp.head]));
      } else {
        hits_[g] = &it->second;
      }
    }
  }

  // Phase 2b: apply every group (R-USING-2). Nothing here can throw.
  template <class Store>
  void commit(Store& store, BatchStats& stats) noexcept {
    scratch_type& sc = *scratch_;
    const std::size_t n = sc.groups.size();
    std::size_t next_new_key = 0;
    for (std::size_t g = 0; g < n; ++g) {
      if (g + prefetch_distance < n) {
        if (const entry* ahead = hits_[g + prefetch_distance]) store.prefetch(ahead->head);
      }
      auto& grp = sc.groups[g];
      entry* e = hits_[g];
      if (e == nullptr) {  // a key new to the target
        const row_id head = insert_chain(store, grp.head, detail::npos32);
        index_.emplace(std::move(new_keys_[next_new_key++]),
                       entry{std::move(grp.seq), head, grp.count});
        stats.applied_rows += grp.count;
        stats.inserted_rows += grp.count;
      } else if (e->seq < grp.seq) {  // higher sequence: replace the key's rows
        stats.replaced_rows += e->count;
        stats.applied_rows += grp.count;
        e->head = replace_chain(store, e->head, grp.head);
        e->count = grp.count;
        e->seq = std::move(grp.seq);
      } else if (grp.seq < e->seq) {  // older than the target: ignored
        stats.ignored_late_rows += grp.count;
      } else {  // same sequence: append beside the stored rows
        e->head = insert_chain(store, grp.head, e->head);
        e->count += grp.count;
        stats.applied_rows += grp.count;
        stats.appended_rows += grp.count;
      }
    }
  }

  // Inserts the candidate chain starting at `c`, linked in front of `tail`;
  // returns the new head.
  template <class Store>
  row_id insert_chain(Store& store, std::uint32_t c, row_id tail) noexcept {
    scratch_type& sc = *scratch_;
    row_id head = detail::npos32;
    row_id prev = detail::npos32;
    for (; c != detail::npos32; c = sc.next[c]) {
      const row_id id = store.insert(std::move(sc.rows[c]));
      next_[id] = detail::npos32;
      if (prev == detail::npos32) {
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
  row_id replace_chain(Store& store, row_id old, std::uint32_t c) noexcept {
    scratch_type& sc = *scratch_;
    const row_id head = old;
    row_id prev = detail::npos32;
    while (old != detail::npos32 && c != detail::npos32) {
      store.assign(old, std::move(sc.rows[c]));
      prev = old;
      old = next_[old];
      c = sc.next[c];
    }
    next_[prev] = detail::npos32;
    while (old != detail::npos32) {  // fewer new rows than old ones
      const row_id nxt = next_[old];
      store.erase(old);
      old = nxt;
    }
    if (c != detail::npos32) next_[prev] = insert_chain(store, c, detail::npos32);
    return head;
  }

  std::string name_;
  K key_;
  S seq_;
  const void* target_ = nullptr;
  index_type index_{0, index_hash{}, index_eq{key_}};
  std::vector<row_id> next_;  // chain of a key's target rows, by row id
  std::unique_ptr<scratch_type> scratch_;
  std::vector<entry*> hits_;         // reserve_commit -> commit
  std::vector<key_type> new_keys_;   // reserve_commit -> commit
};

}  // namespace flowlib
