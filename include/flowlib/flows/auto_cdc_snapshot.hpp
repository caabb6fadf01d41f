// flowlib/flows/auto_cdc_snapshot.hpp
//
// AutoCdcFromSnapshot<Key, Scd, Options...>: AUTO CDC FROM SNAPSHOT
// (docs/semantics.md#r-cdc-8). The source yields successive FULL snapshots of a
// table, each with a version above the previous one; the flow turns each
// into changes against the target: keys new in the snapshot are inserted,
// keys whose row changed are updated, keys missing from it are deleted.
// SCD type 1 keeps the current rows; SCD type 2 keeps versions, with the
// snapshot versions as __START_AT/__END_AT.
//
//   struct Item { std::int64_t id; std::string a; std::string b; };
//   FLOWLIB_SCHEMA(Item, id, a, b);
//   struct ItemHistory { std::int64_t id; std::string a; std::string b;
//                        std::int64_t start_at; std::optional<std::int64_t> end_at; };
//   FLOWLIB_SCHEMA(ItemHistory, id, a, b, (start_at, "__START_AT"), (end_at, "__END_AT"));
//
//   using Flow = flowlib::AutoCdcFromSnapshot<
//       flowlib::Key<&Item::id>, flowlib::Scd2<flowlib::track_history_column_list<"a">>>;
//   flowlib::StreamingTable<ItemHistory> items{"items"};
//   Flow flow{"items_from_snapshots"};
//   // next() -> std::optional<std::pair<Rows, Version>>, called until it returns nullopt:
//   flowlib::BatchStats s = flow.apply(items, next);
//   flow.apply_snapshot(items, rows, 7);   // or one snapshot at a time
//
// Options: column_list<...> / except_column_list<...> (the snapshot columns
// written to the target, mapped by name as in AutoCdc), snapshot_version<T>
// (the version type, default std::int64_t; an SCD2 target's __START_AT has
// this type); Scd2's track_history_column_list / _except_column_list.
//
// Each snapshot is applied all-or-nothing: a version not above the last one
// fails with errc::version_not_increasing, a key twice in one snapshot with
// errc::invalid_argument, and nothing of that snapshot is applied. apply()
// applies the snapshots one after the other: those before a failing one stay
// applied (each is its own micro-batch), and the error propagates.
//
// Cost: one probe per snapshot row, and one pass over the flow's keys per
// snapshot to find deleted keys (a snapshot is a full table, so this is of
// the order of the snapshot's size). Rows are compared column by column
// (every mapped column needs operator==). State: one entry per current key.
//
// Checkpoints (write_checkpoint / read_checkpoint, for the pipeline runtime):
// the key index is derivable from the target (SCD1: a key's one row; SCD2:
// its one version with a null __END_AT), so only the last applied version is
// persisted, with, in a delta, whether the apply reset the flow (a full
// refresh of its table). read_checkpoint() rebuilds the index from the
// target's rows, checking that each key has at most one current row.
#pragma once

#include <flowlib/columns.hpp>
#include <flowlib/detail/batch.hpp>
#include <flowlib/detail/flow_checkpoint.hpp>
#include <flowlib/detail/key_index.hpp>
#include <flowlib/detail/target_key.hpp>
#include <flowlib/detail/target_binding.hpp>
#include <flowlib/error.hpp>
#include <flowlib/flows/contract.hpp>
#include <flowlib/flows/cdc/detail/batch.hpp>
#include <flowlib/flows/cdc/detail/column_checks.hpp>
#include <flowlib/flows/cdc/detail/mapping.hpp>
#include <flowlib/flows/cdc/detail/option_traits.hpp>
#include <flowlib/flows/cdc/detail/target_scratch.hpp>
#include <flowlib/flows/cdc/options.hpp>
#include <flowlib/schema.hpp>
#include <flowlib/source/snapshot.hpp>
#include <flowlib/stats.hpp>
#include <flowlib/table.hpp>

#include <range/v3/view/move.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <ranges>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace flowlib {

