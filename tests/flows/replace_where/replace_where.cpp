// REPLACE WHERE (docs/replace-where.md, docs/semantics.md R-WHERE-1..10): the
// four examples of the documentation as scenarios, every fallback reason
// (predicates changed between runs among them), the declaration errors,
// checkpoints, events, and a randomised check that incremental updates give
// the same target as complete recomputes.
#include <flowlib/checkpoint/memory.hpp>
#include <flowlib/event_log.hpp>
#include <flowlib/flows/replace_where.hpp>
#include <flowlib/pipeline.hpp>
#include <flowlib/source/memory.hpp>
#include <flowlib/table.hpp>
#include <flowlib/where.hpp>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <support/event_json.hpp>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace flows_replace_where_replace_where {

namespace fl = flowlib;
namespace w = flowlib::where;

using Day = std::chrono::sys_days;
/// Day n of the tests' calendar (day 0 is 2026-01-01).
inline Day day(int n) {
  return Day(std::chrono::year{2026} / std::chrono::January / 1) + std::chrono::days(n);
}
/// The update clock at noon of day n.
inline w::context at(int n) { return w::context{w::timestamp_type(day(n)) + std::chrono::hours(12), 7}; }
inline std::chrono::system_clock::time_point clock_at(int n) {
  return std::chrono::system_clock::time_point(day(n)) + std::chrono::hours(12);
}

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

/// Daily aggregates; uniq_users is the metric added later (scenario 3).
struct Agg {
  Day event_date;
  std::int64_t events = 0;
  std::int64_t amount = 0;
  std::optional<std::int64_t> uniq_users;
  friend bool operator==(const Agg&, const Agg&) = default;
  friend auto operator<=>(const Agg&, const Agg&) = default;
};
FLOWLIB_SCHEMA(Agg, event_date, events, amount, uniq_users);

/// Per day and region (fact JOIN dimension).
struct RegionDay {
  Day event_date;
  std::string region;
  std::int64_t amount = 0;
  friend bool operator==(const RegionDay&, const RegionDay&) = default;
  friend auto operator<=>(const RegionDay&, const RegionDay&) = default;
};
FLOWLIB_SCHEMA(RegionDay, event_date, region, amount);

/// A target whose date column the sources do not have (not pushable).
struct Renamed {
  Day day;
  std::int64_t amount = 0;
  friend bool operator==(const Renamed&, const Renamed&) = default;
  friend auto operator<=>(const Renamed&, const Renamed&) = default;
};
FLOWLIB_SCHEMA(Renamed, day, amount);

inline std::vector<Agg> daily(std::span<const Event> es) {
  std::map<Day, Agg> m;
  for (const auto& e : es) {
    Agg& a = m[e.event_date];
    a.event_date = e.event_date;
    a.events += 1;
    a.amount += e.amount;
  }
  std::vector<Agg> out;
  for (auto& [d, a] : m) out.push_back(a);
  return out;
}

inline std::vector<Agg> daily_with_uniq(std::span<const Event> es) {
  std::map<Day, std::set<std::int64_t>> users;
  for (const auto& e : es) users[e.event_date].insert(e.user_id);
  std::vector<Agg> out = daily(es);
  for (auto& a : out) a.uniq_users = static_cast<std::int64_t>(users[a.event_date].size());
  return out;
}

inline std::vector<RegionDay> by_region(std::span<const Event> es, std::span<const User> us) {
  std::map<std::int64_t, std::string> region;
  for (const auto& u : us) region[u.user_id] = u.region;  // the last row of a user wins
  std::map<std::pair<Day, std::string>, std::int64_t> m;
  for (const auto& e : es) {
    auto it = region.find(e.user_id);
    m[{e.event_date, it == region.end() ? std::string("unknown") : it->second}] += e.amount;
  }
  std::vector<RegionDay> out;
  for (auto& [k, v] : m) out.push_back({k.first, k.second, v});
  return out;
}

inline std::vector<Renamed> renamed(std::span<const Event> es) {
  std::map<Day, std::int64_t> m;
  for (const auto& e : es) m[e.event_date] += e.amount;
  std::vector<Renamed> out;
  for (auto& [d, v] : m) out.push_back({d, v});
  return out;
}

inline w::expr last_days(int n) { return w::col("event_date") >= w::current_date() - w::days(n); }

inline std::string reason_of(const fl::ReplaceWherePlan& p) {
  return p.reason ? std::string(fl::to_string(*p.reason)) : std::string("none");
}
inline std::string technique_of(const fl::ReplaceWherePlan& p) {
  return std::string(fl::to_string(p.technique));
}

/// The target's rows of day d.
template <class Table>
auto rows_of(const Table& t, Day d) {
  std::vector<typename Table::row_type> out;
  for (const auto& r : t.sorted_all_rows())
    if (r.event_date == d) out.push_back(r);
  return out;
}

// --- Scenario 1 -----------------------------------------------------------------------------

TEST_CASE("R-WHERE-1/R-WHERE-7: aggregates outlive the source's three-day retention") {
  fl::MemorySource<Event> raw{"events_raw"};
  fl::StreamingTable<Agg> agg{"events_agg"};
  fl::ReplaceWhere flow{"events_agg", last_days(3)};
  std::map<Day, Agg> expected;
  for (int n = 0; n < 12; ++n) {
    std::vector<Event> today;
    for (int i = 0; i <= n % 4; ++i) today.push_back({day(n), i, 10 * n + i});
    raw.append(today);
    expected[day(n)] = daily(today).front();
    // A late event for yesterday, inside the window.
    if (n > 0 && n % 3 == 0) {
      raw.append(Event{day(n - 1), 99, 5});
      expected[day(n - 1)].events += 1;
      expected[day(n - 1)].amount += 5;
    }
    // Retention: the source keeps three days.
    raw.erase_where([&](const Event& e) { return e.event_date < day(n) - std::chrono::days(3); });
    const fl::BatchStats s = flow.apply(agg, at(n), daily, raw);
    if (n == 0) {
      CHECK(technique_of(flow.last_plan()) == "COMPLETE_RECOMPUTE");
      CHECK(reason_of(flow.last_plan()) == "none");
    } else {
      CHECK(technique_of(flow.last_plan()) == "INCREMENTAL");
      // Only today's slice (and yesterday's on a late event) was rewritten.
      CHECK(flow.last_plan().slices == (n % 3 == 0 ? 2u : 1u));
      CHECK(s.inserted_rows == flow.last_plan().slices);
    }
  }
  std::vector<Agg> want;
  for (auto& [d, a] : expected) want.push_back(a);
  CHECK(agg.sorted_all_rows() == want);  // every day, long after the raw rows are gone
  CHECK(raw.size() < 20);
}

// --- Scenario 2 -----------------------------------------------------------------------------

TEST_CASE("R-WHERE-1/R-WHERE-7: a dimension change rewrites only the rows inside the window") {
  fl::MemorySource<Event> fact{"fact"};
  fl::MemorySource<User> users{"dim_users"};
  fl::StreamingTable<RegionDay> out{"by_region"};
  fl::ReplaceWhere flow{"by_region", last_days(1)};
  users.append(User{1, "emea"});
  users.append(User{2, "asia"});
  for (int n = 0; n < 5; ++n) {
    fact.append(Event{day(n), 1, 10});
    fact.append(Event{day(n), 2, 1});
    flow.apply(out, at(n), by_region, fact, users);
  }
  CHECK(technique_of(flow.last_plan()) == "INCREMENTAL");
  CHECK_FALSE(flow.last_plan().all_slices);
  // User 1 moves to asia: the rows of days 3 and 4 (the window on day 4)
  // follow, the older ones keep emea.
  users.append(User{1, "asia"});
  flow.apply(out, at(4), by_region, fact, users);
  CHECK(technique_of(flow.last_plan()) == "INCREMENTAL");
  CHECK(flow.last_plan().all_slices);  // a dimension changed: every slice of the window
  for (int n = 0; n < 3; ++n) {
    CHECK(rows_of(out, day(n)) == std::vector<RegionDay>{{day(n), "asia", 1}, {day(n), "emea", 10}});
  }
  for (int n = 3; n < 5; ++n) CHECK(rows_of(out, day(n)) == std::vector<RegionDay>{{day(n), "asia", 11}});
}

// --- Scenario 3 -----------------------------------------------------------------------------

