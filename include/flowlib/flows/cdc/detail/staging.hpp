// flowlib/flows/cdc/detail/staging.hpp
//
// cdc_flow::staging, what every AUTO CDC engine holds (as a member,
// engine.hpp): the flow's configuration (name, settings, option values, key
// and sequence), what the batches changed since the last checkpoint, the
// target scratch, and the reading of a batch: for the planned paths, the
// admit step (expectations, then null sequences), classifying each change,
// grouping the batch by key, ordering a key's changes by sequence with ties
// resolved (R-CDC-5) and probing the key index for every group; for the one
// passes, the read-ahead loop over the batch (one_pass_over). Internal.
#pragma once

#include <flowlib/columns.hpp>
#include <flowlib/detail/admit.hpp>
#include <flowlib/detail/batch.hpp>
#include <flowlib/detail/prefetch.hpp>
#include <flowlib/error.hpp>
#include <flowlib/expect.hpp>
#include <flowlib/flows/cdc/detail/batch.hpp>
#include <flowlib/flows/cdc/detail/change_log.hpp>
#include <flowlib/flows/cdc/detail/flow.hpp>
#include <flowlib/flows/cdc/detail/mapping.hpp>
#include <flowlib/flows/cdc/detail/option_traits.hpp>
#include <flowlib/flows/cdc/detail/target_scratch.hpp>
#include <flowlib/flows/cdc/options.hpp>
#include <flowlib/schema.hpp>
#include <flowlib/stats.hpp>
#include <flowlib/storage/row_store.hpp>

#include <algorithm>
#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <ranges>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace flowlib::detail {

/// The configuration of an AUTO CDC flow and the staging of its batches (K,
/// S, Scd, Options as in flowlib::AutoCdc). A member of each engine; its
/// members are public to the engine's parts (the planned and one-pass
/// paths, the checkpoint), which are handed it by reference.
template <class K, class S, class Scd, class... Options>
class cdc_flow<K, S, Scd, Options...>::staging {
 public:
  // ignore_null_updates and ties (R-CDC-5): SCD1 keeps every tied change,
  // SCD2 merges each into the next (sort_group).
  static constexpr bool keep_tied_changes = !opts::scd2 && n_ignored > 0;
  static constexpr bool merge_tied_upserts = opts::scd2 && n_ignored > 0;
  using delete_option = typename find_option<is_deletes, void, Options...>::type;
  using truncate_option = typename find_option<is_truncates, void, Options...>::type;
  // Groups ahead whose index slots are prefetched while probing: the index
  // of a large target is out of cache, and one probe per key would stall.
  static constexpr std::size_t probe_prefetch_distance = 16;
  static constexpr std::size_t stage_lookahead = 8;  // rows (a power of two)
  // Pipelined prefetching once every group's entry is known (probe_all):
  // groups ahead whose entries' arrays, then target rows, are prefetched.
  static constexpr std::size_t entry_prefetch_distance = 12;
  static constexpr std::size_t row_prefetch_distance = 6;
  static constexpr std::size_t commit_prefetch_distance = 8;

  explicit staging(std::string flow_name, CdcOptions flow_settings)
      : name(std::move(flow_name)), settings(std::move(flow_settings)) {}
  staging(std::string flow_name, CdcOptions flow_settings, Options... values)
    requires(sizeof...(Options) > 0)
      : name(std::move(flow_name)), settings(std::move(flow_settings)),
        options(std::move(values)...) {}
  staging(const staging&) = delete;
  staging& operator=(const staging&) = delete;
  staging(staging&&) = default;
  staging& operator=(staging&&) = default;

  /// Starts applying a batch to a target of row type Target: notes it in
  /// the change log and returns the target scratch, emptied.
  template <class Target>
  cdc_target_scratch<Target>& begin_batch() {
    changes.on_apply();
    auto& ts = targets.template get<Target>();
    ts.used = 0;
    return ts;
  }

  /// An empty key index of type Index (flat_index or key_index) over this
  /// flow's key.
  template <class Index>
  Index empty_index() const {
    return Index{0, typename Index::hasher{}, typename Index::key_equal{key}};
  }

  op classify(const change_type& c) const {
    if constexpr (!std::is_void_v<truncate_option>) {
      static_assert(std::predicate<const decltype(truncate_option::pred)&, const change_type&>,
                    "flowlib::apply_as_truncates<Pred>: Pred must be callable as "
                    "bool(const Change&) for the flow's change row type.");
      if (std::get<truncate_option>(options).pred(c)) return op::truncate;
    }
    if constexpr (!std::is_void_v<delete_option>) {
      static_assert(std::predicate<const decltype(delete_option::pred)&, const change_type&>,
                    "flowlib::apply_as_deletes<Pred>: Pred must be callable as "
                    "bool(const Change&) for the flow's change row type.");
      if (std::get<delete_option>(options).pred(c)) return op::remove;
    }
    return op::upsert;
  }