/// @brief AUTO CDC FROM SNAPSHOT (R-CDC-8). See the header comment.
template <key_extractor K, class Scd = Scd1, class... Options>
class AutoCdcFromSnapshot {
  using opts = detail::cdc_options<Scd, Options...>;
  static_assert(!opts::has_deletes && !opts::has_truncates && opts::ignore_mode == 0 &&
                    !opts::strict && !opts::once,
                "flowlib::AutoCdcFromSnapshot: deletes, truncates, ignore_null_updates, "
                "strict_sequence and Once are options of AutoCdc (a change feed); a snapshot flow "
                "derives its changes from full snapshots. Options here: column_list / "
                "except_column_list and snapshot_version<T>.");

 public:
  using key_policy = K;
  using row_type = typename K::row_type;  ///< a row of a snapshot
  using key_type = typename K::value_type;
  using version_type =
      typename detail::find_option<detail::is_version, snapshot_version<std::int64_t>,
                                   Options...>::type::value_type;
  static constexpr std::string_view kind = "AUTO CDC";
  static constexpr bool is_scd2 = opts::scd2;
  static_assert(std::totally_ordered<version_type>,
                "flowlib::snapshot_version<T>: snapshot versions must be totally ordered.");

  AutoCdcFromSnapshot() : AutoCdcFromSnapshot(std::string("auto_cdc_from_snapshot")) {}
  explicit AutoCdcFromSnapshot(std::string name, K key = K{})
      : name_(std::move(name)), key_(std::move(key)) {}
  AutoCdcFromSnapshot(const AutoCdcFromSnapshot&) = delete;
  AutoCdcFromSnapshot& operator=(const AutoCdcFromSnapshot&) = delete;
  /// A moved flow keeps writing its table (its claim and state move with
  /// it); the moved-from flow cannot write that table any more.
  AutoCdcFromSnapshot(AutoCdcFromSnapshot&&) noexcept = default;
  AutoCdcFromSnapshot& operator=(AutoCdcFromSnapshot&&) noexcept = default;

  const std::string& name() const noexcept { return name_; }
  /// The version of the last snapshot applied.
  const std::optional<version_type>& last_version() const noexcept { return last_; }
  /// Keys currently present in the target.
  std::size_t key_count() const noexcept { return index_.size(); }

  /// Calls `next()` until it returns std::nullopt, applying each snapshot
  /// (a std::pair<Rows, Version>, Rows any input range of row_type). Returns
  /// the sum of the snapshots' metrics.
  template <class Table, class Source>
  BatchStats apply(Table& target, Source&& next) {
    BatchStats total;
    while (auto snap = next()) {
      auto& [rows, version] = *snap;
      auto moved = ranges::views::move(rows);
      apply_into(target, moved, version_type(version), total);
    }
    return total;
  }

  /// The flow contract's batch (flows/contract.hpp): each record is a whole
  /// snapshot with its version, applied in order. Expectations do not apply
  /// to snapshots.
  template <class Table, class Checks>
  BatchStats apply_batch(Table& target, std::vector<Snapshot<row_type, version_type>>& snapshots,
                         const Checks&, const batch_info&) {
    BatchStats total;
    for (auto& snap : snapshots) {
      auto moved = ranges::views::move(snap.rows);
      apply_into(target, moved, snap.version, total);
    }
    return total;
  }

  /// Applies one full snapshot with its version. All-or-nothing.
  template <class Table, class R>
    requires batch_of<R, row_type>
  BatchStats apply_snapshot(Table& target, R&& rows, const version_type& version) {
    BatchStats stats;
    apply_into(target, rows, version, stats);
    return stats;
  }

  /// @brief Writes the flow's state for a checkpoint: the whole state
  /// (`snapshot`) or what changed since the previous call (`delta`). For the
  /// pipeline runtime; programs that checkpoint by hand may use it too. A
  /// blob is a 7-byte header, a flags byte (bit 0, in a delta: a full
  /// refresh reset the flow since the previous call) and the last applied
  /// version (see the header comment). O(1).
  void write_checkpoint(byte_writer& out, checkpoint_scope scope) const {
    static_assert(detail::checkpointable_v<version_type>,
                  "flowlib::AutoCdcFromSnapshot::write_checkpoint: the snapshot version type has "
                  "no byte encoding; use an integer, an enum, std::string, an integer "
                  "std::chrono duration or time point, or a std::tuple of those as "
                  "snapshot_version<T>.");
    detail::write_flagged_header(out, checkpoint_format, scope, reset_pending_);
    detail::byte_codec<std::optional<version_type>>::write(out, last_);
    reset_pending_ = false;
  }