TEST_CASE("R-WHERE-4: a new metric column, backfilled by an override for a range; older rows null") {
  fl::MemorySource<Event> raw{"events"};
  fl::StreamingTable<Agg> agg{"events_agg"};
  fl::ReplaceWhere flow{"events_agg", last_days(2)};
  for (int n = 0; n < 10; ++n) {
    raw.append(Event{day(n), 1, 1});
    raw.append(Event{day(n), 2, 1});
    raw.append(Event{day(n), 2, 1});
    flow.apply(agg, at(n), daily, raw);
  }
  // The query gains uniq_users from day 10 on; days 5..9 are backfilled.
  raw.append(Event{day(10), 3, 1});
  const auto backfill = w::col("event_date").between(w::lit(day(5)), w::lit(day(9)));
  flow.apply_override(agg, backfill, at(10), daily_with_uniq, raw);
  CHECK(technique_of(flow.last_plan()) == "COMPLETE_RECOMPUTE");
  CHECK(reason_of(flow.last_plan()) == "UNSUPPORTED_REPLACE_WHERE_PREDICATE");
  CHECK(flow.last_plan().override_predicate);
  // The override is pushed down to the source: day 10 is not even read,
  // and rows outside the override's range are untouched.
  CHECK(flow.last_plan().rows_outside_predicate == 0);
  CHECK(rows_of(agg, day(10)).empty());
  // The defined predicate again; its window [day 8, +inf) takes in day 10,
  // which the override excluded: a recompute of the window.
  flow.apply(agg, at(10), daily_with_uniq, raw);
  CHECK(reason_of(flow.last_plan()) == "UNSUPPORTED_REPLACE_WHERE_PREDICATE");
  raw.append(Event{day(10), 4, 1});
  flow.apply(agg, at(10), daily_with_uniq, raw);
  CHECK(technique_of(flow.last_plan()) == "INCREMENTAL");
  for (int n = 0; n < 5; ++n) CHECK_FALSE(rows_of(agg, day(n)).at(0).uniq_users.has_value());
  for (int n = 5; n < 10; ++n) CHECK(rows_of(agg, day(n)).at(0).uniq_users == 2);
  CHECK(rows_of(agg, day(10)).at(0).uniq_users == 2);
  CHECK(agg.size() == 11);
}

// --- Scenario 4 -----------------------------------------------------------------------------

TEST_CASE("R-WHERE-4/R-WHERE-7: iterating on a 7-day window, then a 365-day backfill by override") {
  fl::MemorySource<Event> raw{"events"};
  for (int n = 0; n < 366; ++n) raw.append(Event{day(n), n % 5, n});
  fl::StreamingTable<Agg> agg{"events_agg"};
  fl::ReplaceWhere flow{"events_agg", last_days(7)};
  flow.apply(agg, at(365), daily, raw);
  CHECK(agg.size() == 8);
  flow.apply(agg, at(365), daily, raw);  // nothing changed
  CHECK(technique_of(flow.last_plan()) == "INCREMENTAL");
  CHECK(flow.last_plan().slices == 0);
  flow.apply_override(agg, last_days(365), at(365), daily, raw);
  CHECK(reason_of(flow.last_plan()) == "UNSUPPORTED_REPLACE_WHERE_PREDICATE");
  CHECK(agg.size() == 366);
  // The next day's window lies inside the backfilled one: incremental.
  raw.append(Event{day(366), 0, 1});
  flow.apply(agg, at(366), daily, raw);
  CHECK(technique_of(flow.last_plan()) == "INCREMENTAL");
  CHECK(agg.size() == 367);
  CHECK(rows_of(agg, day(0)).at(0).amount == 0);
  CHECK(rows_of(agg, day(200)).at(0).amount == 200);
}

// --- Fallback reasons (R-WHERE-7, R-WHERE-8) ---------------------------------------------------

TEST_CASE("R-WHERE-8: the first update is a complete recompute with no reason") {
  fl::MemorySource<Event> raw{"events"};
  raw.append(Event{day(0), 1, 1});
  fl::StreamingTable<Agg> agg{"agg"};
  fl::ReplaceWhere flow{"agg", last_days(3)};
  flow.apply(agg, at(0), daily, raw);
  CHECK(technique_of(flow.last_plan()) == "COMPLETE_RECOMPUTE");
  CHECK_FALSE(flow.last_plan().reason.has_value());
  flow.apply(agg, at(1), daily, raw);
  CHECK(technique_of(flow.last_plan()) == "INCREMENTAL");
}

TEST_CASE("R-WHERE-7: a window moving over previously excluded rows falls back") {
  fl::MemorySource<Event> raw{"events"};
  for (int n = 0; n < 20; ++n) raw.append(Event{day(n), 1, n});
  fl::StreamingTable<Agg> agg{"agg"};
  fl::ReplaceWhere flow{"agg", w::col("event_date").between(w::current_date() - w::days(7), w::current_date())};
  flow.apply(agg, at(10), daily, raw);
  CHECK(agg.size() == 8);  // days 3..10
  flow.apply(agg, at(10), daily, raw);
  CHECK(technique_of(flow.last_plan()) == "INCREMENTAL");  // same window
  flow.apply(agg, at(11), daily, raw);  // the upper bound moved: day 11 was excluded
  CHECK(technique_of(flow.last_plan()) == "COMPLETE_RECOMPUTE");
  CHECK(reason_of(flow.last_plan()) == "UNSUPPORTED_REPLACE_WHERE_PREDICATE");
  CHECK(agg.size() == 9);  // days 3..11: day 3 is kept (outside the window now)
}

TEST_CASE("R-WHERE-7: a lower bound moving forward stays incremental") {
  fl::MemorySource<Event> raw{"events"};
  fl::StreamingTable<Agg> agg{"agg"};
  fl::ReplaceWhere flow{"agg", last_days(2)};
  for (int n = 0; n < 6; ++n) {
    raw.append(Event{day(n), 1, 1});
    flow.apply(agg, at(n), daily, raw);
    if (n > 0) CHECK(technique_of(flow.last_plan()) == "INCREMENTAL");
  }
}

TEST_CASE("R-WHERE-5/R-WHERE-8: a direct insert inside the window falls back; outside it survives") {
  fl::MemorySource<Event> raw{"events"};
  fl::StreamingTable<Agg> agg{"agg"};
  fl::ReplaceWhere flow{"agg", last_days(1)};
  for (int n = 0; n < 3; ++n) {
    raw.append(Event{day(n), 1, 1});
    flow.apply(agg, at(n), daily, raw);
  }
  // Outside the next window: kept, the update stays incremental.
  fl::dml_insert(agg, std::vector<Agg>{{day(-30), 7, 7, std::nullopt}});
  raw.append(Event{day(3), 1, 1});
  flow.apply(agg, at(3), daily, raw);
  CHECK(technique_of(flow.last_plan()) == "INCREMENTAL");
  CHECK(rows_of(agg, day(-30)).size() == 1);
  // Inside the window: a complete recompute, which replaces the row.
  fl::dml_insert(agg, std::vector<Agg>{{day(3), 100, 100, std::nullopt}});
  flow.apply(agg, at(3), daily, raw);
  CHECK(technique_of(flow.last_plan()) == "COMPLETE_RECOMPUTE");
  CHECK(reason_of(flow.last_plan()) == "EXTERNAL_CHANGE_IN_REPLACE_WINDOW");
  CHECK(rows_of(agg, day(3)) == std::vector<Agg>{{day(3), 1, 1, std::nullopt}});
  CHECK(rows_of(agg, day(-30)).size() == 1);
  flow.apply(agg, at(3), daily, raw);
  CHECK(technique_of(flow.last_plan()) == "INCREMENTAL");  // eligible again
}

TEST_CASE("R-WHERE-1/R-WHERE-5: a failed update changes nothing, and its retry still sees the direct insert") {
  fl::MemorySource<Event> raw{"events"};
  fl::StreamingTable<Agg> agg{"agg"};
  fl::ReplaceWhere flow{"agg", last_days(1)};
  for (int n = 0; n < 3; ++n) {
    raw.append(Event{day(n), 1, 1});
    flow.apply(agg, at(n), daily, raw);
  }
  fl::dml_insert(agg, std::vector<Agg>{{day(2), 100, 100, std::nullopt}});
  const auto before = agg.sorted_all_rows();
  const auto failing = [](std::span<const Event>) -> std::vector<Agg> { throw std::runtime_error("query failed"); };
  CHECK_THROWS_AS(flow.apply(agg, at(2), failing, raw), std::runtime_error);
  CHECK(agg.sorted_all_rows() == before);
  flow.apply(agg, at(2), daily, raw);
  CHECK(reason_of(flow.last_plan()) == "EXTERNAL_CHANGE_IN_REPLACE_WINDOW");
  CHECK(rows_of(agg, day(2)) == std::vector<Agg>{{day(2), 1, 1, std::nullopt}});
}