  /// Whether two changes carry the same operation and selected columns (a
  /// redelivery rather than a conflict, for strict_sequence).
  static bool same_change(op oa, const change_type& a, op ob, const change_type& b) {
    if (oa != ob) return false;
    if (oa == op::remove) return true;
    bool same = true;
    schema_of<change_type>::for_each([&](auto cc) {
      using CC = decltype(cc);
      if constexpr (cdc_rules<opts>::selected(CC::name)) {
        if (same && !(CC::get(a) == CC::get(b))) same = false;
      }
    });
    return same;
  }

  [[noreturn]] void throw_tie(const change_type& r, std::string_view where) const {
    throw error(errc::tied_sequence, name, seq.name(), key.describe(r),
                std::string("two different changes of this key have the same sequence ") +
                    std::string(where) +
                    " and strict_sequence is set; nothing of the batch was applied (R-CDC-5)");
  }

  // --- phase 1: read and group the batch (may throw; no state changes) ---------

  /// Reads the batch into the scratch, grouped by key: the admit step
  /// (expectations, then null sequences), classification, and the truncate
  /// floor the batch raises from `floor` (the flow's, SCD1) into
  /// batch_floor.
  template <class R, class... P>
  void stage_batch(R& batch, const Expectations<P...>& checks, BatchStats& stats,
                   const std::optional<sequence_type>& floor) {
    if (!scratch) scratch = std::make_unique<scratch_type>(key);
    scratch_type& sc = *scratch;
    constexpr bool move = movable_elements<R>;
    // A batch whose rows stay put is staged by reference, without copying
    // each change: SCD1 reads the changes only while planning (the winning
    // upsert is copied into a target row there); SCD2 copies the new
    // changes into the keys' histories once planning is done (an undoable
    // step, see scd2_planned::copy_events), and moves them there from an rvalue batch.
    // (SCD2 with ignore_null_updates merges tied changes in the scratch
    // rows, see sort_group: those are copied.)
    constexpr bool refer = !move && std::ranges::forward_range<R> && !merge_tied_upserts;
    sc.reset(size_hint(batch), refer);
    batch_floor = floor;
    // Expectations, then the null-sequence check, then counts (R-CDC-5).
    admit_sequenced<K, S, P...> admit{checks, key, seq, name, null_sequence_rule::cdc5};

    // A contiguous batch is read ahead: its rows are prefetched, and the
    // hash of a row a few places ahead is computed early so that its slot
    // in the batch index is prefetched too (hashes[i % lookahead] is row i's).
    constexpr bool contiguous =
        std::ranges::contiguous_range<R> && std::ranges::sized_range<R> &&
        std::is_same_v<std::remove_cv_t<std::ranges::range_value_t<R>>, change_type>;
    [[maybe_unused]] const change_type* data = nullptr;
    [[maybe_unused]] std::size_t size = 0;
    [[maybe_unused]] std::size_t pos = 0;
    [[maybe_unused]] std::array<std::size_t, stage_lookahead> hashes{};
    if constexpr (contiguous) {
      data = std::ranges::data(batch);
      size = static_cast<std::size_t>(std::ranges::size(batch));
      for (std::size_t i = 0; i < std::min(size, stage_lookahead); ++i) {
        hashes[i] = traits::hash(key, data[i]);
      }
    }

    for (auto&& in : batch) {
      const change_type& r = in;
      [[maybe_unused]] std::size_t hash = 0;
      if constexpr (contiguous) {
        hash = hashes[pos % stage_lookahead];
        if (pos + 2 * stage_lookahead < size) prefetch_change(data[pos + 2 * stage_lookahead]);
        if (pos + stage_lookahead < size) {
          const change_type& a = data[pos + stage_lookahead];
          const std::size_t h = traits::hash(key, a);
          hashes[pos % stage_lookahead] = h;
          sc.prefetch(probe{&a, h});
        }
        ++pos;
      }
      std::optional<sequence_type> s = admit(r);
      if (!s) continue;  // dropped by an expectation
      const op o = classify(r);
      if (o == op::truncate) {  // SCD1 only: raises the floor, no key
        if (!batch_floor || *batch_floor < *s) batch_floor = std::move(*s);
        continue;
      }
      probe p{&r, 0};
      if constexpr (contiguous) {
        p.hash = hash;
      } else {
        p.hash = traits::hash(key, r);
      }
      std::uint32_t i;
      if constexpr (refer) {
        i = sc.add_ref(r, p);
      } else {
        i = sc.template add<move>(std::forward<decltype(in)>(in), p);
      }
      // (Each array on its own: a push that failed in an earlier batch may
      // have left one longer than the other.)
      put_slot<true>(seqs, i, *s);
      put_slot(ops, i, o);
      if constexpr (merge_tied_upserts) put_slot(after_delete, i, std::uint8_t{0});
    }
    admit.finish(stats);
    sc.group_rows();
  }

