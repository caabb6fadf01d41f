// flowlib/storage/durable.hpp
//
// What a pipeline tells a durable table's store when it attaches it and when
// it has the store write a batch's changes (storage/file.hpp uses both; a
// store that keeps its rows in a database of its own, as SqliteStorage,
// needs neither). The pipeline finds the hooks by requires-expressions:
//
//   store.attach(checkpoint, table_name, append_log, durable_context)
//   store.write_changes(durable_writer)
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>

namespace flowlib {

/// @brief Who writes a batch's table changes: batch `batch` of flow `flow`,
/// or, with an empty flow, a write outside any batch (a direct insert, a
/// full refresh), which counts as soon as it is written.
struct durable_writer {
  std::string_view flow;
  std::uint64_t batch = 0;
};

/// @brief What a durable store learns when its pipeline attaches it.
struct durable_context {
  /// Whether batch `batch` of flow `flow` is committed in the checkpoint: a
  /// store that writes its changes as records of their own counts a record
  /// only when the batch that wrote it committed.
  std::function<bool(std::string_view flow, std::uint64_t batch)> committed;
  /// PipelineOptions::snapshot_interval: a store that keeps deltas writes a
  /// whole image on the same size-aware schedule as the flows' state.
  std::uint64_t snapshot_interval = 10;
};

}  // namespace flowlib
