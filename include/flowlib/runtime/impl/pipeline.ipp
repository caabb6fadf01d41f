// flowlib/runtime/impl/pipeline.ipp
//
// The definitions runtime/pipeline.hpp declares: inline in header-only mode,
// compiled once by src/flowlib.cpp under FLOWLIB_SEPARATE_COMPILATION
// (detail/config.hpp).
#pragma once

#include <flowlib/runtime/pipeline.hpp>

namespace flowlib {

FLOWLIB_DECL Pipeline::Pipeline(std::string name, checkpoint_store& checkpoint, PipelineOptions options)
    : name_(std::move(name)),
      store_(&checkpoint),
      options_(std::move(options)),
      protocol_(name_, checkpoint, options_),
      log_(protocol_.log()) {
  if (options_.snapshot_interval == 0) {
    throw error(errc::invalid_argument, name_, "", "",
                "PipelineOptions::snapshot_interval must be at least 1");
  }
}

FLOWLIB_DECL Pipeline::~Pipeline() {
  for (auto& r : runners_) protocol_.abandon(*r);
}

FLOWLIB_DECL detail::flow_start Pipeline::flow(std::string name) {
  if (opening_started_) {
    throw error(errc::invalid_argument, name, "", "",
                "flows are declared before the pipeline's first update");
  }
  return detail::flow_start(*this, std::move(name));
}

FLOWLIB_DECL UpdateSummary Pipeline::update(UpdateOptions options) {
  now_ = options.now.value_or(std::chrono::system_clock::now());
  protocol_.now(now_);
  open();
  for (const auto& [flow, p] : options.replace_where_overrides) {
    const auto it = std::find_if(runners_.begin(), runners_.end(),
                                 [&](const auto& r) { return r->name() == flow; });
    if (it == runners_.end() || !(*it)->takes_predicate_override()) {
      throw error(errc::invalid_argument, flow, "", "",
                  "UpdateOptions::replace_where_overrides names no REPLACE WHERE flow of "
                  "pipeline '" + name_ + "'; nothing was run");
    }
  }
  UpdateSummary summary;
  update_id_ = std::max(update_id_, protocol_.last_update_id());
  summary.update_id = ++update_id_;
  emit_update(update_state::started, nullptr, nullptr);
  try {
    for (auto* r : order_) {  // R-EXACT-6: before any flow runs
      protocol_.begin_update(*r, summary.update_id, options);
      protocol_.check_held(*r);
    }
    run_flows(summary, options);
  } catch (...) {
    emit_update(update_state::failed, &summary, std::current_exception());
    throw;
  }
  emit_update(update_state::completed, &summary, nullptr);
  return summary;
}

FLOWLIB_DECL void Pipeline::refresh(const std::vector<detail::flow_runner*>& writers,
                                    std::string_view table) {
  const std::string intent = "refreshes/" + detail::checkpoint_log::hex(table);
  store_->begin_batch();
  bool changed = false;
  try {
    writers.front()->refresh_target();  // throws, changing nothing, when refused
    changed = true;
    store_->write(intent, table);
    for (auto* r : writers) r->forget_quarantined();
    // The emptied tables are written before the flows' records go: a
    // durable table's records count by their writers' commits, which the
    // reset removes, so its new image must already be there.
    for (auto* r : writers) r->persist(durable_writer{});
    for (auto* r : writers) log_.reset_flow(r->name());
    store_->remove(intent);
    store_->commit_batch();
  } catch (...) {
    store_->abort_batch();
    // Memory and checkpoint may differ now: the next update opens the
    // pipeline again, reloading the durable tables and the flows' state
    // (and finishing the refresh when its intent record stayed).
    if (changed) opened_ = false;
    throw;
  }
  for (auto* r : writers) r->commit();  // durable tables: what persist() wrote is committed
}

FLOWLIB_DECL void Pipeline::finish_refreshes() {
  for (const auto& name : store_->list("refreshes")) {
    std::vector<detail::flow_runner*> writers;
    for (auto& r : runners_)
      if (detail::checkpoint_log::hex(r->target_name()) == name) writers.push_back(r.get());
    if (writers.empty()) {
      throw error(errc::checkpoint_mismatch, name_, "", "",
                  "the " + store_->describe() + " holds an unfinished full refresh of a table "
                  "(record 'refreshes/" + name + "') that no flow of this pipeline writes; "
                  "declare the flows that write it, so that the refresh can be finished");
    }
    refresh(writers, writers.front()->target_name());
  }
}

FLOWLIB_DECL void Pipeline::run_flows(UpdateSummary& summary, const UpdateOptions& options) {
  const std::uint64_t id = summary.update_id;
  if (!pool_) {
    for (auto* r : order_) summary.flows.push_back(protocol_.run_flow(*r, id, options));
    return;
  }
  std::vector<std::optional<FlowUpdateSummary>> done(order_.size());
  std::vector<std::exception_ptr> errors(order_.size());
  for (const auto& wave : waves_) {
    if (wave.size() == 1) {
      try {
        done[wave[0]] = protocol_.run_flow(*order_[wave[0]], id, options);
      } catch (...) {
        errors[wave[0]] = std::current_exception();
      }
    } else {
      protocol_.parallel(true);
      pool_->run(wave.size(), [&](std::size_t i) {
        const std::size_t f = wave[i];
        try {
          done[f] = protocol_.run_flow(*order_[f], id, options);
        } catch (...) {
          errors[f] = std::current_exception();
        }
      });
      protocol_.parallel(false);
    }
    for (std::size_t f : wave) {
      if (!errors[f]) continue;
      // The summary an update_progress event carries: the flows done.
      for (std::size_t g = 0; g < order_.size(); ++g)
        if (done[g]) summary.flows.push_back(std::move(*done[g]));
      std::exception_ptr first;
      for (std::size_t g : wave)
        if (!first && errors[g]) first = errors[g];
      std::rethrow_exception(first);
    }
  }
  for (auto& d : done) summary.flows.push_back(std::move(*d));
}

FLOWLIB_DECL void Pipeline::plan_waves() {
  const std::size_t threads = options_.threads == 0 ? detail::default_threads() : options_.threads;
  waves_.clear();
  if (threads <= 1) {
    pool_.reset();
    for (auto& r : runners_) r->pool = nullptr;
    return;
  }
  if (!pool_ || pool_->size() != threads) pool_ = std::make_unique<detail::task_pool>(threads);
  for (auto& r : runners_) r->pool = pool_.get();
  const std::size_t n = order_.size();
  std::vector<std::vector<const void*>> touched(n);
  std::vector<bool> alone(n);
  for (std::size_t i = 0; i < n; ++i) {
    order_[i]->resources(touched[i]);
    std::sort(touched[i].begin(), touched[i].end());
    // A sink's callback is the program's code: it runs alone.
    alone[i] = order_[i]->exclusive() || order_[i]->target_table() == nullptr;
  }
  const auto overlap = [&](std::size_t a, std::size_t b) {
    if (alone[a] || alone[b]) return true;
    auto x = touched[a].begin(), y = touched[b].begin();
    while (x != touched[a].end() && y != touched[b].end()) {
      if (*x == *y) return true;
      if (*x < *y) ++x; else ++y;
    }
    return false;
  };
  std::vector<std::size_t> level(n, 0);
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t j = 0; j < i; ++j)
      if (overlap(i, j)) level[i] = std::max(level[i], level[j] + 1);
    if (level[i] >= waves_.size()) waves_.resize(level[i] + 1);
    waves_[level[i]].push_back(i);
  }
}

