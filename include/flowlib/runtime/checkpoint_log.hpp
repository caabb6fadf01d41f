// flowlib/runtime/checkpoint_log.hpp
//
// The pipeline's records in a checkpoint_store (checkpoint/store.hpp): the
// layout, the exactly-once protocol's records, and the restore of state by
// snapshot + deltas. Internal; the layout is documented for operators in
// docs/pipelines.md.
//
//   pipeline                              name and layout version of the pipeline
//   flows/<F>/definition                  what the flow is (kind, source, target, stages)
//                                         and its components' kinds (for an import)
//   flows/<F>/offsets/<N>                 batch N's planned positions (from, to)
//   flows/<F>/commits/<N>                 batch N committed: its end position, its update
//   flows/<F>/state/<N>.<c>.delta         component c's delta after batch N
//   flows/<F>/state/<N>.<c>.snapshot      component c's whole state after batch N
//   imports/<F>                           the flow's IMPORT CHECKPOINT was taken
//
// <F> is the flow's name in lowercase hex (any name is a safe path), <N> a
// batch id of 20 decimal digits (names sort as numbers). Component 0 is the
// flow policy, 1.. its operators in declaration order.
//
// Protocol for batch N of flow F (R-EXACT-1): offsets/N is written before
// the batch reads its source; then the state records of N; then commits/N,
// which alone makes batch N count. A restore reads the last commit, and for
// each component the last snapshot at or before it and the deltas after the
// snapshot up to it. Records of a batch after the last commit (a batch that
// failed or was cut short) are ignored and overwritten when the batch is
// replayed from the same positions. Old records are removed once a newer
// snapshot is committed, so a restore reads a bounded number of records.
#pragma once

#include <flowlib/checkpoint/store.hpp>
#include <flowlib/detail/byte_codec.hpp>
#include <flowlib/detail/config.hpp>
#include <flowlib/detail/checkpoint_record.hpp>
#include <flowlib/error.hpp>
#include <flowlib/source/position.hpp>

#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace flowlib::detail {

inline constexpr std::uint16_t pipeline_layout_version = 1;

/// A flow's planned batch: the positions it reads between.
struct planned_batch {
  source_position from;
  source_position to;
};

/// The records of one component for a restore, owning their bytes.
struct component_records {
  std::optional<std::string> snapshot;
  std::vector<std::string> deltas;
  checkpoint_blobs view() const {
    checkpoint_blobs b;
    if (snapshot) b.snapshot = std::string_view(*snapshot);
    for (const auto& d : deltas) b.deltas.emplace_back(d);
    return b;
  }
};

/// The pipeline's view of its checkpoint store. See the header comment.
class checkpoint_log {
 public:
  explicit checkpoint_log(checkpoint_store& store) : store_(&store) {}

  checkpoint_store& store() const noexcept { return *store_; }

  static std::string hex(std::string_view name) { return checkpoint_name_hex(name); }
  static std::string batch_name(std::uint64_t n) {
    std::string s;
    append_batch_name(s, n);
    return s;
  }
  /// Appends batch_name(n) to `out`.
  static void append_batch_name(std::string& out, std::uint64_t n) {
    char digits[20];
    for (std::size_t i = 20; i-- > 0; n /= 10) digits[i] = static_cast<char>('0' + n % 10);
    out.append(digits, 20);
  }
  FLOWLIB_DECL static std::optional<std::uint64_t> parse_batch(std::string_view s);
  FLOWLIB_DECL static std::string flow_dir(std::string_view flow);
  /// Appends flow_dir(flow) to `out`, reserving `more` bytes beyond it.
  FLOWLIB_DECL static void append_flow_dir(std::string& out, std::string_view flow,
                                           std::size_t more);
  /// flows/<F>/<sub>/<N>: a batch's record in folder `sub`.
  FLOWLIB_DECL static std::string batch_path(std::string_view flow, std::string_view sub,
                                             std::uint64_t n);

  // --- The pipeline record ---------------------------------------------------------

  /// Forgets the records an earlier, refused open remembered to write.
  void clear_pending() noexcept {
    pending_pipeline_.reset();
    pending_flows_.clear();
  }

