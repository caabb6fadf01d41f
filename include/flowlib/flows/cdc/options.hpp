// flowlib/flows/cdc/options.hpp
//
// The option types of the change-feed flows (AutoCdc, AutoCdcFromSnapshot)
// and their runtime settings, CdcOptions. detail::cdc_options (in
// flows/cdc/detail/option_traits.hpp) reads and checks them.
#pragma once

#include <flowlib/detail/fixed_string.hpp>

#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>

namespace flowlib {

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

/// @brief Option of AutoCdcFromSnapshot: the snapshot version type.
template <class T>
struct snapshot_version {
  using value_type = T;
};

/// @brief The clock tombstone GC is measured on.
using cdc_clock = std::chrono::steady_clock;

/// @brief Engine switch points of a change-feed flow. Tuning only: every
/// value gives the same table and metrics; only speed differs. The defaults
/// suit most machines (docs/benchmarks/auto_cdc.md says how to measure them
/// on another).
struct CdcEngineOptions {
  /// SCD2 with every column tracked (and no ignore_null_updates, no
  /// strict_sequence, on in-memory storage): a batch for a target the flow
  /// already maintains with at least this many keys is applied in one pass
  /// over the changes; with fewer keys it is planned (grouped and sorted by
  /// key first). The one pass wins once the keys' state no longer fits in
  /// cache, which the default approximates.
  std::size_t scd2_one_pass_min_keys = std::size_t{1} << 15;
};

/// @brief Runtime settings of a change-feed flow.
struct CdcOptions {
  /// SCD1: a tombstone (key, delete sequence) is kept at least this long
  /// after its delete was applied, then collected at the start of a later
  /// batch. std::nullopt keeps tombstones for ever. After collection a
  /// change older than the delete resurrects the key (R-CDC-2).
  std::optional<cdc_clock::duration> tombstone_gc_threshold{};
  /// Reads the current time once per batch; empty means cdc_clock::now.
  std::function<cdc_clock::time_point()> clock{};
  /// Engine switch points (speed only, see CdcEngineOptions).
  CdcEngineOptions tuning{};
};

/// @brief The former names of CdcOptions and CdcEngineOptions.
using CdcSettings [[deprecated("use CdcOptions")]] = CdcOptions;
using CdcTuning [[deprecated("use CdcEngineOptions")]] = CdcEngineOptions;

}  // namespace flowlib