FLOWLIB_DECL void Pipeline::add_flow(std::unique_ptr<detail::flow_runner> runner,
                                     const void* target, std::string_view target_name, bool managed,
                                     std::string_view kind, bool exclusive) {
  const std::string& flow = runner->name();
  for (const auto& r : runners_) {
    if (r->name() == flow) {
      throw error(errc::invalid_target, flow, "", "",
                  "FLOW_ALREADY_EXISTS: pipeline '" + name_ + "' already has a flow of this name");
    }
  }
  if (target != nullptr) {
    if (!catalog_.contains(target_name)) {
      catalog_.declare_table(std::string(target_name),
                             managed ? table_kind::managed : table_kind::streaming);
      tables_.emplace_back(target, std::string(target_name));
    } else if (table_ptr(target_name) != target) {
      // Another table of that name: the catalog says which code applies
      // (CANNOT_SWITCH_STREAMING_TABLE_TO_MANAGED_TABLE, TABLE_ALREADY_EXISTS).
      catalog_.declare_table(std::string(target_name),
                             managed ? table_kind::managed : table_kind::streaming);
    }
    // R-USING-9: a REPLACE USING or AUTO CDC target takes one flow and no other.
    for (const auto& [k, n] : catalog_.flows_of(target_name)) {
      const auto other = std::find_if(runners_.begin(), runners_.end(),
                                      [&](const auto& r) { return r->name() == n; });
      if (exclusive || other == runners_.end() || !(*other)->shares_target()) {
        throw error(errc::invalid_target, flow, "", "",
                    "table '" + std::string(target_name) + "' is already written by " + k +
                        " flow '" + n + "'; a " + std::string(exclusive ? kind : k) +
                        " target takes exactly one flow and no other flow type (R-USING-9)");
      }
    }
    catalog_.declare_flow(target_name, kind, flow, exclusive);
  }
  runners_.push_back(std::move(runner));
}