TEST_CASE("R-WHERE-7/R-WHERE-8: rand() falls back, and so does the update after it") {
  fl::MemorySource<Event> raw{"events"};
  for (int n = 0; n < 5; ++n) raw.append(Event{day(n), 1, 1});
  fl::StreamingTable<Agg> agg{"agg"};
  fl::ReplaceWhere flow{"agg", last_days(2)};
  flow.apply(agg, at(4), daily, raw);
  CHECK_FALSE((w::rand() < 2.0).deterministic());
  flow.apply_override(agg, last_days(2) && w::rand() < 2.0, at(4), daily, raw);
  CHECK(reason_of(flow.last_plan()) == "REPLACE_WHERE_NOT_DETERMINISTIC");  // before the override's
  flow.apply(agg, at(4), daily, raw);
  CHECK(reason_of(flow.last_plan()) == "PRIOR_REPLACE_WHERE_NOT_DETERMINISTIC");
  flow.apply(agg, at(4), daily, raw);
  CHECK(technique_of(flow.last_plan()) == "INCREMENTAL");
  CHECK(agg.size() == 3);
}

TEST_CASE("R-WHERE-7/R-WHERE-8: a predicate the sources cannot take, or with no single range, falls back") {
  fl::MemorySource<Event> raw{"events"};
  for (int n = 0; n < 5; ++n) raw.append(Event{day(n), 1, n});
  SUBCASE("not pushable") {
    fl::StreamingTable<Renamed> t{"renamed"};
    fl::ReplaceWhere flow{"renamed", w::col("day") >= w::current_date() - w::days(1)};
    flow.apply(t, at(4), renamed, raw);
    flow.apply(t, at(4), renamed, raw);
    CHECK(reason_of(flow.last_plan()) == "UNSUPPORTED_REPLACE_WHERE_PREDICATE");
    CHECK(t.size() == 2);
  }
  SUBCASE("no single-column window") {
    fl::StreamingTable<Agg> t{"agg"};
    fl::ReplaceWhere flow{"agg", last_days(1) || w::col("events") > 100};
    flow.apply(t, at(4), daily, raw);
    flow.apply(t, at(4), daily, raw);
    CHECK(reason_of(flow.last_plan()) == "UNSUPPORTED_REPLACE_WHERE_PREDICATE");
    CHECK(t.size() == 2);
  }
}

TEST_CASE("R-WHERE-8: with incremental updates disabled every update recomputes, with no reason") {
  fl::MemorySource<Event> raw{"events"};
  raw.append(Event{day(0), 1, 1});
  fl::StreamingTable<Agg> agg{"agg"};
  fl::ReplaceWhere flow{"agg", last_days(1), fl::ReplaceWhereOptions{.incremental = false}};
  flow.apply(agg, at(0), daily, raw);
  flow.apply(agg, at(1), daily, raw);
  CHECK(technique_of(flow.last_plan()) == "COMPLETE_RECOMPUTE");
  CHECK_FALSE(flow.last_plan().reason.has_value());
}

// --- R-WHERE-2 ------------------------------------------------------------------------------

TEST_CASE("R-WHERE-2: result rows outside the predicate are counted and not written") {
  fl::MemorySource<Event> raw{"events"};
  for (int n = 0; n < 10; ++n) raw.append(Event{day(n), 1, n});
  fl::StreamingTable<Renamed> t{"renamed"};
  // The sources lack `day`: they are read whole and the query returns every day.
  fl::ReplaceWhere flow{"renamed", w::col("day") >= w::current_date() - w::days(2)};
  const fl::BatchStats s = flow.apply(t, at(9), renamed, raw);
  CHECK(s.input_rows == 10);
  CHECK(s.inserted_rows == 3);
  CHECK(s.dropped_rows == 7);
  CHECK(flow.last_plan().rows_outside_predicate == 7);
  CHECK(t.sorted_all_rows() == std::vector<Renamed>{{day(7), 7}, {day(8), 8}, {day(9), 9}});
}

// --- R-WHERE-6 ------------------------------------------------------------------------------

TEST_CASE("R-WHERE-6: a full refresh keeps only the current predicate's rows; reset_allowed=false refuses") {
  fl::MemorySource<Event> raw{"events"};
  for (int n = 0; n < 10; ++n) raw.append(Event{day(n), 1, n});
  SUBCASE("refresh") {
    fl::StreamingTable<Agg> agg{"agg"};
    fl::ReplaceWhere flow{"agg", last_days(1)};
    flow.apply_override(agg, last_days(9), at(9), daily, raw);  // a backfill
    fl::dml_insert(agg, std::vector<Agg>{{day(-5), 1, 1, std::nullopt}});
    CHECK(agg.size() == 11);
    agg.full_refresh();
    flow.apply(agg, at(9), daily, raw);
    CHECK(agg.size() == 2);  // days 8 and 9: the backfill and the direct insert are gone
    CHECK(reason_of(flow.last_plan()) == "none");  // a first update again
  }
  SUBCASE("refused") {
    fl::StreamingTable<Agg> agg{"agg", fl::table_options<Agg>().reset_allowed(false)};
    fl::ReplaceWhere flow{"agg", last_days(1)};
    flow.apply_override(agg, last_days(9), at(9), daily, raw);
    const auto before = agg.sorted_all_rows();
    CHECK_THROWS_AS(agg.full_refresh(), fl::error);
    CHECK(agg.sorted_all_rows() == before);
  }
}

TEST_CASE("R-WHERE-6: a pipeline's full refresh re-runs with the current predicate only") {
  fl::MemorySource<Event> raw{"events"};
  for (int n = 0; n < 10; ++n) raw.append(Event{day(n), 1, n});
  fl::StreamingTable<Agg> agg{"agg"};
  fl::MemoryCheckpoint ck;
  fl::Pipeline p{"p", ck};
  p.flow("agg").from(raw).query(daily).into(agg, fl::ReplaceWhere{last_days(1)});
  fl::UpdateOptions o;
  o.now = clock_at(9);
  o.replace_where_overrides.emplace("agg", last_days(9));
  p.update(o);
  CHECK(agg.size() == 10);
  p.full_refresh(agg);
  fl::UpdateOptions o2;
  o2.now = clock_at(9);
  p.update(o2);
  CHECK(agg.size() == 2);
  fl::StreamingTable<Agg> kept{"kept", fl::table_options<Agg>().reset_allowed(false)};
  fl::MemoryCheckpoint ck2;
  fl::Pipeline p2{"p2", ck2};
  p2.flow("kept").from(raw).query(daily).into(kept, fl::ReplaceWhere{last_days(1)});
  fl::UpdateOptions o3;
  o3.now = clock_at(9);
  o3.replace_where_overrides.emplace("kept", last_days(9));
  p2.update(o3);
  CHECK_THROWS_AS(p2.full_refresh(kept), fl::error);
  CHECK(kept.size() == 10);
}

// --- R-WHERE-9 ------------------------------------------------------------------------------

TEST_CASE("R-WHERE-9: one REPLACE WHERE flow per target, no other flow, no expectations") {
  fl::MemorySource<Event> raw{"events"};
  raw.append(Event{day(0), 1, 1});
  SUBCASE("standalone: a second flow is refused") {
    fl::StreamingTable<Agg> agg{"agg"};
    fl::ReplaceWhere a{"a", last_days(1)};
    fl::ReplaceWhere b{"b", last_days(1)};
    a.apply(agg, at(0), daily, raw);
    CHECK_THROWS_AS(b.apply(agg, at(0), daily, raw), fl::error);
    CHECK(agg.size() == 1);
  }
  SUBCASE("standalone: a target with expectations is refused") {
    fl::StreamingTable<Agg> agg{
        "agg", fl::table_options<Agg>().expect(fl::expect("positive", [](const Agg& x) { return x.events > 0; }))};
    fl::ReplaceWhere a{"a", last_days(1)};
    CHECK_THROWS_AS(a.apply(agg, at(0), daily, raw), fl::error);
  }
  SUBCASE("pipeline: declaration errors") {
    fl::StreamingTable<Agg> agg{"agg"};
    fl::MemoryCheckpoint ck;
    fl::Pipeline p{"p", ck};
    p.flow("a").from(raw).query(daily).into(agg, fl::ReplaceWhere{last_days(1)});
    try {
      p.flow("b").from(raw).query(daily).into(agg, fl::ReplaceWhere{last_days(2)});
      FAIL("a second flow was accepted");
    } catch (const fl::error& e) {
      CHECK(e.code() == fl::errc::invalid_target);
      CHECK(std::string(e.what()).find("REPLACE WHERE") != std::string::npos);
    }
    fl::StreamingTable<Agg> checked{
        "checked", fl::table_options<Agg>().expect(fl::expect("positive", [](const Agg& x) { return x.events > 0; }))};
    CHECK_THROWS_AS(p.flow("c").from(raw).query(daily).into(checked, fl::ReplaceWhere{last_days(1)}), fl::error);
    fl::UpdateOptions o;
    o.replace_where_overrides.emplace("nope", last_days(1));
    CHECK_THROWS_AS(p.update(o), fl::error);
  }
}