  /// Fills order[from..) with the group's rows by sequence (source order
  /// among equals), then drops all but the last of each run of equal
  /// sequences (R-CDC-5). Returns the end. With ignore_null_updates tied
  /// changes apply in source order, the later one's null columns keeping
  /// the earlier one's values, within a batch as across batches: SCD1 keeps
  /// them all, in source order; SCD2 merges each into the next (one change
  /// per sequence, so that no version opens and closes at one sequence). A
  /// delete among them leaves nothing to keep: an upsert tied after it is
  /// marked after_delete and inherits no value (merge_tied).
  /// SCD1: equal changes
  /// below `late_below` (the stored sequence, or a truncate's) are late,
  /// not ties: they count in ignored_late_rows when planned, as every late
  /// change does.
  std::uint32_t sort_group(const typename scratch_type::group& grp, BatchStats& stats,
                           const sequence_type* late_below = nullptr) {
    const scratch_type& sc = *scratch;
    const auto begin = static_cast<std::uint32_t>(order.size());
    order.insert(order.end(), sc.members.begin() + grp.first,
                  sc.members.begin() + grp.first + grp.count);
    if (grp.count == 1) return begin + 1;
    const auto less = [&](std::uint32_t a, std::uint32_t b) { return seqs[a] < seqs[b]; };
    if constexpr (std::is_trivially_copyable_v<sequence_type> && sizeof(sequence_type) <= 16) {
      if (grp.count > 16) {
        // A large group: sort (sequence, row) pairs, without the indirection
        // per comparison; rows are numbered in source order, so this is stable.
        sort_buf.clear();
        for (std::size_t k = begin; k < order.size(); ++k) {
          sort_buf.emplace_back(seqs[order[k]], order[k]);
        }
        std::sort(sort_buf.begin(), sort_buf.end(), [](const auto& a, const auto& b) {
          return a.first < b.first || (!(b.first < a.first) && a.second < b.second);
        });
        for (std::size_t k = 0; k < sort_buf.size(); ++k) order[begin + k] = sort_buf[k].second;
      }
    }
    if (grp.count <= 16) {  // the common case: a stable insertion sort, no buffer
      for (std::size_t k = begin + 1; k < order.size(); ++k) {
        const std::uint32_t c = order[k];
        std::size_t j = k;
        for (; j > begin && less(c, order[j - 1]); --j) order[j] = order[j - 1];
        order[j] = c;
      }
    } else if constexpr (!(std::is_trivially_copyable_v<sequence_type> &&
                           sizeof(sequence_type) <= 16)) {
      std::stable_sort(order.begin() + begin, order.end(), less);
    }
    // Keep the last of each run of equal sequences.
    std::uint32_t out = begin;
    const auto end = static_cast<std::uint32_t>(order.size());
    for (std::uint32_t k = begin; k < end; ++k) {
      const std::uint32_t c = order[k];
      if (k + 1 < end && seqs[order[k + 1]] == seqs[c]) {
        if (late_below != nullptr && seqs[c] < *late_below) {
          ++stats.ignored_late_rows;
        } else {
          ++stats.tied_rows;
        }
        if constexpr (opts::strict) {
          const std::uint32_t d = order[k + 1];
          if (!same_change(ops[c], sc.row(c), ops[d], sc.row(d))) {
            throw_tie(sc.row(c), "within the batch");
          }
        }
        if constexpr (merge_tied_upserts) {
          merge_tied(c, order[k + 1]);
          continue;
        } else if constexpr (!keep_tied_changes) {
          continue;
        }
      }
      order[out++] = c;
    }
    order.resize(out);
    return out;
  }

