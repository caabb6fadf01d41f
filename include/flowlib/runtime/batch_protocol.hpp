// flowlib/runtime/batch_protocol.hpp
//
// The batch protocol: how a pipeline turns a flow's source into committed
// micro-batches, exactly once (R-EXACT-1, R-EXACT-2, R-EXACT-6). For each
// batch of flow F, in order:
//   1. its positions (from, to) are recorded in the checkpoint's offset log,
//      unless an uncommitted batch already recorded them: then it is
//      replayed with the same positions (a source must still hold them).
//      A flow into tables records them in the batch's transaction (on a
//      store with transactions, SqliteCheckpoint, a batch is one
//      transaction); a sink's are recorded before, on their own;
//   2. the flow's runner reads the rows and applies them, with the tables'
//      journals open (runtime/flow_runner.hpp); durable tables write their
//      changes in the batch's transaction;
//   3. each stateful component writes its delta, or now and then a
//      snapshot (PipelineOptions::snapshot_interval);
//   4. the commit record is written: only now does the batch count.
// A failure before the commit record undoes the tables through their
// journals and restores the flow's state from the last commit; a failure
// after it keeps the batch (and is still reported). The checkpoint's record
// layout is runtime/checkpoint_log.hpp's.
//
// Flows at the same time (PipelineOptions::threads; the pipeline decides
// which flows may overlap): while parallel(true), run_flow() may be called
// from several threads for different flows. Everything that touches the
// checkpoint, the event log or a program's callback (fault hook, progress)
// then happens under one mutex; only step 2's reading and applying runs
// outside it, before the batch's store transaction begins (a store has one
// transaction at a time). So a batch's positions, table changes, state and
// commit record still commit together, and the steps of one flow happen in
// the order above except that a flow into tables reaches positions_recorded
// after the table steps. Internal.
#pragma once

#include <flowlib/checkpoint/store.hpp>
#include <flowlib/detail/config.hpp>
#include <flowlib/error.hpp>
#include <flowlib/flows/contract.hpp>
#include <flowlib/runtime/checkpoint_log.hpp>
#include <flowlib/runtime/event_log.hpp>
#include <flowlib/runtime/flow_runner.hpp>
#include <flowlib/runtime/options.hpp>
#include <flowlib/source/position.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace flowlib::detail {

/// Runs a flow's batches under the protocol (see the header comment).
class batch_protocol {
 public:
  batch_protocol(const std::string& pipeline, checkpoint_store& store, const PipelineOptions& options)
      : name_(pipeline), store_(&store), log_(store), options_(options) {}

  checkpoint_log& log() noexcept { return log_; }
  void events(EventLog* log) noexcept { events_ = log; }
  /// The running update's clock.
  void now(std::chrono::system_clock::time_point t) noexcept { now_ = t; }
  /// Whether a failed batch's state could not be read back: the pipeline
  /// must be opened again (which reports the cause) before it goes on.
  bool closed() const noexcept { return closed_; }
  void reopened() noexcept { closed_ = false; }
  /// The highest update id found in the commit records read so far.
  std::uint64_t last_update_id() const noexcept { return update_id_; }
  /// Whether run_flow() may be called for several flows at once (see the
  /// header comment). Set between flows, never while one runs.
  void parallel(bool on) noexcept { parallel_ = on; }

  /// Tells `r` that an update starts (its clock, id and override).
  FLOWLIB_DECL void begin_update(flow_runner& r, std::uint64_t update_id,
                                 const UpdateOptions& options);

  /// R-EXACT-6: throws errc::checkpoint_mismatch when `r`'s source holds
  /// fewer records than its committed batches, or its planned batch, read.
  /// Checked for every flow before an update runs any.
  FLOWLIB_DECL void check_held(flow_runner& r);

  /// Settles a batch of `r` that a failure left unsettled (settle_failed()):
  /// kept when the checkpoint has its commit record, undone otherwise.
  /// Throws what reading the checkpoint throws (the open that calls it
  /// fails, and runs again at the next update).
  FLOWLIB_DECL void settle_unknown(flow_runner& r);

  /// The pipeline goes away with a batch of `r` unsettled: settles it as
  /// settle_failed() tries to; when the checkpoint can be neither read nor
  /// changed, the batch is undone (a durable table is loaded from the
  /// checkpoint at the next open anyway).
  FLOWLIB_DECL void abandon(flow_runner& r) noexcept;

  /// Replaces `r`'s state by the last commit's (last snapshot and deltas).
  FLOWLIB_DECL void restore(flow_runner& r);