// --- Pipelines: checkpoints, restarts, faults, events ---------------------------------------

TEST_CASE("R-WHERE-7: a restarted pipeline goes on incrementally from its checkpoint") {
  fl::MemorySource<Event> raw{"events"};
  fl::StreamingTable<Agg> agg{"agg"};
  fl::MemoryCheckpoint ck;
  std::vector<std::string> techniques;
  fl::EventLog log{[&](std::string_view line) {
    const auto j = nlohmann::json::parse(line);
    if (j["event_type"] == "planning_information") techniques.push_back(j["technique"]);
  }};
  for (int n = 0; n < 6; ++n) {
    fl::Pipeline p{"p", ck};  // a new pipeline every update, the same query version
    p.event_log(log);
    p.flow("agg").from(raw).query(daily, "v1").into(agg, fl::ReplaceWhere{last_days(2)});
    raw.append(Event{day(n), 1, n});
    fl::UpdateOptions o;
    o.now = clock_at(n);
    const auto s = p.update(o);
    CHECK(s.flow("agg")->batches == 1);
    CHECK(s.flow("agg")->upserted_rows == 1);
  }
  CHECK(techniques == std::vector<std::string>{"COMPLETE_RECOMPUTE", "INCREMENTAL", "INCREMENTAL",
                                               "INCREMENTAL", "INCREMENTAL", "INCREMENTAL"});
  CHECK(agg.size() == 6);
  // A direct insert made while no pipeline ran is noticed after a restart.
  fl::dml_insert(agg, std::vector<Agg>{{day(5), 50, 50, std::nullopt}});
  fl::Pipeline p{"p", ck};
  p.event_log(log);
  p.flow("agg").from(raw).query(daily, "v1").into(agg, fl::ReplaceWhere{last_days(2)});
  fl::UpdateOptions o;
  o.now = clock_at(5);
  p.update(o);
  CHECK(techniques.back() == "COMPLETE_RECOMPUTE");
  CHECK(rows_of(agg, day(5)).size() == 1);
}

// --- R-WHERE-10: the flow's recorded definition -----------------------------------------------

/// One update of a new pipeline over `ck` (as a restarted program runs it):
/// the flow "agg" with `predicate`, `query` and its `version`, at noon of
/// day n (`updates` times; each with `override_predicate` when given).
/// Returns the last planning event's technique and reason.
template <class Query>
std::pair<std::string, std::string> update_restarted(fl::MemoryCheckpoint& ck, fl::MemorySource<Event>& raw,
                                                     fl::StreamingTable<Agg>& agg, w::expr predicate,
                                                     Query query, std::string version, int n,
                                                     fl::ReplaceWhereOptions options = {},
                                                     int updates = 1,
                                                     std::optional<w::expr> override_predicate = std::nullopt) {
  std::pair<std::string, std::string> plan;
  fl::EventLog log{[&](std::string_view line) {
    const auto j = nlohmann::json::parse(line);
    if (j["event_type"] != "planning_information") return;
    plan.first = j["technique"];
    plan.second = j["reason"].is_null() ? "none" : std::string(j["reason"]);
  }};
  fl::Pipeline p{"p", ck};
  p.event_log(log);
  p.flow("agg").from(raw).query(query, std::move(version)).into(agg, fl::ReplaceWhere{std::move(predicate), options});
  for (int i = 0; i < updates; ++i) {
    fl::UpdateOptions o;
    o.now = clock_at(n);
    if (override_predicate) o.replace_where_overrides.emplace("agg", *override_predicate);
    p.update(o);
  }
  return plan;
}

TEST_CASE("R-WHERE-10: a new query version recomputes the whole window, once") {
  fl::MemorySource<Event> raw{"events"};
  fl::StreamingTable<Agg> agg{"agg"};
  fl::MemoryCheckpoint ck;
  // Query v1 over days 0..6 (one event a day, two users on even days).
  for (int n = 0; n < 7; ++n) {
    raw.append(Event{day(n), 1, n});
    if (n % 2 == 0) raw.append(Event{day(n), 2, 1});
    update_restarted(ck, raw, agg, last_days(6), daily, "v1", n);
  }
  CHECK(agg.size() == 7);
  // A new program: query v2 also computes uniq_users. One more day of rows.
  raw.append(Event{day(7), 1, 7});
  const auto plan = update_restarted(ck, raw, agg, last_days(6), daily_with_uniq, "v2", 7);
  CHECK(plan == std::pair<std::string, std::string>{"COMPLETE_RECOMPUTE", "REPLACE_WHERE_DEFINITION_CHANGED"});
  // Every row of the window (days 1..7) has v2's values; day 0 keeps v1's.
  for (const Agg& a : agg.sorted_all_rows()) {
    CAPTURE(a.event_date);
    if (a.event_date == day(0)) {
      CHECK(!a.uniq_users.has_value());
    } else {
      REQUIRE(a.uniq_users.has_value());
      const int n = static_cast<int>((a.event_date - day(0)).count());
      CHECK(*a.uniq_users == (n % 2 == 0 ? 2 : 1));
    }
  }
  CHECK(agg.size() == 8);
  // The definition is recorded: the next run with v2 is incremental again.
  raw.append(Event{day(8), 3, 8});
  CHECK(update_restarted(ck, raw, agg, last_days(6), daily_with_uniq, "v2", 8) ==
        std::pair<std::string, std::string>{"INCREMENTAL", "none"});
  CHECK(rows_of(agg, day(8)).at(0).uniq_users == 1);
}

TEST_CASE("R-WHERE-10: a changed incremental option recomputes the window; the predicate is not in the definition") {
  fl::MemorySource<Event> raw{"events"};
  fl::StreamingTable<Agg> agg{"agg"};
  fl::MemoryCheckpoint ck;
  for (int n = 0; n < 4; ++n) raw.append(Event{day(n), 1, n});
  update_restarted(ck, raw, agg, last_days(3), daily, "v1", 3);
  raw.append(Event{day(4), 1, 4});
  // A narrower predicate: its window is covered by the previous one, so the
  // update is incremental (R-WHERE-7), whatever the predicate's text.
  CHECK(update_restarted(ck, raw, agg, last_days(2), daily, "v1", 4) ==
        std::pair<std::string, std::string>{"INCREMENTAL", "none"});
  raw.append(Event{day(5), 1, 5});
  CHECK(update_restarted(ck, raw, agg, last_days(2), daily, "v1", 5) ==
        std::pair<std::string, std::string>{"INCREMENTAL", "none"});
  // Incremental updates switched off, then on again.
  raw.append(Event{day(6), 1, 6});
  CHECK(update_restarted(ck, raw, agg, last_days(2), daily, "v1", 6, {.incremental = false}) ==
        std::pair<std::string, std::string>{"COMPLETE_RECOMPUTE", "none"});
  raw.append(Event{day(7), 1, 7});
  CHECK(update_restarted(ck, raw, agg, last_days(2), daily, "v1", 7) ==
        std::pair<std::string, std::string>{"COMPLETE_RECOMPUTE", "REPLACE_WHERE_DEFINITION_CHANGED"});
  CHECK(agg.size() == 8);
  // The version may be given in the options instead; the same version is
  // the same definition.
  raw.append(Event{day(8), 1, 8});
  CHECK(update_restarted(ck, raw, agg, last_days(2), daily, "", 8, {.query_version = "v1"}) ==
        std::pair<std::string, std::string>{"INCREMENTAL", "none"});
}

