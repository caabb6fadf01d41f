// benchmarks/support/smoke.hpp
//
// Smoke mode, shared by flowlib's benchmarks: CTest runs every benchmark
// binary with FLOWLIB_BENCH_SMOKE=1 (see benchmarks/CMakeLists.txt). In that
// mode a benchmark uses tiny sizes and checks that flowlib and each baseline
// end with the same result; `require` stops the program with a message and a
// non-zero status when they do not.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace flowlib_bench {

/// True when the environment variable `name` is set to a value other than
/// "" or "0".
inline bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && std::string_view(v) != "" && std::string_view(v) != "0";
}

/// True when FLOWLIB_BENCH_SMOKE is set (see env_flag).
inline bool smoke_mode() { return env_flag("FLOWLIB_BENCH_SMOKE"); }

/// Exits with status 1 and `what` on stderr unless `ok`.
inline void require(bool ok, std::string_view what) {
  if (ok) return;
  std::fprintf(stderr, "benchmark check failed: %.*s\n", static_cast<int>(what.size()), what.data());
  std::exit(1);
}

}  // namespace flowlib_bench
