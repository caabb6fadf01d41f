// flowlib/flows/auto_cdc.hpp
//
// AutoCdc<Key, Seq, Scd, Options...>: applies a change feed (inserts,
// updates, deletes and, for SCD type 1, truncates), ordered by a sequence,
// to a target table (SEMANTICS.md section 3, R-CDC-1..R-CDC-7).
//
//   struct Change {                         // one row of the change feed
//     std::int64_t userId;
//     std::optional<std::string> name;
//     std::optional<std::string> city;
//     std::string operation;                // "INSERT", "UPDATE", "DELETE", "TRUNCATE"
//     std::int64_t sequenceNum;
//   };
//   FLOWLIB_SCHEMA(Change, userId, name, city, operation, sequenceNum);
//
//   struct User {                           // SCD type 1 target: the selected columns
//     std::int64_t userId;
//     std::optional<std::string> name;
//     std::optional<std::string> city;
//   };
//   FLOWLIB_SCHEMA(User, userId, name, city);
//
//   struct UserHistory {                    // SCD type 2 target: + __START_AT, __END_AT
//     std::int64_t userId;
//     std::optional<std::string> name;
//     std::optional<std::string> city;
//     std::int64_t start_at;                // the sequence's type
//     std::optional<std::int64_t> end_at;   // null for the current version
//   };
//   FLOWLIB_SCHEMA(UserHistory, userId, name, city, (start_at, "__START_AT"),
//                  (end_at, "__END_AT"));
//
//   struct IsDelete {
//     bool operator()(const Change& c) const { return c.operation == "DELETE"; }
//   };
//   struct IsTruncate {
//     bool operator()(const Change& c) const { return c.operation == "TRUNCATE"; }
//   };
//
//   namespace fl = flowlib;
//   using Scd1Flow = fl::AutoCdc<fl::Key<&Change::userId>, fl::Seq<&Change::sequenceNum>, fl::Scd1,
//                                fl::apply_as_deletes<IsDelete>,
//                                fl::apply_as_truncates<IsTruncate>,
//                                fl::except_column_list<"operation", "sequenceNum">>;
//   using Scd2Flow = fl::AutoCdc<fl::Key<&Change::userId>, fl::Seq<&Change::sequenceNum>,
//                                fl::Scd2<fl::track_history_except_column_list<"city">>,
//                                fl::apply_as_deletes<IsDelete>,
//                                fl::except_column_list<"operation", "sequenceNum">>;
//
//   fl::StreamingTable<User> users{"users"};
//   Scd1Flow flow{"users_cdc"};
//   fl::BatchStats s = flow.apply(users, changes);     // any input range of Change
//   flow.apply(users, changes, fl::expectations(...)); // with expectations
//
//   // Runtime settings: tombstone GC (SCD1) on an injected clock; predicates
//   // with state are passed as option values after the settings.
//   Scd1Flow gc_flow{"users_cdc", fl::CdcSettings{.tombstone_gc_threshold = std::chrono::hours(24),
//                                                 .clock = [] { return my_clock_now(); }}};
//   Scd1Flow stateful{"users_cdc", fl::CdcSettings{}, fl::apply_as_deletes<IsDelete>{IsDelete{}},
//                     fl::apply_as_truncates<IsTruncate>{},
//                     fl::except_column_list<"operation", "sequenceNum">{}};  // one value per option, in order
//
// Options (types, in any order after Scd):
//   apply_as_deletes<Pred>           Pred(const Change&) -> bool: the change is a delete.
//   apply_as_truncates<Pred>         the change is a truncate (SCD1 only; with Scd2 it
//                                    does not compile).
//   column_list<"a", ...>            the change columns written to the target; or
//   except_column_list<"a", ...>     all change columns but these (never both). The
//                                    selected columns map onto the target row BY NAME
//                                    (FLOWLIB_SCHEMA on both): every target column
//                                    (but __START_AT/__END_AT) must be a selected change
//                                    column of the same type, and every selected column
//                                    a target column; otherwise it does not compile, and
//                                    the diagnostic names the column.
//   ignore_null_updates              a null (empty std::optional) column of an upsert
//                                    keeps the stored value, for every nullable column;
//   ignore_null_updates_column_list<"a", ...>         ... for these columns only;
//   ignore_null_updates_except_column_list<"a", ...>  ... for all nullable columns but
//                                    these. At most one of the three.
//   flowlib::Once                    ONCE: the flow applies a single batch (a backfill);
//                                    later apply() calls read nothing and return stats
//                                    with `skipped` set, until reset() (after a full
//                                    refresh) or restore(false). A failed apply() does
//                                    not count.
//   strict_sequence                  two changes with equal key and sequence are an
//                                    error (errc::tied_sequence) instead of a tie.
// Scd2's own options: track_history_column_list<"a", ...> or
// track_history_except_column_list<"a", ...> (never both): the columns whose
// changes open a new version; changes to the others update the current
// version in place. Default: every column.
//
// Semantics (R-CDC-1..7): see SEMANTICS.md and docs/auto-cdc-scd1.md,
// docs/auto-cdc-scd2.md. In short: within a batch a key's changes apply in
// sequence order; SCD1 keeps per key the last sequence applied and, for
// deletes, a tombstone (collected after CdcSettings::tombstone_gc_threshold;
// a change older than a collected tombstone resurrects its key); a truncate
// removes rows below its sequence and raises a floor below which later
// changes are ignored. SCD2 keeps every change of a key, so a late change
// re-derives that key's versions (changes newer than all stored ones just
// continue from the current version). Ties (equal key and sequence): the
// later change in source order wins, counted in tied_rows (R-CDC-5).
//
// Applying a batch is all-or-nothing: on any error (null sequences, strict
// ties, expectations, user exceptions) the target and the flow's state are
// unchanged. SCD2 batches, and SCD1 batches the one-pass path does not take
// (see apply_one_pass), are grouped and every key's outcome planned in
// scratch space, storage is reserved, and only then is it committed by
// operations that cannot fail. SCD1 batches otherwise apply in one pass
// straight into the target, with an undo record per key touched. The flow
// object holds the target's index and state: apply it to one table for its
// whole life (it claims the table exclusively).
//
// Performance: SCD1 in one pass: one hash and one probe per change, read
// ahead (rows, index slots, entries and target rows prefetched a few rows
// ahead). Planned: one hash per change, reused for the index probe; one probe
// per distinct key; a key's changes are sorted only when it has several;
// scratch rows and the batch index are reused across batches, so steady
// state does not allocate per change (SCD2 histories grow with the changes
// they keep). A batch whose rows stay put is staged by reference. The
// target's index is probed for the whole batch first, then planning and
// commit prefetch each key's entry, arrays and rows a few keys ahead (a
// large target is out of cache). SCD2: a change after all of its key's
// stored ones closes the current version in place; a late one re-derives
// the key's history only from the version in effect at its sequence. With
// every column tracked and no null-ignoring (the default), the kept history
// refers to version rows instead of copying change rows (compact_history).
#pragma once

#include <flowlib/columns.hpp>
#include <flowlib/detail/batch.hpp>
#include <flowlib/detail/flat_index.hpp>
#include <flowlib/detail/key_index.hpp>
#include <flowlib/detail/cdc_batch.hpp>
#include <flowlib/detail/cdc_columns.hpp>
#include <flowlib/detail/fixed_string.hpp>
#include <flowlib/error.hpp>
#include <flowlib/expect.hpp>
#include <flowlib/schema.hpp>
#include <flowlib/stats.hpp>
#include <flowlib/table.hpp>

#include <absl/container/flat_hash_set.h>
#include <absl/container/inlined_vector.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <ranges>
#include <string>
#include <string_view>
#include <type_traits>
#include <tuple>
#include <utility>
#include <vector>

namespace flowlib {

// ---------------------------------------------------------------------------
// Options
// ---------------------------------------------------------------------------

/// @brief SCD type 1: the target holds the current row of every key.
struct Scd1 {};

/// @brief SCD type 2: the target holds every version of every key, bounded by
/// `__START_AT` and `__END_AT`. Options: track_history_column_list or
/// track_history_except_column_list.
template <class... TrackOptions>
struct Scd2 {};

/// @brief Option: the change is a delete when Pred(change) is true.
template <class Pred>
struct apply_as_deletes {
  Pred pred{};
};

/// @brief Option (SCD1 only): the change is a truncate when Pred(change) is true.
template <class Pred>
struct apply_as_truncates {
  Pred pred{};
};

/// @brief Option: the change columns written to the target.
template <detail::fixed_string... Names>
struct column_list {};

/// @brief Option: every change column except these is written to the target.
template <detail::fixed_string... Names>
struct except_column_list {};

/// @brief Option: a null column in an upsert keeps the stored value (every
/// nullable column).
struct ignore_null_updates {};

/// @brief Option: ignore_null_updates for the listed columns only.
template <detail::fixed_string... Names>
struct ignore_null_updates_column_list {};

/// @brief Option: ignore_null_updates for every nullable column but these.
template <detail::fixed_string... Names>
struct ignore_null_updates_except_column_list {};

/// @brief Scd2 option: only changes of these columns open a new version.
template <detail::fixed_string... Names>
struct track_history_column_list {};

/// @brief Scd2 option: changes of every column but these open a new version.
template <detail::fixed_string... Names>
struct track_history_except_column_list {};

/// @brief Option: equal key and sequence is an error (errc::tied_sequence).
struct strict_sequence {};

/// @brief The clock tombstone GC is measured on.
using cdc_clock = std::chrono::steady_clock;

/// @brief Runtime settings of a change-feed flow.
struct CdcSettings {
  /// SCD1: a tombstone (key, delete sequence) is kept at least this long
  /// after its delete was applied, then collected at the start of a later
  /// batch. std::nullopt keeps tombstones for ever. After collection a
  /// change older than the delete resurrects the key (R-CDC-2).
  std::optional<cdc_clock::duration> tombstone_gc_threshold;
  /// Reads the current time once per batch; empty means cdc_clock::now.
  std::function<cdc_clock::time_point()> clock;
  /// SCD2 with every column tracked (and no ignore_null_updates, no
  /// strict_sequence, on in-memory storage): a batch for a target the flow
  /// already maintains with at least this many keys is applied in one pass
  /// over the changes; with fewer keys it is planned (grouped and sorted by
  /// key first). Both give the same table and metrics; only speed differs.
  /// The one pass wins once the keys' state no longer fits in cache; the
  /// default is where it did on the benchmarks, measured from 1e3 to 1e6
  /// keys (docs/benchmarks/auto_cdc.md, which says how to measure it).
  std::size_t scd2_one_pass_min_keys = std::size_t{1} << 15;
};


namespace detail {

/// What a change does.
enum class cdc_op : std::uint8_t { upsert, remove, truncate };

/// Per-target scratch rows of a change-feed flow, created on the first
/// apply() (the target's row type is known only there). Type-erased only
/// at the flow level: one cast per batch, no virtual call per row.
struct cdc_target_scratch_base {
  virtual ~cdc_target_scratch_base() = default;
};
template <class Target>
struct cdc_target_scratch final : cdc_target_scratch_base {
  static_assert(std::is_default_constructible_v<Target>,
                "flowlib::AutoCdc: the target row type must be default-constructible (the "
                "flow builds target rows column by column).");
  std::vector<Target> rows;  // slots kept across batches; [0, used) belong to this batch
  std::size_t used = 0;
  std::uint32_t alloc() {
    if (used == rows.size()) rows.emplace_back();
    return static_cast<std::uint32_t>(used++);
  }
  static const void* tag() noexcept {
    static const char t = 0;
    return &t;
  }
};

/// Makes room for n elements in v, growing its capacity geometrically, so
/// that vectors reserved batch after batch (before an all-or-nothing
/// commit) are not reallocated to the exact size every time.
template <class V>
void cdc_reserve_grow(V& v, std::size_t n) {
  if (n > v.capacity()) v.reserve(std::max(n, 2 * v.capacity()));
}

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

}  // namespace detail

/// @brief AUTO CDC: applies a change feed to a target table (SCD type 1 or 2).
/// See the header comment for the options and an example.
///
/// K and S are a key and a sequence over the change row type; Scd is Scd1
/// or Scd2<...>; Options are the option types above.
template <key_extractor K, sequence_extractor S, class Scd = Scd1, class... Options>
class AutoCdc {
  static_assert(std::is_same_v<typename K::row_type, typename S::row_type>,
                "flowlib::AutoCdc<Key, Seq, ...>: the key and the sequence must be columns of "
                "the same (change) row type.");
  using opts = detail::cdc_options<Scd, Options...>;