  FLOWLIB_DECL FlowUpdateSummary run_flow(flow_runner& r, std::uint64_t update_id,
                                          const UpdateOptions& options);

 private:
  FLOWLIB_DECL batch_outcome run_batch(flow_runner& r, const planned_batch& p, std::uint64_t n,
                                       std::uint64_t update_id, bool record_positions);

  // run_batch() for a flow that may run beside others (see the header
  // comment). `lock` (on mutex_) is held on entry and on return; it is
  // released while the rows are read and applied, which touches only the
  // flow's own tables, stages and sources.
  FLOWLIB_DECL batch_outcome run_batch_parallel(flow_runner& r, const planned_batch& p,
                                                std::uint64_t n, std::uint64_t update_id,
                                                bool record_positions,
                                                std::unique_lock<std::mutex>& lock);

  // The snapshot schedule after a committed batch (PipelineOptions::snapshot_interval).
  FLOWLIB_DECL void note_committed(flow_runner& r, bool snapshot) noexcept;

  // After batch n of `r` failed (the store's batch already aborted):
  // keeps it when its commit record is in place, undoes it otherwise, and
  // returns whether it counts. `commit_written`: the commit record's write
  // was reached, so the record may be in place although the failure came
  // from its write or after it (a write can land and still report failure).
  // When that cannot be found out, the batch is left unsettled: its tables'
  // journals stay open, the pipeline is closed, and the next open settles
  // it by the checkpoint before anything else (settle_unknown()).
  FLOWLIB_DECL bool settle_failed(flow_runner& r, std::uint64_t n, bool commit_written,
                                  bool snapshot, bool in_batch) noexcept;

  enum class commit_state { committed, absent, unknown };

  // Whether batch n's commit record is in place, read back from the store.
  // A read that fails is tried again; between tries the record is removed
  // instead, which settles the question the other way: a removal that
  // succeeds means the batch does not count (its other records are ignored
  // without it, runtime/checkpoint_log.hpp). Unknown only when the store
  // failed every read and every removal.
  FLOWLIB_DECL commit_state settle(flow_runner& r, std::uint64_t n) noexcept;

  // Undoes a failed batch: table changes through the journals, in-memory
  // state from the last commit. If the state cannot be read back (the
  // checkpoint became unreadable), the pipeline is closed: the next update
  // opens it again, and reports the cause.
  FLOWLIB_DECL void fail_batch(flow_runner& r, bool in_batch = true) noexcept;

  // A source that holds fewer records than the checkpoint already planned
  // or committed (a restarted program re-appended less than before): going
  // on would skip the records appended in their place, so nothing runs.
  FLOWLIB_DECL void require_held(const flow_runner& r, const source_position& recorded,
                                 const source_position& latest, std::string_view what) const;

  FLOWLIB_DECL static source_position clamp(source_position to, const source_position& latest);

  FLOWLIB_DECL void fault(fault_point p, std::string_view flow, std::uint64_t n) const;

  // --- Events ----------------------------------------------------------------------

  FLOWLIB_DECL void emit_flow(flow_runner& r, std::uint64_t n, std::uint64_t update_id,
                              const planned_batch& p, const batch_outcome& out,
                              std::chrono::steady_clock::time_point started, std::exception_ptr e,
                              bool committed);

 public:
  /// Sets an event's error from the exception: flowlib's code, or
  /// "EXCEPTION" for any other exception.
  template <class Ev>
  static void set_error(Ev& ev, std::exception_ptr e) {
    try {
      std::rethrow_exception(e);
    } catch (const error& fe) {
      ev.error.code = std::string(to_string(fe.code()));
      ev.error.message = fe.what();
    } catch (const std::exception& x) {
      ev.error.code = "EXCEPTION";
      ev.error.message = x.what();
    } catch (...) {
      ev.error.code = "EXCEPTION";
      ev.error.message = "an exception that is not a std::exception";
    }
  }


 private:
  const std::string& name_;
  checkpoint_store* store_;
  checkpoint_log log_;
  const PipelineOptions& options_;
  EventLog* events_ = nullptr;
  std::uint64_t pending_state_bytes_ = 0;
  std::chrono::system_clock::time_point now_{};
  std::uint64_t update_id_ = 0;
  bool closed_ = false;
  bool parallel_ = false;
  std::string state_bytes_;  // a component's state record, reused (under mutex_ while parallel_)
  std::mutex mutex_;  // while parallel_: the checkpoint, events, callbacks (header comment)
};

}  // namespace flowlib::detail

#if !defined(FLOWLIB_SEPARATE_COMPILATION)
#include <flowlib/runtime/impl/batch_protocol.ipp>
#endif
