// Evaluating REPLACE WHERE predicates (flowlib/where.hpp) on rows: a bound
// where::expr against the same condition hand-written in C++ (the baseline
// a compiled query would reach), for the predicate shapes REPLACE WHERE
// scans and deletes with: a moving lower bound on a date, the same with a
// second condition, BETWEEN, IN, and a null-aware comparison on an optional
// column. items_per_second is rows evaluated per second. In smoke mode
// (FLOWLIB_BENCH_SMOKE=1) the sizes are tiny and every pair must select the
// same number of rows.
#include <flowlib/where.hpp>

#include "support/smoke.hpp"

#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace flowlib_bench_where {

struct Event {
  std::chrono::sys_days event_date;
  std::string region;
  std::int64_t qty;
  std::optional<double> price;
};
FLOWLIB_SCHEMA(Event, event_date, region, qty, price);

}  // namespace flowlib_bench_where

namespace {

namespace w = flowlib::where;
using flowlib_bench_where::Event;

const std::chrono::sys_days today{std::chrono::days(20'000)};

const std::vector<Event>& rows() {
  static const std::vector<Event> r = [] {
    const std::size_t n = flowlib_bench::smoke_mode() ? 2'000 : 1'000'000;
    const char* regions[] = {"asia", "emea", "amer", "apac-south"};
    std::vector<Event> v;
    v.reserve(n);
    std::uint64_t x = 88172645463325252ULL;
    for (std::size_t i = 0; i < n; ++i) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      v.push_back(Event{today - std::chrono::days(x % 365), regions[(x >> 9) % 4],
                        static_cast<std::int64_t>((x >> 20) % 100),
                        (x >> 30) % 5 == 0 ? std::nullopt : std::optional<double>((x >> 33) % 1000 / 10.0)});
    }
    return v;
  }();
  return r;
}

const w::context ctx{w::timestamp_type(today) + std::chrono::hours(10)};

// Runs `pred` over every row; returns the number of matches.
template <class Pred>
std::size_t run(benchmark::State& state, const Pred& pred) {
  const auto& r = rows();
  std::size_t matched = 0;
  for (auto _ : state) {
    matched = 0;
    for (const Event& e : r) matched += pred(e) ? 1 : 0;
    benchmark::DoNotOptimize(matched);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * r.size()));
  state.counters["matched"] = static_cast<double>(matched);
  return matched;
}

// Each case: an expression and its hand-written equivalent (inlined into
// the baseline's loop, as a compiled query would be). The smoke check
// compares their counts.
struct DateGe {
  static w::expr expression() { return w::col("event_date") >= w::current_date() - w::days(7); }
  static bool hand(const Event& e) { return e.event_date >= today - std::chrono::days(7); }
};
struct DateGeAndRegion {
  static w::expr expression() {
    return w::col("event_date") >= w::current_date() - w::days(30) && w::col("region") == "emea";
  }
  static bool hand(const Event& e) {
    return e.event_date >= today - std::chrono::days(30) && e.region == "emea";
  }
};
struct Between {
  static w::expr expression() {
    return w::col("event_date").between(w::current_date() - w::days(7), w::current_date());
  }
  static bool hand(const Event& e) {
    return e.event_date >= today - std::chrono::days(7) && e.event_date <= today;
  }
};
struct In {
  static w::expr expression() { return w::col("region").in({"asia", "apac-south"}); }
  static bool hand(const Event& e) { return e.region == "asia" || e.region == "apac-south"; }
};
struct OptionalGt {
  static w::expr expression() { return w::col("price") > 50; }
  static bool hand(const Event& e) { return e.price && *e.price > 50; }
};

template <class C>
void BM_where(benchmark::State& state) {
  const auto b = w::bind<Event>(C::expression(), ctx);
  const std::size_t got = run(state, b);
  if (flowlib_bench::smoke_mode()) {
    std::size_t want = 0;
    for (const Event& e : rows()) want += C::hand(e) ? 1 : 0;
    flowlib_bench::require(got == want, C::expression().to_string());
  }
}

template <class C>
void BM_hand(benchmark::State& state) {
  run(state, [](const Event& e) { return C::hand(e); });
}

BENCHMARK(BM_where<DateGe>);
BENCHMARK(BM_hand<DateGe>);
BENCHMARK(BM_where<DateGeAndRegion>);
BENCHMARK(BM_hand<DateGeAndRegion>);
BENCHMARK(BM_where<Between>);
BENCHMARK(BM_hand<Between>);
BENCHMARK(BM_where<In>);
BENCHMARK(BM_hand<In>);
BENCHMARK(BM_where<OptionalGt>);
BENCHMARK(BM_hand<OptionalGt>);

}  // namespace

BENCHMARK_MAIN();