 public:
  using key_policy = K;
  using sequence_policy = S;
  using change_type = typename K::row_type;  ///< a row of the change feed
  using key_type = typename K::value_type;
  using sequence_type = typename S::value_type;  ///< also the type of __START_AT
  static constexpr std::string_view kind = "AUTO CDC";
  static constexpr bool is_scd2 = opts::scd2;

  static_assert(!is_scd2 || (std::is_nothrow_move_constructible_v<change_type> &&
                             std::is_nothrow_move_assignable_v<change_type>),
                "flowlib::AutoCdc with Scd2 keeps each key's changes to re-derive its history "
                "when late changes arrive; the change row type must be nothrow-movable.");

  /// A flow named "auto_cdc" with default settings.
  AutoCdc() : AutoCdc(std::string("auto_cdc")) {}
  /// A flow with a name (used in errors and metrics) and runtime settings.
  explicit AutoCdc(std::string name, CdcSettings settings = {})
      : name_(std::move(name)), settings_(std::move(settings)) {}
  /// As above, with a value for every option (for predicates with state).
  AutoCdc(std::string name, CdcSettings settings, Options... options)
    requires(sizeof...(Options) > 0)
      : name_(std::move(name)), settings_(std::move(settings)), options_(std::move(options)...) {}

  AutoCdc(const AutoCdc&) = delete;  // holds the target's index
  AutoCdc& operator=(const AutoCdc&) = delete;

  const std::string& name() const noexcept { return name_; }

  /// Applies one batch of changes (any input range of change_type).
  /// All-or-nothing; returns the batch's metrics (R-CDC-7).
  template <class Table, class R>
    requires batch_of<R, change_type>
  BatchStats apply(Table& target, R&& batch) {
    return apply(target, std::forward<R>(batch), NoExpectations{});
  }

  /// Applies one batch after the expectations (a dropped change is as if the
  /// source never produced it).
  template <class Table, class R, class... P>
    requires batch_of<R, change_type>
  BatchStats apply(Table& target, R&& batch, const Expectations<P...>& checks) {
    static_assert(!is_managed_table_v<Table>,
                  "MANAGED_TABLE_DOES_NOT_SUPPORT_CDC: a managed table accepts only append flows "
                  "(R-TABLE-1); write the change feed into a flowlib::StreamingTable.");
    using Target = typename Table::row_type;
    static_assert(detail::cdc_mapping_check<change_type, Target, opts>::ok);
    if constexpr (is_scd2) {
      static_assert(detail::cdc_scd2_bounds_check<
                    sequence_type, typename detail::col_value<start_col<Target>>::type,
                    typename detail::col_value<end_col<Target>>::type,
                    !std::is_void_v<start_col<Target>>, !std::is_void_v<end_col<Target>>>::ok);
    }
    check_target(target);
    BatchStats stats;
    if (opts::once && done_) {  // ONCE: ran already; nothing is read
      stats.skipped = true;
      return stats;
    }
    auto& ts = target_scratch<Target>();
    ts.used = 0;
    auto& store = target.store();
    if constexpr (is_scd2) {
      if constexpr (one_pass_scd2<std::remove_cvref_t<decltype(store)>, Target, R>) {
        // The first batch also claims the target: planned.
        if (target_ == &target && index_.size() >= settings_.scd2_one_pass_min_keys) {
          apply_one_pass_scd2(store, ts, batch, checks, stats);
          done_ = opts::once;
          return stats;
        }
      }
      stage_batch(batch, checks, stats);
      plan_scd2(store, ts, stats);
      reserve_scd2(store);
      copy_events_scd2();  // undone by undo_events_scd2 on a later error
      try {
        target.claim(this, kind, name_, /*exclusive=*/true);
      } catch (...) {
        undo_events_scd2(plans2_.size());
        throw;
      }
      target_ = &target;
      commit_scd2(store, ts);
    } else {
      if constexpr (one_pass<std::remove_cvref_t<decltype(store)>, Target, R>) {
        if (target_ == &target) {  // the first batch also claims the target: planned
          if (apply_one_pass(store, ts, batch, checks, stats)) {
            release_planned_scratch();
            done_ = opts::once;
            return stats;
          }
          stats = BatchStats{};  // a truncate: the pass was undone; planned instead
          ts.used = 0;
        }
      }
      stage_batch(batch, checks, stats);
      plan_scd1(store, ts, stats);
      reserve_scd1(store);
      target.claim(this, kind, name_, /*exclusive=*/true);
      target_ = &target;
      commit_scd1(store, ts, stats);
    }
    done_ = opts::once;
    return stats;
  }

  /// True for ONCE flows (the option flowlib::Once).
  static constexpr bool once = opts::once;
  /// ONCE flows: true after a successful apply(), until reset().
  bool done() const noexcept { return done_; }
  /// Full refresh: a ONCE flow runs again at its next apply() (the target's
  /// part of a full refresh is the table's own full_refresh()).
  void reset() noexcept { done_ = false; }
  /// Restores the ONCE marker from a checkpoint.
  void restore(bool done) noexcept { done_ = done; }

  /// Keys the flow holds state for (target keys, plus SCD1 tombstones).
  std::size_t key_count() const noexcept { return index_.size(); }
  /// SCD1: tombstones currently kept.
  std::size_t tombstone_count() const noexcept { return tombstones_; }
  /// SCD1: changes below this sequence are ignored (the highest truncate applied).
  const std::optional<sequence_type>& truncate_floor() const noexcept { return floor_; }

 private:
  using traits = detail::key_traits<K>;
  using op = detail::cdc_op;
  using probe = detail::cdc_probe<change_type>;
  using scratch_type = detail::cdc_batch<K>;  // the batch grouped by key
  using ignored_cols = detail::cdc_ignored_columns<change_type, opts>;
  static constexpr std::size_t n_ignored = ignored_cols::count();
  static constexpr bool ignore_active = !is_scd2 && n_ignored > 0;
  using delete_option = typename detail::find_option<detail::is_deletes, void, Options...>::type;
  using truncate_option =
      typename detail::find_option<detail::is_truncates, void, Options...>::type;
  template <class Target>
  using mapping = detail::cdc_mapping<change_type, Target, opts>;
  template <class Target>
  using start_col = column_named_t<Target, "__START_AT">;
  template <class Target>
  using end_col = column_named_t<Target, "__END_AT">;
  static constexpr row_id no_row = detail::cdc_npos;
  // Groups ahead whose index slots are prefetched while probing: the index
  // of a large target is out of cache, and one probe per key would stall.
  static constexpr std::size_t probe_prefetch_distance = 16;
  static constexpr std::size_t stage_lookahead = 8;  // rows (a power of two)
  // Pipelined prefetching once every group's entry is known (probe_all):
  // groups ahead whose entries' arrays, then target rows, are prefetched.
  static constexpr std::size_t entry_prefetch_distance = 12;
  static constexpr std::size_t row_prefetch_distance = 6;
  static constexpr std::size_t commit_prefetch_distance = 8;
  // SCD2 closes a stored version by writing its __END_AT in place when the
  // store hands out mutable rows and copying the sequence cannot throw (the
  // commit cannot fail); otherwise the version is rewritten whole.
  template <class Store, class Target>
  static constexpr bool close_in_place =
      std::is_nothrow_copy_assignable_v<sequence_type> &&
      requires(Store& s, row_id id) {
        { s.get(id) } -> std::same_as<Target&>;
      };

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
  // SCD2 keeps every change of a key, to re-derive its versions when a late
  // change arrives. When every selected column is tracked and none ignores
  // nulls (compact_history), the versions themselves show most changes:
  // each version was opened by an upsert at its __START_AT with its values,
  // and one that ends where no version starts was closed by a delete at its
  // __END_AT (an upsert that closes a version opens the next at its own
  // sequence). The history then keeps only the other changes, those that
  // opened or closed no version (an upsert with the open version's values, a
  // delete with none open), each referring to the version holding its
  // values (its index among the key's versions): 16 bytes for an int64
  // sequence, the first one inline. Most keys keep none, so a change in
  // order reads and writes no history (a miss saved per change on a target
  // larger than the cache), and the history's memory is that of the changes
  // the versions do not show. strict_sequence keeps a copy of every change,
  // because a tie is checked against every column of the stored change.
  static constexpr bool compact_history =
      is_scd2 && opts::ignore_mode == 0 && opts::scd::track_mode == 0 && !opts::strict &&
      std::is_nothrow_move_constructible_v<sequence_type> &&
      std::is_nothrow_move_assignable_v<sequence_type>;
  struct full_event {
    sequence_type seq;
    bool remove;
    change_type row;
  };
  struct ref_event {
    sequence_type seq;
    std::uint32_t version;  // upserts: the version holding its values (index in versions)
    bool remove;
  };
  using event = std::conditional_t<compact_history, ref_event, full_event>;
  using history_type = std::conditional_t<compact_history, absl::InlinedVector<ref_event, 1>,
                                          std::vector<full_event>>;
  // One-pass apply (compact history only, so other modes pay no memory
  // for it): the pass that last touched the key, and its undo record there.
  struct pass_mark {
    std::uint32_t pass = 0;
    std::uint32_t rec = 0;
  };
  struct no_pass_mark {};
  struct scd2_entry : std::conditional_t<compact_history, pass_mark, no_pass_mark> {
    // The key's changes by sequence (ties replaced); with a compact history,
    // only those its versions do not show.
    history_type history;
    // The key's target rows, by __START_AT. Up to four are held in the
    // entry itself (the size of a std::vector): most keys have few
    // versions, and a key touched then costs no allocation and no miss on
    // a separate array.
    absl::InlinedVector<row_id, 4> versions;
  };
  using entry = std::conditional_t<is_scd2, scd2_entry, scd1_entry>;

  // (Not detail::key_index: see flat_index.hpp for what it adds.)
  using index_type = detail::flat_index<key_type, entry, detail::key_index_hash<K, probe>,
                                        detail::key_index_eq<K, probe>>;

  // --- per-batch plans -----------------------------------------------------------

  enum class outcome : std::uint8_t { none, row, tombstone };
  struct scd1_plan {
    scd1_entry* hit;      // the key's entry, or nullptr for a new key
    std::uint32_t group;  // the key's group in the batch scratch
    outcome result;
    std::uint32_t slot;   // target scratch row when result == row
    scd1_entry state;     // the entry after the batch (row filled at commit)
  };
  // A key's plan, or one segment of it: a key with several late changes in
  // a batch may have a plan per stretch of its history (plan_segment_scd2);
  // its plans are consecutive in plans2_ and committed last to first.
  struct scd2_plan {
    scd2_entry* hit;             // nullptr: a new key
    std::uint32_t group;
    std::uint32_t ev_begin, ev_end;   // new events (indices into order_), by sequence
    std::uint32_t rep_begin, rep_end; // ties with stored events (into reps_)
    std::uint32_t from;          // first version replaced
    std::uint32_t v_begin, v_end;  // derived versions (target scratch rows)
    std::uint32_t ev_from;       // first stored event at or after the re-derivation's start
    std::uint32_t hist_size;     // the key's stored events (before this batch)
    std::uint32_t close;         // batch row whose sequence closes the stored current
                                 // version in place, or cdc_npos
    bool append;                 // new events all after the stored ones
    std::uint32_t tail_begin, tail_end;  // compact history: the key's events from
                                         // ev_from on, as re-derived (into tail_)
    // Compact history, a late change: where its re-derivation converged with
    // the stored versions (see plan_segment_scd2), or cdc_npos. The derived
    // versions then replace the stored ones from `from` up to keep_v, the
    // derived events replace the stored ones from ev_from up to keep_e, and
    // the stored versions and events from there on stay (the events'
    // version indices shifted by the difference).
    std::uint32_t keep_v, keep_e;
    bool converged() const noexcept { return keep_v != detail::cdc_npos; }
  };
  struct replacement {
    std::uint32_t pos;  // index in the key's history
    std::uint32_t row;  // batch row that replaces it
  };

