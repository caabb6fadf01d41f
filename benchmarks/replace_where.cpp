// REPLACE WHERE: one update of a 7-day window over a target that holds 365
// days, when one day of the source changed.
//
// What is measured (docs/benchmarks.md has the results):
//   full         flowlib::ReplaceWhere with incremental updates disabled: the
//                whole window is deleted (through the flow's side index),
//                recomputed from the source and inserted (7 days of rows);
//   incremental  the same flow with incremental updates: only the changed
//                day is deleted, recomputed and inserted; its source rows
//                are read through the source's value index on the date
//                column (MemorySource::locate, built by the first update),
//                not a scan;
//   baseline     a hand-written loop on the same storage doing what `full`
//                does: scan the source for the window's rows, recompute them,
//                erase the window's target rows through a hand-built
//                std::map<day, row ids>, insert the new rows and index them.
// Per iteration (timed): one update; before it (not timed) one day of the
// source is replaced (erase_where + append), so that the source reports it
// changed. items_per_second counts target rows deleted plus rows inserted;
// compare iteration times for the speed-up of `incremental` over `full`.
//
// The data: the target holds 365 days x R rows (R = 1e4 and 1e5 per day);
// the source holds the last 8 days (the window and one day before it), as a
// source with a short retention does (the target outlives it). The query is
// a projection that recomputes one column. The clock is fixed.
//
// FLOWLIB_BENCH_SMOKE=1: R = 50, and before the benchmarks run the three
// implementations, and the incremental flow reading the source by scans (a
// wrapper that hides the index), apply the same changes and must end with
// the same rows, the indexed flow having built and used the index; the
// program exits 1 otherwise.
#include <flowlib/flows/replace_where.hpp>
#include <flowlib/source/memory.hpp>
#include <flowlib/table.hpp>
#include <flowlib/where.hpp>

#include "support/smoke.hpp"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

namespace fl = flowlib;
namespace fb = flowlib_bench;
namespace w = flowlib::where;

namespace bench {

using Day = std::chrono::sys_days;

struct Fact {
  Day event_date;
  std::int64_t id = 0;
  std::int64_t value = 0;
  double amount = 0;
  friend auto operator<=>(const Fact&, const Fact&) = default;
};
FLOWLIB_SCHEMA(Fact, event_date, id, value, amount);

constexpr int days_held = 365;
constexpr int window_days = 7;
constexpr int today = days_held - 1;

inline Day day(int n) { return Day(std::chrono::year{2025} / std::chrono::January / 1) + std::chrono::days(n); }
inline w::context clock_now() { return w::context{w::timestamp_type(day(today)) + std::chrono::hours(12), 1}; }

inline std::vector<Fact> rows_of_day(int d, std::int64_t rows, std::int64_t generation) {
  std::vector<Fact> out;
  out.reserve(static_cast<std::size_t>(rows));
  for (std::int64_t i = 0; i < rows; ++i) {
    out.push_back({day(d), i, generation * 1000 + i % 97, static_cast<double>(i) * 0.5});
  }
  return out;
}

// The query: a projection that recomputes `value`.
inline std::vector<Fact> recompute(std::span<const Fact> in) {
  std::vector<Fact> out;
  out.reserve(in.size());
  for (const Fact& f : in) out.push_back({f.event_date, f.id, f.value + 1, f.amount});
  return out;
}

inline w::expr window_predicate() {
  return w::col("event_date") > w::current_date() - w::days(window_days);
}

/// A source holding the last 8 days and a target holding 365 days, and the
/// change applied before each update.
struct world {
  fl::MemorySource<Fact> source{"facts"};
  fl::StreamingTable<Fact> target{"facts_by_day"};
  std::int64_t rows_per_day;
  std::int64_t generation = 1;

  explicit world(std::int64_t r) : rows_per_day(r) {
    for (int d = today - window_days; d <= today; ++d) source.append(rows_of_day(d, r, 0));
    // The target's old days (the source no longer holds them).
    auto& store = target.store();
    store.reserve(static_cast<std::size_t>(r) * days_held);
    for (int d = 0; d < today - window_days + 1; ++d) {
      for (auto& f : recompute(rows_of_day(d, r, 0))) store.insert(std::move(f));
    }
  }
  /// Replaces today's rows of the source (one changed day).
  void change_one_day() {
    source.erase_where([](const Fact& f) { return f.event_date == day(today); });
    source.append(rows_of_day(today, rows_per_day, ++generation));
  }
};

/// The hand-written baseline: the window's rows erased through a hand-built
/// index, the recomputed ones inserted.
struct baseline {
  std::map<Day, std::vector<fl::row_id>> index;
  std::vector<Fact> read;