  /// Checks the pipeline record against `name`, or writes it when absent.
  /// Throws checkpoint_mismatch naming both pipelines.
  FLOWLIB_DECL void open_pipeline(std::string_view name);

  /// Checks flow `flow`'s definition record against `definition`; when
  /// absent, remembers it (with the flow's component `layout`, what an
  /// import maps state by) for write_pending(). Throws checkpoint_mismatch.
  FLOWLIB_DECL void open_flow(std::string_view flow, std::string_view definition,
                              std::string_view layout);

  /// The component layout recorded for `flow` in `store` ("APPEND|DEDUP"),
  /// if the flow has a definition record there.
  FLOWLIB_DECL static std::optional<std::string> layout_of(
      const checkpoint_store& store, std::string_view flow);

  /// Writes the pipeline and definition records found missing by the open_*
  /// calls (after every check passed, so a refused open writes nothing).
  FLOWLIB_DECL void write_pending();

  // --- Batches -----------------------------------------------------------------------

  /// The last committed batch of `flow`: its id, its end position, and the
  /// update that committed it.
  struct commit_record {
    std::uint64_t batch = 0;
    source_position end;
    std::uint64_t update_id = 0;
  };
  FLOWLIB_DECL std::optional<commit_record> last_commit(std::string_view flow) const;

  /// Batch `n`'s planned positions, if recorded.
  FLOWLIB_DECL std::optional<planned_batch> planned(std::string_view flow, std::uint64_t n) const;

  FLOWLIB_DECL void write_planned(std::string_view flow, std::uint64_t n, const planned_batch& p);

  void write_state(std::string_view flow, std::uint64_t n, std::size_t component,
                   checkpoint_scope scope, std::string_view bytes) {
    store_->write(state_path(flow, n, component, scope), bytes);
  }

  FLOWLIB_DECL void write_commit(std::string_view flow, std::uint64_t n, const source_position& end,
                                 std::uint64_t update_id);

  /// The records component `c` of `flow` restores from, as of batch `last`
  /// (committed). Throws checkpoint_corrupt when a delta is missing.
  FLOWLIB_DECL component_records load_state(std::string_view flow, std::uint64_t last,
                                            std::size_t c) const;

  /// Removes the records a restore no longer reads: state of batches before
  /// `snapshot_batch` (a committed batch that wrote snapshots), and offsets
  /// and commits more than `retain` batches older than it.
  FLOWLIB_DECL void purge_before(std::string_view flow, std::uint64_t snapshot_batch,
                                 std::uint64_t retain);

  /// Removes every record of `flow` but its definition (a full refresh).
  FLOWLIB_DECL void reset_flow(std::string_view flow);

  // --- IMPORT CHECKPOINT (R-TABLE-4) ------------------------------------------------------

  FLOWLIB_DECL bool imported(std::string_view flow) const;
  FLOWLIB_DECL void mark_imported(std::string_view flow, std::string_view from);

  /// Copies flow `from_flow`'s offsets, commits and state from `from` into
  /// this store under `flow`; state records of component `m.first` become
  /// records of component `m.second` for each pair of `mapping`, others are
  /// left out. `from` is only read.
  FLOWLIB_DECL void copy_flow(const checkpoint_store& from, std::string_view from_flow,
                              std::string_view flow,
                              const std::vector<std::pair<std::size_t, std::size_t>>& mapping);

 private:
  FLOWLIB_DECL static std::string state_path(std::string_view flow, std::uint64_t n, std::size_t c,
                                             checkpoint_scope scope);

  byte_reader reader(std::string_view rec, std::string_view owner) const {
    byte_reader r{rec, 0, owner, suffix_, errc::checkpoint_corrupt};
    return r;
  }

  checkpoint_store* store_;
  std::optional<std::string> pending_pipeline_;
  struct pending_flow {
    std::string flow, definition, layout;
  };
  std::vector<pending_flow> pending_flows_;
  std::string suffix_ = "; the checkpoint was left as it was";
};

}  // namespace flowlib::detail

#if !defined(FLOWLIB_SEPARATE_COMPILATION)
#include <flowlib/runtime/impl/checkpoint_log.ipp>
#endif