FLOWLIB_DECL void Pipeline::keep_alive(std::shared_ptr<void> object) {
  owned_.push_back(std::move(object));
}

FLOWLIB_DECL const void* Pipeline::table_ptr(std::string_view name) const {
  for (const auto& [p, n] : tables_)
    if (n == name) return p;
  return nullptr;
}

FLOWLIB_DECL void Pipeline::open() {
  if (opened_ && !protocol_.closed()) return;
  // Until this open finishes, the flows' state and tables are not known to
  // match the checkpoint: an open that fails part way must run again whole
  // at the next update (not be taken for done because it began).
  opened_ = false;
  opening_started_ = true;
  // A batch a failure left unsettled is kept or undone first, by the
  // checkpoint's commit record (its tables' journals are still open).
  for (auto& r : runners_) protocol_.settle_unknown(*r);
  // Reads and checks first: a refused open writes nothing.
  log_.clear_pending();
  log_.open_pipeline(name_);
  for (auto& r : runners_) log_.open_flow(r->name(), r->definition(), r->component_layout());
  for (auto& r : runners_) {
    if (r->writes_tables() && !r->tables_durable(store_->durable())) {
      throw error(errc::checkpoint_mismatch, r->name(), "", "",
                  store_->durable()
                      ? "the " + store_->describe() + " is durable but the flow's tables are "
                            "not: after a restart the checkpoint would skip rows the tables "
                            "lost; use durable tables (flowlib::FileStorage, or SqliteStorage with a "
                            "SqliteCheckpoint), or a MemoryCheckpoint"
                      : "the " + store_->describe() + " is volatile but the flow's tables are "
                            "durable: after a restart every row would be applied again; use a "
                            "durable checkpoint (FileCheckpoint)");
    }
  }
  // Durable tables (SqliteStorage) are loaded from the checkpoint's
  // database before anything is written and before the flows restore
  // their state from them; a table that does not suit is refused here.
  std::vector<const void*> attached;
  durable_context context;
  context.committed = [this](std::string_view flow, std::uint64_t batch) {
    const auto last = log_.last_commit(flow);
    return last && last->batch >= batch;
  };
  context.snapshot_interval = options_.snapshot_interval;
  for (auto& r : runners_) r->attach_tables(*store_, context, attached);
  finish_refreshes();
  std::vector<std::pair<detail::flow_runner*, import_plan>> imports;
  for (auto& r : runners_) {
    if (r->import_from == nullptr || log_.imported(r->name())) continue;
    if (log_.last_commit(r->name())) continue;  // has its own history already
    imports.emplace_back(r.get(), plan_import(*r));
  }
  order_ = dependency_order();
  plan_waves();
  for (auto& r : runners_) {
    for (const void* t : r->source_tables())
      for (auto& w : runners_)
        if (w->target_table() == t) w->log_appends(true);
  }
  // Writes.
  log_.write_pending();
  for (auto& [r, plan] : imports) {
    log_.copy_flow(*r->import_from, r->import_flow, r->name(), plan.mapping);
    if (plan.last && !plan.fresh.empty()) {
      // Components the stream did not have start fresh at its last batch.
      std::string bytes;
      for (std::size_t c : plan.fresh) {
        bytes.clear();
        r->write_state(c, checkpoint_scope::snapshot, bytes);
        log_.write_state(r->name(), *plan.last, c, checkpoint_scope::snapshot, bytes);
      }
    }
    log_.mark_imported(r->name(), r->import_from->describe() + " / " + r->import_flow);
  }
  for (auto& r : runners_) protocol_.restore(*r);
  protocol_.reopened();
  opened_ = true;
}