TEST_CASE("R-WHERE-10: an unversioned query recomputes the window at the first update of each pipeline") {
  fl::MemorySource<Event> raw{"events"};
  fl::StreamingTable<Agg> agg{"agg"};
  fl::MemoryCheckpoint ck;
  for (int n = 0; n < 3; ++n) raw.append(Event{day(n), 1, n});
  CHECK(update_restarted(ck, raw, agg, last_days(2), daily, "", 2) ==
        std::pair<std::string, std::string>{"COMPLETE_RECOMPUTE", "none"});
  // A new pipeline: nothing says its query is the one that wrote the rows.
  raw.append(Event{day(3), 1, 3});
  CHECK(update_restarted(ck, raw, agg, last_days(2), daily, "", 3) ==
        std::pair<std::string, std::string>{"COMPLETE_RECOMPUTE", "REPLACE_WHERE_QUERY_NOT_VERSIONED"});
  // Within one pipeline, the second update is incremental: its flow object
  // wrote the state it goes on from.
  raw.append(Event{day(4), 1, 4});
  fl::MemoryCheckpoint ck2;
  fl::StreamingTable<Agg> agg2{"agg"};
  update_restarted(ck2, raw, agg2, last_days(2), daily, "", 4);
  CHECK(update_restarted(ck2, raw, agg2, last_days(2), daily, "", 4, {}, 2) ==
        std::pair<std::string, std::string>{"INCREMENTAL", "none"});
  // A versioned query over an unversioned flow's state: a definition change.
  CHECK(update_restarted(ck2, raw, agg2, last_days(2), daily, "v1", 4) ==
        std::pair<std::string, std::string>{"COMPLETE_RECOMPUTE", "REPLACE_WHERE_DEFINITION_CHANGED"});
}

TEST_CASE("R-WHERE-10: standalone flows compare definitions through their checkpoint") {
  fl::MemorySource<Event> raw{"events"};
  for (int n = 0; n < 5; ++n) raw.append(Event{day(n), 1, n});
  fl::StreamingTable<Agg> agg{"agg"};
  std::string blob;
  {
    fl::ReplaceWhere v1{"agg", last_days(2), {.query_version = "v1"}};
    v1.apply(agg, at(4), daily, raw);
    fl::detail::byte_writer wr{blob};
    v1.write_checkpoint(wr, fl::checkpoint_scope::snapshot);
  }
  const auto restored = [&](fl::ReplaceWhereOptions o) {
    auto f = std::make_unique<fl::ReplaceWhere<>>("agg", last_days(2), std::move(o));
    fl::checkpoint_blobs b;
    b.snapshot = std::string_view(blob);
    f->read_checkpoint(agg, b);
    raw.append(Event{day(4), 9, 1});
    f->apply(agg, at(4), daily, raw);
    return reason_of(f->last_plan());
  };
  CHECK(restored({.query_version = "v1"}) == "none");
  CHECK(technique_of(fl::ReplaceWhere{"x", last_days(2)}.last_plan()) == "COMPLETE_RECOMPUTE");
  CHECK(restored({.query_version = "v2"}) == "REPLACE_WHERE_DEFINITION_CHANGED");
  CHECK(restored({}) == "REPLACE_WHERE_DEFINITION_CHANGED");
}

TEST_CASE("R-WHERE-10: query(fn, version) and a different ReplaceWhereOptions::query_version are refused") {
  fl::MemorySource<Event> raw{"events"};
  fl::StreamingTable<Agg> agg{"agg"};
  fl::MemoryCheckpoint ck;
  fl::Pipeline p{"p", ck};
  try {
    p.flow("agg").from(raw).query(daily, "v2").into(agg, fl::ReplaceWhere{last_days(2), {.query_version = "v1"}});
    FAIL("two versions were accepted");
  } catch (const fl::error& e) {
    CHECK(e.code() == fl::errc::invalid_argument);
    CHECK(std::string(e.what()).find("\"v1\"") != std::string::npos);
  }
  // The same version twice is one version.
  p.flow("agg").from(raw).query(daily, "v1").into(agg, fl::ReplaceWhere{last_days(2), {.query_version = "v1"}});
}

// --- A changed predicate is judged by its window (R-WHERE-7, R-WHERE-8) ------------------------

/// What a complete recompute writes for day d: daily() over the source's rows of d.
inline std::vector<Agg> recomputed(const fl::MemorySource<Event>& raw, Day d) {
  std::vector<Event> es;
  raw.scan([&](const Event& e) {
    if (e.event_date == d) es.push_back(e);
  });
  return daily(es);
}

using plan_pair = std::pair<std::string, std::string>;

TEST_CASE("R-WHERE-8: a widened predicate takes in rows not processed before: UNSUPPORTED_REPLACE_WHERE_PREDICATE") {
  fl::MemorySource<Event> raw{"events"};
  fl::StreamingTable<Agg> agg{"agg"};
  fl::MemoryCheckpoint ck;
  for (int n = 0; n < 6; ++n) {
    raw.append(Event{day(n), 1, n});
    update_restarted(ck, raw, agg, last_days(2), daily, "v1", n);
  }
  // The last update processed days 3 onwards. A late event for day 1, which
  // no update of that predicate would see, and a new day.
  raw.append(Event{day(1), 2, 100});
  raw.append(Event{day(6), 1, 6});
  const std::vector<Agg> day0 = rows_of(agg, day(0));
  // Five days from day 6: days 1 and 2 were outside the window processed.
  CHECK(update_restarted(ck, raw, agg, last_days(5), daily, "v1", 6) ==
        plan_pair{"COMPLETE_RECOMPUTE", "UNSUPPORTED_REPLACE_WHERE_PREDICATE"});
  // The whole window recomputed, the late event included; day 0 untouched.
  for (int n = 1; n <= 6; ++n) CHECK(rows_of(agg, day(n)) == recomputed(raw, day(n)));
  CHECK(rows_of(agg, day(1)).at(0).amount == 101);
  CHECK(rows_of(agg, day(0)) == day0);
  CHECK(agg.size() == 7);
  // The widened window is the one processed now: the next update goes on incrementally.
  raw.append(Event{day(7), 1, 7});
  CHECK(update_restarted(ck, raw, agg, last_days(5), daily, "v1", 7) == plan_pair{"INCREMENTAL", "none"});
  // Widened on the other side: an open upper bound after a closed one.
  const w::expr to_today = w::col("event_date").between(w::current_date() - w::days(2), w::current_date());
  CHECK(update_restarted(ck, raw, agg, to_today, daily, "v1", 7) == plan_pair{"INCREMENTAL", "none"});
  raw.append(Event{day(9), 1, 9});  // a row of the future, outside [day 5, day 7]
  CHECK(update_restarted(ck, raw, agg, last_days(2), daily, "v1", 7) ==
        plan_pair{"COMPLETE_RECOMPUTE", "UNSUPPORTED_REPLACE_WHERE_PREDICATE"});
  CHECK(rows_of(agg, day(9)) == recomputed(raw, day(9)));
}

TEST_CASE("R-WHERE-8: a narrowed predicate stays INCREMENTAL") {
  fl::MemorySource<Event> raw{"events"};
  fl::StreamingTable<Agg> agg{"agg"};
  fl::MemoryCheckpoint ck;
  for (int n = 0; n < 6; ++n) {
    raw.append(Event{day(n), 1, n});
    update_restarted(ck, raw, agg, last_days(4), daily, "v1", n);
  }
  // The last update processed days 1 onwards. Late events for day 2 (inside
  // that window, outside the narrowed one) and day 5 (inside both), and a new day.
  raw.append(Event{day(2), 2, 100});
  raw.append(Event{day(5), 2, 50});
  raw.append(Event{day(6), 1, 6});
  const std::vector<Agg> day2 = rows_of(agg, day(2));
  // One day from day 6: days 5 onwards, inside the window processed.
  CHECK(update_restarted(ck, raw, agg, last_days(1), daily, "v1", 6) == plan_pair{"INCREMENTAL", "none"});
  CHECK(rows_of(agg, day(5)) == recomputed(raw, day(5)));
  CHECK(rows_of(agg, day(5)).at(0).amount == 55);
  CHECK(rows_of(agg, day(6)) == recomputed(raw, day(6)));
  // Day 2 is outside the predicate now: untouched (R-WHERE-1).
  CHECK(rows_of(agg, day(2)) == day2);
  CHECK(agg.size() == 7);
  // A narrowed absolute range inside it, then the relative window again:
  // [day 5, day 6] lies in [day 5, +inf); [day 5, +inf) does not lie in [day 5, day 6].
  const w::expr fixed = w::col("event_date").between(w::lit(day(5)), w::lit(day(6)));
  CHECK(update_restarted(ck, raw, agg, fixed, daily, "v1", 6) == plan_pair{"INCREMENTAL", "none"});
  CHECK(update_restarted(ck, raw, agg, last_days(1), daily, "v1", 6) ==
        plan_pair{"COMPLETE_RECOMPUTE", "UNSUPPORTED_REPLACE_WHERE_PREDICATE"});
  // Standalone: a flow object with a narrower predicate taking over the state.
  std::string blob;
  fl::StreamingTable<Agg> t{"t"};
  {
    fl::ReplaceWhere wide{"t", last_days(4), {.query_version = "v1"}};
    wide.apply(t, at(6), daily, raw);
    fl::detail::byte_writer wr{blob};
    wide.write_checkpoint(wr, fl::checkpoint_scope::snapshot);
  }
  fl::ReplaceWhere narrow{"t", last_days(1), {.query_version = "v1"}};
  fl::checkpoint_blobs b;
  b.snapshot = std::string_view(blob);
  narrow.read_checkpoint(t, b);
  raw.append(Event{day(6), 3, 1});
  raw.append(Event{day(3), 3, 1});  // outside the narrowed window
  const std::vector<Agg> day3 = rows_of(t, day(3));
  narrow.apply(t, at(6), daily, raw);
  CHECK(technique_of(narrow.last_plan()) == "INCREMENTAL");
  CHECK(narrow.last_plan().slices == 1);  // day 6 only
  CHECK(rows_of(t, day(6)) == recomputed(raw, day(6)));
  CHECK(rows_of(t, day(3)) == day3);
}

