// flowlib/flows/auto_cdc.hpp
//
// AutoCdc<Key, Seq, Scd, Options...>: applies a change feed (inserts,
// updates, deletes and, for SCD type 1, truncates), ordered by a sequence,
// to a target table (docs/semantics.md#auto-cdc, R-CDC-1..R-CDC-7).
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
//   Scd1Flow gc_flow{"users_cdc", fl::CdcOptions{.tombstone_gc_threshold = std::chrono::hours(24),
//                                                 .clock = [] { return my_clock_now(); }}};
//   Scd1Flow stateful{"users_cdc", fl::CdcOptions{}, fl::apply_as_deletes<IsDelete>{IsDelete{}},
//                     fl::apply_as_truncates<IsTruncate>{},
//                     fl::except_column_list<"operation", "sequenceNum">{}};
//                     // (one value per option, in order)
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
// Semantics (R-CDC-1..7): see docs/semantics.md#auto-cdc and docs/auto-cdc-scd1.md,
// docs/auto-cdc-scd2.md. In short: within a batch a key's changes apply in
// sequence order; SCD1 keeps per key the last sequence applied and, for
// deletes, a tombstone (collected after CdcOptions::tombstone_gc_threshold;
// a change older than a collected tombstone resurrects its key); a truncate
// removes rows below its sequence and raises a floor below which later
// changes are ignored. SCD2 keeps every change of a key, so a late change
// re-derives that key's versions (changes newer than all stored ones just
// continue from the current version). Ties (equal key and sequence): the
// later change in source order wins, counted in tied_rows (R-CDC-5).
//
// Applying a batch is all-or-nothing: on any error (null sequences, strict
// ties, expectations, user exceptions) the target and the flow's state are
// unchanged. Batches the one-pass path does not take (see
// flows/cdc/detail/scd1_one_pass.hpp and scd2_one_pass.hpp) are grouped and
// every key's outcome planned in scratch space, storage is reserved, and
// only then is it committed by operations that cannot fail. The others
// apply in one pass straight into the target, with an undo record per key
// touched (SCD2 plans a key's late changes after the pass). The flow
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

#include <flowlib/checkpoint/store.hpp>
#include <flowlib/columns.hpp>
#include <flowlib/detail/batch.hpp>
#include <flowlib/detail/byte_codec.hpp>
#include <flowlib/detail/target_binding.hpp>
#include <flowlib/expect.hpp>
#include <flowlib/flows/contract.hpp>
#include <flowlib/flows/cdc/detail/checkpoint.hpp>
#include <flowlib/flows/cdc/detail/column_checks.hpp>
#include <flowlib/flows/cdc/detail/engine.hpp>
#include <flowlib/flows/cdc/detail/option_traits.hpp>
#include <flowlib/flows/cdc/options.hpp>
#include <flowlib/schema.hpp>
#include <flowlib/stats.hpp>
#include <flowlib/table.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace flowlib {

