// A key type that is valid (hashable, ordered) but that the byte codec of
// checkpoints cannot encode: the negative tests of checkpoint writing.
#pragma once

#include <compare>
#include <cstdint>
#include <utility>

struct DeviceId {
  std::uint64_t hi, lo;
  auto operator<=>(const DeviceId&) const = default;
  template <class H>
  friend H AbslHashValue(H h, const DeviceId& d) {
    return H::combine(std::move(h), d.hi, d.lo);
  }
};