TEST_CASE("R-WHERE-5/R-WHERE-8: a changed predicate, a direct insert in it: EXTERNAL_CHANGE_IN_REPLACE_WINDOW") {
  fl::MemorySource<Event> raw{"events"};
  fl::StreamingTable<Agg> agg{"agg"};
  fl::MemoryCheckpoint ck;
  for (int n = 0; n < 6; ++n) {
    raw.append(Event{day(n), 1, n});
    update_restarted(ck, raw, agg, last_days(4), daily, "v1", n);
  }
  raw.append(Event{day(6), 1, 6});
  SUBCASE("narrowed: the direct insert decides (pipeline)") {
    fl::dml_insert(agg, std::vector<Agg>{{day(5), 100, 100, std::nullopt}});
    CHECK(update_restarted(ck, raw, agg, last_days(1), daily, "v1", 6) ==
          plan_pair{"COMPLETE_RECOMPUTE", "EXTERNAL_CHANGE_IN_REPLACE_WINDOW"});
    CHECK(rows_of(agg, day(5)) == recomputed(raw, day(5)));  // the inserted row replaced
    CHECK(rows_of(agg, day(6)) == recomputed(raw, day(6)));
    raw.append(Event{day(6), 2, 1});
    CHECK(update_restarted(ck, raw, agg, last_days(1), daily, "v1", 6) == plan_pair{"INCREMENTAL", "none"});
  }
  SUBCASE("widened: the predicate comes first (R-WHERE-8's order)") {
    fl::dml_insert(agg, std::vector<Agg>{{day(5), 100, 100, std::nullopt}});
    CHECK(update_restarted(ck, raw, agg, last_days(6), daily, "v1", 6) ==
          plan_pair{"COMPLETE_RECOMPUTE", "UNSUPPORTED_REPLACE_WHERE_PREDICATE"});
    CHECK(rows_of(agg, day(5)) == recomputed(raw, day(5)));
  }
  SUBCASE("narrowed, standalone: inside the new window, or only inside the old one") {
    std::string blob;
    fl::StreamingTable<Agg> t{"t"};
    {
      fl::ReplaceWhere wide{"t", last_days(4), {.query_version = "v1"}};
      wide.apply(t, at(6), daily, raw);
      fl::detail::byte_writer wr{blob};
      wide.write_checkpoint(wr, fl::checkpoint_scope::snapshot);
    }
    fl::ReplaceWhere narrow{"t", last_days(1), {.query_version = "v1"}};
    fl::checkpoint_blobs b;
    b.snapshot = std::string_view(blob);
    narrow.read_checkpoint(t, b);
    // Day 3 lay in the window processed, not in the new one: kept, incremental.
    fl::dml_insert(t, std::vector<Agg>{{day(3), 100, 100, std::nullopt}});
    narrow.apply(t, at(6), daily, raw);
    CHECK(technique_of(narrow.last_plan()) == "INCREMENTAL");
    CHECK(rows_of(t, day(3)).size() == 2);
    // Day 6 lies in the new window.
    fl::dml_insert(t, std::vector<Agg>{{day(6), 100, 100, std::nullopt}});
    narrow.apply(t, at(6), daily, raw);
    CHECK(reason_of(narrow.last_plan()) == "EXTERNAL_CHANGE_IN_REPLACE_WINDOW");
    CHECK(rows_of(t, day(6)) == recomputed(raw, day(6)));
    CHECK(rows_of(t, day(3)).size() == 2);
  }
}

TEST_CASE("R-WHERE-10: a changed query version is REPLACE_WHERE_DEFINITION_CHANGED, the predicate changed or not") {
  fl::MemorySource<Event> raw{"events"};
  fl::StreamingTable<Agg> agg{"agg"};
  fl::MemoryCheckpoint ck;
  for (int n = 0; n < 6; ++n) {
    raw.append(Event{day(n), 1, n});
    update_restarted(ck, raw, agg, last_days(4), daily, "v1", n);
  }
  raw.append(Event{day(6), 1, 6});
  // Narrowed, under a new version: the version decides (R-WHERE-8's order).
  CHECK(update_restarted(ck, raw, agg, last_days(1), daily_with_uniq, "v2", 6) ==
        plan_pair{"COMPLETE_RECOMPUTE", "REPLACE_WHERE_DEFINITION_CHANGED"});
  CHECK(rows_of(agg, day(5)).at(0).uniq_users == 1);
  CHECK(rows_of(agg, day(6)).at(0).uniq_users == 1);
  CHECK_FALSE(rows_of(agg, day(4)).at(0).uniq_users.has_value());
  // Widened, under a new version.
  raw.append(Event{day(7), 1, 7});
  CHECK(update_restarted(ck, raw, agg, last_days(5), daily_with_uniq, "v3", 7) ==
        plan_pair{"COMPLETE_RECOMPUTE", "REPLACE_WHERE_DEFINITION_CHANGED"});
  CHECK(rows_of(agg, day(2)).at(0).uniq_users == 1);
  // The same version, narrowed again: incremental.
  raw.append(Event{day(7), 2, 7});
  CHECK(update_restarted(ck, raw, agg, last_days(2), daily_with_uniq, "v3", 7) == plan_pair{"INCREMENTAL", "none"});
  CHECK(rows_of(agg, day(7)).at(0).uniq_users == 2);
  // A changed predicate with incremental updates switched back on: the option decides.
  update_restarted(ck, raw, agg, last_days(2), daily_with_uniq, "v3", 7, {.incremental = false});
  CHECK(update_restarted(ck, raw, agg, last_days(1), daily_with_uniq, "v3", 7) ==
        plan_pair{"COMPLETE_RECOMPUTE", "REPLACE_WHERE_DEFINITION_CHANGED"});
}

TEST_CASE("R-WHERE-8: a changed predicate next to a non-deterministic one reports the non-determinism") {
  fl::MemorySource<Event> raw{"events"};
  fl::StreamingTable<Agg> agg{"agg"};
  fl::MemoryCheckpoint ck;
  for (int n = 0; n < 6; ++n) raw.append(Event{day(n), 1, n});
  update_restarted(ck, raw, agg, last_days(4), daily, "v1", 5);
  // rand() < 2.0 keeps every row: the target is the same, the plan is not.
  CHECK(update_restarted(ck, raw, agg, last_days(3) && w::rand() < 2.0, daily, "v1", 5) ==
        plan_pair{"COMPLETE_RECOMPUTE", "REPLACE_WHERE_NOT_DETERMINISTIC"});
  CHECK(update_restarted(ck, raw, agg, last_days(2), daily, "v1", 5) ==
        plan_pair{"COMPLETE_RECOMPUTE", "PRIOR_REPLACE_WHERE_NOT_DETERMINISTIC"});
  CHECK(update_restarted(ck, raw, agg, last_days(1), daily, "v1", 5) == plan_pair{"INCREMENTAL", "none"});
  CHECK(rows_of(agg, day(0)).empty());  // outside every window
  for (int n = 1; n < 6; ++n) CHECK(rows_of(agg, day(n)) == recomputed(raw, day(n)));
}

