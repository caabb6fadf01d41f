// tests/support/source_contract.hpp
//
// The `flowlib::source` contract (source/position.hpp) checked once, for
// every source: each source's program instantiates it with a harness that
// appends rows to the source's log (R-SOURCE-1; R-EXACT-1's replay). That
// positions advance only with a commit is a pipeline's part: each source's
// pipeline tests check it.
//
//   struct harness {
//     const S& source() const;                        // a fresh source
//     std::vector<std::uint32_t> partitions() const;  // the partitions appends go to
//     Row row(std::uint64_t n);                       // the n-th row, distinct from the others
//     void append(std::uint32_t partition, const std::vector<Row>& rows);  // may be empty
//     // Optional:
//     bool reads(std::uint32_t partition) const;      // false: the source does not read it
//     source_position plan_model(const source_position& from, const source_position& latest,
//                                std::size_t limit) const;  // how the source shares a limit
//     void after_batch(const source_position& read_to, std::mt19937_64& rng);  // e.g. retention
//   };
//   flowtest::check_source_contract(h, seed, {.steps = 12});
//
// Checked against a model of the rows appended to each partition read:
//   - a fresh source: start(), latest() and plan(start(), 0) are the empty
//     position, and a read of it appends nothing;
//   - latest(): each partition read at the count of rows appended to it,
//     no partition the source does not read;
//   - plan(from, limit), after latest() as a pipeline calls it:
//     deterministic, from <= end <= latest() in every partition, and
//     min(limit, available) rows (all of them for limit 0; none, the
//     position unchanged, when nothing is new), as plan_model() says when
//     given;
//   - read(from, to, out): appends to `out` the model's rows between the
//     positions, partition by partition (ascending), each in append order;
//     read again, the same rows; consecutive batches deliver each row once,
//     and a last plan with no limit reaches latest();
//   - replay: random ranges between start() and latest(), read after the
//     batches moved on, give the rows they held when appended;
//   - a range that ends before it starts is invalid_argument, and `out` is
//     as it was.
#pragma once

#include <flowlib/error.hpp>
#include <flowlib/source/position.hpp>

#include "support/errors.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <random>
#include <type_traits>
#include <utility>
#include <vector>

namespace flowtest {

/// How much a run of the suite does.
struct contract_sizes {
  int steps = 40;                    // rounds of an append (most rounds) and a batch
  std::size_t most_appended = 60;    // rows of one append, at most
  std::size_t most_limit = 40;       // a batch's row limit, at most (0, no limit, is drawn too)
  int replays = 20;                  // random ranges read again at the end
};

template <class H>
void check_source_contract(H& h, std::uint64_t seed, const contract_sizes& sizes = {}) {
  namespace fl = flowlib;
  const auto& s = h.source();
  using Row = typename std::remove_cvref_t<decltype(s)>::row_type;
  static_assert(fl::source<std::remove_cvref_t<decltype(s)>>);
  std::mt19937_64 rng(seed);

  const auto reads = [&](std::uint32_t p) {
    if constexpr (requires { h.reads(p); }) {
      return h.reads(p);
    } else {
      return true;
    }
  };
  std::map<std::uint32_t, std::vector<Row>> model;  // the rows appended to each partition read
  const std::vector<std::uint32_t> parts = h.partitions();
  REQUIRE(!parts.empty());
  for (const auto p : parts)
    if (reads(p)) model[p];
  const auto rows_between = [&](const fl::source_position& from, const fl::source_position& to) {
    std::vector<Row> out;
    for (const auto& [p, rows] : model)
      for (auto o = from.offset(p); o < to.offset(p); ++o) out.push_back(rows.at(o));
    return out;
  };
  const Row kept = h.row(0);  // in `out` before a read
  std::uint64_t next_row = 1;

  // A fresh source.
  const fl::source_position none{};
  CHECK(s.start() == none);
  CHECK(s.latest() == none);
  CHECK(s.plan(s.start(), 0) == none);
  std::vector<Row> out{kept};
  s.read(none, none, out);
  CHECK(out == std::vector<Row>{kept});

  fl::source_position at = s.start();
  for (int step = 0; step < sizes.steps; ++step) {
    CAPTURE(step);
    if (rng() % 4 != 0) {
      const auto p = parts[rng() % parts.size()];
      const std::size_t n = rng() % 5 == 0 ? 0 : rng() % (sizes.most_appended + 1);
      std::vector<Row> rows;
      for (std::size_t i = 0; i < n; ++i) rows.push_back(h.row(next_row++));
      h.append(p, rows);
      if (reads(p)) model[p].insert(model[p].end(), rows.begin(), rows.end());
    }

    const fl::source_position latest = s.latest();
    for (const auto& [p, rows] : model) CHECK(latest.offset(p) == rows.size());
    for (const auto& [p, o] : latest.partitions()) CHECK(model.count(p) == 1);

    const std::size_t limit = rng() % 4 == 0 ? 0 : 1 + rng() % sizes.most_limit;
    CAPTURE(limit);
    const fl::source_position to = s.plan(at, limit);
    CHECK(s.plan(at, limit) == to);  // deterministic
    std::uint64_t available = 0;
    for (const auto& [p, rows] : model) {
      CHECK(to.offset(p) >= at.offset(p));
      CHECK(to.offset(p) <= latest.offset(p));
      available += latest.offset(p) - at.offset(p);
    }
    CHECK(to.rows_after(at) == (limit == 0 ? available : std::min<std::uint64_t>(limit, available)));
    if constexpr (requires { h.plan_model(at, latest, limit); }) CHECK(to == h.plan_model(at, latest, limit));

    out = {kept};
    s.read(at, to, out);
    REQUIRE(!out.empty());
    CHECK(out.front() == kept);
    out.erase(out.begin());
    CHECK(out == rows_between(at, to));
    std::vector<Row> again;
    s.read(at, to, again);  // a replay reads the same rows
    CHECK(again == out);
    at = to;
    if constexpr (requires { h.after_batch(at, rng); }) h.after_batch(at, rng);
  }

  // Drain: the batches delivered every row once.
  const fl::source_position latest = s.latest();
  const fl::source_position end = s.plan(at, 0);
  CHECK(end == latest);
  out.clear();
  s.read(at, end, out);
  CHECK(out == rows_between(at, end));

  // Replays of random ranges still held, in any order.
  const fl::source_position start = s.start();
  for (int i = 0; i < sizes.replays; ++i) {
    fl::source_position from, to;
    for (const auto& [p, rows] : model) {
      const auto lo = start.offset(p), span = latest.offset(p) - lo + 1;
      auto a = lo + rng() % span, b = lo + rng() % span;
      if (a > b) std::swap(a, b);
      from.set(p, a);
      to.set(p, b);
    }
    CAPTURE(from.to_string());
    CAPTURE(to.to_string());
    out.clear();
    s.read(from, to, out);
    CHECK(out == rows_between(from, to));
  }

  // A range backwards.
  if (latest.rows_after(start) > 0) {
    out = {kept};
    CHECK(error_of([&] { s.read(latest, start, out); }).code() == fl::errc::invalid_argument);
    CHECK(out == std::vector<Row>{kept});
  }
}

}  // namespace flowtest
