// MemorySource's value index (source/memory.hpp, "Reading by value"): the
// locations locate() gives, and the rows read_located() visits, against a
// model of per-partition logs over random appends (append, bulk append,
// append_to), erase_where and discard_before on several partitions and
// seeds, for columns of several kinds (a date, an integer, a double with
// NaN and -0.0, a nullable integer, a string), indexes built at different
// moments and dropped; every look-up equals a filtered scan, in scan order.
// Also: the index is built only by a look-up, stale locations are skipped,
// bad locations are refused, and producers appending while a reader looks
// up.
#include <flowlib/flows/where/sources.hpp>
#include <flowlib/source/memory.hpp>
#include <flowlib/where.hpp>

#include <doctest/doctest.h>

#include "support/errors.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

namespace where_value_index {

namespace fl = flowlib;
namespace w = flowlib::where;

using Day = std::chrono::sys_days;
inline Day day(int n) { return Day(std::chrono::year{2026} / std::chrono::January / 1) + std::chrono::days(n); }

struct Row {
  Day event_date;
  std::int64_t key = 0;
  double score = 0;
  std::optional<std::int64_t> maybe;
  std::string region;
  std::uint64_t seq = 0;  // unique per appended row: identifies it
};
FLOWLIB_SCHEMA(Row, event_date, key, score, maybe, region, seq);

bool same_row(const Row& a, const Row& b) { return a.seq == b.seq; }

const char* const columns[] = {"event_date", "key", "score", "maybe", "region"};

// The index's equality: where::value's structural one, all NaNs one value.
bool matches(const w::value& a, const w::value& b) {
  if (a.type() == w::kind::float64 && b.type() == w::kind::float64 && std::isnan(a.as_double()) &&
      std::isnan(b.as_double()))
    return true;
  return a == b;
}

// Per partition, every row ever appended, and whether it is still held.
struct Model {
  struct Slot {
    Row row;
    bool held = true;
  };
  std::vector<std::vector<Slot>> parts;
  std::vector<std::uint64_t> start;
  explicit Model(std::uint32_t n) : parts(n), start(n, 0) {}

  template <class Keep>
  std::vector<fl::row_location> where(Keep&& keep) const {
    std::vector<fl::row_location> out;
    for (std::uint32_t p = 0; p < parts.size(); ++p)
      for (std::uint64_t o = start[p]; o < parts[p].size(); ++o)
        if (parts[p][o].held && keep(parts[p][o].row)) out.push_back({p, o});
    return out;
  }
};

struct Gen {
  std::mt19937 rng;
  std::uint64_t seq = 0;
  explicit Gen(std::uint32_t seed) : rng(seed) {}
  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); }
  double score() {
    switch (pick(0, 7)) {
      case 0: return std::numeric_limits<double>::quiet_NaN();
      case 1: return -0.0;
      case 2: return 0.0;
      default: return pick(0, 4) * 0.5;
    }
  }
  Row row() {
    Row r;
    r.event_date = day(pick(0, 9));
    r.key = pick(-3, 3);
    r.score = score();
    if (pick(0, 3) != 0) r.maybe = pick(0, 2);
    r.region = std::string("r") + std::to_string(pick(0, 3));
    r.seq = ++seq;
    return r;
  }
  // A value to look up in `column`: mostly one a row may hold, sometimes
  // one no row holds, null, or a value of another kind.
  w::value value(const std::string& column) {
    const int k = pick(0, 11);
    if (k == 0) return w::value{};
    if (k == 1) return w::value(std::string("zz"));  // no row holds it (or another kind)
    if (k == 2) return w::value(std::int64_t{99});
    const Row r = row();
    --seq;
    return w::column_value(r, column);
  }
};

// Checks every look-up the source answers against the model and a scan.
void check_lookups(const fl::MemorySource<Row>& src, const Model& m, Gen& g, const std::string& column) {
  std::vector<w::value> values;
  const int n = g.pick(0, 4);
  for (int i = 0; i < n; ++i) values.push_back(g.value(column));
  if (n > 1 && g.pick(0, 2) == 0) values.push_back(values.front());  // a duplicate
  const auto keep = [&](const Row& r) {
    const w::value v = w::column_value(r, column);
    return std::any_of(values.begin(), values.end(), [&](const w::value& x) { return matches(v, x); });
  };
  auto at = src.locate(column, values);
  REQUIRE(at.has_value());
  CHECK(*at == m.where(keep));
  // The rows read through the locations are a filtered scan's, in order.
  std::vector<Row> scanned, located;
  src.scan([&](const Row& r) {
    if (keep(r)) scanned.push_back(r);
  });
  const std::uint64_t visited = src.read_located(*at, [&](const Row& r) { located.push_back(r); });
  CHECK(visited == located.size());
  REQUIRE(located.size() == scanned.size());
  CHECK(std::equal(located.begin(), located.end(), scanned.begin(), same_row));

  // A range of the column: window::contains, SQL comparison.
  const w::value lo = g.value(column), hi = g.value(column);
  std::optional<w::endpoint> lower, upper;
  if (g.pick(0, 3) != 0) lower = w::endpoint{lo, g.pick(0, 1) == 0};
  if (g.pick(0, 3) != 0) upper = w::endpoint{hi, g.pick(0, 1) == 0};
  const w::window range(column, lower, upper);
  auto in_range = src.locate(range);
  REQUIRE(in_range.has_value());
  INFO("range " << range.to_string());
  CHECK(*in_range == m.where([&](const Row& r) { return range.contains(w::column_value(r, column)); }));
}

