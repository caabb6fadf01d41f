// flowlib/flows/cdc/detail/scd1.hpp
//
// AUTO CDC, SCD type 1: the engine, cdc_flow::scd1_engine (R-CDC-2, R-CDC-3,
// R-CDC-5..7). It holds the flow's staging (staging.hpp), the SCD1 state
// (scd1_state.hpp) and its two apply paths: the one pass
// (scd1_one_pass.hpp), for a batch for a target it already maintains, and
// the planned path (scd1_planned.hpp) otherwise. Both give the same table
// and metrics. Internal.
#pragma once

#include <flowlib/detail/target_binding.hpp>
#include <flowlib/expect.hpp>
#include <flowlib/flows/cdc/detail/flow.hpp>
#include <flowlib/flows/cdc/detail/scd1_one_pass.hpp>
#include <flowlib/flows/cdc/detail/scd1_planned.hpp>
#include <flowlib/flows/cdc/detail/scd1_state.hpp>
#include <flowlib/flows/cdc/detail/staging.hpp>
#include <flowlib/stats.hpp>

#include <concepts>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace flowlib::detail {

/// The SCD1 engine: one pass where it applies, else planned.
template <class K, class S, class Scd, class... Options>
class cdc_flow<K, S, Scd, Options...>::scd1_engine {
 public:
  using flow = cdc_flow;
  using state_type = scd1_state;

  /// As staging's constructors: a name, the settings, and a value for
  /// every option or none.
  template <class... Args>
    requires std::constructible_from<staging, Args...>
  explicit scd1_engine(Args&&... args) : stage_(std::forward<Args>(args)...), state_(stage_) {}

  const std::string& name() const noexcept { return stage_.name; }
  /// Keys the engine holds state for (target keys and tombstones).
  std::size_t key_count() const noexcept { return state_.index.size(); }
  /// Tombstones currently kept.
  std::size_t tombstone_count() const noexcept { return state_.tombstones; }
  /// Changes below this sequence are ignored (the highest truncate applied).
  const std::optional<sequence_type>& truncate_floor() const noexcept { return state_.floor; }

  /// Applies one batch (the facade has checked the target and ONCE).
  template <class Table, class R, class... P>
  void apply(Table& target, R& batch, const Expectations<P...>& checks, BatchStats& stats,
             target_binding& binding, std::string_view kind) {
    using Target = typename Table::row_type;
    auto& ts = stage_.template begin_batch<Target>();
    auto& store = target.store();
    if constexpr (scd1_one_pass::template applies<std::remove_cvref_t<decltype(store)>, Target,
                                                  R>) {
      if (binding.table() == &target) {  // the first batch also claims the target: planned
        if (one_pass_.apply(stage_, state_, store, ts, batch, checks, stats)) {
          release_planned_scratch();
          return;
        }
        stats = BatchStats{};  // a truncate: the pass was undone; planned instead
        ts.used = 0;
      }
    }
    planned_.apply(stage_, state_, target, store, ts, batch, checks, stats, binding, kind);
  }

  /// As new (R-EXACT-5): no keys, tombstones or floor; the index and every
  /// scratch are freed (the ONCE marker is the facade's target_binding).
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

  /// Frees the planned path's scratch once the one pass has taken over (a
  /// later planned batch allocates it again).
  void release_planned_scratch() noexcept {
    if (!stage_.scratch) return;
    stage_.release_staging();
    planned_.release();
  }

  staging stage_;
  scd1_state state_;
  scd1_planned planned_;
  scd1_one_pass one_pass_;
};

}  // namespace flowlib::detail
