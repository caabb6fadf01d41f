// benchmarks/support/fixture_slot.hpp
//
// The one benchmark fixture alive at a time, shared by flowlib's benchmarks.
//
// A fixture is an implementation's target (or state) for one pool of
// batches: built before timing, kept across the repetitions of one
// configuration. Keeping one per implementation (a function-local static of a
// template) would leave every implementation's last target alive and, worse,
// let the baselines reuse their own freed memory: a baseline whose memory is
// small heap blocks gets them back from malloc's free lists, already touched,
// while flowlib's store segments and index arrays are large blocks, unmapped
// when freed, that come back untouched. Where touching a page for the first
// time is slow (virtual machines that back memory lazily), that alone moved a
// ratio 2.5x (docs/benchmarks/auto_cdc.md, "Twelfth pass"). So one slot holds
// whichever fixture runs now, and what the previous one freed is given back to
// the system before the next is built: every implementation starts from the
// same state.
#pragma once

#include <malloc.h>

#include <cstdint>
#include <memory>
#include <utility>

namespace flowlib_bench {

namespace detail {
/// One object per type; its address tells fixture types apart.
template <class T>
inline constexpr char type_tag = 0;

struct fixture_slot {
  std::shared_ptr<void> fx;
  const void* type = nullptr;
  std::uint64_t pool = 0;
};
inline fixture_slot the_fixture_slot;
}  // namespace detail

/// The fixture of type `Fx` for the pool numbered `pool_id`. If the slot holds
/// another (another type or another pool), that one is destroyed, freed memory
/// is returned to the system (`malloc_trim`), and `make()`, which returns a
/// `std::unique_ptr<Fx>`, builds the new one. References to the previous
/// fixture dangle after a call that replaced it.
template <class Fx, class Make>
Fx& fixture_in_slot(std::uint64_t pool_id, Make&& make) {
  detail::fixture_slot& s = detail::the_fixture_slot;
  if (!s.fx || s.type != &detail::type_tag<Fx> || s.pool != pool_id) {
    s.fx.reset();
    s.type = nullptr;
    malloc_trim(0);
    std::unique_ptr<Fx> built = std::forward<Make>(make)();
    s.fx = std::shared_ptr<Fx>(std::move(built));
    s.type = &detail::type_tag<Fx>;
    s.pool = pool_id;
  }
  return *static_cast<Fx*>(s.fx.get());
}

}  // namespace flowlib_bench
