// flowlib/flows/where/detail/pipeline_flow.hpp
//
// REPLACE WHERE in a pipeline, through the flow contract (flows/contract.hpp)
// and the one runner like every other flow:
//
//   pipeline.flow("events_agg").from(events_raw).with(dim_users).query(fn, "v1")
//       .into(events_agg, flowlib::ReplaceWhere{w::col("date") >= w::current_date() - w::days(3)});
//
// A REPLACE WHERE flow does not read its sources as streams: each update is
// one batch that reads them whole (with the predicate pushed down). So its
// source in the pipeline is `replace_where_updates`, whose positions count
// the flow's updates: the batch of update n goes from n to n + 1 and holds
// one token, so the exactly-once protocol (record the positions, apply,
// write the state, commit) covers it as it covers a stream, and a failed
// update is undone through the target's journal and replayed by the next
// update. Its policy is `replace_where_policy`, which runs the update with
// the query over the real sources (`reads_sources`), takes the update's
// clock and override predicate at begin_update() (R-WHERE-3, R-WHERE-4),
// seeds rand() from the update id, and reports its plan (R-WHERE-8). The
// two share the flow (its update count says where the positions stand).
// Internal.
#pragma once

#include <flowlib/flows/contract.hpp>
#include <flowlib/flows/replace_where.hpp>
#include <flowlib/source/position.hpp>

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

namespace flowlib::detail {

/// One REPLACE WHERE update: the batch's only record.
struct replace_where_update {};

/// What the updates source and the policy share: the flow, and whether an
/// update is waiting to run with which clock and predicate.
struct replace_where_shared {
  explicit replace_where_shared(ReplaceWhere<> f) : flow(std::move(f)) {}
  ReplaceWhere<> flow;
  where::context ctx{};
  const where::expr* predicate_override = nullptr;
  bool pending = false;
};

/// The flow's source in the pipeline: one position per update (see the
/// header comment). Meets flowlib::source.
class replace_where_updates {
 public:
  using row_type = replace_where_update;

  replace_where_updates(std::shared_ptr<replace_where_shared> shared, std::string source_names)
      : shared_(std::move(shared)), names_(std::move(source_names)) {}

  /// The real sources' names, as the flow's definition has always named them.
  std::string_view name() const noexcept { return names_; }
  flowlib::delivery delivery() const noexcept { return flowlib::delivery::exactly_once; }
  source_position start() const { return source_position::at(0); }
  source_position latest() const {
    return source_position::at(shared_->flow.updates() + (shared_->pending ? 1 : 0));
  }
  source_position plan(const source_position& from, std::size_t) const {
    return shared_->pending ? source_position::at(from.offset() + 1) : from;
  }
  void read(const source_position& from, const source_position& to, std::vector<row_type>& out) const {
    for (auto n = from.offset(); n < to.offset(); ++n) out.push_back(replace_where_update{});
  }

 private:
  std::shared_ptr<replace_where_shared> shared_;
  std::string names_;
};

/// The flow's policy in the pipeline (see the header comment).
template <class Query, class... Sources>
class replace_where_policy {
 public:
  static constexpr std::string_view kind = ReplaceWhere<>::kind;
  static constexpr bool reads_sources = true;
  static constexpr bool takes_predicate_override = true;

  replace_where_policy(std::shared_ptr<replace_where_shared> shared, Query query,
                       std::tuple<const Sources*...> sources)
      : shared_(std::move(shared)), query_(std::move(query)), sources_(sources) {}

  void begin_update(const update_context& u) {
    shared_->ctx = where::context{u.now, u.update_id * 0x9E3779B97F4A7C15ULL + 1};
    shared_->predicate_override = u.predicate_override;
    shared_->pending = true;
  }

  template <class Table, class Checks>
  BatchStats apply_batch(Table& target, std::vector<replace_where_update>&, const Checks&,
                         const batch_info&) {
    auto& s = *shared_;
    BatchStats stats = std::apply(
        [&](const auto*... src) { return s.flow.update(target, s.ctx, s.predicate_override, query_, *src...); },
        sources_);
    s.pending = false;
    stats.upserted_rows = stats.applied_rows;  // deleted_rows: the rows of the replaced slices
    return stats;
  }

  std::optional<planning_info> planning() const {
    const ReplaceWherePlan& plan = shared_->flow.last_plan();
    planning_info p{std::string(to_string(plan.technique)), std::nullopt};
    if (plan.reason) p.reason = std::string(to_string(*plan.reason));
    return p;
  }

  void write_checkpoint(byte_writer& w, checkpoint_scope scope) const {
    shared_->flow.write_checkpoint(w, scope);
  }
  template <class Table>
  void read_checkpoint(Table& target, const checkpoint_blobs& blobs) {
    shared_->flow.read_checkpoint(target, blobs);
  }

  /// The flow (its last_plan(), for programs and tests).
  const ReplaceWhere<>& flow() const noexcept { return shared_->flow; }

 private:
  std::shared_ptr<replace_where_shared> shared_;
  Query query_;
  std::tuple<const Sources*...> sources_;
};

}  // namespace flowlib::detail