FLOWLIB_DECL Pipeline::import_plan Pipeline::plan_import(detail::flow_runner& r) const {
  const auto refuse = [&](const std::string& why) {
    return error(errc::checkpoint_mismatch, r.name(), "", "",
                 "IMPORT CHECKPOINT: " + why + "; nothing was imported");
  };
  const auto layout = detail::checkpoint_log::layout_of(*r.import_from, r.import_flow);
  if (!layout) {
    throw refuse("the " + r.import_from->describe() + " has no stream named '" + r.import_flow + "'");
  }
  const auto split = [](const std::string& s) {
    std::vector<std::string> parts;
    std::size_t at = 0;
    for (;;) {
      const auto bar = s.find('|', at);
      parts.push_back(s.substr(at, bar - at));
      if (bar == std::string::npos) return parts;
      at = bar + 1;
    }
  };
  // The stream's layout is a record another pipeline stored: its sink's
  // kind comes back as text, and is compared with the kinds' names.
  const auto src = split(*layout);
  const auto dst = split(r.component_layout());
  const bool src_policy = src.front() != foreach_batch_kind;
  if (src.front() != append_flow_kind && src_policy) {
    throw refuse("stream '" + r.import_flow + "' is a " + src.front() +
                 " flow; only a stream that appends or calls a foreach-batch sink can be imported");
  }
  if (std::vector<std::string>(src.begin() + 1, src.end()) !=
      std::vector<std::string>(dst.begin() + 1, dst.end())) {
    throw refuse("stream '" + r.import_flow + "' has the operators (" + *layout +
                 ") and this flow (" + r.component_layout() + "): they must be the same, in order");
  }
  detail::checkpoint_log other(const_cast<checkpoint_store&>(*r.import_from));
  import_plan plan;
  if (auto last = other.last_commit(r.import_flow)) plan.last = last->batch;
  if (src_policy) {
    plan.mapping.emplace_back(0, 0);
  } else {
    plan.fresh.push_back(0);
  }
  for (std::size_t i = 1; i < dst.size(); ++i) {
    plan.mapping.emplace_back(src_policy ? i : i - 1, i);
  }
  return plan;
}

FLOWLIB_DECL std::vector<detail::flow_runner*> Pipeline::dependency_order() const {
  std::vector<detail::flow_runner*> out;
  std::vector<bool> done(runners_.size(), false);
  while (out.size() < runners_.size()) {
    bool progress = false;
    for (std::size_t i = 0; i < runners_.size(); ++i) {
      if (done[i]) continue;
      std::vector<const void*> reads = runners_[i]->source_tables();
      for (const void* t : runners_[i]->lookup_tables()) reads.push_back(t);
      bool ready = true;
      for (std::size_t j = 0; j < runners_.size(); ++j) {
        if (done[j] || j == i) continue;
        for (const void* t : reads)
          if (runners_[j]->target_table() == t) ready = false;
      }
      if (ready) {
        done[i] = true;
        out.push_back(runners_[i].get());
        progress = true;
      }
    }
    if (!progress) {
      throw error(errc::invalid_target, name_, "", "",
                  "the flows read each other's tables in a cycle; a pipeline's flows must form "
                  "a directed acyclic graph");
    }
  }
  return out;
}

FLOWLIB_DECL void Pipeline::emit_update(update_state state, const UpdateSummary* s,
                                        std::exception_ptr e) {
  if (events_ == nullptr) return;
  update_progress_event ev;
  ev.timestamp = now_;
  ev.pipeline = name_;
  ev.update_id = update_id_;
  ev.state = state;
  if (s != nullptr) {
    ev.details.flows = s->flows.size();
    ev.details.batches = s->batches();
    ev.details.rows = s->input_rows();
  }
  if (e != nullptr) detail::batch_protocol::set_error(ev, e);
  events_->update_progress(ev);
}

}  // namespace flowlib