TEST_CASE("R-WHERE-4/R-WHERE-8: a changed predicate after an override is compared with the override's window") {
  fl::MemorySource<Event> raw{"events"};
  fl::StreamingTable<Agg> agg{"agg"};
  fl::MemoryCheckpoint ck;
  for (int n = 0; n < 10; ++n) {
    raw.append(Event{day(n), 1, n});
    update_restarted(ck, raw, agg, last_days(1), daily, "v1", n);
  }
  // A backfill of days 3 onwards, under the flow's own predicate as declared.
  CHECK(update_restarted(ck, raw, agg, last_days(1), daily, "v1", 9, {}, 1, last_days(6)) ==
        plan_pair{"COMPLETE_RECOMPUTE", "UNSUPPORTED_REPLACE_WHERE_PREDICATE"});
  CHECK(agg.size() == 10);
  // A wider predicate than the flow had, inside the backfilled window: incremental.
  raw.append(Event{day(10), 1, 10});
  CHECK(update_restarted(ck, raw, agg, last_days(4), daily, "v1", 10) == plan_pair{"INCREMENTAL", "none"});
  // Wider than the previous update's window [day 6, +inf): a recompute.
  CHECK(update_restarted(ck, raw, agg, last_days(8), daily, "v1", 10) ==
        plan_pair{"COMPLETE_RECOMPUTE", "UNSUPPORTED_REPLACE_WHERE_PREDICATE"});
  // An override is a recompute even when it is the flow's predicate itself
  // or narrower than the window processed (R-WHERE-4).
  CHECK(update_restarted(ck, raw, agg, last_days(8), daily, "v1", 10, {}, 1, last_days(8)) ==
        plan_pair{"COMPLETE_RECOMPUTE", "UNSUPPORTED_REPLACE_WHERE_PREDICATE"});
  CHECK(update_restarted(ck, raw, agg, last_days(8), daily, "v1", 10, {}, 1, last_days(1)) ==
        plan_pair{"COMPLETE_RECOMPUTE", "UNSUPPORTED_REPLACE_WHERE_PREDICATE"});
  // The override's window [day 9, +inf) was the last processed: a predicate
  // of two days is wider, one of one day is not.
  CHECK(update_restarted(ck, raw, agg, last_days(2), daily, "v1", 10) ==
        plan_pair{"COMPLETE_RECOMPUTE", "UNSUPPORTED_REPLACE_WHERE_PREDICATE"});
  CHECK(update_restarted(ck, raw, agg, last_days(1), daily, "v1", 10) == plan_pair{"INCREMENTAL", "none"});
  for (int n = 0; n <= 10; ++n) CHECK(rows_of(agg, day(n)) == recomputed(raw, day(n)));
}

TEST_CASE("R-WHERE-10: checkpoints of formats 1 and 2 still open; a format-2 definition's predicate text is dropped") {
  fl::MemorySource<Event> raw{"events"};
  for (int n = 0; n < 6; ++n) raw.append(Event{day(n), 1, n});
  // A blob of `format`, written by a flow with last_days(4) at day 5. Format
  // 2 has format 3's fields; its definition was "REPLACE WHERE ", the
  // predicate's text, and " (no incremental)" when incremental updates were
  // off. Format 1 ends before the definition and the query.
  const auto older = [&](fl::StreamingTable<Agg>& t, int format, bool incremental) {
    fl::ReplaceWhere v1{"t", last_days(4), {.incremental = incremental, .query_version = "v1"}};
    v1.apply(t, at(5), daily, raw);
    std::string blob;
    fl::detail::byte_writer wr{blob};
    v1.write_checkpoint(wr, fl::checkpoint_scope::snapshot);
    REQUIRE(blob.size() > 6);
    CHECK(blob.substr(0, 6) == std::string("FLRW\x03\x00", 6));
    fl::detail::replace_where_state s =
        fl::detail::decode_replace_where_state(blob, fl::checkpoint_scope::snapshot, "t");
    s.definition = "REPLACE WHERE " + last_days(4).to_string() + (incremental ? "" : " (no incremental)");
    if (format == 1) {
      s.definition.clear();
      s.query.clear();
    }
    std::string old;
    fl::detail::byte_writer ow{old};
    fl::detail::encode_replace_where_state(ow, s, fl::checkpoint_scope::snapshot);
    if (format == 1) old.resize(old.size() - 16);  // the two empty strings' lengths
    old[4] = static_cast<char>(format);  // the format number, little-endian
    return old;
  };
  const auto reopened = [&](fl::StreamingTable<Agg>& t, const std::string& blob, const w::expr& p) {
    fl::ReplaceWhere f{"t", p, {.query_version = "v1"}};
    fl::checkpoint_blobs b;
    b.snapshot = std::string_view(blob);
    f.read_checkpoint(t, b);
    f.apply(t, at(6), daily, raw);
    return plan_pair{technique_of(f.last_plan()), reason_of(f.last_plan())};
  };
  raw.append(Event{day(6), 1, 6});
  fl::StreamingTable<Agg> same{"t"}, narrower{"t"}, wider{"t"}, off{"t"}, unknown{"t"};
  CHECK(reopened(same, older(same, 2, true), last_days(4)) == plan_pair{"INCREMENTAL", "none"});
  CHECK(reopened(narrower, older(narrower, 2, true), last_days(1)) == plan_pair{"INCREMENTAL", "none"});
  CHECK(reopened(wider, older(wider, 2, true), last_days(6)) ==
        plan_pair{"COMPLETE_RECOMPUTE", "UNSUPPORTED_REPLACE_WHERE_PREDICATE"});
  CHECK(reopened(off, older(off, 2, false), last_days(4)) ==
        plan_pair{"COMPLETE_RECOMPUTE", "REPLACE_WHERE_DEFINITION_CHANGED"});
  // Format 1 recorded no definition: unknown, so a recompute.
  CHECK(reopened(unknown, older(unknown, 1, true), last_days(4)) ==
        plan_pair{"COMPLETE_RECOMPUTE", "REPLACE_WHERE_DEFINITION_CHANGED"});
  for (auto* t : {&same, &narrower, &wider, &off, &unknown}) CHECK(rows_of(*t, day(6)) == recomputed(raw, day(6)));
  // A format this build does not know is refused, naming the one it reads.
  fl::StreamingTable<Agg> later{"t"};
  std::string blob = older(later, 2, true);
  blob[4] = 4;
  fl::ReplaceWhere f{"t", last_days(4), {.query_version = "v1"}};
  fl::checkpoint_blobs b;
  b.snapshot = std::string_view(blob);
  try {
    f.read_checkpoint(later, b);
    FAIL("accepted");
  } catch (const fl::error& e) {
    CHECK(e.code() == fl::errc::checkpoint_corrupt);
    CHECK(std::string(e.what()).find("unknown format version 4 (this build reads version 3)") != std::string::npos);
  }
}

TEST_CASE("R-WHERE-4/R-WHERE-7: an override's window is remembered on the flow's slice column only") {
  fl::MemorySource<Event> raw{"events"};
  for (int n = 0; n < 10; ++n) raw.append(Event{day(n), n, n});
  const w::expr with_or = last_days(3) || w::col("events") == 7;
  SUBCASE("a flow predicate with no single range has no slice column: every update recomputes") {
    fl::StreamingTable<Agg> agg{"agg"};
    fl::ReplaceWhere flow{"agg", with_or, {.query_version = "v1"}};
    CHECK(!flow.slice_column().has_value());
    flow.apply_override(agg, last_days(2), at(9), daily, raw);
    CHECK(!flow.last_plan().window.has_value());  // not remembered: no slice column
    raw.append(Event{day(10), 1, 1});
    flow.apply(agg, at(10), daily, raw);
    CHECK(technique_of(flow.last_plan()) == "COMPLETE_RECOMPUTE");
    CHECK(reason_of(flow.last_plan()) == "UNSUPPORTED_REPLACE_WHERE_PREDICATE");
  }
  SUBCASE("a flow predicate with a range: the override's window covers the next update's") {
    fl::StreamingTable<Agg> agg{"agg"};
    fl::ReplaceWhere flow{"agg", last_days(1), {.query_version = "v1"}};
    flow.apply(agg, at(9), daily, raw);
    flow.apply_override(agg, last_days(5), at(9), daily, raw);
    REQUIRE(flow.last_plan().window.has_value());
    raw.append(Event{day(10), 1, 1});
    flow.apply(agg, at(10), daily, raw);
    CHECK(technique_of(flow.last_plan()) == "INCREMENTAL");
  }
}