  /// @brief Replaces the flow's state by the one `blobs` hold and binds the
  /// flow to `target` (claiming it, at its current generation). For the
  /// pipeline runtime; programs that checkpoint by hand may use it too.
  /// The blobs give the last applied version (errc::checkpoint_corrupt if
  /// one is corrupt); the key index is rebuilt from the target's rows
  /// (errc::checkpoint_mismatch, naming the key, when a key has two current
  /// rows). On either error nothing changed. The rows are re-inserted so that
  /// the flow learns their ids (detail/flow_checkpoint.hpp): the table holds
  /// the same rows. Empty blobs: no version applied yet, and the keys of
  /// the table as it is.
  template <class Table>
  void read_checkpoint(Table& target, const checkpoint_blobs& blobs) {
    using Target = typename Table::row_type;
    static_assert(detail::checkpointable_v<version_type>,
                  "flowlib::AutoCdcFromSnapshot::read_checkpoint: the snapshot version type has "
                  "no byte encoding; use an integer, an enum, std::string, an integer "
                  "std::chrono duration or time point, or a std::tuple of those as "
                  "snapshot_version<T>.");
    static_assert(!is_managed_table_v<Table>,
                  "MANAGED_TABLE_DOES_NOT_SUPPORT_CDC: a managed table accepts only append flows "
                  "(R-TABLE-1); write AUTO CDC FROM SNAPSHOT into a flowlib::StreamingTable.");
    using TK = detail::target_key<K, Target>;
    static_assert(TK::supported,
                  "flowlib::AutoCdcFromSnapshot::read_checkpoint rebuilds the key index from the "
                  "target's rows: the key must be flowlib::Key<&Row::col, ...> over a row type "
                  "with FLOWLIB_SCHEMA, and the target must have each key column, by name, of "
                  "the same type.");
    std::optional<version_type> last;
    if (blobs.snapshot) last = read_blob(*blobs.snapshot, checkpoint_scope::snapshot);
    for (std::string_view d : blobs.deltas) last = read_blob(d, checkpoint_scope::delta);

    auto& store = target.store();
    auto rows = detail::rows_by_position(store);
    index_type index{rows.size(), typename index_type::hasher{},
                     typename index_type::key_equal{key_}};
    for (std::size_t i = 0; i < rows.size(); ++i) {
      if constexpr (is_scd2) {
        if (end_col<Target>::get(rows[i]).has_value()) continue;  // a closed version
      }
      if (!index.try_emplace(TK::of(rows[i]), entry{static_cast<row_id>(i), 0}).second) {
        throw error(errc::checkpoint_mismatch, name_, "",
                    detail::to_text(TK::of(rows[i])),
                    is_scd2 ? "the target holds two current versions (null __END_AT) of this "
                              "key: the table is not this flow's; the flow's state is unchanged"
                            : "the target holds two rows of this key: the table is not this "
                              "flow's; the flow's state is unchanged");
      }
    }
    if constexpr (!detail::row_store_with_ids<std::remove_cvref_t<decltype(store)>>) {
      store.reserve(rows.size());  // the reload's inserts cannot fail after this
    }
    binding_.restore(target, kind, name_, /*exclusive=*/true, /*done=*/false, one_target_reason);
    const std::vector<row_id>& ids = detail::ids_of(store, rows);
    for (auto& [k, e] : index) e.row = ids[e.row];
    index_ = std::move(index);
    last_ = std::move(last);
    reset_pending_ = false;
  }

 private:
  static constexpr detail::blob_format checkpoint_format{"FLCS", 1, "AUTO CDC FROM SNAPSHOT"};
  static constexpr std::string_view one_target_reason =
      "a flow keeps the state of exactly one target";

