// flowlib/once.hpp
//
// Once: the option of flows that run a single time (a backfill), until the
// flow is reset after a full refresh (R-TABLE-2's INSERT ONCE, and AUTO
// CDC's `once`). A ONCE flow's apply() after a successful one reads nothing,
// writes nothing and returns stats with `skipped` set; a failed apply()
// leaves the flow as it was, so the next one runs.
#pragma once

namespace flowlib {

/// @brief Flow option: the flow runs a single time, until reset().
struct Once {};

}  // namespace flowlib