/// @brief AUTO CDC: applies a change feed to a target table (SCD type 1 or 2).
/// See the header comment for the options and an example.
///
/// K and S are a key and a sequence over the change row type; Scd is Scd1
/// or Scd2<...>; Options are the option types above. The work is done by an
/// engine of the SCD type (flows/cdc/detail/engine.hpp): an SCD1 flow holds
/// no SCD2 state and the reverse.
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
  explicit AutoCdc(std::string name, CdcOptions settings = {})
      : engine_(std::move(name), std::move(settings)) {}
  /// As above, with a value for every option (for predicates with state).
  AutoCdc(std::string name, CdcOptions settings, Options... options)
    requires(sizeof...(Options) > 0)
      : engine_(std::move(name), std::move(settings), std::move(options)...) {}

  AutoCdc(const AutoCdc&) = delete;  // holds the target's index
  AutoCdc& operator=(const AutoCdc&) = delete;
  /// A moved flow keeps writing its table (its claim, index and history move
  /// with it); the moved-from flow cannot write that table any more.
  AutoCdc(AutoCdc&&) = default;
  AutoCdc& operator=(AutoCdc&&) = default;

  const std::string& name() const noexcept { return engine_.name(); }

  /// Applies one batch of changes (any input range of change_type).
  /// All-or-nothing; returns the batch's metrics (R-CDC-7).
  template <class Table, class R>
    requires batch_of<R, change_type>
  BatchStats apply(Table& target, R&& batch) {
    return apply(target, std::forward<R>(batch), NoExpectations{});
  }

  /// The flow contract's batch (flows/contract.hpp): apply(), whose
  /// upserted and deleted rows are R-CDC-7's.
  template <class Table, class... P>
  BatchStats apply_batch(Table& target, std::vector<change_type>& changes,
                         const Expectations<P...>& checks, const batch_info&) {
    return apply(target, changes, checks);
  }

  /// Applies one batch after the expectations (a dropped change is as if the
  /// source never produced it). After a full refresh of the target (a new
  /// generation, R-EXACT-5) the flow first drops all its state, ONCE marker
  /// included, and applies as to a new table.
  template <class Table, class R, class... P>
    requires batch_of<R, change_type>
  BatchStats apply(Table& target, R&& batch, const Expectations<P...>& checks) {
    static_assert(!is_managed_table_v<Table>,
                  "MANAGED_TABLE_DOES_NOT_SUPPORT_CDC: a managed table accepts only append flows "
                  "(R-TABLE-1); write the change feed into a flowlib::StreamingTable.");
    using Target = typename Table::row_type;
    static_assert(detail::cdc_target_checked<change_type, Target, sequence_type, opts>());
    // One target per flow; after a full refresh of it (a new generation) the
    // engine drops its state and the ONCE marker is cleared (R-EXACT-5).
    if (binding_.begin_apply(target, engine_.name(),
                             "a flow keeps the state of exactly one target")) {
      engine_.reset_state();  // the table was emptied behind the flow
    }
    BatchStats stats;
    if (opts::once && binding_.done()) {  // ONCE: ran already; nothing is read
      stats.skipped = true;
      return stats;
    }
    // The engine claims the target through the binding as the last fallible
    // step before its commit (detail/target_binding.hpp).
    engine_.apply(target, batch, checks, stats, binding_, kind);
    if constexpr (opts::once) binding_.mark_done();
    return stats;
  }

  /// True for ONCE flows (the option flowlib::Once).
  static constexpr bool once = opts::once;
  /// ONCE flows: true after a successful apply(), until reset().
  bool done() const noexcept { return binding_.done(); }
  /// Full refresh: a ONCE flow runs again at its next apply(). (The flow's
  /// other state is dropped at its next apply() after the table's own
  /// full_refresh(), which starts a new generation.)
  void reset() noexcept { binding_.reset_once(); }
  /// Restores the ONCE marker from a checkpoint.
  void restore(bool done) noexcept { binding_.restore_once(done); }

  /// @brief Writes the flow's state for a checkpoint: with
  /// checkpoint_scope::delta, what changed since the previous
  /// write_checkpoint() (or since construction or read_checkpoint()), in
  /// O(the keys changed), never O(the state); with checkpoint_scope::snapshot,
  /// the whole state. Either restarts the "changed since" count. Call it once
  /// after every successful apply() (a ONCE flow's skipped one and one that
  /// changed nothing included). A delta after a full refresh of the target
  /// says so: a restore drops what came before it. For the pipeline runtime;
  /// programs that checkpoint by hand may use it too. The key and sequence
  /// types must have a byte encoding (detail/byte_codec.hpp), else this does
  /// not compile. Format and what is kept: flows/cdc/detail/checkpoint.hpp.
  void write_checkpoint(byte_writer& out, checkpoint_scope scope) const {
    detail::cdc_checkpoint<engine_type>::write(engine_, out, scope, binding_.done());
  }

  /// @brief Replaces the flow's whole state with the one `blobs` describe
  /// (the snapshot, if any, then each delta in order; empty blobs: a new
  /// flow's state). Afterwards the flow is bound to `target`, at its current
  /// generation, with its ONCE marker as it was written, and behaves as the
  /// flow that wrote the blobs would on the same table. `target` must be the
  /// table that flow wrote, holding the rows it held at the last blob (the
  /// state refers to them by row id). Also discards, on a live flow, the
  /// in-memory changes of a batch whose checkpoint was not written. Throws
  /// flowlib::error naming the flow, leaving the state as it was:
  /// errc::checkpoint_corrupt (a truncated or damaged blob, another flow
  /// kind's, an unknown format version), errc::checkpoint_mismatch (the
  /// state refers to rows the target does not hold), errc::invalid_target
  /// (another flow writes the target). For the pipeline runtime; programs
  /// that checkpoint by hand may use it too.
  template <class Table>
  void read_checkpoint(Table& target, const checkpoint_blobs& blobs) {
    static_assert(!is_managed_table_v<Table>,
                  "MANAGED_TABLE_DOES_NOT_SUPPORT_CDC: a managed table accepts only append flows "
                  "(R-TABLE-1); write the change feed into a flowlib::StreamingTable.");
    detail::cdc_checkpoint<engine_type>::read(engine_, target, blobs, binding_, kind);
  }

  /// Keys the flow holds state for (target keys, plus SCD1 tombstones).
  std::size_t key_count() const noexcept { return engine_.state().index.size(); }
  /// SCD1: tombstones currently kept.
  std::size_t tombstone_count() const noexcept {
    if constexpr (is_scd2) {
      return 0;
    } else {
      return engine_.state().tombstones;
    }
  }
  /// SCD1: changes below this sequence are ignored (the highest truncate applied).
  const std::optional<sequence_type>& truncate_floor() const noexcept {
    if constexpr (is_scd2) {
      static const std::optional<sequence_type> none;
      return none;
    } else {
      return engine_.state().floor;
    }
  }

 private:
  using flow_parts = detail::cdc_flow<K, S, Scd, Options...>;
  using engine_type = std::conditional_t<is_scd2, typename flow_parts::scd2_engine,
                                         typename flow_parts::scd1_engine>;

  engine_type engine_;
  detail::target_binding binding_;  // the one target, its generation, the claim, ONCE
};

}  // namespace flowlib