  /// SCD2, ignore_null_updates: the tied change `earlier` is merged into
  /// `later` (which wins, R-CDC-5): an upsert after an upsert keeps the
  /// earlier one's values in its null columns that ignore nulls; an upsert
  /// after a delete keeps nothing, neither from the changes tied before the
  /// delete nor from the version the delete closed: it is marked
  /// after_delete, which it passes on to the upserts tied after it (SCD1
  /// applies the same changes one by one, and its delete empties the row).
  void merge_tied(std::uint32_t earlier, std::uint32_t later) {
    if (ops[later] != op::upsert) return;
    if (ops[earlier] == op::remove) {
      after_delete[later] = 1;
    } else if (ops[earlier] == op::upsert) {
      merge_tied_values(scratch->rows[later], scratch->row(earlier));
      if (after_delete[earlier] != 0) after_delete[later] = 1;
    }
  }
  /// Whether batch row c is an upsert that follows a delete of its key at
  /// the same sequence (merge_tied): it inherits no value (R-CDC-5, R-CDC-6).
  bool after_tied_delete(std::uint32_t c) const noexcept {
    if constexpr (merge_tied_upserts) {
      return after_delete[c] != 0;
    } else {
      (void)c;
      return false;
    }
  }
  static void merge_tied_values(change_type& later, const change_type& earlier) {
    schema_of<change_type>::for_each([&](auto cc) {
      using CC = decltype(cc);
      if constexpr (ignored_cols::template is_ignored<CC>()) {
        if (!CC::get(later).has_value()) CC::get(later) = CC::get(earlier);
      }
    });
  }

  /// Fills `entries` with every group's entry in `index` (nullptr: a new key), probing the
  /// index with prefetching ahead: one pass that only probes keeps many
  /// misses in flight, and the planning pass then finds its entries known.
  template <class Index, class Entry>
  void probe_all(Index& index, std::vector<Entry*>& entries) {
    scratch_type& sc = *scratch;
    const std::size_t n = sc.groups.size();
    entries.resize(n);
    // Two stages: a group's control bytes, then the slot its lookup compares.
    constexpr std::size_t d = probe_prefetch_distance, d2 = probe_prefetch_distance / 2;
    for (std::size_t g = 0; g < n; ++g) {
      if (g + d < n) {
        const auto& ahead = sc.groups[g + d];
        index.prefetch(probe{&sc.row(ahead.head), ahead.hash});
      }
      if (g + d2 < n) {
        const auto& ahead = sc.groups[g + d2];
        index.prefetch_match(probe{&sc.row(ahead.head), ahead.hash});
      }
      const auto& grp = sc.groups[g];
      auto it = index.find(probe{&sc.row(grp.head), grp.hash});
      entries[g] = it == index.end() ? nullptr : &it->second;
    }
  }

  /// Prefetches the batch rows of group g (a key's changes are scattered
  /// over the batch, which need not fit in cache).
  void prefetch_group_rows(std::size_t g) const noexcept {
    const scratch_type& sc = *scratch;
    const auto& grp = sc.groups[g];
    for (std::uint32_t k = grp.first; k < grp.first + grp.count; ++k) {
      prefetch_change(sc.row(sc.members[k]));
    }
  }
  // A change row's first line, and its last when the row spans more than
  // one line (detail/prefetch.hpp); an index entry's lines are hinted with
  // prefetch_object (first and last byte: an entry may straddle two lines).
  static void prefetch_change(const change_type& r) noexcept {
    if constexpr (sizeof(change_type) > cache_line_bytes) {
      prefetch_object(&r);
    } else {
      prefetch(&r);
    }
  }