  explicit baseline(fl::StreamingTable<Fact>& t) {
    t.store().for_each_row([&](fl::row_id id, const Fact& f) { index[f.event_date].push_back(id); });
  }
  std::uint64_t update(fl::MemorySource<Fact>& source, fl::StreamingTable<Fact>& t) {
    const Day lo = day(today - window_days + 1), hi = day(today);
    read.clear();
    source.scan([&](const Fact& f) {
      if (f.event_date >= lo && f.event_date <= hi) read.push_back(f);
    });
    std::vector<Fact> out = recompute(read);
    auto& store = t.store();
    store.reserve(out.size());
    std::uint64_t n = 0;
    for (auto it = index.lower_bound(lo); it != index.end() && it->first <= hi;) {
      for (fl::row_id id : it->second) store.erase(id);
      n += it->second.size();
      it = index.erase(it);
    }
    for (Fact& f : out) {
      const Day d = f.event_date;
      index[d].push_back(store.insert(std::move(f)));
      ++n;
    }
    return n;
  }
};

std::int64_t rows_per_day(const benchmark::State& state) {
  return fb::smoke_mode() ? 50 : state.range(0);
}

void run_flow(benchmark::State& state, bool incremental) {
  world wd(rows_per_day(state));
  fl::ReplaceWhere flow{"facts_by_day", window_predicate(), fl::ReplaceWhereOptions{.incremental = incremental}};
  flow.apply(wd.target, clock_now(), recompute, wd.source);  // the first update: full
  std::uint64_t rows = 0;
  for (auto _ : state) {
    state.PauseTiming();
    wd.change_one_day();
    state.ResumeTiming();
    const fl::BatchStats s = flow.apply(wd.target, clock_now(), recompute, wd.source);
    rows += s.deleted_rows + s.inserted_rows;
  }
  if (incremental) fb::require(flow.last_plan().technique == fl::replace_where_technique::incremental &&
                                   flow.last_plan().slices == 1,
                               "the incremental flow reprocessed exactly the changed day");
  state.SetItemsProcessed(static_cast<std::int64_t>(rows));
  state.counters["target_rows"] = static_cast<double>(wd.target.size());
}

void BM_flowlib_full(benchmark::State& state) { run_flow(state, false); }
void BM_flowlib_incremental(benchmark::State& state) { run_flow(state, true); }

void BM_baseline_full(benchmark::State& state) {
  world wd(rows_per_day(state));
  baseline b(wd.target);
  b.update(wd.source, wd.target);
  std::uint64_t rows = 0;
  for (auto _ : state) {
    state.PauseTiming();
    wd.change_one_day();
    state.ResumeTiming();
    rows += b.update(wd.source, wd.target);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(rows));
  state.counters["target_rows"] = static_cast<double>(wd.target.size());
}

/// The source without its index: the flow scans it.
struct scan_only {
  using row_type = Fact;
  const fl::MemorySource<Fact>* s;
  std::uint64_t version() const { return s->version(); }
  std::optional<std::vector<w::value>> changed_values(std::string_view c, std::uint64_t since) const {
    return s->changed_values(c, since);
  }
  template <class F>
  std::uint64_t scan(F&& f) const {
    return s->scan(std::forward<F>(f));
  }
};
static_assert(fl::where_source<scan_only> && !fl::slice_indexed_source<scan_only>);

// Smoke mode: the four end with the same rows after the same changes.
void smoke_check() {
  world a(50), b(50), c(50), d(50);
  fl::ReplaceWhere full{"f", window_predicate(), fl::ReplaceWhereOptions{.incremental = false}};
  fl::ReplaceWhere inc{"i", window_predicate()};
  fl::ReplaceWhere inc_scan{"s", window_predicate()};
  baseline base(c.target);
  for (int i = 0; i < 4; ++i) {
    full.apply(a.target, clock_now(), recompute, a.source);
    inc.apply(b.target, clock_now(), recompute, b.source);
    base.update(c.source, c.target);
    inc_scan.apply(d.target, clock_now(), recompute, scan_only{&d.source});
    a.change_one_day();
    b.change_one_day();
    c.change_one_day();
    d.change_one_day();
  }
  const auto rows = a.target.sorted_all_rows();
  fb::require(rows == b.target.sorted_all_rows(), "incremental and full REPLACE WHERE agree");
  fb::require(rows == c.target.sorted_all_rows(), "REPLACE WHERE and the baseline agree");
  fb::require(rows == d.target.sorted_all_rows(), "reads through the index and by scans agree");
  fb::require(rows.size() == 365u * 50u, "the target holds 365 days");
  fb::require(b.source.has_value_index("event_date") && !a.source.has_value_index("event_date"),
              "the incremental flow built the source's index; the full one did not");
}

}  // namespace bench

// Fixed iteration counts: every iteration adds a day of rows to the source's
// log (erased rows keep their offsets), so the source grows with them.
BENCHMARK(bench::BM_flowlib_full)->Arg(10'000)->Arg(100'000)->Iterations(8)->Unit(benchmark::kMillisecond);
BENCHMARK(bench::BM_flowlib_incremental)->Arg(10'000)->Arg(100'000)->Iterations(8)->Unit(benchmark::kMillisecond);
BENCHMARK(bench::BM_baseline_full)->Arg(10'000)->Arg(100'000)->Iterations(8)->Unit(benchmark::kMillisecond);

int main(int argc, char** argv) {
  if (fb::smoke_mode()) bench::smoke_check();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