TEST_CASE("memory source index: look-ups equal a filtered scan over random appends, erasures and retention") {
  std::uint64_t found = 0;
  for (std::uint32_t seed = 1; seed <= 12; ++seed) {
    Gen g(seed);
    const std::uint32_t partitions = 1 + seed % 3;
    fl::MemorySource<Row> src("rows", {.partitions = partitions});
    Model m(partitions);
    const auto append_to = [&](std::uint32_t p, const Row& r) {
      m.parts[p].push_back({r, true});
      if (p == 0 && g.pick(0, 1) == 0) src.append(r);
      else src.append_to(p, r);
    };
    for (int step = 0; step < 160; ++step) {
      INFO("seed " << seed << " step " << step);
      switch (g.pick(0, 9)) {
        case 0:
        case 1:
        case 2: append_to(static_cast<std::uint32_t>(g.pick(0, static_cast<int>(partitions) - 1)), g.row()); break;
        case 3: {  // a run of one day's rows, in one call
          std::vector<Row> rows;
          const Day d = day(g.pick(0, 9));
          for (int i = g.pick(0, 40); i > 0; --i) {
            rows.push_back(g.row());
            rows.back().event_date = d;
          }
          for (const Row& r : rows) m.parts[0].push_back({r, true});
          src.append(rows);
          break;
        }
        case 4: {  // corrections by value
          const Day d = day(g.pick(0, 9));
          const std::int64_t k = g.pick(-3, 3);
          const auto pred = [&](const Row& r) { return r.event_date == d || r.key == k; };
          std::uint64_t n = 0;
          for (std::uint32_t p = 0; p < partitions; ++p)
            for (std::uint64_t o = m.start[p]; o < m.parts[p].size(); ++o)
              if (m.parts[p][o].held && pred(m.parts[p][o].row)) {
                m.parts[p][o].held = false;
                ++n;
              }
          CHECK(src.erase_where(pred) == n);
          break;
        }
        case 5: {  // retention
          fl::source_position to;
          for (std::uint32_t p = 0; p < partitions; ++p) {
            const auto end = m.parts[p].size();
            const auto at = std::max<std::uint64_t>(m.start[p], end - std::min<std::uint64_t>(end, g.pick(0, 30)));
            to.set(p, at);
            m.start[p] = std::max(m.start[p], at);
          }
          src.discard_before(to);
          break;
        }
        case 6:
          if (g.pick(0, 5) == 0) src.drop_value_index(columns[g.pick(0, 4)]);
          break;
        default: {
          const std::string column = columns[g.pick(0, 4)];
          check_lookups(src, m, g, column);
          found += m.where([](const Row&) { return true; }).size();
          break;
        }
      }
    }
    for (const char* column : columns) check_lookups(src, m, g, column);
  }
  CHECK(found > 1000);  // the look-ups ran over sources holding rows
}

TEST_CASE("memory source index: built by the first look-up only; unknown columns give nullopt") {
  fl::MemorySource<Row> src("rows", {.partitions = 2});
  Gen g(7);
  for (int i = 0; i < 50; ++i) src.append_to(static_cast<std::uint32_t>(i % 2), g.row());
  src.erase_where([](const Row& r) { return r.key == 0; });
  CHECK_FALSE(src.has_value_index("event_date"));
  CHECK_FALSE(src.has_value_index("key"));
  const std::vector<w::value> d3{w::value(day(3))};
  const auto at = src.locate("event_date", d3);
  REQUIRE(at.has_value());
  CHECK(src.has_value_index("event_date"));
  CHECK_FALSE(src.has_value_index("key"));
  CHECK(std::is_sorted(at->begin(), at->end()));
  CHECK_FALSE(src.locate("no_such_column", d3).has_value());
  CHECK_FALSE(src.locate(w::window("no_such_column", std::nullopt, std::nullopt)).has_value());
  CHECK_FALSE(src.has_value_index("no_such_column"));
  CHECK(src.build_value_index("key"));
  CHECK(src.has_value_index("key"));
  CHECK_FALSE(src.build_value_index("no_such_column"));
  src.drop_value_index("event_date");
  CHECK_FALSE(src.has_value_index("event_date"));
  CHECK(src.locate("event_date", d3) == at);  // rebuilt, same answer
}

