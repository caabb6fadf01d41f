// tests/support/errors.hpp
//
// The flowlib::error a call throws, for the tests of error paths:
//
//   const fl::error e = flowtest::error_of([&] { p.update(); });
//   CHECK(e.code() == fl::errc::checkpoint_mismatch);
//   CHECK(flowtest::contains(e.what(), "belongs to pipeline"));
//
//   CHECK(flowtest::contains(flowtest::message_of(fl::errc::invalid_argument, [&] { s.plan(p, 0); }),
//                            "is beyond"));
//
// error_of ends the test case as failed when the call throws no
// flowlib::error (any other exception passes through); message_of also
// checks the error's code and returns what().
#pragma once

#include <flowlib/error.hpp>

#include <doctest/doctest.h>

#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace flowtest {

template <class F>
flowlib::error error_of(F&& f) {
  try {
    std::forward<F>(f)();
  } catch (const flowlib::error& e) {
    return e;
  }
  FAIL("expected a flowlib::error");
  throw std::logic_error("expected a flowlib::error");  // not reached: FAIL ends the test case
}

template <class F>
std::string message_of(flowlib::errc code, F&& f) {
  const flowlib::error e = error_of(std::forward<F>(f));
  CHECK(e.code() == code);
  return e.what();
}

inline bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

}  // namespace flowtest
