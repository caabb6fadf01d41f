// flowlib/flows/cdc/detail/change_log.hpp
//
// What an AUTO CDC engine changed since its last checkpoint, so that a
// delta checkpoint (checkpoint.hpp) is O(the keys changed): the engines
// record, only once checkpointing began (the first write_checkpoint or
// read_checkpoint; before that apply() records nothing), the keys a batch
// changed, and SCD1 the keys its tombstone GC examined. Internal.
#pragma once

#include <cstddef>
#include <vector>

namespace flowlib::detail {

/// What an AUTO CDC engine changed since its last write_checkpoint. Kept by
/// the flow's staging; `mutable` there, since writing a checkpoint (a const
/// operation of the flow) restarts it.
template <class Key>
struct cdc_change_log {
  bool tracking = false;   // keys are recorded (checkpointing began)
  bool untracked = false;  // the state changed while not tracking: next delta is whole
  bool reset = false;      // the engine reset its state since the last write
  std::vector<Key> touched;  // keys changed since the last write (may repeat)
  std::size_t gc_from = 0;   // SCD1: GC queue entries [gc_from, head) were examined since

  /// An apply is about to run.
  void on_apply() noexcept {
    if (!tracking) untracked = true;
  }
  /// The engine reset its state (a full refresh of the target).
  void on_reset() noexcept {
    reset = true;
    touched.clear();
    gc_from = 0;
    if (!tracking) untracked = true;
  }
  /// A checkpoint was written (or read): changes are counted from here.
  void restart(std::size_t gc_head) noexcept {
    tracking = true;
    untracked = false;
    reset = false;
    touched.clear();
    gc_from = gc_head;
  }
};

}  // namespace flowlib::detail
