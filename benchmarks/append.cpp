// Append flows: flowlib::Append::apply into a memory table against a
// hand-written std::vector push_back doing the same copies.
//
// What is measured (docs/benchmarks/append.md has the results): rows per
// second (`items_per_second`) of appending pre-generated batches of 1e4 and
// 1e5 rows, for three sources:
//   same      the table's own row type, with a short string (SSO) column
//             (its copy may throw: the store undoes a failed batch);
//   plain     the table's own row type, trivially copyable;
//   by_name   a source type whose columns are in another order and which
//             lacks the table's nullable `region` column (INSERT BY NAME
//             fills it with null).
// In all three flowlib reserves once and builds each row in its slot.
// and two scenarios:
//   batch     one batch into an emptied table (the table and the vector keep
//             their capacity; the clear runs with the timer paused): the
//             per-row cost of the flow itself;
//   growing   10 consecutive batches into a new table (construction timed,
//             for both): adds the storage's growth policy.
// Baselines, in the same binary:
//   vector    std::vector<Row>: reserve, then push_back(row) (same type) or
//             emplace_back(columns...) in place (by name, hand-mapped); in
//             the growing scenario plain push_back (geometric growth).
//
// Rates are per CPU second (no UseRealTime): the benchmark is single-threaded
// and CPU time is the steadier clock on a shared machine.
//
// FLOWLIB_BENCH_SMOKE=1: tiny sizes; before the benchmarks run, flowlib and
// the baseline append the same batches and must end with the same rows; the
// program exits 1 otherwise.
#include <flowlib/flows/append.hpp>
#include <flowlib/table.hpp>

#include "support/smoke.hpp"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

namespace fl = flowlib;
namespace fb = flowlib_bench;

namespace bench {

// --- Rows ---------------------------------------------------------------------

struct Event {
  std::int64_t id;
  std::int64_t value;
  std::string tag;  // short: fits the small-string buffer
  double amount;
  friend auto operator<=>(const Event&, const Event&) = default;
};
FLOWLIB_SCHEMA(Event, id, value, tag, amount);

struct Plain {
  std::int64_t id;
  std::int64_t value;
  std::int64_t ts;
  double amount;
  friend auto operator<=>(const Plain&, const Plain&) = default;
};

// The by-name case: the table's row has a nullable column the source lacks.
struct Wide {
  std::int64_t id;
  std::int64_t value;
  std::string tag;
  double amount;
  std::optional<std::int64_t> region;
  friend auto operator<=>(const Wide&, const Wide&) = default;
};
FLOWLIB_SCHEMA(Wide, id, value, tag, amount, region);

struct Narrow {  // columns in another order, no `region`
  std::string tag;
  std::int64_t id;
  double amount;
  std::int64_t value;
};
FLOWLIB_SCHEMA(Narrow, tag, id, amount, value);

// --- Data -----------------------------------------------------------------------

template <class Src>
std::vector<Src> make_batch(std::size_t n, std::uint64_t seed);

template <>
std::vector<Event> make_batch<Event>(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 g(seed);
  std::vector<Event> out;
  out.reserve(n);
  for (std::size_t i = 0; i < n; ++i)
    out.push_back({static_cast<std::int64_t>(g() % 1000000), static_cast<std::int64_t>(g() % 1000),
                   "tag" + std::to_string(g() % 100), static_cast<double>(g() % 10000) / 100});
  return out;
}
template <>
std::vector<Plain> make_batch<Plain>(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 g(seed);
  std::vector<Plain> out;
  out.reserve(n);
  for (std::size_t i = 0; i < n; ++i)
    out.push_back({static_cast<std::int64_t>(g() % 1000000), static_cast<std::int64_t>(g() % 1000),
                   static_cast<std::int64_t>(i), static_cast<double>(g() % 10000) / 100});
  return out;
}
template <>
std::vector<Narrow> make_batch<Narrow>(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 g(seed);
  std::vector<Narrow> out;
  out.reserve(n);
  for (std::size_t i = 0; i < n; ++i)
    out.push_back({"tag" + std::to_string(g() % 100), static_cast<std::int64_t>(g() % 1000000),
                   static_cast<double>(g() % 10000) / 100, static_cast<std::int64_t>(g() % 1000)});
  return out;
}

// --- Cases: source type -> table row type, and the baseline's copy ---------------

struct same_case {
  using source = Event;
  using row = Event;
  static constexpr const char* name = "same";
  static void push(std::vector<row>& out, const source& s) { out.push_back(s); }
};
struct plain_case {
  using source = Plain;
  using row = Plain;
  static constexpr const char* name = "plain";
  static void push(std::vector<row>& out, const source& s) { out.push_back(s); }
};
struct by_name_case {
  using source = Narrow;
  using row = Wide;
  static constexpr const char* name = "by_name";
  static void push(std::vector<row>& out, const source& s) {
    out.emplace_back(s.id, s.value, s.tag, s.amount, std::nullopt);
  }
};

// --- Implementations --------------------------------------------------------------

template <class Case>
struct flowlib_impl {
  static constexpr const char* name = "flowlib";
  fl::ManagedTable<typename Case::row> table{"t"};
  fl::Append<> flow{"f"};
  void append(const std::vector<typename Case::source>& batch) { flow.apply(table, batch); }
  void clear() { table.store().clear(); }
  std::size_t size() const { return table.size(); }
  std::vector<typename Case::row> rows() const { return table.sorted_all_rows(); }
};

template <class Case>
struct vector_impl {
  static constexpr const char* name = "vector";
  std::vector<typename Case::row> out;
  bool reserve = true;
  void append(const std::vector<typename Case::source>& batch) {
    if (reserve) out.reserve(out.size() + batch.size());
    for (const auto& s : batch) Case::push(out, s);
  }
  void clear() { out.clear(); }
  std::size_t size() const { return out.size(); }
  std::vector<typename Case::row> rows() const {
    auto r = out;
    std::sort(r.begin(), r.end());
    return r;
  }
};

// --- Benchmarks -------------------------------------------------------------------

constexpr std::size_t growing_batches = 10;

template <class Impl, class Case>
void bm_batch(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const auto batch = make_batch<typename Case::source>(n, 42);
  Impl impl;
  impl.append(batch);  // warm: capacity for one batch
  for (auto _ : state) {
    state.PauseTiming();
    impl.clear();
    state.ResumeTiming();
    impl.append(batch);
    benchmark::DoNotOptimize(impl.size());
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * n));
}

