// flowlib/runtime/impl/batch_protocol.ipp
//
// The definitions runtime/batch_protocol.hpp declares: inline in header-only
// mode, compiled once by src/flowlib.cpp under FLOWLIB_SEPARATE_COMPILATION
// (detail/config.hpp).
#pragma once

#include <flowlib/runtime/batch_protocol.hpp>

namespace flowlib::detail {

FLOWLIB_DECL void batch_protocol::begin_update(flow_runner& r, std::uint64_t update_id,
                                               const UpdateOptions& options) {
  update_context u{now_, update_id, nullptr};
  if (auto it = options.replace_where_overrides.find(r.name());
      it != options.replace_where_overrides.end()) {
    u.predicate_override = &it->second;
  }
  r.begin_update(u);
}

FLOWLIB_DECL void batch_protocol::check_held(flow_runner& r) {
  const source_position latest = r.latest();
  std::uint64_t next = 0;
  if (auto last = log_.last_commit(r.name())) {
    require_held(r, last->end, latest, "committed");
    next = last->batch + 1;
  }
  if (auto planned = log_.planned(r.name(), next)) require_held(r, planned->to, latest, "planned");
}

FLOWLIB_DECL void batch_protocol::settle_unknown(flow_runner& r) {
  if (!r.unsettled) return;
  const auto last = log_.last_commit(r.name());
  if (last && last->batch >= *r.unsettled) {
    r.commit();
  } else {
    r.rollback();
  }
  r.unsettled.reset();
}

FLOWLIB_DECL void batch_protocol::abandon(flow_runner& r) noexcept {
  if (!r.unsettled) return;
  if (settle(r, *r.unsettled) == commit_state::committed) {
    r.commit();
  } else {
    r.rollback();
  }
  r.unsettled.reset();
}

FLOWLIB_DECL void batch_protocol::restore(flow_runner& r) {
  std::vector<component_records> recs(r.components());
  r.snapshots = {};
  r.snapshots.any = recs.empty();  // a flow without state has nothing to snapshot
  if (auto last = log_.last_commit(r.name())) {
    for (std::size_t c = 0; c < recs.size(); ++c) recs[c] = log_.load_state(r.name(), last->batch, c);
    // Where the snapshot schedule stands (PipelineOptions::snapshot_interval).
    for (const auto& rc : recs) {
      if (rc.snapshot) {
        r.snapshots.any = true;
        r.snapshots.snapshot_bytes += rc.snapshot->size();
      }
      for (const auto& d : rc.deltas) r.snapshots.delta_bytes_since += d.size();
      r.snapshots.batches_since = std::max<std::uint64_t>(r.snapshots.batches_since, rc.deltas.size());
    }
    // Update ids continue across restarts (an update that committed
    // nothing leaves no trace, and its id may be given again).
    update_id_ = std::max(update_id_, last->update_id);
  }
  r.restore(recs);
}

FLOWLIB_DECL FlowUpdateSummary batch_protocol::run_flow(flow_runner& r, std::uint64_t update_id,
                                                        const UpdateOptions& options) {
  std::unique_lock<std::mutex> lock(mutex_, std::defer_lock);
  if (parallel_) lock.lock();  // released only while the batch's rows are applied
  FlowUpdateSummary sum;
  sum.flow = r.name();
  begin_update(r, update_id, options);
  if (r.once() && r.once_done()) {
    sum.skipped = true;
    return sum;
  }
  std::uint64_t next = 0;
  source_position from = r.start();
  if (auto last = log_.last_commit(r.name())) {
    next = last->batch + 1;
    from = last->end;
  }
  const std::size_t limit =
      r.once() ? 0 : (r.max_rows_per_batch != 0 ? r.max_rows_per_batch : options_.max_rows_per_batch);
  const source_position latest = r.latest();
  require_held(r, from, latest, "committed");
  FlowProgress progress{r.name(), 0, 0, latest.rows_after(from)};
  for (;;) {
    planned_batch p;
    bool fresh = false;
    if (auto planned = log_.planned(r.name(), next)) {
      p = std::move(*planned);  // an uncommitted batch: replay the same positions
      require_held(r, p.to, latest, "planned");
    } else {
      p.from = from;
      p.to = clamp(r.plan(from, limit), latest);
      if (p.to == p.from && !(r.once() && next == 0)) break;
      fresh = true;
    }
    // A flow into tables records its positions in the batch's own
    // transaction (one per batch on a store that has them): a failure
    // undoes both, and the replay plans again from the committed end. A
    // sink's positions are recorded first, on their own: what the sink
    // did cannot be undone, so a replay must show it the same batch.
    const bool together = fresh && r.target_table() != nullptr;
    if (fresh && !together) log_.write_planned(r.name(), next, p);
    const batch_outcome out = parallel_ ? run_batch_parallel(r, p, next, update_id, together, lock)
                                        : run_batch(r, p, next, update_id, together);
    sum.batches += 1;
    static_cast<FlowRowCounts&>(sum) += out.counts();
    progress.batches += 1;
    progress.rows += out.stats.input_rows;
    if (options.on_progress) options.on_progress(progress);
    from = p.to;
    ++next;
    if (r.once()) break;
  }
  return sum;
}

FLOWLIB_DECL batch_outcome batch_protocol::run_batch(flow_runner& r, const planned_batch& p,
                                                     std::uint64_t n, std::uint64_t update_id,
                                                     bool record_positions) {
  const auto started = std::chrono::steady_clock::now();
  const auto& track = r.snapshots;
  const bool snapshot = !track.any || (track.batches_since >= options_.snapshot_interval &&
                                       track.delta_bytes_since >= track.snapshot_bytes);
  const auto scope = snapshot ? checkpoint_scope::snapshot : checkpoint_scope::delta;
  batch_outcome out;
  bool commit_written = false;
  try {
    store_->begin_batch();
    r.begin();  // the tables' journals: a failure from here on is undone through them
    if (record_positions) log_.write_planned(r.name(), n, p);
    fault(fault_point::positions_recorded, r.name(), n);
    out = r.run(p, n, options_.fault_hook);
    r.persist(durable_writer{r.name(), n});  // durable tables: the batch's changes
    std::string& bytes = state_bytes_;
    std::uint64_t written = 0;
    for (std::size_t c = 0; c < r.components(); ++c) {
      bytes.clear();
      r.write_state(c, scope, bytes);
      log_.write_state(r.name(), n, c, scope, bytes);
      written += bytes.size();
      if (c == 0) fault(fault_point::state_saving, r.name(), n);
    }
    pending_state_bytes_ = written;
    fault(fault_point::before_commit, r.name(), n);
    commit_written = true;
    log_.write_commit(r.name(), n, p.to, update_id);
    store_->commit_batch();
  } catch (...) {
    const std::exception_ptr e = std::current_exception();
    // A store with transactions rolls back first: the check below then
    // reads what was really committed (a failed COMMIT does not count).
    store_->abort_batch();
    const bool counts = settle_failed(r, n, commit_written, snapshot, true);
    emit_flow(r, n, update_id, p, out, started, e, counts);
    throw;
  }
  r.commit();
  note_committed(r, snapshot);
  emit_flow(r, n, update_id, p, out, started, nullptr, true);
  // Old records go once a snapshot makes them unneeded (a flow without
  // state: every snapshot_interval batches).
  if ((snapshot && r.components() != 0) ||
      (r.components() == 0 && n % options_.snapshot_interval == 0)) {
    log_.purge_before(r.name(), n, options_.retain_batches);
  }
  fault(fault_point::after_commit, r.name(), n);
  return out;
}

FLOWLIB_DECL batch_outcome batch_protocol::run_batch_parallel(
    flow_runner& r, const planned_batch& p, std::uint64_t n, std::uint64_t update_id,
    bool record_positions, std::unique_lock<std::mutex>& lock) {
  const auto started = std::chrono::steady_clock::now();
  const auto& track = r.snapshots;
  const bool snapshot = !track.any || (track.batches_since >= options_.snapshot_interval &&
                                       track.delta_bytes_since >= track.snapshot_bytes);
  const auto scope = snapshot ? checkpoint_scope::snapshot : checkpoint_scope::delta;
  // The hook is a program's callback: never called by two threads at once.
  fault_hook_fn hook;
  if (options_.fault_hook) {
    hook = [this](fault_point at, std::string_view flow, std::uint64_t batch) {
      std::lock_guard<std::mutex> g(mutex_);
      options_.fault_hook(at, flow, batch);
    };
  }
  batch_outcome out;
  bool commit_written = false;
  bool began = false;
  try {
    lock.unlock();
    r.begin();  // the tables' journals: a failure from here on is undone through them
    out = r.run(p, n, hook);
    lock.lock();
    store_->begin_batch();
    began = true;
    if (record_positions) log_.write_planned(r.name(), n, p);
    fault(fault_point::positions_recorded, r.name(), n);
    r.persist(durable_writer{r.name(), n});
    std::string& bytes = state_bytes_;
    std::uint64_t written = 0;
    for (std::size_t c = 0; c < r.components(); ++c) {
      bytes.clear();
      r.write_state(c, scope, bytes);
      log_.write_state(r.name(), n, c, scope, bytes);
      written += bytes.size();
      if (c == 0) fault(fault_point::state_saving, r.name(), n);
    }
    pending_state_bytes_ = written;
    fault(fault_point::before_commit, r.name(), n);
    commit_written = true;
    log_.write_commit(r.name(), n, p.to, update_id);
    store_->commit_batch();
  } catch (...) {
    const std::exception_ptr e = std::current_exception();
    if (!lock.owns_lock()) lock.lock();
    if (began) store_->abort_batch();
    const bool counts = settle_failed(r, n, commit_written, snapshot, began);
    emit_flow(r, n, update_id, p, out, started, e, counts);
    throw;
  }
  r.commit();
  note_committed(r, snapshot);
  emit_flow(r, n, update_id, p, out, started, nullptr, true);
  if ((snapshot && r.components() != 0) ||
      (r.components() == 0 && n % options_.snapshot_interval == 0)) {
    log_.purge_before(r.name(), n, options_.retain_batches);
  }
  fault(fault_point::after_commit, r.name(), n);
  return out;
}

FLOWLIB_DECL void batch_protocol::note_committed(flow_runner& r, bool snapshot) noexcept {
  auto& track = r.snapshots;
  if (snapshot) {
    track = {true, pending_state_bytes_, 0, 0};
  } else {
    track.delta_bytes_since += pending_state_bytes_;
    track.batches_since += 1;
  }
}

FLOWLIB_DECL bool batch_protocol::settle_failed(flow_runner& r, std::uint64_t n,
                                                bool commit_written, bool snapshot,
                                                bool in_batch) noexcept {
  const commit_state state = commit_written ? settle(r, n) : commit_state::absent;
  if (state == commit_state::committed) {
    // The failure came after the commit: the batch counts, so its
    // changes stay; the failure is still reported, on a COMPLETED event
    // (its counts are in the tables).
    r.commit();
    note_committed(r, snapshot);
    return true;
  }
  if (state == commit_state::absent) {
    fail_batch(r, in_batch);
    return false;
  }
  r.unsettled = n;
  closed_ = true;
  return false;
}

FLOWLIB_DECL batch_protocol::commit_state batch_protocol::settle(
    flow_runner& r, std::uint64_t n) noexcept {
  for (int attempt = 0; attempt < 3; ++attempt) {
    try {
      const auto last = log_.last_commit(r.name());
      return last && last->batch >= n ? commit_state::committed : commit_state::absent;
    } catch (...) {
    }
    try {
      store_->remove(checkpoint_log::batch_path(r.name(), "commits", n));
      return commit_state::absent;
    } catch (...) {
    }
  }
  return commit_state::unknown;
}

FLOWLIB_DECL void batch_protocol::fail_batch(flow_runner& r, bool in_batch) noexcept {
  r.rollback();
  if (in_batch) store_->abort_batch();
  try {
    restore(r);
  } catch (...) {
    closed_ = true;
  }
}

FLOWLIB_DECL void batch_protocol::require_held(const flow_runner& r,
                                               const source_position& recorded,
                                               const source_position& latest,
                                               std::string_view what) const {
  for (const auto& [part, off] : recorded.partitions()) {
    const auto held = latest.offset(part);
    if (held >= off) continue;
    throw error(errc::checkpoint_mismatch, r.name(), "", "",
                "source '" + r.source_name() + "' holds " + std::to_string(held) +
                    " records in partition " + std::to_string(part) + " but the " +
                    store_->describe() + " has " + std::string(what) + " batches up to " +
                    std::to_string(off) + "; re-append at least the records appended before "
                    "the restart (the same ones, in the same order; R-EXACT-6); nothing was run");
  }
}

FLOWLIB_DECL source_position batch_protocol::clamp(source_position to,
                                                   const source_position& latest) {
  for (const auto& [part, off] : to.partitions()) {
    const auto cap = latest.offset(part);
    if (off > cap) to.set(part, cap);
  }
  return to;
}

FLOWLIB_DECL void batch_protocol::fault(fault_point p, std::string_view flow,
                                        std::uint64_t n) const {
  if (options_.fault_hook) options_.fault_hook(p, flow, n);
}

FLOWLIB_DECL void batch_protocol::emit_flow(flow_runner& r, std::uint64_t n,
                                            std::uint64_t update_id, const planned_batch& p,
                                            const batch_outcome& out,
                                            std::chrono::steady_clock::time_point started,
                                            std::exception_ptr e, bool committed) {
  if (events_ == nullptr) return;
  if (out.planning) {  // REPLACE WHERE: how the batch was planned (R-WHERE-8)
    planning_information_event pe;
    pe.timestamp = now_;
    pe.pipeline = name_;
    pe.update_id = update_id;
    pe.flow = r.name();
    pe.technique = out.planning->technique;
    pe.reason = out.planning->reason;
    events_->planning_information(pe);
  }
  flow_progress_event ev;
  ev.timestamp = now_;
  ev.pipeline = name_;
  ev.update_id = update_id;
  ev.flow = r.name();
  ev.target = r.target_name();
  ev.batch_id = n;
  ev.status = !committed ? flow_status::failed
                         : (out.stats.skipped ? flow_status::skipped : flow_status::completed);
  ev.start_position = p.from.to_string();
  ev.end_position = p.to.to_string();
  ev.duration_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  ev.metrics = out.counts();
  if (!committed) ev.metrics.input_rows = r.rows_read();
  ev.expectations = out.stats.expectations;
  ev.stages = out.stages;
  if (e != nullptr) set_error(ev, e);
  events_->flow_progress(ev);
}

}  // namespace flowlib::detail
