// REPLACE WHERE reading its sources through MemorySource's value index
// (flows/where/detail/read.hpp, slice_indexed_source) against the same flow
// reading them by scans (a wrapper source that hides the index): on random
// histories (several seeds and predicate shapes, appends to several
// partitions in random batches, erasures, retention, a dimension changing,
// the clock moving) the targets, the plans and the statistics are the same
// after every update, for incremental flows and for complete recomputes,
// and both index paths (an update's slices; a recompute's window) were
// taken. Also: a source whose slice column is of another kind than the
// slices looked up (timestamps among dates) and a nullable slice column.
#include <flowlib/flows/replace_where.hpp>
#include <flowlib/source/memory.hpp>
#include <flowlib/table.hpp>
#include <flowlib/where.hpp>

#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace where_replace_where_index {

namespace fl = flowlib;
namespace w = flowlib::where;

using Day = std::chrono::sys_days;
inline Day day(int n) { return Day(std::chrono::year{2026} / std::chrono::January / 1) + std::chrono::days(n); }
inline w::context at(int n) { return w::context{w::timestamp_type(day(n)) + std::chrono::hours(12), 3}; }

struct Event {
  Day event_date;
  std::int64_t user_id = 0;
  std::int64_t amount = 0;
};
FLOWLIB_SCHEMA(Event, event_date, user_id, amount);

struct User {
  std::int64_t user_id = 0;
  std::string region;
};
FLOWLIB_SCHEMA(User, user_id, region);

struct RegionDay {
  Day event_date;
  std::string region;
  std::int64_t amount = 0;
  std::int64_t events = 0;
  std::int64_t first = 0;
  friend bool operator==(const RegionDay&, const RegionDay&) = default;
  friend auto operator<=>(const RegionDay&, const RegionDay&) = default;
};
FLOWLIB_SCHEMA(RegionDay, event_date, region, amount, events, first);

// Per day and region: the sum, the count, and the amount of the first event
// in the order the rows came, so that reading them in another order than a
// scan's would show.
inline std::vector<RegionDay> by_region(std::span<const Event> es, std::span<const User> us) {
  std::map<std::int64_t, std::string> region;
  for (const auto& u : us) region[u.user_id] = u.region;  // the last row of a user wins
  std::map<std::pair<Day, std::string>, RegionDay> m;
  for (const auto& e : es) {
    auto it = region.find(e.user_id);
    const std::string r = it == region.end() ? std::string("unknown") : it->second;
    RegionDay& out = m[{e.event_date, r}];
    if (out.events == 0) out.first = e.amount;
    out.event_date = e.event_date;
    out.region = r;
    out.amount += e.amount;
    out.events += 1;
  }
  std::vector<RegionDay> out;
  for (auto& [k, v] : m) out.push_back(v);
  return out;
}

/// A where_source that forwards to a MemorySource but offers no index: the
/// flow scans it.
template <class Row>
struct scan_only {
  using row_type = Row;
  const fl::MemorySource<Row>* s;
  std::uint64_t version() const { return s->version(); }
  std::optional<std::vector<w::value>> changed_values(std::string_view c, std::uint64_t since) const {
    return s->changed_values(c, since);
  }
  template <class F>
  std::uint64_t scan(F&& f) const {
    return s->scan(std::forward<F>(f));
  }
};

/// A slice_indexed_source that forwards to a MemorySource and counts the
/// index reads, so that the test knows both paths were taken.
template <class Row>
struct counting : scan_only<Row> {
  using scan_only<Row>::s;
  mutable std::uint64_t by_values = 0, by_window = 0, rows_located = 0;
  auto locate(std::string_view c, std::span<const w::value> v) const {
    ++by_values;
    return s->locate(c, v);
  }
  auto locate(const w::window& r) const {
    ++by_window;
    return s->locate(r);
  }
  template <class F>
  std::uint64_t read_located(std::span<const fl::row_location> a, F&& f) const {
    rows_located += a.size();
    return s->read_located(a, std::forward<F>(f));
  }
  bool has_value_index(std::string_view c) const { return s->has_value_index(c); }
  std::uint64_t size() const { return s->size(); }
};

static_assert(fl::where_source<scan_only<Event>> && !fl::slice_indexed_source<scan_only<Event>>);
static_assert(fl::slice_indexed_source<counting<Event>>);

bool same_plan(const fl::ReplaceWherePlan& a, const fl::ReplaceWherePlan& b) {
  return a.technique == b.technique && a.reason == b.reason && a.slices == b.slices &&
         a.all_slices == b.all_slices && a.rows_outside_predicate == b.rows_outside_predicate &&
         a.window == b.window && a.predicate == b.predicate;
}