// A row type without a schema has no look-ups; one with a schema makes the
// source a slice_indexed_source (the REPLACE WHERE flow's hook).
template <class S>
concept can_locate = requires(const S& s) { s.locate("x", std::span<const w::value>{}); };
static_assert(!can_locate<fl::MemorySource<int>>);
static_assert(can_locate<fl::MemorySource<Row>>);
static_assert(fl::slice_indexed_source<fl::MemorySource<Row>>);

TEST_CASE("memory source index: stale locations are skipped, bad ones refused before any row is visited") {
  fl::MemorySource<Row> src("rows", {.partitions = 2});
  Gen g(3);
  for (int i = 0; i < 4000; ++i) {  // several chunks per partition
    Row r = g.row();
    r.event_date = day(i % 4);
    src.append_to(static_cast<std::uint32_t>(i % 2), r);
  }
  const std::vector<w::value> d1{w::value(day(1))};
  const auto at = src.locate("event_date", d1);
  REQUIRE(at.has_value());
  REQUIRE(at->size() == 1000);
  // Erase half of day 1 and discard the first 1000 rows of partition 1.
  src.erase_where([](const Row& r) { return r.event_date == day(1) && r.seq % 4 == 2; });
  fl::source_position keep;
  keep.set(1, 1000);
  src.discard_before(keep);
  std::vector<Row> now, scanned;
  const std::uint64_t visited_now = src.read_located(*at, [&](const Row& r) { now.push_back(r); });
  CHECK(visited_now == now.size());
  src.scan([&](const Row& r) {
    if (r.event_date == day(1)) scanned.push_back(r);
  });
  REQUIRE(now.size() == scanned.size());
  CHECK(std::equal(now.begin(), now.end(), scanned.begin(), same_row));
  CHECK(now.size() < 1000);
  CHECK(src.locate("event_date", d1)->size() == now.size());

  std::size_t visited = 0;
  const auto count = [&](const Row&) { ++visited; };
  const std::vector<fl::row_location> bad_partition{{0, 0}, {2, 0}};
  CHECK_THROWS_AS(src.read_located(bad_partition, count), fl::error);
  const std::vector<fl::row_location> bad_offset{{0, 0}, {0, 2000}};
  CHECK(flowtest::contains(flowtest::message_of(fl::errc::invalid_argument, [&] { src.read_located(bad_offset, count); }),
                           "offset 2000 of partition 0"));
  CHECK(visited == 0);
}

TEST_CASE("memory source index: producers append while a reader looks up and erases") {
  fl::MemorySource<Row> src("rows", {.partitions = 2});
  std::atomic<int> done{0};
  std::atomic<std::uint64_t> seq{0};
  const auto produce = [&](std::uint32_t p) {
    std::mt19937 rng(p + 1);
    for (int i = 0; i < 20000; ++i) {
      Row r;
      r.event_date = day(static_cast<int>(rng() % 5));
      r.seq = ++seq;
      src.append_to(p, r);
    }
    done.fetch_add(1);
  };
  const std::vector<w::value> d2{w::value(day(2))};
  CHECK(src.build_value_index("event_date"));
  std::thread a(produce, 0u), b(produce, 1u);
  std::uint64_t wrong = 0;
  do {
    const auto at = src.locate("event_date", d2);
    REQUIRE(at.has_value());
    CHECK(std::is_sorted(at->begin(), at->end()));
    src.read_located(*at, [&](const Row& r) { wrong += r.event_date != day(2); });
    src.erase_where([](const Row& r) { return r.seq % 97 == 0; });
  } while (done.load() < 2);
  a.join();
  b.join();
  CHECK(wrong == 0);
  std::vector<Row> located, scanned;
  src.read_located(*src.locate("event_date", d2), [&](const Row& r) { located.push_back(r); });
  src.scan([&](const Row& r) {
    if (r.event_date == day(2)) scanned.push_back(r);
  });
  REQUIRE(located.size() == scanned.size());
  CHECK(std::equal(located.begin(), located.end(), scanned.begin(), same_row));
  CHECK(located.size() > 5000);
}

}  // namespace where_value_index
