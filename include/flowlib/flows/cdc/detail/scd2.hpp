// flowlib/flows/cdc/detail/scd2.hpp
//
// AUTO CDC, SCD type 2: the engine, cdc_flow::scd2_engine (R-CDC-4, R-CDC-5..7). It
// holds the flow's staging (staging.hpp), the SCD2 state (scd2_state.hpp)
// and its two apply paths: the one pass (scd2_one_pass.hpp), for a batch
// for a large target it already maintains (with a compact history), and
// the planned path (scd2_planned.hpp) otherwise. Both give the same table
// and metrics. Internal.
#pragma once

#include <flowlib/detail/target_binding.hpp>
#include <flowlib/expect.hpp>
#include <flowlib/flows/cdc/detail/flow.hpp>
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

/// The SCD2 engine: one pass where it applies, else planned.
template <class K, class S, class Scd, class... Options>
class cdc_flow<K, S, Scd, Options...>::scd2_engine {
 public:
  using flow = cdc_flow;
  using state_type = scd2_state;

  /// As staging's constructors: a name, the settings, and a value for
  /// every option or none.
  template <class... Args>
    requires std::constructible_from<staging, Args...>
  explicit scd2_engine(Args&&... args) : stage_(std::forward<Args>(args)...), state_(stage_) {}

  const std::string& name() const noexcept { return stage_.name; }
  /// Keys the engine holds state for.
  std::size_t key_count() const noexcept { return state_.index.size(); }

  /// Applies one batch (the facade has checked the target and ONCE).
  template <class Table, class R, class... P>
  void apply(Table& target, R& batch, const Expectations<P...>& checks, BatchStats& stats,
             target_binding& binding, std::string_view kind) {
    using Target = typename Table::row_type;
    auto& ts = stage_.template begin_batch<Target>();
    auto& store = target.store();
    if constexpr (scd2_one_pass::template applies<std::remove_cvref_t<decltype(store)>, Target,
                                                  R>) {
      // The first batch also claims the target: planned.
      if (binding.table() == &target &&
          state_.index.size() >= stage_.settings.tuning.scd2_one_pass_min_keys) {
        one_pass_.apply(stage_, state_, planned_, store, ts, batch, checks, stats);
        return;
      }
    }
    planned_.apply(stage_, state_, target, store, ts, batch, checks, stats, binding, kind);
  }

  /// As new (R-EXACT-5): no keys; the index and every scratch are freed
  /// (the ONCE marker is the facade's target_binding).
  void reset_state() noexcept {
    state_.reset(stage_);
    stage_.reset_staging();
    planned_.release();
    one_pass_.release();
    stage_.changes.on_reset();
  }

 private:
  template <class>
  friend struct cdc_checkpoint;

  staging stage_;
  scd2_state state_;
  scd2_planned planned_;
  scd2_one_pass one_pass_;
};

}  // namespace flowlib::detail