bool same_stats(const fl::BatchStats& a, const fl::BatchStats& b) {
  return a.input_rows == b.input_rows && a.inserted_rows == b.inserted_rows &&
         a.deleted_rows == b.deleted_rows && a.dropped_rows == b.dropped_rows;
}

TEST_CASE("R-WHERE-7/R-WHERE-1: reads through the source's index give the targets, plans and stats scans give") {
  std::uint64_t incremental = 0, recomputes = 0, by_values = 0, by_window = 0, located = 0;
  for (std::uint32_t seed = 1; seed <= 24; ++seed) {
    std::mt19937 rng(seed);
    const auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    const int shape = static_cast<int>(seed % 4);
    const w::expr pred =
        shape == 0   ? w::col("event_date") >= w::current_date() - w::days(3)
        : shape == 1 ? w::col("event_date").between(w::current_date() - w::days(4), w::current_date())
        : shape == 2 ? (w::col("event_date") > w::current_date() - w::days(5) &&
                        w::col("event_date") <= w::current_date() + w::days(1))
                     : w::col("event_date") >= w::current_date() - w::days(12);
    const std::uint32_t partitions = 1 + seed % 3;
    fl::MemorySource<Event> fact("fact", {.partitions = partitions});
    fl::MemorySource<User> users("users");
    for (int u = 0; u < 4; ++u) users.append(User{u, "r" + std::to_string(u % 2)});
    counting<Event> fact_ix{&fact};
    counting<User> users_ix{&users};
    const scan_only<Event> fact_scan{&fact};
    const scan_only<User> users_scan{&users};

    // Incremental and recomputing flows, each reading through the index and
    // by scans.
    struct side {
      fl::StreamingTable<RegionDay> table;
      fl::ReplaceWhere<> flow;
      side(const char* name, const w::expr& p, bool inc)
          : table(name), flow(name, p, fl::ReplaceWhereOptions{.incremental = inc}) {}
    };
    side inc_ix("inc_ix", pred, true), inc_scan("inc_scan", pred, true);
    side full_ix("full_ix", pred, false), full_scan("full_scan", pred, false);

    // A long history, most of it outside the window: a recompute's window
    // holds few of the source's rows.
    int today = 30;
    for (int d = 0; d <= today; ++d) {
      std::vector<Event> rows;
      for (int i = pick(0, 6); i > 0; --i) rows.push_back(Event{day(d), pick(0, 5), pick(1, 9)});
      fact.append(rows);
    }
    for (int step = 0; step < 40; ++step) {
      const int ops = pick(0, 5);
      for (int k = 0; k < ops; ++k) {
        switch (pick(0, 7)) {
          case 0:
          case 1: {
            const auto p = static_cast<std::uint32_t>(pick(0, static_cast<int>(partitions) - 1));
            fact.append_to(p, Event{day(today + pick(-14, 1)), pick(0, 5), pick(1, 9)});
            break;
          }
          case 2: {  // a batch of one day's rows
            std::vector<Event> rows;
            const Day d = day(today + pick(-6, 1));
            for (int i = pick(1, 30); i > 0; --i) rows.push_back(Event{d, pick(0, 5), pick(1, 9)});
            fact.append(rows);
            break;
          }
          case 3: {
            const Day d = day(today + pick(-8, 0));
            const int parity = pick(0, 1);
            fact.erase_where([&](const Event& e) { return e.event_date == d && e.user_id % 2 == parity; });
            break;
          }
          case 4: {  // retention: the oldest rows of each partition
            fl::source_position to = fact.start();
            const fl::source_position end = fact.latest();
            for (std::uint32_t p = 0; p < partitions; ++p)
              to.set(p, std::min(end.offset(p), to.offset(p) + static_cast<std::uint64_t>(pick(0, 8))));
            fact.discard_before(to);
            break;
          }
          case 5: users.append(User{pick(0, 5), "r" + std::to_string(pick(0, 2))}); break;
          default: today += pick(0, 1); break;
        }
      }
      INFO("seed " << seed << " step " << step << " predicate " << pred.to_string());
      const w::context now = at(today);
      const fl::BatchStats a = inc_ix.flow.apply(inc_ix.table, now, by_region, fact_ix, users_ix);
      const fl::BatchStats b = inc_scan.flow.apply(inc_scan.table, now, by_region, fact_scan, users_scan);
      const fl::BatchStats c = full_ix.flow.apply(full_ix.table, now, by_region, fact_ix, users_ix);
      const fl::BatchStats d = full_scan.flow.apply(full_scan.table, now, by_region, fact_scan, users_scan);
      REQUIRE(inc_ix.table.sorted_all_rows() == inc_scan.table.sorted_all_rows());
      REQUIRE(full_ix.table.sorted_all_rows() == full_scan.table.sorted_all_rows());
      // The query keeps slices apart: incremental updates equal recomputes.
      REQUIRE(inc_ix.table.sorted_all_rows() == full_ix.table.sorted_all_rows());
      CHECK(same_plan(inc_ix.flow.last_plan(), inc_scan.flow.last_plan()));
      CHECK(same_plan(full_ix.flow.last_plan(), full_scan.flow.last_plan()));
      CHECK(same_stats(a, b));
      CHECK(same_stats(c, d));
      incremental += inc_ix.flow.last_plan().technique == fl::replace_where_technique::incremental;
      ++recomputes;
    }
    by_values += fact_ix.by_values;
    by_window += fact_ix.by_window;
    located += fact_ix.rows_located;
    CHECK(users_ix.by_values + users_ix.by_window == 0);  // a dimension has no slice column
  }
  // Not vacuous: incremental updates ran, and both index paths were taken.
  CHECK(incremental > recomputes / 4);
  CHECK(by_values > 100);
  CHECK(by_window > 100);
  CHECK(located > 1000);
}

