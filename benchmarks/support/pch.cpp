// The source of flowlib_bench_pch (benchmarks/CMakeLists.txt): the target
// exists to build the benchmarks' precompiled header; this file compiles to
// nothing else.