  // --- helpers ---------------------------------------------------------------------

  template <class Table>
  void check_target(const Table& target) const {
    if (target_ != nullptr && target_ != &target) {
      throw error(errc::invalid_target, name_, "", "",
                  "this flow already maintains table '" +
                      static_cast<const Table*>(target_)->name() +
                      "'; a flow keeps the state of exactly one target");
    }
  }

  template <class Target>
  detail::cdc_target_scratch<Target>& target_scratch() {
    using TS = detail::cdc_target_scratch<Target>;
    if (!tscratch_ || tscratch_tag_ != TS::tag()) {
      tscratch_ = std::make_unique<TS>();
      tscratch_tag_ = TS::tag();
    }
    return static_cast<TS&>(*tscratch_);
  }

  op classify(const change_type& c) const {
    if constexpr (!std::is_void_v<truncate_option>) {
      static_assert(std::predicate<const decltype(truncate_option::pred)&, const change_type&>,
                    "flowlib::apply_as_truncates<Pred>: Pred must be callable as "
                    "bool(const Change&) for the flow's change row type.");
      if (std::get<truncate_option>(options_).pred(c)) return op::truncate;
    }
    if constexpr (!std::is_void_v<delete_option>) {
      static_assert(std::predicate<const decltype(delete_option::pred)&, const change_type&>,
                    "flowlib::apply_as_deletes<Pred>: Pred must be callable as "
                    "bool(const Change&) for the flow's change row type.");
      if (std::get<delete_option>(options_).pred(c)) return op::remove;
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
      if constexpr (detail::cdc_rules<opts>::selected(CC::name)) {
        if (same && !(CC::get(a) == CC::get(b))) same = false;
      }
    });
    return same;
  }

  [[noreturn]] void throw_tie(const change_type& r, std::string_view where) const {
    throw error(errc::tied_sequence, name_, seq_.name(), key_.describe(r),
                std::string("two different changes of this key have the same sequence ") +
                    std::string(where) +
                    " and strict_sequence is set; nothing of the batch was applied (R-CDC-5)");
  }

  // --- phase 1: read and group the batch (may throw; no state changes) ---------