// The source's slice column holds timestamps; the flow's slices are dates
// from another source. SQL equality matches a date with a timestamp at its
// midnight, the index's structural equality does not: the flow scans that
// source for those slices. Rows with a null slice value are in no slice.
struct Tick {
  w::timestamp_type event_date;
  std::int64_t amount = 0;
};
FLOWLIB_SCHEMA(Tick, event_date, amount);

struct Maybe {
  std::optional<Day> event_date;
  std::int64_t amount = 0;
};
FLOWLIB_SCHEMA(Maybe, event_date, amount);

struct Total {
  Day event_date;
  std::int64_t amount = 0;
  friend bool operator==(const Total&, const Total&) = default;
  friend auto operator<=>(const Total&, const Total&) = default;
};
FLOWLIB_SCHEMA(Total, event_date, amount);

inline std::vector<Total> totals(std::span<const Event> es, std::span<const Tick> ts, std::span<const Maybe> ms) {
  std::map<Day, std::int64_t> m;
  for (const auto& e : es) m[e.event_date] += e.amount;
  for (const auto& t : ts) m[std::chrono::floor<std::chrono::days>(t.event_date)] += t.amount;
  for (const auto& x : ms)
    if (x.event_date) m[*x.event_date] += x.amount;
  std::vector<Total> out;
  for (auto& [d, a] : m) out.push_back({d, a});
  return out;
}

TEST_CASE("R-WHERE-7: slices of another kind than the source's column, and null slice values, read as by a scan") {
  for (std::uint32_t seed = 1; seed <= 8; ++seed) {
    std::mt19937 rng(seed);
    const auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    fl::MemorySource<Event> events("events");
    fl::MemorySource<Tick> ticks("ticks");
    fl::MemorySource<Maybe> maybes("maybes");
    const scan_only<Event> events_scan{&events};
    const scan_only<Tick> ticks_scan{&ticks};
    const scan_only<Maybe> maybes_scan{&maybes};
    const w::expr pred = w::col("event_date") >= w::current_date() - w::days(4);
    fl::StreamingTable<Total> ix("ix"), scan("scan");
    fl::ReplaceWhere<> f_ix("ix", pred), f_scan("scan", pred);
    int today = 10;
    for (int step = 0; step < 30; ++step) {
      for (int k = pick(0, 4); k > 0; --k) {
        switch (pick(0, 4)) {
          case 0: events.append(Event{day(today - pick(0, 6)), 0, pick(1, 9)}); break;
          case 1: {
            // Midnight (equal to a date under SQL) or later in the day.
            const auto t = w::timestamp_type(day(today - pick(0, 6))) + std::chrono::hours(pick(0, 1) * 6);
            ticks.append(Tick{t, pick(1, 9)});
            break;
          }
          case 2: {
            Maybe m{std::nullopt, pick(1, 9)};
            if (pick(0, 2) != 0) m.event_date = day(today - pick(0, 6));
            maybes.append(m);
            break;
          }
          case 3: {
            const Day d = day(today - pick(0, 6));
            ticks.erase_where([&](const Tick& t) { return std::chrono::floor<std::chrono::days>(t.event_date) == d; });
            break;
          }
          default: today += pick(0, 1); break;
        }
      }
      INFO("seed " << seed << " step " << step);
      const fl::BatchStats a = f_ix.apply(ix, at(today), totals, events, ticks, maybes);
      const fl::BatchStats b = f_scan.apply(scan, at(today), totals, events_scan, ticks_scan, maybes_scan);
      REQUIRE(ix.sorted_all_rows() == scan.sorted_all_rows());
      CHECK(same_plan(f_ix.last_plan(), f_scan.last_plan()));
      CHECK(same_stats(a, b));
    }
    CHECK(events.has_value_index("event_date"));
  }
}

}  // namespace where_replace_where_index
