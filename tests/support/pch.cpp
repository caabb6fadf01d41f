// The source of flowlib_test_pch (tests/CMakeLists.txt): the target exists
// to build the test programs' precompiled header; this file compiles to
// nothing else.