  /// Applies one snapshot, adding its metrics to `stats`. All-or-nothing
  /// for the table and the flow (on an error `stats` is the caller's to drop).
  template <class Table, class R>
    requires batch_of<R, row_type>
  void apply_into(Table& target, R& rows, const version_type& version, BatchStats& stats) {
    static_assert(!is_managed_table_v<Table>,

                  "MANAGED_TABLE_DOES_NOT_SUPPORT_CDC: a managed table accepts only append flows "
                  "(R-TABLE-1); write AUTO CDC FROM SNAPSHOT into a flowlib::StreamingTable.");
    using Target = typename Table::row_type;
    static_assert(detail::cdc_target_checked<row_type, Target, version_type, opts>());
    // After a full refresh of the table the flow starts afresh: no key, no
    // version (R-EXACT-5).
    if (binding_.begin_apply(target, name_, one_target_reason)) {
      index_.clear();
      last_.reset();
      reset_pending_ = true;
    }
    if (last_ && !(*last_ < version)) {
      throw error(errc::version_not_increasing, name_, "", "",
                  "snapshot version " + detail::to_text(version) +
                      " is not above the last applied version " + detail::to_text(*last_) +
                      "; nothing of the snapshot was applied (R-CDC-8)");
    }
    auto& ts = targets_.get<Target>();
    ts.used = 0;
    auto& store = target.store();
    stage(rows, stats);
    plan<Target>(store, ts, version, stats);
    reserve(store);
    binding_.claim(target, kind, name_, /*exclusive=*/true);
    commit(store, ts);
    last_ = version;
  }

  // Decodes one blob; returns its last applied version (each blob carries
  // the whole of it, so the last one read decides).
  std::optional<version_type> read_blob(std::string_view blob, checkpoint_scope scope) const {
    detail::byte_reader r = detail::read_flagged_header(blob, name_, checkpoint_format, scope);
    std::optional<version_type> v = detail::byte_codec<std::optional<version_type>>::read(r);
    detail::expect_checkpoint_end(r);
    return v;
  }

  using traits = detail::key_traits<K>;
  using probe = detail::cdc_probe<row_type>;
  using scratch_type = detail::cdc_batch<K>;
  template <class Target>
  using mapping = detail::cdc_mapping<row_type, Target, opts>;
  template <class Target>
  using start_col = column_named_t<Target, "__START_AT">;
  template <class Target>
  using end_col = column_named_t<Target, "__END_AT">;
  static constexpr row_id no_row = detail::npos;

  struct entry {
    row_id row;              // SCD1: the row; SCD2: the current version
    std::uint64_t seen = 0;  // the last snapshot that contained the key
  };
  using index_type = detail::key_index<K, probe, entry>;

  enum class action : std::uint8_t { insert, assign, close_and_insert, remove, close };
  struct step {
    action what;
    entry* hit;          // nullptr for insert of a new key
    std::uint32_t slot;  // the new row (insert/assign/close_and_insert)
    std::uint32_t closed;  // SCD2: the closed copy of the current version
  };

  // Phase 1: read the snapshot, one row per key.
  template <class R>
  void stage(R& rows, BatchStats& stats) {
    if (!scratch_) scratch_ = std::make_unique<scratch_type>(key_);
    scratch_type& sc = *scratch_;
    constexpr bool move = detail::movable_elements<R>;
    // Rows are only read while planning: a snapshot whose rows stay put is
    // staged by reference, without copying each row.
    constexpr bool refer = !move && std::ranges::forward_range<R>;
    sc.reset(detail::size_hint(rows), refer);
    for (auto&& in : rows) {
      const row_type& r = in;
      ++stats.input_rows;
      const probe p{&r, traits::hash(key_, r)};
      if (sc.contains(p)) {
        throw error(errc::invalid_argument, name_, "", key_.describe(r),
                    "the key appears twice in one snapshot; a snapshot holds one row per key. "
                    "Nothing of the snapshot was applied (R-CDC-8)");
      }
      if constexpr (refer) {
        sc.add_ref(r, p);
      } else {
        sc.template add<move>(std::forward<decltype(in)>(in), p);
      }
    }
  }

