// tests/support/checkpoint_blobs.hpp
//
// A flow's or an operator's checkpoint blobs (write_checkpoint()) as the
// runtime writes them, and the records a restore (read_checkpoint()) reads:
//
//   flowtest::written w;
//   flowtest::write_commit(flow, w, interval, snapshot_only);  // after each commit
//   flowtest::write_commit(flow, w, plan);                     // a restore_plan's
//   restored.read_checkpoint(table, w.upto(k));                 // state after commit k
#pragma once

#include <flowlib/checkpoint/store.hpp>
#include <flowlib/detail/byte_codec.hpp>

#include <cstddef>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace flowtest {

/// One blob of `f`'s state: a delta (what changed since the last blob) or a
/// snapshot (the whole state).
template <class Flow>
std::string blob_of(const Flow& f, flowlib::checkpoint_scope scope) {
  std::string s;
  flowlib::detail::byte_writer w{s};
  f.write_checkpoint(w, scope);
  return s;
}
template <class Flow>
std::string delta_of(const Flow& f) {
  return blob_of(f, flowlib::checkpoint_scope::delta);
}
template <class Flow>
std::string snapshot_of(const Flow& f) {
  return blob_of(f, flowlib::checkpoint_scope::snapshot);
}

/// The blobs one flow wrote, commit by commit.
struct written {
  struct commit {
    std::optional<std::string> snapshot;
    std::string delta;  // empty when the commit wrote a snapshot only
  };
  std::vector<commit> commits;

  /// The records a restore reads after commit `k` (1-based): the last
  /// snapshot at or before it, then the deltas after that snapshot.
  flowlib::checkpoint_blobs upto(std::size_t k) const {
    flowlib::checkpoint_blobs b;
    std::size_t from = 0;
    for (std::size_t i = 0; i < k; ++i) {
      if (commits[i].snapshot) {
        b.snapshot = *commits[i].snapshot;
        from = i + 1;
      }
    }
    for (std::size_t i = from; i < k; ++i) b.deltas.push_back(commits[i].delta);
    return b;
  }
};

/// How a randomised test writes and restores: a snapshot every `interval`
/// commits (instead of that commit's delta when `snapshot_only`), and a
/// restore after commit `k` of `commits`, drawn in that order.
struct restore_plan {
  std::size_t interval = 1;
  bool snapshot_only = false;
  std::size_t k = 0;
  template <class Rng>
  static restore_plan random(Rng& rng, std::size_t commits) {
    restore_plan p;
    p.interval = 1 + rng() % 5;
    p.snapshot_only = rng() % 2 == 0;
    p.k = rng() % (commits + 1);
    return p;
  }
  friend std::ostream& operator<<(std::ostream& os, const restore_plan& p) {
    return os << "{interval " << p.interval << (p.snapshot_only ? ", snapshots only" : "") << ", restore after "
              << p.k << "}";
  }
};

/// Writes what the runtime writes after a commit: a delta, and every
/// `interval` commits a snapshot too (after the delta, or instead of it).
template <class Flow>
void write_commit(const Flow& f, written& w, std::size_t interval, bool snapshot_only) {
  written::commit c;
  const bool snap = (w.commits.size() + 1) % interval == 0;
  if (!(snap && snapshot_only)) c.delta = delta_of(f);
  if (snap) c.snapshot = snapshot_of(f);
  w.commits.push_back(std::move(c));
}
template <class Flow>
void write_commit(const Flow& f, written& w, const restore_plan& plan) {
  write_commit(f, w, plan.interval, plan.snapshot_only);
}

}  // namespace flowtest