  template <class R, class... P>
  void stage_batch(R& batch, const Expectations<P...>& checks, BatchStats& stats) {
    if (!scratch_) scratch_ = std::make_unique<scratch_type>(key_);
    scratch_type& sc = *scratch_;
    constexpr bool move = detail::movable_elements<R>;
    // A batch whose rows stay put is staged by reference, without copying
    // each change: SCD1 reads the changes only while planning (the winning
    // upsert is copied into a target row there); SCD2 copies the new
    // changes into the keys' histories once planning is done (an undoable
    // step, see copy_events_scd2), and moves them there from an rvalue batch.
    constexpr bool refer = !move && std::ranges::forward_range<R>;
    sc.reset(detail::size_hint(batch), refer);
    batch_floor_ = floor_;
    typename Expectations<P...>::counts_type counts;
    const auto describe = [this](const change_type& r) { return key_.describe(r); };

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
        hashes[i] = traits::hash(key_, data[i]);
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
          const std::size_t h = traits::hash(key_, a);
          hashes[pos % stage_lookahead] = h;
          sc.prefetch(probe{&a, h});
        }
        ++pos;
      }
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
                    "the change's sequence is null; nothing of the batch was applied and the "
                    "source position does not advance (R-CDC-5)");
      }
      const op o = classify(r);
      if (o == op::truncate) {  // SCD1 only: raises the floor, no key
        if (!batch_floor_ || *batch_floor_ < *s) batch_floor_ = std::move(*s);
        continue;
      }
      probe p{&r, 0};
      if constexpr (contiguous) {
        p.hash = hash;
      } else {
        p.hash = traits::hash(key_, r);
      }
      std::uint32_t i;
      if constexpr (refer) {
        i = sc.add_ref(r, p);
      } else {
        i = sc.template add<move>(std::forward<decltype(in)>(in), p);
      }
      // (Each array on its own: a push that failed in an earlier batch may
      // have left one longer than the other.)
      if (seqs_.size() <= i) {
        seqs_.push_back(std::move(*s));
      } else {
        seqs_[i] = std::move(*s);
      }
      if (ops_.size() <= i) {
        ops_.push_back(o);
      } else {
        ops_[i] = o;
      }
    }
    if constexpr (sizeof...(P) > 0) checks.report(counts, stats.expectations);
    sc.group_rows();
  }

  /// Fills order_[from..) with the group's rows by sequence (source order
  /// among equals), then drops all but the last of each run of equal
  /// sequences (R-CDC-5). Returns the end. With SCD1 and ignore_null_updates
  /// the tied changes are all kept, in source order, so that the later one
  /// applies on top of the earlier one within a batch as across batches
  /// (its null columns keep the earlier one's values). SCD1: equal changes
  /// below `late_below` (the stored sequence, or a truncate's) are late,
  /// not ties: they count in ignored_late_rows when planned, as every late
  /// change does.
  std::uint32_t sort_group(const typename scratch_type::group& grp, BatchStats& stats,
                           const sequence_type* late_below = nullptr) {
    const scratch_type& sc = *scratch_;
    const auto begin = static_cast<std::uint32_t>(order_.size());
    order_.insert(order_.end(), sc.members.begin() + grp.first,
                  sc.members.begin() + grp.first + grp.count);
    if (grp.count == 1) return begin + 1;
    const auto less = [&](std::uint32_t a, std::uint32_t b) { return seqs_[a] < seqs_[b]; };
    if constexpr (std::is_trivially_copyable_v<sequence_type> && sizeof(sequence_type) <= 16) {
      if (grp.count > 16) {
        // A large group: sort (sequence, row) pairs, without the indirection
        // per comparison; rows are numbered in source order, so this is stable.
        sort_buf_.clear();
        for (std::size_t k = begin; k < order_.size(); ++k) {
          sort_buf_.emplace_back(seqs_[order_[k]], order_[k]);
        }
        std::sort(sort_buf_.begin(), sort_buf_.end(), [](const auto& a, const auto& b) {
          return a.first < b.first || (!(b.first < a.first) && a.second < b.second);
        });
        for (std::size_t k = 0; k < sort_buf_.size(); ++k) order_[begin + k] = sort_buf_[k].second;
      }
    }
    if (grp.count <= 16) {  // the common case: a stable insertion sort, no buffer
      for (std::size_t k = begin + 1; k < order_.size(); ++k) {
        const std::uint32_t c = order_[k];
        std::size_t j = k;
        for (; j > begin && less(c, order_[j - 1]); --j) order_[j] = order_[j - 1];
        order_[j] = c;
      }
    } else if constexpr (!(std::is_trivially_copyable_v<sequence_type> &&
                           sizeof(sequence_type) <= 16)) {
      std::stable_sort(order_.begin() + begin, order_.end(), less);
    }
    // Keep the last of each run of equal sequences.
    std::uint32_t out = begin;
    const auto end = static_cast<std::uint32_t>(order_.size());
    for (std::uint32_t k = begin; k < end; ++k) {
      const std::uint32_t c = order_[k];
      if (k + 1 < end && seqs_[order_[k + 1]] == seqs_[c]) {
        if (late_below != nullptr && seqs_[c] < *late_below) {
          ++stats.ignored_late_rows;
        } else {
          ++stats.tied_rows;
        }
        if constexpr (opts::strict) {
          const std::uint32_t d = order_[k + 1];
          if (!same_change(ops_[c], sc.row(c), ops_[d], sc.row(d))) {
            throw_tie(sc.row(c), "within the batch");
          }
        }
        if constexpr (!ignore_active) continue;
      }
      order_[out++] = c;
    }
    order_.resize(out);
    return out;
  }

  // --- SCD type 1 ---------------------------------------------------------------------

  template <class Store, class Target>
  void plan_scd1(Store& store, detail::cdc_target_scratch<Target>& ts, BatchStats& stats) {
    using M = mapping<Target>;
    scratch_type& sc = *scratch_;
    const std::size_t n = sc.groups.size();
    // Reserved first: the plans hold pointers into the index, which a
    // rehash would invalidate (new keys are inserted at commit).
    index_.reserve(index_.size() + n);
    order_.clear();
    plans1_.clear();
    plans1_.reserve(n);
    new_tombstones_ = 0;
    new_keys_.clear();
    gc_keys_.clear();
    const bool gc = settings_.tombstone_gc_threshold.has_value();
    now_ = settings_.tombstone_gc_threshold ? read_clock() : cdc_clock::time_point{};
    truncating_ = batch_floor_.has_value() && (!floor_ || *floor_ < *batch_floor_);
    probe_all();

    for (std::size_t g = 0; g < n; ++g) {
      if (g + row_prefetch_distance < n) prefetch_group_rows(g + row_prefetch_distance);
      if constexpr (ignore_active) {  // the stored row is read while planning
        if (g + row_prefetch_distance < n) {
          if (const scd1_entry* a = hits_[g + row_prefetch_distance]; a && a->row != no_row) {
            detail::prefetch_row(store, a->row);
          }
        }
      }
      const auto& grp = sc.groups[g];
      const std::uint32_t b = static_cast<std::uint32_t>(order_.size());
      scd1_entry* hit = hits_[g];
      // The key, copied before the last upsert's row is moved into the target row.
      std::optional<key_type> key;
      if (hit == nullptr || gc) key.emplace(key_(sc.row(grp.head)));

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
              M::assign(ts.rows[plan.slot], row);
              set_colseqs(w, row, s);
            }
          } else {
            if (!loaded) {
              plan.slot = ts.alloc();
              loaded = true;
            }
            if (k + 1 == e) {  // only the last upsert's values matter
              if (sc.by_ref) {
                M::assign(ts.rows[plan.slot], row);
              } else {
                M::assign(ts.rows[plan.slot], std::move(sc.rows[c]));
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
      if (exists) {
        plan.result = outcome::row;
      } else {
        plan.result = outcome::tombstone;
        w.deleted_at = now_;
        ++new_tombstones_;
        if (gc) gc_keys_.push_back(*key);
      }
      if (hit == nullptr) new_keys_.push_back(std::move(*key));
      plans1_.push_back(std::move(plan));
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
    const Target& t = store.get(e.row);
    bool same = true;
    mapping<Target>::for_each([&](auto tc, auto cc) {
      using TC = decltype(tc);
      using CC = decltype(cc);
      if constexpr (detail::cdc_rules<opts>::template ignores_null<typename TC::value_type>(
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
  void reserve_scd1(Store& store) {
    std::size_t inserts = 0;
    for (const scd1_plan& p : plans1_) {
      if (p.result == outcome::row && (p.hit == nullptr || p.hit->row == no_row)) ++inserts;
    }
    store.reserve(inserts);
    if (settings_.tombstone_gc_threshold && new_tombstones_ != 0) {
      if (gc_head_ > gc_queue_.size() / 2) {  // compact the queue (moves only)
        gc_queue_.erase(gc_queue_.begin(), gc_queue_.begin() + static_cast<std::ptrdiff_t>(gc_head_));
        gc_head_ = 0;
      }
      detail::cdc_reserve_grow(gc_queue_, gc_queue_.size() + new_tombstones_);
    }
  }

  template <class Store, class Target>
  void commit_scd1(Store& store, detail::cdc_target_scratch<Target>& ts, BatchStats& stats) noexcept {
    std::size_t next_new_key = 0;
    std::size_t next_gc_key = 0;
    const bool gc = settings_.tombstone_gc_threshold.has_value();
    const std::size_t n = plans1_.size();
    for (std::size_t q = 0; q < n; ++q) {
      // The target rows are first touched here (entries were, while
      // planning, but may have been evicted since).
      if (q + 2 * commit_prefetch_distance < n) {
        if (const scd1_entry* a = plans1_[q + 2 * commit_prefetch_distance].hit) {
          detail::cdc_prefetch(a);
        }
      }
      if (q + commit_prefetch_distance < n) {
        const scd1_plan& a = plans1_[q + commit_prefetch_distance];
        if (a.hit != nullptr && a.hit->row != no_row) detail::prefetch_row(store, a.hit->row);
      }
      scd1_plan& p = plans1_[q];
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
    for (const auto& cs : e.ign.colseq)
      if (cs && *cs < f) return true;
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
  void plan_truncate_ignored(Store& store, detail::cdc_target_scratch<Target>& ts) {
    const sequence_type& f = *batch_floor_;
    absl::flat_hash_set<const scd1_entry*> planned;  // rare path: only when a truncate arrives
    for (scd1_plan& p : plans1_) {
      if (p.hit != nullptr) planned.insert(p.hit);
      if (p.result == outcome::row) clear_below(ts.rows[p.slot], p.state, f);
    }
    for (auto& [k, e] : index_) {
      if (e.row == no_row || e.seq < f || planned.contains(&e) || !kept_below(e, f)) continue;
      scd1_plan p{&e, 0, outcome::row, ts.alloc(), e};
      ts.rows[p.slot] = store.get(e.row);
      clear_below(ts.rows[p.slot], p.state, f);
      plans1_.push_back(std::move(p));
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

  /// Fills hits_ with every group's entry (nullptr: a new key), probing the
  /// index with prefetching ahead: one pass that only probes keeps many
  /// misses in flight, and the planning pass then finds its entries known.
  void probe_all() {
    scratch_type& sc = *scratch_;
    const std::size_t n = sc.groups.size();
    hits_.resize(n);
    // Two stages: a group's control bytes, then the slot its lookup compares.
    constexpr std::size_t d = probe_prefetch_distance, d2 = probe_prefetch_distance / 2;
    for (std::size_t g = 0; g < n; ++g) {
      if (g + d < n) {
        const auto& ahead = sc.groups[g + d];
        index_.prefetch(probe{&sc.row(ahead.head), ahead.hash});
      }
      if (g + d2 < n) {
        const auto& ahead = sc.groups[g + d2];
        index_.prefetch_match(probe{&sc.row(ahead.head), ahead.hash});
      }
      const auto& grp = sc.groups[g];
      auto it = index_.find(probe{&sc.row(grp.head), grp.hash});
      hits_[g] = it == index_.end() ? nullptr : &it->second;
    }
  }

  /// Prefetches the batch rows of group g (a key's changes are scattered
  /// over the batch, which need not fit in cache).
  void prefetch_group_rows(std::size_t g) const noexcept {
    const scratch_type& sc = *scratch_;
    const auto& grp = sc.groups[g];
    for (std::uint32_t k = grp.first; k < grp.first + grp.count; ++k) {
      prefetch_change(sc.row(sc.members[k]));
    }
  }
  static void prefetch_change(const change_type& r) noexcept {
    detail::cdc_prefetch(&r);
    if constexpr (sizeof(change_type) > 64) {
      detail::cdc_prefetch(reinterpret_cast<const char*>(&r + 1) - 1);
    }
  }

  // --- SCD type 1 in one pass -----------------------------------------------------------
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
  // input ranges whose rows do not stay put, or stores without mutable rows.
  template <class Store, class Target, class R>
  static constexpr bool one_pass =
      !is_scd2 && !ignore_active && !opts::strict && std::ranges::forward_range<R> &&
      std::is_lvalue_reference_v<std::ranges::range_reference_t<R>> &&
      std::is_same_v<std::remove_cvref_t<std::ranges::range_reference_t<R>>, change_type> &&
      std::is_nothrow_move_constructible_v<Target> && std::is_nothrow_move_assignable_v<Target> &&
      std::is_nothrow_move_assignable_v<sequence_type> && requires(Store& s, row_id id) {
        { s.get(id) } -> std::same_as<Target&>;
      };

  // SCD1 in one pass: how a stored row takes its key's last upsert. When
  // every mapped column's assignment can be made unable to throw ahead of
  // time (mapping::preparable: numbers, std::strings and nullable ones, ...),
  // the pass only prepares the row and writes it after everything that can
  // fail (write_due, last), so it keeps no copy of the stored values: the
  // copy, into the target scratch, cost the pass 1.2x-1.4x in rows per
  // second (measured). Otherwise the stored values are moved aside before
  // the first write, for undo_one_pass.
  template <class Target>
  static constexpr bool write_last = mapping<Target>::preparable;

  // SCD2 in one pass: with a compact history, where every change of a key
  // that follows all of its stored ones is applied straight into the target.
  template <class Store, class Target, class R>
  static constexpr bool one_pass_scd2 =
      compact_history && close_in_place<Store, Target> && std::ranges::forward_range<R> &&
      std::is_lvalue_reference_v<std::ranges::range_reference_t<R>> &&
      std::is_same_v<std::remove_cvref_t<std::ranges::range_reference_t<R>>, change_type> &&
      std::is_nothrow_move_constructible_v<Target> && std::is_nothrow_move_assignable_v<Target>;

  struct undo_rec {
    const change_type* src;   // a change of the key: finds its entry again
    scd1_entry old;           // the entry before the pass (when `existed`)
    std::uint32_t saved;      // target scratch row with the stored row's values, or cdc_npos
                              // (always cdc_npos with write_last: the row is written last)
    // (Bit-fields keep the record in one cache line for an int64 sequence.)
    bool existed : 1;         // the key had an entry
    bool have : 1;            // ... whose sequence counts (not a collected tombstone)
    bool tomb : 1;            // the key is a tombstone now
    bool parked : 1;          // its stored row is deleted, erased at the end
    bool tie : 1;             // recount: a change below the key's batch maximum ties
    std::uint32_t last_log;   // the key's latest change in log_
    std::uint32_t last_max;   // ... that was not superseded (pass_log::none: none)
    std::uint32_t last_sup;   // the key's latest superseded change in superseded_, or cdc_npos
    std::uint32_t due;        // the key's pending write in due_, or cdc_npos
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
    std::uint32_t prev;       // the key's previous one in superseded_, or cdc_npos
  };
  struct pass_log {           // an applied change (16 bytes for an int64 sequence)
    sequence_type seq;        // a copy: reading it never touches the batch again
    std::uint32_t prev;       // the key's previous change in log_, or cdc_npos
    std::uint32_t prev_max : 31;  // the key's previous change that was not superseded
    std::uint32_t remove : 1;     // a delete (else an upsert)
    static constexpr std::uint32_t none = 0x7fffffff;  // prev_max: no such change
  };
  static constexpr std::size_t max_one_pass_rows = pass_log::none;

  // An index entry may straddle two cache lines.
  static void prefetch_entry(const entry* e) noexcept {
    detail::cdc_prefetch(e);
    detail::cdc_prefetch(reinterpret_cast<const char*>(e + 1) - 1);
  }

  /// After a one-pass batch: the planned path's scratch (kept for the next
  /// planned batch, sized for the largest) is freed, since the one-pass
  /// path is taken from now on; a later planned batch allocates it again.
  void release_planned_scratch() noexcept {
    if (!scratch_) return;
    scratch_.reset();
    seqs_ = {};
    ops_ = {};
    order_ = {};
    sort_buf_ = {};
    plans1_ = {};
    new_keys_ = {};
    gc_keys_ = {};
    hits_ = {};
  }

  /// Applies the batch in one pass. Returns false, with everything undone,
  /// when the batch holds a truncate; throws, with everything undone, on an
  /// error.
  template <class Store, class Target, class R, class... P>
  bool apply_one_pass(Store& store, detail::cdc_target_scratch<Target>& ts, R& batch,
                      const Expectations<P...>& checks, BatchStats& stats) {
    recs_.clear();
    log_.clear();
    nulled_.clear();
    if (++pass_ == 0) {  // wrapped: no entry may look touched by this pass
      for (auto& kv : index_) kv.second.pass = 0;
      pass_ = 1;
    }
    const bool gc = settings_.tombstone_gc_threshold.has_value();
    now_ = gc ? read_clock() : cdc_clock::time_point{};
    if (gc && gc_head_ > gc_queue_.size() / 2) {  // compact the queue (moves only)
      gc_queue_.erase(gc_queue_.begin(), gc_queue_.begin() + static_cast<std::ptrdiff_t>(gc_head_));
      gc_head_ = 0;
    }
    const std::size_t gc_size = gc_queue_.size();
    std::ptrdiff_t tomb_delta = 0;
    bool ties = false;  // some key's metrics need recounting
    superseded_.clear();
    sup_keys_.clear();
    due_.clear();
    typename Expectations<P...>::counts_type counts;
    const auto describe = [this](const change_type& r) { return key_.describe(r); };

    // One change; false on a truncate. `e` is the key's entry when the
    // caller found it already (nullptr: look it up).
    const auto step = [&](const change_type& r, std::size_t h, scd1_entry* e) -> bool {
      ++stats.input_rows;
      if constexpr (sizeof...(P) > 0) {
        if (!checks.check(r, counts, name_, describe)) {
          ++stats.dropped_rows;
          return true;
        }
      }
      std::optional<sequence_type> so = seq_(r);
      if (!so) {
        throw error(errc::null_sequence, name_, seq_.name(), key_.describe(r),
                    "the change's sequence is null; nothing of the batch was applied and the "
                    "source position does not advance (R-CDC-5)");
      }
      const sequence_type& s = *so;
      const op o = classify(r);
      if (o == op::truncate) return false;
      if (floor_ && s < *floor_) {  // below an earlier truncate
        ++stats.ignored_late_rows;
        return true;
      }
      const probe p{&r, h};
      if (e == nullptr) {
        auto it = index_.find(p);
        if (it != index_.end()) e = &it->second;
      }
      undo_rec* u;
      bool first = false;
      if (e != nullptr && e->pass == pass_) {
        u = &recs_[e->rec];
        if (u->have && s < u->old.seq) {  // older than the stored change (R-CDC-2)
          ++stats.ignored_late_rows;
          return true;
        }
      } else {
        const bool have = e != nullptr && !(e->row == no_row && expired(*e));
        if (have && s < e->seq) {
          ++stats.ignored_late_rows;
          return true;
        }
        // The key's first applied change in this pass: its undo record.
        first = true;
        const auto ri = static_cast<std::uint32_t>(recs_.size());
        if (e != nullptr) {
          recs_.push_back({&r, *e, detail::cdc_npos, true, have, e->row == no_row, false, false,
                           detail::cdc_npos, pass_log::none, detail::cdc_npos, detail::cdc_npos});
        } else {
          key_type k = key_(r);
          recs_.push_back({&r, scd1_entry{}, detail::cdc_npos, false, false, false, false, false,
                           detail::cdc_npos, pass_log::none, detail::cdc_npos, detail::cdc_npos});
          const std::uint64_t gen = index_.generation();
          scd1_entry fresh{};
          fresh.seq = s;
          e = &index_.emplace(std::move(k), std::move(fresh)).first->second;
          if (index_.generation() != gen) found_.fill(nullptr);  // rehashed: lookahead is stale
        }
        e->pass = pass_;
        e->rec = ri;
        u = &recs_.back();
      }
      const auto li = static_cast<std::uint32_t>(log_.size());
      if (li == max_one_pass_rows) {
        throw error(errc::invalid_argument, name_, "", "",
                    "a batch cannot hold more than 2^31-1 changes");
      }
      log_.push_back({s, u->last_log, u->last_max, o == op::remove});
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
          while (j != pass_log::none && s < log_[j].seq) j = log_[j].prev_max;
          if (j != pass_log::none && !(log_[j].seq < s)) u->tie = ties = true;
          // Ties among superseded changes: found at the end.
          if (u->last_sup != detail::cdc_npos && superseded_[u->last_sup].prev == detail::cdc_npos) {
            sup_keys_.push_back(e->rec);  // the key's second
          }
          superseded_.push_back({s, u->last_sup});
          u->last_sup = static_cast<std::uint32_t>(superseded_.size() - 1);
        }
        return true;
      }
      u->last_max = li;
      if (valid && !(e->seq < s)) {  // a tie: the later change wins (R-CDC-5)
        ++stats.tied_rows;
        if (!first) --(e->row == no_row ? stats.deleted_rows : stats.upserted_rows);
      }
      ++(o == op::remove ? stats.deleted_rows : stats.upserted_rows);

      e->seq = s;
      if (o == op::remove) {
        if (u->due != detail::cdc_npos) due_[u->due].change = nullptr;
        if (e->row != no_row) {
          if (u->existed && e->row == u->old.row) {
            u->parked = true;  // erased once the pass has succeeded
          } else {
            store.erase(e->row);  // inserted by this pass
          }
          e->row = no_row;
        }
        e->deleted_at = now_;
        if (!u->tomb) ++tomb_delta;
        u->tomb = true;
        return true;
      }
      if (e->row == no_row && u->parked) {  // deleted earlier in the pass: back
        e->row = u->old.row;
        u->parked = false;
      }
      if (e->row != no_row) {
        Target& t = store.get(e->row);
        if constexpr (write_last<Target>) {
          // A stored row's null made an empty string is logged for the undo
          // (a row this pass inserted is erased by it).
          const bool stored = u->existed && e->row == u->old.row;
          mapping<Target>::prepare(t, r, [&](std::uint32_t col) {
            if (stored) nulled_.push_back({e->row, col});
          });
        } else if (u->existed && e->row == u->old.row && u->saved == detail::cdc_npos) {
          const std::uint32_t slot = ts.alloc();
          ts.rows[slot] = std::move(t);
          u->saved = slot;
        }
        if (!write_last<Target> && first) {
          mapping<Target>::assign(t, r);
        } else if (u->due == detail::cdc_npos) {  // written once the pass is through
          u->due = static_cast<std::uint32_t>(due_.size());
          due_.push_back({&r, e->row});
        } else {
          due_[u->due] = {&r, e->row};
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
      constexpr bool contiguous = std::ranges::contiguous_range<R> && std::ranges::sized_range<R>;
      if constexpr (contiguous) {
        // Read ahead: a row is prefetched 32 rows ahead, its key hashed and
        // its index control bytes prefetched 16 ahead, the slot its lookup
        // will compare prefetched 8 ahead (flat_index::prefetch_match), its
        // entry found 4 ahead (found_[i % 4] is row i's entry, or null), and
        // its undo record, or its target row (unless write_last: the pass
        // does not read it), prefetched 2 ahead. (Without the slot stage
        // the lookup 4 ahead stalled on the slot: 0.65x-0.75x the rows per
        // second at 1e6 keys, measured.)
        constexpr std::size_t L = 16, M = 8, F = 4, F2 = 2;
        // (Even a small target is read ahead: the batch streams through
        // the cache and evicts its index and rows between batches.)
        const change_type* data = std::ranges::data(batch);
        const auto n = static_cast<std::size_t>(std::ranges::size(batch));
        std::array<std::size_t, L> hashes{};
        found_.fill(nullptr);
        for (std::size_t i = 0; i < std::min(n, L); ++i) {
          hashes[i] = traits::hash(key_, data[i]);
          index_.prefetch(probe{&data[i], hashes[i]});
        }
        for (std::size_t i = 0; i < n; ++i) {
          const std::size_t h = hashes[i % L];
          scd1_entry* e = found_[i % F];
          if (i + 2 * L < n) prefetch_change(data[i + 2 * L]);
          if (i + F2 < n) {
            // (A key this pass touched already has its row cached; its
            // later upserts are not written until the end anyway.)
            if (const scd1_entry* a = found_[(i + F2) % F]) {
              if (a->pass == pass_) {
                detail::cdc_prefetch(&recs_[a->rec]);
              } else if (!write_last<Target> && a->row != no_row) {
                detail::prefetch_row(store, a->row);
              }
            }
          }
          if (i + F < n) {
            const std::size_t j = i + F;
            auto it = index_.find(probe{&data[j], hashes[j % L]});
            found_[j % F] = it == index_.end() ? nullptr : &it->second;
          }
          if (i + M < n) index_.prefetch_match(probe{&data[i + M], hashes[(i + M) % L]});
          if (i + L < n) {
            const change_type& a = data[i + L];
            hashes[i % L] = traits::hash(key_, a);
            index_.prefetch(probe{&a, hashes[i % L]});
          }
          if (!step(data[i], h, e)) {
            complete = false;
            break;
          }
        }
      } else {
        for (const change_type& r : batch) {
          if (!step(r, traits::hash(key_, r), nullptr)) {
            complete = false;
            break;
          }
        }
      }
      if (complete) {
        if (!sup_keys_.empty() && find_superseded_ties()) ties = true;
        if (ties) recount_ties(stats);
        if (gc) {
          for (const undo_rec& u : recs_) {
            if (u.tomb) gc_queue_.push_back({key_(*u.src), now_});
          }
        }
        if constexpr (sizeof...(P) > 0) checks.report(counts, stats.expectations);
        write_due(store);  // last: with write_last, it cannot throw
      }
    } catch (...) {
      undo_one_pass(store, ts, gc_size);
      throw;
    }
    if (!complete) {
      undo_one_pass(store, ts, gc_size);
      return false;
    }
    // Commit: erase the parked rows; nothing here can fail.
    for (const undo_rec& u : recs_) {
      if (u.parked) store.erase(u.old.row);
    }
    tombstones_ = static_cast<std::size_t>(static_cast<std::ptrdiff_t>(tombstones_) + tomb_delta);
    if (gc) collect_tombstones();
    return true;
  }

  /// Writes each key's last pending upsert (see apply_one_pass). With
  /// write_last the rows were prepared and this cannot throw; otherwise
  /// the stored rows' values are already aside.
  template <class Store>
  void write_due(Store& store) {
    using Target = std::remove_cvref_t<decltype(store.get(row_id{}))>;
    constexpr std::size_t ahead = 8;  // rows and changes are cold in a large batch
    const std::size_t n = due_.size();
    for (std::size_t i = 0; i < n; ++i) {
      if (i + ahead < n && due_[i + ahead].change != nullptr) {
        detail::prefetch_row(store, due_[i + ahead].row);
        prefetch_change(*due_[i + ahead].change);
      }
      if (due_[i].change != nullptr) mapping<Target>::assign(store.get(due_[i].row), *due_[i].change);
    }
  }

  /// Restores every key the pass touched (see apply_one_pass).
  template <class Store, class Target>
  void undo_one_pass(Store& store, detail::cdc_target_scratch<Target>& ts,
                     std::size_t gc_size) noexcept {
    for (const nulled_column& n : nulled_) mapping<Target>::reset_null(store.get(n.row), n.column);
    nulled_.clear();
    for (undo_rec& u : recs_) {
      auto it = index_.find(probe{u.src, traits::hash(key_, *u.src)});
      if (it == index_.end()) continue;  // a new key whose entry was never made
      scd1_entry& e = it->second;
      if (e.row != no_row && !(u.existed && e.row == u.old.row)) store.erase(e.row);
      if (u.saved != detail::cdc_npos) store.get(u.old.row) = std::move(ts.rows[u.saved]);
      if (u.existed) {
        e = std::move(u.old);
      } else {
        index_.erase(it);
      }
    }
    gc_queue_.erase(gc_queue_.begin() + static_cast<std::ptrdiff_t>(gc_size), gc_queue_.end());
    recs_.clear();
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
  /// or more are visited, each sorting its own few (one sort of the whole list
  /// cost up to a tenth of the pass, mostly in mispredicted branches).
  bool find_superseded_ties() {
    bool any = false;
    for (const std::uint32_t ri : sup_keys_) {
      undo_rec& u = recs_[ri];
      sup_seqs_.clear();
      for (std::uint32_t i = u.last_sup; i != detail::cdc_npos; i = superseded_[i].prev) {
        sup_seqs_.push_back(&superseded_[i].seq);
      }
      std::sort(sup_seqs_.begin(), sup_seqs_.end(),
                [](const auto* a, const auto* b) { return *a < *b; });
      for (std::size_t k = 1; k < sup_seqs_.size(); ++k) {
        if (!(*sup_seqs_[k - 1] < *sup_seqs_[k])) {
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
    for (const undo_rec& u : recs_) {
      if (!u.tie) continue;
      by_seq_.clear();  // (sequence, log position), in source order once reversed
      for (std::uint32_t i = u.last_log; i != detail::cdc_npos; i = log_[i].prev) {
        by_seq_.emplace_back(log_[i].seq, i);
      }
      std::reverse(by_seq_.begin(), by_seq_.end());
      // As the pass counted: source order.
      std::uint64_t up = 0, del = 0, tied = 0;
      {
        bool valid = u.have, from_batch = false;
        const sequence_type* cur = u.have ? &u.old.seq : nullptr;
        op cur_op = op::upsert;
        for (const auto& [s, i] : by_seq_) {
          const op o = log_[i].remove ? op::remove : op::upsert;
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
      std::sort(by_seq_.begin(), by_seq_.end(), [](const auto& x, const auto& y) {
        return x.first < y.first || (!(y.first < x.first) && x.second < y.second);
      });
      std::uint64_t p_up = 0, p_del = 0, p_tied = 0;
      for (std::size_t k = 0; k < by_seq_.size(); ++k) {
        const sequence_type& s = by_seq_[k].first;
        if (k + 1 < by_seq_.size() && !(s < by_seq_[k + 1].first)) {
          ++p_tied;
          continue;
        }
        count_op(p_up, p_del, log_[by_seq_[k].second].remove ? op::remove : op::upsert, 1);
        if (u.have && !(u.old.seq < s) && !(s < u.old.seq)) ++p_tied;  // equals the stored change
      }
      stats.upserted_rows += p_up - up;  // modular: the totals stay exact
      stats.deleted_rows += p_del - del;
      stats.tied_rows += p_tied - tied;
    }
  }

  // --- SCD type 2 ------------------------------------------------------------------------

  /// One segment of a key's plan (see plan_scd2): derives the key's versions
  /// and events from the segment's first new change, plan.ev_begin (in
  /// order_), on. Returns where the next segment starts: the key's end
  /// (plan.ev_end as given) when the walk ran through its new changes, else
  /// the change the walk stopped before, which plan.ev_end is set to.
  template <class Store, class Target>
  std::uint32_t plan_segment_scd2(Store& store, detail::cdc_target_scratch<Target>& ts,
                                  BatchStats& stats, scd2_plan& plan) {
    using M = mapping<Target>;
    scratch_type& sc = *scratch_;
    scd2_entry* const hit = plan.hit;
    const history_type* hist = hit ? &hit->history : nullptr;
    const std::uint32_t sb = plan.ev_begin;
    const std::uint32_t e = plan.ev_end;
    std::uint32_t next_segment = e;  // where the next segment starts (e: none)
    // Compact history: keeps a change the walk just applied unless the
    // versions show it (`visible`: it opened or closed a version); an
    // upsert refers to the version now open (derived rows map one to one,
    // in order, onto the key's versions from plan.from on).
    const auto record = [&](const sequence_type& s, bool remove, std::uint32_t cur,
                            bool visible) {
      if constexpr (compact_history) {
        if (!visible) {
          tail_.push_back(ref_event{s, remove ? 0 : plan.from + (cur - plan.v_begin), remove});
        }
      } else {
        (void)s, (void)remove, (void)cur, (void)visible;
      }
    };
    const sequence_type& first = seqs_[order_[sb]];
    const sequence_type* latest = hit ? latest_seq(store, *hit) : nullptr;
    plan.append = latest == nullptr || *latest < first;
    plan.v_begin = static_cast<std::uint32_t>(ts.used);
    if (plan.append) {
      plan.ev_from = hist ? static_cast<std::uint32_t>(hist->size()) : 0;
      // Continue from the current version (if the key is open).
      std::uint32_t cur = detail::cdc_npos;
      std::uint32_t k = sb;
      plan.from = hit ? static_cast<std::uint32_t>(hit->versions.size()) : 0;
      if (hit && !hit->versions.empty() &&
          !end_col<Target>::get(store.get(hit->versions.back())).has_value()) {
        const Target& stored = store.get(hit->versions.back());
        const std::uint32_t c = order_[sb];
        if constexpr (close_in_place<Store, Target>) {
          // The common case: the first new change closes the stored
          // version (a delete, or an upsert with other tracked values),
          // which is then closed in place at commit instead of being
          // copied into scratch and written back whole.
          if (ops_[c] == op::remove) {
            plan.close = c;
            record(seqs_[c], true, cur, true);
            k = sb + 1;
          } else if constexpr (opts::ignore_mode == 0) {
            cur = ts.alloc();
            Target& t = ts.rows[cur];
            M::assign(t, sc.row(c));
            start_col<Target>::get(t) = seqs_[c];
            end_col<Target>::get(t).reset();
            const bool opens = !M::tracked_equal(stored, t);
            if (opens) {
              plan.close = c;
            } else {  // updated in place, keeping its start
              start_col<Target>::get(t) = start_col<Target>::get(stored);
              --plan.from;
            }
            record(seqs_[c], false, cur, opens);
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
        const std::uint32_t c = order_[k];
        const bool remove = ops_[c] == op::remove;
        record(seqs_[c], remove, cur, walk_step<Target>(ts, cur, seqs_[c], remove, sc.row(c)));
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
      const auto after = detail::partition_point_from_back(  // the first starting after it
          vs.begin(), vs.end(),
          [&](row_id id) { return !(first < start_col<Target>::get(store.get(id))); });
      std::uint32_t cur = detail::cdc_npos;
      std::size_t i = 0;
      std::size_t w = 0;  // compact history: the version whose changes are shown next
      plan.from = 0;
      if (after != vs.begin()) {
        const auto v = static_cast<std::size_t>(after - vs.begin()) - 1;
        const sequence_type& start = start_col<Target>::get(store.get(vs[v]));
        i = static_cast<std::size_t>(
            detail::partition_point_from_back(hist->begin(), hist->end(),
                                              [&](const event& ev) { return ev.seq < start; }) -
            hist->begin());
        w = v;
        plan.from = static_cast<std::uint32_t>(v);
        if (v > 0) {
          const Target& prev = store.get(vs[v - 1]);
          const auto& prev_end = end_col<Target>::get(prev);
          if (prev_end.has_value() && !(*prev_end < start) && !(start < *prev_end)) {
            cur = ts.alloc();
            ts.rows[cur] = prev;
            end_col<Target>::get(ts.rows[cur]).reset();
            plan.from = static_cast<std::uint32_t>(v - 1);
          }
        }
      }
      plan.ev_from = static_cast<std::uint32_t>(i);
      bool w_closed = false;  // ... its opening (false) or its closing delete (true)
      std::uint32_t k = sb;
      for (;;) {
        // The next stored change: hist[i], or one the versions show.
        const sequence_type* os = i < hist->size() ? &(*hist)[i].seq : nullptr;
        bool oremove = os != nullptr && (*hist)[i].remove;
        bool shown = false;
        if constexpr (compact_history) {
          if (const sequence_type* d = shown_change(store, vs, w, w_closed);
              d != nullptr && (os == nullptr || *d < *os)) {
            os = d;
            oremove = w_closed;
            shown = true;
          }
        }
        const std::uint32_t c = k < e ? order_[k] : detail::cdc_npos;
        if (os == nullptr && c == detail::cdc_npos) break;
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
        if (c != detail::cdc_npos && (os == nullptr || !(*os < seqs_[c]))) {
          if (os != nullptr && !(seqs_[c] < *os)) {  // tie with a stored change
            ++stats.tied_rows;
            if constexpr (compact_history) {
              // A change the one-pass apply of this batch applied: a tie
              // within the batch, whose loser the planned path never counts.
              if (fixing_pass_ties_ && hit->pass == pass_) {
                const undo_rec2& u = recs2_[hit->rec];
                const bool by_pass =
                    shown ? w >= u.vers_size || (oremove && u.closed && w + 1 == u.vers_size)
                          : i >= u.hist_size;
                if (by_pass) ++pass_tie_fix_[oremove ? 1 : 0];
              }
            }
            if constexpr (opts::strict) {
              const event& old = (*hist)[i];
              if (!same_change(old.remove ? op::remove : op::upsert, old.row, ops_[c],
                               sc.row(c))) {
                throw_tie(sc.row(c), "as a stored change");
              }
            }
            if constexpr (!compact_history) reps_.push_back({static_cast<std::uint32_t>(i), c});
            next_stored();
          }
          const bool remove = ops_[c] == op::remove;
          record(seqs_[c], remove, cur, walk_step<Target>(ts, cur, seqs_[c], remove, sc.row(c)));
          ++k;
        } else {
          if constexpr (compact_history) {
            bool visible;
            if (oremove) {
              visible = walk_delete<Target>(ts, cur, *os);
            } else {
              const std::size_t holder = shown ? w : (*hist)[i].version;
              visible = walk_upsert<Target>(ts, cur, *os, store.get(vs[holder]));
            }
            if (shown && !oremove && visible &&
                (k == e || resumes_after(store, vs, w, seqs_[order_[k]]))) {
              // Converged: the opening of stored version w opened a
              // version again, a copy of it (walk_upsert copies the stored
              // row; its end is set later), and every new change before it
              // is applied. The state is the stored one after that
              // opening, so the walk would re-derive the stored versions
              // and events unchanged up to the next new change: they stay
              // (keep_v, keep_e), and w's copy is dropped. A late change
              // then writes a few versions however long its key's history,
              // not every later one. The key's next new change, if any,
              // starts a segment of its own at the version it falls in,
              // after w (resumes_after), so the segments replace disjoint
              // ranges of versions and events. (Each segment applies a new
              // change at least: its first falls in a version before w.)
              plan.keep_v = static_cast<std::uint32_t>(w);
              plan.keep_e = static_cast<std::uint32_t>(i);
              plan.ev_end = k;
              next_segment = k;
              --ts.used;  // cur, the last derived row
              break;
            }
            record(*os, oremove, cur, visible);
          } else {
            walk_step<Target>(ts, cur, *os, oremove, (*hist)[i].row);
          }
          next_stored();
        }
      }
    }
    plan.v_end = static_cast<std::uint32_t>(ts.used);
    plan.rep_end = static_cast<std::uint32_t>(reps_.size());
    plan.tail_end = static_cast<std::uint32_t>(tail_.size());
    return next_segment;
  }

  template <class Store, class Target>
  void plan_scd2(Store& store, detail::cdc_target_scratch<Target>& ts, BatchStats& stats) {
    scratch_type& sc = *scratch_;
    const std::size_t n = sc.groups.size();
    index_.reserve(index_.size() + n);  // as in plan_scd1: plans point into the index
    order_.clear();
    plans2_.clear();
    plans2_.reserve(n);
    reps_.clear();
    tail_.clear();
    new_keys_.clear();
    fresh_.clear();
    inserts_ = 0;
    probe_all();
    for (std::size_t g = 0; g < n; ++g) {
      // The entries were probed above; now their arrays (history and
      // versions) and then the current version's row are prefetched ahead,
      // each step reading what the previous one brought in.
      if (g + 2 * entry_prefetch_distance < n) {
        if (const scd2_entry* a = hits_[g + 2 * entry_prefetch_distance]) prefetch_entry(a);
      }
      if (g + entry_prefetch_distance < n) {
        if (const scd2_entry* a = hits_[g + entry_prefetch_distance]) {
          if (!a->history.empty()) detail::cdc_prefetch(&a->history.back());
          if (!a->versions.empty()) detail::cdc_prefetch(&a->versions.back());
        }
      }
      if (g + row_prefetch_distance < n) {
        prefetch_group_rows(g + row_prefetch_distance);
        if (const scd2_entry* a = hits_[g + row_prefetch_distance]; a && !a->versions.empty()) {
          detail::prefetch_row(store, a->versions.back());
        }
      }
      const auto& grp = sc.groups[g];
      const std::uint32_t b = static_cast<std::uint32_t>(order_.size());
      const std::uint32_t e = sort_group(grp, stats);
      scd2_entry* hit = hits_[g];
      for (std::uint32_t k = b; k < e; ++k) {
        ++(ops_[order_[k]] == op::remove ? stats.deleted_rows : stats.upserted_rows);
      }
      // The key's changes are planned in segments, one plan each: a late
      // change's walk that converges with the stored versions before the
      // key's next new change stops there, and the next segment starts at
      // that change (see plan_segment_scd2). Room for the commit over all
      // of them:
      std::size_t vers_grow = 0;  // versions inserted, over the segments
      std::size_t hist_grow = 0;  // events added, over the segments
      for (std::uint32_t sb = b; sb < e;) {  // sb: the segment's first new change (in order_)
        scd2_plan plan{hit, static_cast<std::uint32_t>(g), sb, e,
                       static_cast<std::uint32_t>(reps_.size()), 0, 0, 0, 0, 0,
                       hit ? static_cast<std::uint32_t>(hit->history.size()) : 0,
                       detail::cdc_npos, true,
                       static_cast<std::uint32_t>(tail_.size()), 0, detail::cdc_npos, 0};
        sb = plan_segment_scd2(store, ts, stats, plan);
        // What the commit of this segment adds to the key's versions and
        // events (a compact history may shrink: a kept change can come to
        // open or close a version; after a cut, the stored versions and
        // events from keep_v and keep_e on stay). Staged by reference, ties
        // are appended too before they replace the stored events
        // (copy_events_scd2).
        const std::size_t derived = plan.v_end - plan.v_begin;
        const bool cut = plan.converged();
        const std::size_t n_vers = hit ? hit->versions.size() : 0;
        const std::size_t replaced_v = (cut ? plan.keep_v : n_vers) - plan.from;
        const std::size_t replaced_e =
            compact_history ? (cut ? plan.keep_e : plan.hist_size) - plan.ev_from
                            : (sc.by_ref ? 0 : plan.rep_end - plan.rep_begin);
        const std::size_t added_e = compact_history ? plan.tail_end - plan.tail_begin
                                                    : plan.ev_end - plan.ev_begin;
        if (derived > replaced_v) vers_grow += derived - replaced_v;
        if (added_e > replaced_e) hist_grow += added_e - replaced_e;
        plans2_.push_back(plan);
      }
      // Room for the commit, made while the entry is in cache (growing a
      // capacity changes no state, so it may happen before a later error).
      // The segments are committed last to first, each inserting at most
      // its own growth: the sums bound every intermediate size. (A new key
      // has one plan, and every version it derives is inserted.)
      inserts_ += vers_grow;
      if (hit == nullptr) {
        new_keys_.push_back(key_(sc.row(grp.head)));
        scd2_entry fresh;
        fresh.history.reserve(hist_grow);
        fresh.versions.reserve(vers_grow);
        fresh_.push_back(std::move(fresh));
      } else {
        detail::cdc_reserve_grow(hit->history, hit->history.size() + hist_grow);
        detail::cdc_reserve_grow(hit->versions, hit->versions.size() + vers_grow);
      }
    }
  }

  /// Compact history, a late change's walk converged at stored version w
  /// (see plan_segment_scd2): whether the key's next new change, of
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
  const sequence_type* latest_seq(const Store& store, const scd2_entry& e) const noexcept {
    const typename Store::row_type* last = nullptr;
    if constexpr (compact_history) {  // (otherwise the history holds every change)
      if (!e.versions.empty()) last = &store.get(e.versions.back());
    }
    return latest_seq(e, last);
  }
  /// The same, given the key's last version row (nullptr: it has none).
  template <class Target>
  const sequence_type* latest_seq(const scd2_entry& e, const Target* last) const noexcept {
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
      const Target& row = store.get(vs[w]);
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
  // (a scratch row) or cdc_npos; new versions are appended to the scratch
  // rows. Returns whether the versions show the change (see compact_history).
  template <class Target>
  bool walk_step(detail::cdc_target_scratch<Target>& ts, std::uint32_t& cur,
                 const sequence_type& s, bool remove, const change_type& row) {
    if (remove) return walk_delete<Target>(ts, cur, s);
    return walk_upsert<Target>(ts, cur, s, row);
  }
  /// A delete closes the current version. Returns whether there was one.
  template <class Target>
  static bool walk_delete(detail::cdc_target_scratch<Target>& ts, std::uint32_t& cur,
                          const sequence_type& s) {
    if (cur == detail::cdc_npos) return false;
    end_col<Target>::get(ts.rows[cur]) = s;
    cur = detail::cdc_npos;
    return true;
  }
  /// An upsert whose values are a change row, or (compact history) those of
  /// a stored version. Returns whether it opened a version.
  template <class Target, class Values>
  bool walk_upsert(detail::cdc_target_scratch<Target>& ts, std::uint32_t& cur,
                   const sequence_type& s, const Values& values) {
    using M = mapping<Target>;
    const bool open = cur != detail::cdc_npos;
    const std::uint32_t cand = ts.alloc();
    Target& t = ts.rows[cand];
    if constexpr (std::is_same_v<Values, Target>) {
      t = values;
    } else if (open && opts::ignore_mode != 0) {
      t = ts.rows[cur];
      M::assign_keeping_ignored_nulls(t, values);
    } else {
      M::assign(t, values);
    }
    start_col<Target>::get(t) = s;
    end_col<Target>::get(t).reset();
    if (open && M::tracked_equal(ts.rows[cur], t)) {
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

  /// A batch staged by reference: appends a copy of every new change
  /// (ties included) to its key's history, after the stored events, in the
  /// order of order_ (room was reserved while planning). Copying may throw:
  /// then every history is restored to its stored events, and the error
  /// propagates. commit_scd2 puts the copies in place.
  void copy_events_scd2() {
    if constexpr (!compact_history) {  // compact events are written at commit
      scratch_type& sc = *scratch_;
      if (!sc.by_ref) return;
      std::size_t q = 0;
      std::size_t next_new = 0;
      const std::size_t n = plans2_.size();
      std::size_t ahead = 0;  // batch rows (in order_) prefetched so far
      try {
        for (; q < n; ++q) {
          const scd2_plan& p = plans2_[q];
          // As in commit_scd2: the entries and the histories' ends, then the
          // changes (scattered over the batch) are prefetched ahead.
          if (q + 2 * commit_prefetch_distance < n) {
            if (const scd2_entry* a = plans2_[q + 2 * commit_prefetch_distance].hit) {
              prefetch_entry(a);
            }
          }
          if (q + commit_prefetch_distance < n) {
            if (const scd2_entry* a = plans2_[q + commit_prefetch_distance].hit) {
              detail::cdc_prefetch(a->history.data() + a->history.size());
            }
          }
          for (const std::size_t to = std::min<std::size_t>(p.ev_end + commit_prefetch_distance,
                                                            order_.size());
               ahead < to; ++ahead) {
            prefetch_change(sc.row(order_[ahead]));
          }
          scd2_entry& e = p.hit != nullptr ? *p.hit : fresh_[next_new++];
          for (std::uint32_t k = p.ev_begin; k < p.ev_end; ++k) {
            const std::uint32_t c = order_[k];
            e.history.push_back(event{seqs_[c], ops_[c] == op::remove, sc.row(c)});
          }
        }
      } catch (...) {
        undo_events_scd2(q + 1);
        throw;
      }
    }
  }
  /// Undoes copy_events_scd2 for the first `count` plans (fresh entries
  /// are scratch: they are rebuilt by the next batch).
  void undo_events_scd2(std::size_t count) noexcept {
    if (compact_history || !scratch_->by_ref) return;
    for (std::size_t q = 0; q < count && q < plans2_.size(); ++q) {
      const scd2_plan& p = plans2_[q];
      if (p.hit == nullptr) continue;
      while (p.hit->history.size() > p.hist_size) p.hit->history.pop_back();
    }
  }

  template <class Store>
  void reserve_scd2(Store& store) {
    // The keys' own arrays were grown while planning.
    detail::reserve_rows(store, inserts_);
  }

  /// The key's history after the batch (room was reserved while planning;
  /// nothing here throws).
  void commit_history(scd2_entry& e, const scd2_plan& p) noexcept {
    if constexpr (compact_history) {
      // The events from ev_from on (up to keep_e after a cut), as the
      // planning walk re-derived them.
      const std::size_t to = p.converged() ? p.keep_e : e.history.size();
      if (p.converged()) {
        // The events that stay refer to versions from keep_v on, which move
        // to where the derived versions end.
        const std::uint32_t moved_to = p.from + (p.v_end - p.v_begin);
        for (std::size_t k = to; k < e.history.size(); ++k) {
          ref_event& ev = e.history[k];
          if (!ev.remove) ev.version = ev.version - p.keep_v + moved_to;
        }
      }
      e.history.erase(e.history.begin() + p.ev_from,
                      e.history.begin() + static_cast<std::ptrdiff_t>(to));
      e.history.insert(e.history.begin() + p.ev_from, tail_.begin() + p.tail_begin,
                       tail_.begin() + p.tail_end);
    } else {
      // Ties replace stored changes; the others are merged in.
      scratch_type& sc = *scratch_;
      const std::size_t old_size = p.hist_size;
      std::uint32_t r = p.rep_begin;
      if (sc.by_ref) {
        // The new events were copied in after the stored ones, in the
        // order of order_: move the ties onto the events they replace and
        // close the gaps they leave.
        std::size_t w = old_size;
        std::size_t j = old_size;
        for (std::uint32_t k = p.ev_begin; k < p.ev_end; ++k, ++j) {
          if (r < p.rep_end && reps_[r].row == order_[k]) {
            e.history[reps_[r].pos] = std::move(e.history[j]);
            ++r;
            continue;
          }
          if (w != j) e.history[w] = std::move(e.history[j]);
          ++w;
        }
        while (e.history.size() > w) e.history.pop_back();
      } else {
        for (std::uint32_t k = p.ev_begin; k < p.ev_end; ++k) {
          const std::uint32_t c = order_[k];
          if (r < p.rep_end && reps_[r].row == c) {
            event& ev = e.history[reps_[r].pos];
            ev.remove = ops_[c] == op::remove;
            ev.row = std::move(sc.rows[c]);
            ++r;
            continue;
          }
          e.history.push_back(
              event{std::move(seqs_[c]), ops_[c] == op::remove, std::move(sc.rows[c])});
        }
      }
      if (!p.append && p.ev_from < old_size && old_size != e.history.size()) {
        // Only the tail from the re-derivation's start can be out of order.
        std::inplace_merge(e.history.begin() + static_cast<std::ptrdiff_t>(p.ev_from),
                           e.history.begin() + static_cast<std::ptrdiff_t>(old_size),
                           e.history.end(),
                           [](const event& a, const event& b) { return a.seq < b.seq; });
      }
    }
  }

  template <class Store, class Target>
  void commit_scd2(Store& store, detail::cdc_target_scratch<Target>& ts) noexcept {
    scratch_type& sc = *scratch_;
    std::size_t next_new = 0;
    const std::size_t n = plans2_.size();
    std::size_t ahead = 0;  // batch rows (in order_) prefetched so far
    for (std::size_t q = 0; q < n; ++q) {
      // A key's plans (its segments, see plan_scd2) are consecutive.
      std::size_t last = q;
      while (last + 1 < n && plans2_[last + 1].group == plans2_[q].group) ++last;
      // The changes moved into histories, in key order: scattered over the batch.
      for (const std::size_t to = std::min<std::size_t>(
               plans2_[last].ev_end + commit_prefetch_distance, order_.size());
           ahead < to; ++ahead) {
        if (!sc.by_ref) prefetch_change(sc.rows[order_[ahead]]);
      }
      // What planning brought in has been evicted since (a batch touches
      // more than the cache holds): prefetch again, in the same three steps.
      if (last + 2 * commit_prefetch_distance < n) {
        if (const scd2_entry* a = plans2_[last + 2 * commit_prefetch_distance].hit) {
          prefetch_entry(a);
        }
      }
      if (last + commit_prefetch_distance < n) {
        if (const scd2_entry* a = plans2_[last + commit_prefetch_distance].hit) {
          detail::cdc_prefetch(a->history.data() + a->history.size());
          if (!a->versions.empty()) detail::cdc_prefetch(&a->versions.back());
        }
      }
      if (last + commit_prefetch_distance / 2 < n) {
        if (const scd2_entry* a = plans2_[last + commit_prefetch_distance / 2].hit;
            a && !a->versions.empty()) {
          detail::prefetch_row(store, a->versions.back());
        }
      }
      scd2_entry* e = plans2_[q].hit;
      if (e == nullptr) {  // a new key: one plan
        e = &index_.emplace(std::move(new_keys_[next_new]), std::move(fresh_[next_new]))
                 .first->second;
        ++next_new;
      }
      // Last segment first: each replaces versions and events at or after
      // where the one before it stops (keep_v, keep_e), so the positions an
      // earlier segment refers to are still the stored ones when it commits.
      for (std::size_t x = last + 1; x-- > q;) commit_plan_scd2(store, ts, *e, plans2_[x]);
      q = last;
    }
  }

  /// One plan of commit_scd2 (cannot fail: room was reserved).
  template <class Store, class Target>
  void commit_plan_scd2(Store& store, detail::cdc_target_scratch<Target>& ts, scd2_entry& e,
                        const scd2_plan& p) noexcept {
    if constexpr (close_in_place<Store, Target>) {
      if (p.close != detail::cdc_npos) {  // before its sequence is moved into the history
        end_col<Target>::get(store.get(e.versions.back())) = seqs_[p.close];
      }
    }
    commit_history(e, p);
    // Versions: the derived ones replace those from p.from on (up to
    // keep_v after a cut; room for those inserted was reserved).
    auto& vs = e.versions;
    const std::size_t stop = p.converged() ? p.keep_v : vs.size();
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

  // --- SCD type 2 in one pass ------------------------------------------------------------
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
  // (plan_scd2 sees the changes applied by the pass as stored ones); the
  // key's later changes that follow all of its stored ones still go through
  // the pass (see the step below). The outcome is the planned path's: a
  // key's changes in sequence order, the later in source order winning a
  // tie (R-CDC-1, R-CDC-5); so are the metrics, once a tie with a change of
  // the same pass is counted as the planned path counts a tie within the
  // batch (pass_tie_fix).
  //
  // All-or-nothing: an undo record per key touched holds the sizes of its
  // history and versions before the pass, and whether the pass closed its
  // stored open version; on any error (null sequence, expectation `fail`,
  // a throwing predicate or copy, planning the set-aside changes) the
  // records restore every key, erase the rows the pass inserted and drop
  // the keys it created.

  struct undo_rec2 {
    const change_type* src;   // a change of the key: finds its entry again
    std::uint32_t hist_size;  // the key's history before the pass
    std::uint32_t vers_size;  // ... and its versions
    bool existed;             // the key had an entry
    bool closed;              // the pass closed the key's stored open version
  };

  template <class Store, class Target, class R, class... P>
  void apply_one_pass_scd2(Store& store, detail::cdc_target_scratch<Target>& ts, R& batch,
                           const Expectations<P...>& checks, BatchStats& stats) {
    using M = mapping<Target>;
    recs2_.clear();
    deferred_.clear();
    if (++pass_ == 0) {  // wrapped: no entry may look touched by this pass
      for (auto& kv : index_) kv.second.pass = 0;
      pass_ = 1;
    }
    typename Expectations<P...>::counts_type counts;
    const auto describe = [this](const change_type& r) { return key_.describe(r); };
    std::size_t n_changes = 4096;  // (a bound for the chunks of fresh rows)
    if constexpr (std::ranges::sized_range<R>) {
      n_changes = static_cast<std::size_t>(std::ranges::size(batch));
    }
    std::size_t fresh_rows = 0;  // rows reserved but not yet inserted

    // One change. `e` is the key's entry when the caller found it already
    // (nullptr: look it up).
    const auto step = [&](const change_type& r, std::size_t h, scd2_entry* e) {
      ++stats.input_rows;
      if constexpr (sizeof...(P) > 0) {
        if (!checks.check(r, counts, name_, describe)) {
          ++stats.dropped_rows;
          return;
        }
      }
      std::optional<sequence_type> so = seq_(r);
      if (!so) {
        throw error(errc::null_sequence, name_, seq_.name(), key_.describe(r),
                    "the change's sequence is null; nothing of the batch was applied and the "
                    "source position does not advance (R-CDC-5)");
      }
      const sequence_type& s = *so;
      const bool remove = classify(r) == op::remove;
      if (e == nullptr) {
        auto it = index_.find(probe{&r, h});
        if (it != index_.end()) e = &it->second;
      }
      undo_rec2* u;
      if (e != nullptr && e->pass == pass_) {
        u = &recs2_[e->rec];
      } else {  // the key's first change in this pass: its undo record
        const auto ri = static_cast<std::uint32_t>(recs2_.size());
        if (e != nullptr) {
          recs2_.push_back({&r, static_cast<std::uint32_t>(e->history.size()),
                            static_cast<std::uint32_t>(e->versions.size()), true, false});
        } else {
          key_type k = key_(r);
          recs2_.push_back({&r, 0, 0, false, false});
          const std::uint64_t gen = index_.generation();
          e = &index_.try_emplace(std::move(k)).first->second;
          if (index_.generation() != gen) found_.fill(nullptr);  // rehashed: lookahead is stale
        }
        e->pass = pass_;
        e->rec = ri;
        u = &recs2_.back();
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
      // and wins (the tie fix of plan_scd2).
      if (const sequence_type* latest = latest_seq(*e, last); latest != nullptr && !(*latest < s)) {
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
        detail::cdc_reserve_grow(hist, hist.size() + 1);
        hist.push_back(ref_event{s, version, remove});
      };
      if (remove) {
        if (open) {
          close();
        } else {
          keep(0);
        }
        return;
      }
      if (open && M::tracked_equal(*last, r)) {  // same values: no new version
        keep(static_cast<std::uint32_t>(vs.size() - 1));
        return;
      }
      // (Closed first, while `last` is valid: if making room for the new
      // version or building it throws, the undo restores it.)
      if (open) close();
      detail::cdc_reserve_grow(vs, vs.size() + 1);
      // Room for the new versions, a chunk at a time: where the store maps
      // their memory in at once (reserve_rows), one system call per chunk
      // replaces a page fault per page, and at most a chunk is left unused.
      if (fresh_rows == 0) {
        fresh_rows = std::clamp<std::size_t>(n_changes, 1, 4096);
        detail::reserve_rows(store, fresh_rows);
      }
      // The new version is built in its slot, not aside and moved in (3.4%
      // fewer instructions per change, counted with callgrind).
      const row_id id = detail::insert_made(store, [&]() -> Target {
        Target t{};
        M::assign(t, r);
        start_col<Target>::get(t) = s;
        end_col<Target>::get(t).reset();
        return t;
      });
      --fresh_rows;
      vs.push_back(id);
    };

    try {
      if constexpr (std::ranges::contiguous_range<R> && std::ranges::sized_range<R>) {
        // The read-ahead of apply_one_pass (SCD1), with one more stage: 2
        // ahead the entry's version list and last event are prefetched, 1
        // ahead its open version's row (a key with more than four versions
        // keeps the list on the heap). The loop is written out in each:
        // shared through a member template taking the step, or through
        // helpers that start and advance the read-ahead, it made GCC 12
        // compile SCD1's pass 1.6x-1.7x slower at 1e6 keys (measured).
        constexpr std::size_t L = 16, M = 8, F = 4, F2 = 2, F3 = 1;
        const change_type* data = std::ranges::data(batch);
        const auto n = static_cast<std::size_t>(std::ranges::size(batch));
        std::array<std::size_t, L> hashes{};
        found_.fill(nullptr);
        for (std::size_t i = 0; i < std::min(n, L); ++i) {
          hashes[i] = traits::hash(key_, data[i]);
          index_.prefetch(probe{&data[i], hashes[i]});
        }
        for (std::size_t i = 0; i < n; ++i) {
          const std::size_t h = hashes[i % L];
          scd2_entry* e = found_[i % F];
          if (i + 2 * L < n) prefetch_change(data[i + 2 * L]);
          if (i + F3 < n) {  // its version row, once the version list is in cache
            const scd2_entry* a = found_[(i + F3) % F];
            if (a != nullptr && !a->versions.empty()) {
              detail::prefetch_row(store, a->versions.back());
            }
          }
          if (i + F2 < n) {  // what the entry, found and prefetched earlier, points to
            if (const scd2_entry* a = found_[(i + F2) % F]) {
              if (!a->versions.empty()) detail::cdc_prefetch(&a->versions.back());
              if (a->history.size() > 1) detail::cdc_prefetch(&a->history.back());
              if (a->pass == pass_) detail::cdc_prefetch(&recs2_[a->rec]);
            }
          }
          if (i + F < n) {
            const std::size_t j = i + F;
            auto it = index_.find(probe{&data[j], hashes[j % L]});
            scd2_entry* a = it == index_.end() ? nullptr : &it->second;
            found_[j % F] = a;
            // (With prefetch_match's first and last line of the slot, this
            // covers a slot over three lines.)
            if (a != nullptr) prefetch_entry(a);
          }
          if (i + M < n) index_.prefetch_match(probe{&data[i + M], hashes[(i + M) % L]});
          if (i + L < n) {
            const change_type& a = data[i + L];
            hashes[i % L] = traits::hash(key_, a);
            index_.prefetch(probe{&a, hashes[i % L]});
          }
          step(data[i], h, e);
        }
      } else {
        for (const change_type& r : batch) step(r, traits::hash(key_, r), nullptr);
      }
      if (!deferred_.empty()) {
        // The set-aside changes, planned over what the pass applied (their
        // rows were counted, checked and validated by the pass).
        const auto deref = [](const change_type* c) -> const change_type& { return *c; };
        auto rows = deferred_ | std::views::transform(deref);
        BatchStats late;
        pass_tie_fix_ = {0, 0};
        fixing_pass_ties_ = true;
        ts.used = 0;
        stage_batch(rows, NoExpectations{}, late);
        plan_scd2(store, ts, late);
        reserve_scd2(store);
        fixing_pass_ties_ = false;
        stats.upserted_rows += late.upserted_rows - pass_tie_fix_[0];
        stats.deleted_rows += late.deleted_rows - pass_tie_fix_[1];
        stats.tied_rows += late.tied_rows;
      }
      if constexpr (sizeof...(P) > 0) checks.report(counts, stats.expectations);
    } catch (...) {
      fixing_pass_ties_ = false;
      undo_one_pass_scd2(store);
      throw;
    }
    if (!deferred_.empty()) commit_scd2(store, ts);  // cannot fail
  }

  template <class Store>
  void undo_one_pass_scd2(Store& store) noexcept {
    using Target = typename Store::row_type;
    for (const undo_rec2& u : recs2_) {
      auto it = index_.find(probe{u.src, traits::hash(key_, *u.src)});
      if (it == index_.end()) continue;  // a new key whose entry was never made
      scd2_entry& e = it->second;
      while (e.history.size() > u.hist_size) e.history.pop_back();
      while (e.versions.size() > u.vers_size) {
        store.erase(e.versions.back());
        e.versions.pop_back();
      }
      if (u.closed) end_col<Target>::get(store.get(e.versions.back())).reset();
      if (!u.existed) index_.erase(it);
    }
    recs2_.clear();
  }

  // --- data ---------------------------------------------------------------------------------

  std::string name_;
  CdcSettings settings_;
  [[no_unique_address]] std::tuple<Options...> options_{};
  K key_{};
  S seq_{};
  const void* target_ = nullptr;
  bool done_ = false;  // ONCE: a batch was applied
  index_type index_{0, typename index_type::hasher{}, typename index_type::key_equal{key_}};
  std::optional<sequence_type> floor_;  // SCD1: highest truncate applied
  std::size_t tombstones_ = 0;
  std::vector<std::pair<key_type, cdc_clock::time_point>> gc_queue_;  // by deletion time
  std::size_t gc_head_ = 0;

  // Batch scratch, kept across batches so that steady state does not allocate.
  std::unique_ptr<scratch_type> scratch_;
  std::unique_ptr<detail::cdc_target_scratch_base> tscratch_;
  const void* tscratch_tag_ = nullptr;
  std::vector<sequence_type> seqs_;  // per batch row
  std::vector<op> ops_;              // per batch row
  std::vector<std::uint32_t> order_;  // rows of each group, by sequence
  std::vector<std::pair<sequence_type, std::uint32_t>> sort_buf_;  // sort_group, large groups
  std::vector<scd1_plan> plans1_;
  std::vector<scd2_plan> plans2_;
  std::vector<replacement> reps_;
  std::vector<event> tail_;  // SCD2 compact history: re-derived events (plan.tail_*)
  std::vector<key_type> new_keys_;
  std::vector<key_type> gc_keys_;
  std::vector<scd2_entry> fresh_;
  std::vector<entry*> hits_;  // per group: its entry, or nullptr
  // SCD1 one-pass apply (apply_one_pass).
  std::uint32_t pass_ = 0;            // passes so far (0: none)
  std::vector<undo_rec> recs_;        // per key touched
  std::vector<pass_log> log_;         // per change applied, in source order
  std::vector<superseded_change> superseded_;  // chained per key (undo_rec::last_sup)
  std::vector<std::uint32_t> sup_keys_;         // records of keys with two or more of them
  std::vector<due_write> due_;                  // one per key with an upsert not written yet
  std::vector<nulled_column> nulled_;           // write_last: made null again by the undo
  std::vector<const sequence_type*> sup_seqs_;  // find_superseded_ties: one key's
  std::vector<std::pair<sequence_type, std::uint32_t>> by_seq_;  // recount_ties
  std::array<entry*, 4> found_{};  // read-ahead: the entries of the next rows
  // SCD2 one-pass apply (apply_one_pass_scd2).
  std::vector<undo_rec2> recs2_;                 // per key touched
  std::vector<const change_type*> deferred_;     // changes planned after the pass
  bool fixing_pass_ties_ = false;                // planning them
  std::array<std::uint64_t, 2> pass_tie_fix_{};  // upserts, deletes of the pass that lost a tie
  std::size_t inserts_ = 0;   // SCD2: rows the commit inserts
  std::optional<sequence_type> batch_floor_;
  bool truncating_ = false;
  std::size_t new_tombstones_ = 0;
  cdc_clock::time_point now_{};
};

}  // namespace flowlib