  /// Runs a one pass's step(change, hash, entry) over `batch` in source
  /// order, stopping where a step returns false (then returns false). The
  /// entry is the change's in `index` when found ahead (else nullptr: the
  /// step looks it up). A contiguous batch is read ahead, in stages: a row
  /// is prefetched 32 rows ahead, its key hashed and its index control
  /// bytes prefetched 16 ahead, the slot its lookup will compare prefetched
  /// 8 ahead (flat_index::prefetch_match), its entry found 4 ahead
  /// (`entries[i % 4]` is row i's, or null; found(entry) then hints what it
  /// will read of it), and what the step reads through the entry hinted 2
  /// ahead (record_ahead(entry)) and 1 ahead (row_ahead(entry)). Without
  /// the slot stage the lookup 4 ahead stalls on the slot. Even a small
  /// target is read ahead: the batch streams through the cache and evicts
  /// the index and rows between batches. The loop is inlined into each
  /// pass (with its step and hooks, as if written out there): called
  /// through, GCC compiled SCD1's pass markedly slower.
  template <class R, class Index, class Entry, class Step, class RowAhead, class RecordAhead,
            class Found>
  [[gnu::always_inline]] bool one_pass_over(R& batch, Index& index,
                                            std::array<Entry*, 4>& entries, Step&& step,
                                            RowAhead&& row_ahead, RecordAhead&& record_ahead,
                                            Found&& found) const {
    if constexpr (std::ranges::contiguous_range<R> && std::ranges::sized_range<R>) {
      constexpr std::size_t hash_ahead = 16, match_ahead = 8, find_ahead = 4, record_dist = 2,
                            row_dist = 1;
      const change_type* data = std::ranges::data(batch);
      const auto n = static_cast<std::size_t>(std::ranges::size(batch));
      std::array<std::size_t, hash_ahead> hashes{};
      entries.fill(nullptr);
      for (std::size_t i = 0; i < std::min(n, hash_ahead); ++i) {
        hashes[i] = traits::hash(key, data[i]);
        index.prefetch(probe{&data[i], hashes[i]});
      }
      for (std::size_t i = 0; i < n; ++i) {
        const std::size_t h = hashes[i % hash_ahead];
        Entry* e = entries[i % find_ahead];
        if (i + 2 * hash_ahead < n) prefetch_change(data[i + 2 * hash_ahead]);
        if (i + row_dist < n) {
          if (const Entry* a = entries[(i + row_dist) % find_ahead]) row_ahead(*a);
        }
        if (i + record_dist < n) {
          if (const Entry* a = entries[(i + record_dist) % find_ahead]) record_ahead(*a);
        }
        if (i + find_ahead < n) {
          const std::size_t j = i + find_ahead;
          auto it = index.find(probe{&data[j], hashes[j % hash_ahead]});
          Entry* a = it == index.end() ? nullptr : &it->second;
          entries[j % find_ahead] = a;
          if (a != nullptr) found(*a);
        }
        if (i + match_ahead < n) {
          index.prefetch_match(
              probe{&data[i + match_ahead], hashes[(i + match_ahead) % hash_ahead]});
        }
        if (i + hash_ahead < n) {
          const change_type& a = data[i + hash_ahead];
          hashes[i % hash_ahead] = traits::hash(key, a);
          index.prefetch(probe{&a, hashes[i % hash_ahead]});
        }
        if (!run_step(step, data[i], h, e)) return false;
      }
    } else {
      for (const change_type& r : batch) {
        if (!run_step(step, r, traits::hash(key, r), static_cast<Entry*>(nullptr))) return false;
      }
    }
    return true;
  }

  /// One step of one_pass_over; a step that returns nothing never stops
  /// the pass.
  template <class Step, class Entry>
  [[gnu::always_inline]] static bool run_step(Step& step, const change_type& r, std::size_t h,
                                              Entry* e) {
    if constexpr (std::is_void_v<decltype(step(r, h, e))>) {
      step(r, h, e);
      return true;
    } else {
      return step(r, h, e);
    }
  }

  /// Frees the staging scratch (a later batch allocates it again).
  void release_staging() noexcept {
    scratch.reset();
    seqs = {};
    ops = {};
    after_delete = {};
    order = {};
    sort_buf = {};
  }
  /// As new, for a full refresh of the target (R-EXACT-5); the target's
  /// claim and ONCE marker (the facade's target_binding) are not the
  /// engine's, and the target scratch is kept (it holds no state).
  void reset_staging() noexcept {
    release_staging();
    batch_floor.reset();
  }

  std::string name;
  CdcOptions settings;
  [[no_unique_address]] std::tuple<Options...> options{};
  K key{};
  S seq{};

  // Batch scratch, kept across batches so that steady state does not allocate.
  std::unique_ptr<scratch_type> scratch;
  cdc_target_scratch_slot targets;  // rows of the target's type
  std::vector<sequence_type> seqs;  // per batch row
  std::vector<op> ops;              // per batch row
  // Per batch row, SCD2 with ignore_null_updates only: 1 for an upsert
  // tied after a delete of its key (merge_tied, after_tied_delete).
  std::vector<std::uint8_t> after_delete;
  std::vector<std::uint32_t> order;  // rows of each group, by sequence
  std::vector<std::pair<sequence_type, std::uint32_t>> sort_buf;  // sort_group, large groups
  std::optional<sequence_type> batch_floor;  // SCD1: the floor after the batch's truncates

  // What the batches changed since the last checkpoint written (checkpoint.hpp).
  mutable cdc_change_log<key_type> changes;
};

}  // namespace flowlib::detail