template <class Impl, class Case>
void bm_growing(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  std::vector<std::vector<typename Case::source>> batches;
  for (std::size_t b = 0; b < growing_batches; ++b)
    batches.push_back(make_batch<typename Case::source>(n, 100 + b));
  for (auto _ : state) {
    Impl impl;
    if constexpr (requires { impl.reserve; }) impl.reserve = false;  // geometric growth
    for (const auto& b : batches) impl.append(b);
    benchmark::DoNotOptimize(impl.size());
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * n * growing_batches));
}

std::vector<std::int64_t> sizes() {
  return fb::smoke_mode() ? std::vector<std::int64_t>{100, 1000}
                          : std::vector<std::int64_t>{10000, 100000};
}

// Smoke check: both implementations end with the same rows, in both scenarios.
template <class Case>
void check_case() {
  for (std::int64_t n : sizes()) {
    flowlib_impl<Case> a;
    vector_impl<Case> b;
    vector_impl<Case> c;
    c.reserve = false;
    for (std::size_t i = 0; i < 3; ++i) {
      const auto batch = make_batch<typename Case::source>(static_cast<std::size_t>(n), 7 + i);
      a.append(batch);
      b.append(batch);
      c.append(batch);
    }
    fb::require(a.size() == static_cast<std::size_t>(3 * n), "flowlib appended every row");
    fb::require(a.rows() == b.rows(), "flowlib and vector agree");
    fb::require(b.rows() == c.rows(), "vector with and without reserve agree");
    a.clear();
    fb::require(a.size() == 0, "cleared");
  }
}

template <class Case>
void register_case() {
  for (std::int64_t n : sizes()) {
    for (const char* scenario : {"batch", "growing"}) {
      const bool batch = std::string(scenario) == "batch";
      const auto reg = [&](const char* impl, auto fn) {
        benchmark::RegisterBenchmark(
            ("append/" + std::string(Case::name) + "/" + scenario + "/" + impl).c_str(), fn)
            ->Arg(n)
            ->ArgName("rows")
            ->Unit(benchmark::kMicrosecond);
      };
      if (batch) {
        reg("flowlib", bm_batch<flowlib_impl<Case>, Case>);
        reg("vector", bm_batch<vector_impl<Case>, Case>);
      } else {
        reg("flowlib", bm_growing<flowlib_impl<Case>, Case>);
        reg("vector", bm_growing<vector_impl<Case>, Case>);
      }
    }
  }
}

}  // namespace bench

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  if (fb::smoke_mode()) {
    bench::check_case<bench::same_case>();
    bench::check_case<bench::plain_case>();
    bench::check_case<bench::by_name_case>();
    std::printf("smoke checks passed: flowlib and vector agree\n");
  }
  bench::register_case<bench::same_case>();
  bench::register_case<bench::plain_case>();
  bench::register_case<bench::by_name_case>();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
