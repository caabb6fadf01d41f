// flowlib/flows/cdc/detail/target_scratch.hpp
//
// The change-feed flows' scratch rows of the target's row type: planned
// rows, copies of stored rows, and rows set aside for an undo. They are
// created on a flow's first apply() (the target's row type is known only
// there) and kept across batches, so that steady state does not allocate
// per row. Also cdc_reserve_grow, the geometric reserve of the arrays an
// all-or-nothing commit makes room in first. Internal.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <vector>

namespace flowlib::detail {

/// Per-target scratch rows of a change-feed flow, created on the first
/// apply() (the target's row type is known only there). Type-erased only
/// at the flow level: one cast per batch, no virtual call per row.
struct cdc_target_scratch_base {
  virtual ~cdc_target_scratch_base() = default;
};
template <class Target>
struct cdc_target_scratch final : cdc_target_scratch_base {
  static_assert(std::is_default_constructible_v<Target>,
                "flowlib::AutoCdc: the target row type must be default-constructible (the "
                "flow builds target rows column by column).");
  std::vector<Target> rows;  // slots kept across batches; [0, used) belong to this batch
  std::size_t used = 0;
  std::uint32_t alloc() {
    if (used == rows.size()) rows.emplace_back();
    return static_cast<std::uint32_t>(used++);
  }
  static const void* tag() noexcept {
    static const char t = 0;
    return &t;
  }
};

/// Makes room for n elements in v, growing its capacity geometrically, so
/// that vectors reserved batch after batch (before an all-or-nothing
/// commit) are not reallocated to the exact size every time.
template <class V>
void cdc_reserve_grow(V& v, std::size_t n) {
  if (n > v.capacity()) v.reserve(std::max(n, 2 * v.capacity()));
}

/// The target scratch a flow holds, made on first use for the row type of
/// its target (a flow applies to one target, so it is made once).
class cdc_target_scratch_slot {
 public:
  template <class Target>
  cdc_target_scratch<Target>& get() {
    using TS = cdc_target_scratch<Target>;
    if (!scratch_ || tag_ != TS::tag()) {
      scratch_ = std::make_unique<TS>();
      tag_ = TS::tag();
    }
    return static_cast<TS&>(*scratch_);
  }

 private:
  std::unique_ptr<cdc_target_scratch_base> scratch_;
  const void* tag_ = nullptr;
};

}  // namespace flowlib::detail