  // Phase 2: decide every change (may throw: copies rows; stamps `seen`,
  // which no later snapshot reads as stale because the stamp increases).
  template <class Target, class Store>
  void plan(Store& store, detail::cdc_target_scratch<Target>& ts, const version_type& v,
            BatchStats& stats) {
    using M = mapping<Target>;
    scratch_type& sc = *scratch_;
    ++stamp_;
    // Reserved first: the steps hold pointers into the index, which a rehash
    // would invalidate (new keys are inserted at commit).
    index_.reserve(index_.size() + sc.groups.size());
    steps_.clear();
    new_keys_.clear();
    for (const auto& grp : sc.groups) {
      const row_type& r = sc.row(grp.head);
      auto it = index_.find(probe{&r, grp.hash});
      if (it == index_.end()) {
        const std::uint32_t slot = ts.alloc();
        M::assign(ts.rows[slot], r);
        if constexpr (is_scd2) {
          start_col<Target>::get(ts.rows[slot]) = v;
          end_col<Target>::get(ts.rows[slot]).reset();
        }
        new_keys_.push_back(key_(r));
        steps_.push_back({action::insert, nullptr, slot, 0});
        ++stats.upserted_rows;
        ++stats.inserted_rows;
        continue;
      }
      entry& e = it->second;
      e.seen = stamp_;
      const Target& cur = std::as_const(store).get(e.row);
      if (M::equal_change(cur, r)) continue;  // unchanged: no write
      ++stats.upserted_rows;
      const std::uint32_t slot = ts.alloc();
      M::assign(ts.rows[slot], r);
      if constexpr (is_scd2) {
        if (!M::tracked_equal(cur, ts.rows[slot])) {  // a new version
          start_col<Target>::get(ts.rows[slot]) = v;
          end_col<Target>::get(ts.rows[slot]).reset();
          const std::uint32_t closed = ts.alloc();
          ts.rows[closed] = store.get(e.row);
          end_col<Target>::get(ts.rows[closed]) = v;
          steps_.push_back({action::close_and_insert, &e, slot, closed});
          continue;
        }
        // Only untracked columns changed: in place, keeping __START_AT.
        start_col<Target>::get(ts.rows[slot]) = start_col<Target>::get(cur);
        end_col<Target>::get(ts.rows[slot]).reset();
      }
      steps_.push_back({action::assign, &e, slot, 0});
    }
    // Keys missing from the snapshot are deleted (SCD2: closed at v).
    for (auto& [k, e] : index_) {
      if (e.seen == stamp_) continue;
      ++stats.deleted_rows;
      if constexpr (is_scd2) {
        const std::uint32_t closed = ts.alloc();
        ts.rows[closed] = store.get(e.row);
        end_col<Target>::get(ts.rows[closed]) = v;
        steps_.push_back({action::close, &e, 0, closed});
      } else {
        steps_.push_back({action::remove, &e, 0, 0});
      }
    }
    stats.applied_rows = stats.upserted_rows + stats.deleted_rows;
  }

  template <class Store>
  void reserve(Store& store) {
    std::size_t inserts = 0;
    for (const step& s : steps_) {
      if (s.what == action::insert || s.what == action::close_and_insert) ++inserts;
    }
    store.reserve(inserts);
  }

  template <class Store, class Target>
  void commit(Store& store, detail::cdc_target_scratch<Target>& ts) noexcept {
    std::size_t next_key = 0;
    for (const step& s : steps_) {
      switch (s.what) {
        case action::insert: {
          const row_id id = store.insert(std::move(ts.rows[s.slot]));
          index_.emplace(std::move(new_keys_[next_key++]), entry{id, stamp_});
          break;
        }
        case action::assign:
          store.assign(s.hit->row, std::move(ts.rows[s.slot]));
          break;
        case action::close_and_insert:
          store.assign(s.hit->row, std::move(ts.rows[s.closed]));
          s.hit->row = store.insert(std::move(ts.rows[s.slot]));
          break;
        case action::remove:
          store.erase(s.hit->row);
          s.hit->row = no_row;
          break;
        case action::close:
          store.assign(s.hit->row, std::move(ts.rows[s.closed]));
          s.hit->row = no_row;
          break;
      }
    }
    // Forget deleted keys (their pointers above are no longer used).
    for (auto it = index_.begin(); it != index_.end();) {
      if (it->second.row == no_row) {
        index_.erase(it++);
      } else {
        ++it;
      }
    }
  }

  std::string name_;
  K key_{};
  detail::target_binding binding_;  // the one target, its generation, the claim
  std::optional<version_type> last_;
  index_type index_{0, typename index_type::hasher{}, typename index_type::key_equal{key_}};
  std::uint64_t stamp_ = 0;
  std::unique_ptr<scratch_type> scratch_;
  detail::cdc_target_scratch_slot targets_;
  std::vector<step> steps_;
  std::vector<key_type> new_keys_;
  // A full refresh reset the state since the last write_checkpoint(), which
  // clears it (a checkpoint write is const to its callers).
  mutable bool reset_pending_ = false;
};

}  // namespace flowlib