TEST_CASE("R-WHERE-1: a failed update is undone and replayed exactly once") {
  fl::MemorySource<Event> raw{"events"};
  fl::StreamingTable<Agg> agg{"agg"};
  fl::MemoryCheckpoint ck;
  bool fail = false;
  fl::PipelineOptions po;
  po.fault_hook = [&](fl::fault_point fp, std::string_view, std::uint64_t) {
    if (fail && fp == fl::fault_point::before_commit) throw std::runtime_error("injected");
  };
  fl::Pipeline p{"p", ck, po};
  p.flow("agg").from(raw).query(daily).into(agg, fl::ReplaceWhere{last_days(2)});
  for (int n = 0; n < 3; ++n) {
    raw.append(Event{day(n), 1, 1});
    fl::UpdateOptions o;
    o.now = clock_at(n);
    p.update(o);
  }
  const auto before = agg.sorted_all_rows();
  raw.append(Event{day(2), 2, 5});
  fail = true;
  fl::UpdateOptions o;
  o.now = clock_at(2);
  CHECK_THROWS_AS(p.update(o), std::runtime_error);
  CHECK(agg.sorted_all_rows() == before);
  fail = false;
  p.update(o);
  CHECK(rows_of(agg, day(2)) == std::vector<Agg>{{day(2), 2, 6, std::nullopt}});
  CHECK(agg.size() == 3);
}

TEST_CASE("R-WHERE-8: planning_information events carry the technique and the reason") {
  fl::MemorySource<Event> raw{"events"};
  for (int n = 0; n < 5; ++n) raw.append(Event{day(n), 1, n});
  fl::StreamingTable<Agg> agg{"agg"};
  fl::MemoryCheckpoint ck;
  flowtest::json_events plans{"planning_information"};
  auto& [type, events, log] = plans;
  fl::Pipeline p{"p", ck};
  p.event_log(log);
  p.flow("agg").from(raw).query(daily).into(agg, fl::ReplaceWhere{last_days(1)});
  fl::UpdateOptions o;
  o.now = clock_at(4);
  p.update(o);
  p.update(o);
  fl::UpdateOptions backfill = o;
  backfill.replace_where_overrides.emplace("agg", last_days(4));
  p.update(backfill);
  REQUIRE(events.size() == 3);
  CHECK(events[0]["flow"] == "agg");
  CHECK(events[0]["technique"] == "COMPLETE_RECOMPUTE");
  CHECK(events[0]["reason"].is_null());
  CHECK(events[1]["technique"] == "INCREMENTAL");
  CHECK(events[1]["reason"].is_null());
  CHECK(events[2]["technique"] == "COMPLETE_RECOMPUTE");
  CHECK(events[2]["reason"] == "UNSUPPORTED_REPLACE_WHERE_PREDICATE");
  CHECK(events[2]["pipeline"] == "p");
  CHECK(agg.size() == 5);
}

TEST_CASE("R-WHERE-7: a corrupt checkpoint blob is refused, the flow unchanged") {
  fl::StreamingTable<Agg> agg{"agg"};
  fl::ReplaceWhere flow{"agg", last_days(1)};
  fl::checkpoint_blobs blobs;
  const std::string junk = "FLRW\x01";
  blobs.snapshot = std::string_view(junk);
  try {
    flow.read_checkpoint(agg, blobs);
    FAIL("accepted");
  } catch (const fl::error& e) {
    CHECK(e.code() == fl::errc::checkpoint_corrupt);
  }
  CHECK(flow.updates() == 0);
}

// --- Randomised equivalence -------------------------------------------------------------------

struct random_world {
  fl::MemorySource<Event> fact{"fact"};
  fl::MemorySource<User> users{"users"};
};

/// A pipeline writing one target; `incremental` chooses the flow's option.
struct random_side {
  fl::StreamingTable<RegionDay> table;
  fl::MemoryCheckpoint ck;
  std::unique_ptr<fl::Pipeline> p;
  w::expr pred;
  bool incremental;
  random_side(std::string name, w::expr pr, bool inc) : table(name), pred(std::move(pr)), incremental(inc) {}
  void open(random_world& world, fl::EventLog* log = nullptr) {
    p.reset();
    p = std::make_unique<fl::Pipeline>("p", ck);
    if (log != nullptr) p->event_log(*log);
    p->flow("f").from(world.fact).with(world.users).query(by_region).into(
        table, fl::ReplaceWhere{"f", pred, fl::ReplaceWhereOptions{.incremental = incremental}});
  }
};

TEST_CASE("R-WHERE-7: incremental updates give the target a complete recompute gives (random histories)") {
  std::uint64_t incremental_updates = 0, updates = 0;
  fl::EventLog log{[&](std::string_view line) {
    if (line.find("\"technique\":\"INCREMENTAL\"") != std::string_view::npos) ++incremental_updates;
  }};
  for (std::uint32_t seed = 1; seed <= 40; ++seed) {
    std::mt19937 rng(seed);
    const auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    const int shape = seed % 4;
    const w::expr pred = shape == 0   ? last_days(3)
                         : shape == 1 ? w::col("event_date").between(w::current_date() - w::days(4), w::current_date())
                         : shape == 2 ? (w::col("event_date") > w::current_date() - w::days(5) &&
                                         w::col("event_date") <= w::current_date() + w::days(1))
                                      : last_days(6);
    random_world world;
    for (int u = 0; u < 4; ++u) world.users.append(User{u, "r" + std::to_string(u % 2)});
    random_side inc{"inc", pred, true}, full{"full", pred, false};
    inc.open(world, &log);
    full.open(world);
    int today = 0;
    for (int step = 0; step < 30; ++step) {
      const int ops = pick(1, 4);
      for (int k = 0; k < ops; ++k) {
        switch (pick(0, 5)) {
          case 0:
          case 1:
          case 2: world.fact.append(Event{day(today + pick(-8, 1)), pick(0, 5), pick(1, 9)}); break;
          case 3: {
            const Day d = day(today + pick(-8, 0));
            world.fact.erase_where([&](const Event& e) { return e.event_date == d && e.user_id % 2 == 0; });
            break;
          }
          case 4: world.users.append(User{pick(0, 5), "r" + std::to_string(pick(0, 2))}); break;
          default: today += pick(0, 2); break;
        }
      }
      if (pick(0, 7) == 0) inc.open(world, &log);  // a restart over the same checkpoint
      fl::UpdateOptions o;
      o.now = clock_at(today);
      inc.p->update(o);
      full.p->update(o);
      ++updates;
      INFO("seed " << seed << " step " << step << " predicate " << pred.to_string());
      REQUIRE(inc.table.sorted_all_rows() == full.table.sorted_all_rows());
    }
  }
  CHECK(updates == 40 * 30);
  // The comparison is not vacuous: many updates were incremental.
  CHECK(incremental_updates > updates / 4);
}

TEST_CASE("R-WHERE-3: where::context takes any system-clock time point, floored to microseconds") {
  const std::chrono::system_clock::time_point now =
      std::chrono::system_clock::time_point(day(3)) + std::chrono::hours(5) + std::chrono::nanoseconds(1'999);
  const w::context c{now};
  CHECK(c.now == w::timestamp_type(day(3)) + std::chrono::hours(5) + std::chrono::microseconds(1));
  CHECK(c.current_date() == day(3));
  CHECK(c.seed == 0);
  const w::context seeded{day(4), 9};  // a sys_days is a time point too
  CHECK(seeded.current_date() == day(4));
  CHECK(seeded.seed == 9);
  // UpdateOptions::now and the standalone clock give the same updates.
  fl::MemorySource<Event> raw{"events"};
  for (int n = 0; n < 4; ++n) raw.append(Event{day(n), 1, n});
  fl::StreamingTable<Agg> agg{"agg"};
  fl::ReplaceWhere flow{"agg", last_days(1)};
  flow.apply(agg, w::context{clock_at(3)}, daily, raw);
  CHECK(agg.size() == 2);
}

TEST_CASE("R-WHERE-7: a source filled again with fewer appends than before a restart reprocesses every slice") {
  fl::StreamingTable<Agg> agg{"agg"};
  fl::MemoryCheckpoint ck;
  {
    fl::MemorySource<Event> raw{"events"};
    for (int n = 0; n < 4; ++n) raw.append(Event{day(n), 1, n});  // version 4
    update_restarted(ck, raw, agg, last_days(3), daily, "v1", 3);
  }
  // The restarted program appends the same records, and a new day, in one
  // call: its version (1) is below the one the flow remembers.
  fl::MemorySource<Event> raw{"events"};
  std::vector<Event> all;
  for (int n = 0; n < 4; ++n) all.push_back(Event{day(n), 1, n});
  all.push_back(Event{day(4), 1, 40});
  all.push_back(Event{day(3), 2, 30});
  raw.append(all);
  update_restarted(ck, raw, agg, last_days(3), daily, "v1", 4);
  REQUIRE(rows_of(agg, day(4)).size() == 1);
  CHECK(rows_of(agg, day(4)).at(0).amount == 40);
  CHECK(rows_of(agg, day(3)).at(0).amount == 33);
  CHECK(rows_of(agg, day(3)).at(0).events == 2);
}

}  // namespace flows_replace_where_replace_where
