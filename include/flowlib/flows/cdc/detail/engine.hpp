// flowlib/flows/cdc/detail/engine.hpp
//
// AUTO CDC's engine (R-CDC-1..7), of which a flow holds one: for SCD type 1,
// cdc_flow::scd1_engine, and for SCD type 2, cdc_flow::scd2_engine (an SCD1
// flow holds no SCD2 state, and the reverse). An engine is the flow's
// staging (staging.hpp), the state of its SCD type and that type's two apply
// paths, each a member: a batch for a target the engine already maintains
// takes the one pass where the pass applies to it and takes it (SCD1:
// scd1_one_pass.hpp, SCD2: scd2_one_pass.hpp), and otherwise the planned
// path (scd1_planned.hpp, scd2_planned.hpp). Both paths give the same table
// and metrics. Internal.
#pragma once

#include <flowlib/detail/target_binding.hpp>
#include <flowlib/expect.hpp>
#include <flowlib/flows/cdc/detail/flow.hpp>
#include <flowlib/flows/cdc/detail/scd1_one_pass.hpp>
#include <flowlib/flows/cdc/detail/scd1_planned.hpp>
#include <flowlib/flows/cdc/detail/scd1_state.hpp>
#include <flowlib/flows/cdc/detail/scd2_one_pass.hpp>
#include <flowlib/flows/cdc/detail/scd2_planned.hpp>
#include <flowlib/flows/cdc/detail/scd2_state.hpp>
#include <flowlib/flows/cdc/detail/staging.hpp>
#include <flowlib/stats.hpp>

#include <concepts>
#include <cstddef>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace flowlib::detail {

/// An engine: one pass where it applies, else planned (see the header).
template <class K, class S, class Scd, class... Options>
template <class State, class Planned, class OnePass>
class cdc_flow<K, S, Scd, Options...>::engine {
 public:
  using flow = cdc_flow;
  using state_type = State;

  /// As staging's constructors: a name, the settings, and a value for
  /// every option or none.
  template <class... Args>
    requires std::constructible_from<staging, Args...>
  explicit engine(Args&&... args) : stage_(std::forward<Args>(args)...), state_(stage_) {}

  const std::string& name() const noexcept { return stage_.name; }
  /// What the engine keeps between batches (keys, and SCD1 tombstones and
  /// the truncate floor).
  const State& state() const noexcept { return state_; }

  /// Applies one batch (the facade has checked the target and ONCE).
  template <class Table, class R, class... P>
  void apply(Table& target, R& batch, const Expectations<P...>& checks, BatchStats& stats,
             target_binding& binding, std::string_view kind) {
    using Target = typename Table::row_type;
    auto& ts = stage_.template begin_batch<Target>();
    auto& store = target.store();
    if constexpr (OnePass::template applies<std::remove_cvref_t<decltype(store)>, Target, R>) {
      // The first batch also claims the target: planned.
      if (binding.table() == &target && OnePass::takes(stage_, state_)) {
        if (one_pass_.apply(stage_, state_, planned_, store, ts, batch, checks, stats)) return;
        stats = BatchStats{};  // the pass gave up (an SCD1 truncate), undone: planned instead
        ts.used = 0;
      }
    }
    planned_.apply(stage_, state_, target, store, ts, batch, checks, stats, binding, kind);
  }

  /// As new (R-EXACT-5): no keys; the index and every scratch are freed
  /// (the ONCE marker is the facade's target_binding).
  void reset_state() noexcept {
    state_.reset(stage_);
    planned_.release();
    one_pass_.release();
    stage_.reset_staging();
    stage_.changes.on_reset();
  }

 private:
  template <class>
  friend struct cdc_checkpoint;

  staging stage_;
  State state_;
  Planned planned_;
  OnePass one_pass_;
};

}  // namespace flowlib::detail
