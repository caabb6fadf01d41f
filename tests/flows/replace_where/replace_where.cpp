// REPLACE WHERE (docs/replace-where.md, docs/semantics.md R-WHERE-1..10): the
// four examples of the documentation as scenarios, every fallback reason
// (predicates changed between runs among them), the declaration errors,
// checkpoints, events, and a randomised check that incremental updates give
// the same target as complete recomputes.
#include <flows/replace_where/world.hpp>
#include <support/checkpoint_blobs.hpp>
#include <support/errors.hpp>
#include <support/event_json.hpp>

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace flows_replace_where_replace_where {

using namespace flows_replace_where;

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

/// A target whose date column the sources do not have (not pushable).
struct Renamed {
  Day day;
  std::int64_t amount = 0;
  friend auto operator<=>(const Renamed&, const Renamed&) = default;  // and ==
};
FLOWLIB_SCHEMA(Renamed, day, amount);

/// Per day: the count and the sum of the amounts.
inline std::vector<Agg> daily(std::span<const Event> es) {
  std::map<Day, std::pair<std::int64_t, std::int64_t>> per_day;  // events, amount
  for (const auto& e : es) {
    auto& [events, amount] = per_day[e.event_date];
    ++events;
    amount += e.amount;
  }
  std::vector<Agg> out;
  for (const auto& [d, v] : per_day) out.push_back({d, v.first, v.second, std::nullopt});
  return out;
}

inline std::vector<Agg> daily_with_uniq(std::span<const Event> es) {
  std::map<Day, std::set<std::int64_t>> users;
  for (const auto& e : es) users[e.event_date].insert(e.user_id);
  std::vector<Agg> out = daily(es);
  for (auto& a : out) a.uniq_users = static_cast<std::int64_t>(users[a.event_date].size());
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
/// A flow's last plan; the plans the tests expect.
template <class Flow>
plan_pair plan_of(const Flow& f) {
  return {technique_of(f.last_plan()), reason_of(f.last_plan())};
}
const plan_pair incremental{"INCREMENTAL", "none"};
inline plan_pair recompute(std::string reason) { return {"COMPLETE_RECOMPUTE", std::move(reason)}; }

/// The target's rows of day d.
template <class Table>
auto rows_of(const Table& t, Day d) {
  std::vector<typename Table::row_type> out;
  for (const auto& r : t.sorted_all_rows())
    if (r.event_date == d) out.push_back(r);
  return out;
}

/// Events of user 1 on days [from, to), the amount of each its day number.
inline void one_a_day(fl::MemorySource<Event>& raw, int from, int to) {
  for (int n = from; n < to; ++n) raw.append(Event{day(n), 1, n});
}

using flowtest::snapshot_of;

/// A flow given a snapshot of state.
template <class Flow, class Table>
void restore(Flow& f, Table& t, const std::string& blob) {
  fl::checkpoint_blobs b;
  b.snapshot = std::string_view(blob);
  f.read_checkpoint(t, b);
}

/// A standalone flow writing `agg` from `raw`.
struct standalone {
  fl::MemorySource<Event> raw{"events"};
  fl::StreamingTable<Agg> agg{"agg"};
  fl::ReplaceWhere<> flow;
  explicit standalone(w::expr predicate, fl::ReplaceWhereOptions options = {})
      : flow("agg", std::move(predicate), std::move(options)) {}
  /// An update at noon of day n; its plan.
  plan_pair apply(int n) {
    flow.apply(agg, at(n), daily, raw);
    return plan_of(flow);
  }
  /// Days [0, days): an event of amount 1 each, each followed by an update.
  void history(int days) {
    for (int n = 0; n < days; ++n) {
      raw.append(Event{day(n), 1, 1});
      apply(n);
    }
  }
};

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
      CHECK(plan_of(flow) == recompute("none"));
    } else {
      CHECK(plan_of(flow) == incremental);
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
  CHECK(plan_of(flow) == incremental);
  CHECK_FALSE(flow.last_plan().all_slices);
  // User 1 moves to asia: the rows of days 3 and 4 (the window on day 4)
  // follow, the older ones keep emea.
  users.append(User{1, "asia"});
  flow.apply(out, at(4), by_region, fact, users);
  CHECK(plan_of(flow) == incremental);
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
  CHECK(plan_of(flow) == recompute("UNSUPPORTED_REPLACE_WHERE_PREDICATE"));
  CHECK(flow.last_plan().override_predicate);
  // The override is pushed down to the source: day 10 is not even read,
  // and rows outside the override's range are untouched.
  CHECK(flow.last_plan().rows_outside_predicate == 0);
  CHECK(rows_of(agg, day(10)).empty());
  // The defined predicate again; its window [day 8, +inf) takes in day 10,
  // which the override excluded: a recompute of the window.
  flow.apply(agg, at(10), daily_with_uniq, raw);
  CHECK(plan_of(flow) == recompute("UNSUPPORTED_REPLACE_WHERE_PREDICATE"));
  raw.append(Event{day(10), 4, 1});
  flow.apply(agg, at(10), daily_with_uniq, raw);
  CHECK(plan_of(flow) == incremental);
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
  CHECK(plan_of(flow) == incremental);
  CHECK(flow.last_plan().slices == 0);
  flow.apply_override(agg, last_days(365), at(365), daily, raw);
  CHECK(plan_of(flow) == recompute("UNSUPPORTED_REPLACE_WHERE_PREDICATE"));
  CHECK(agg.size() == 366);
  // The next day's window lies inside the backfilled one: incremental.
  raw.append(Event{day(366), 0, 1});
  flow.apply(agg, at(366), daily, raw);
  CHECK(plan_of(flow) == incremental);
  CHECK(agg.size() == 367);
  CHECK(rows_of(agg, day(0)).at(0).amount == 0);
  CHECK(rows_of(agg, day(200)).at(0).amount == 200);
}

// --- Fallback reasons (R-WHERE-7, R-WHERE-8) ---------------------------------------------------

TEST_CASE("R-WHERE-8: the first update is a complete recompute with no reason") {
  standalone s{last_days(3)};
  s.history(1);
  CHECK(technique_of(s.flow.last_plan()) == "COMPLETE_RECOMPUTE");
  CHECK_FALSE(s.flow.last_plan().reason.has_value());
  CHECK(s.apply(1) == incremental);
}

TEST_CASE("R-WHERE-7: a window moving over previously excluded rows falls back") {
  standalone s{w::col("event_date").between(w::current_date() - w::days(7), w::current_date())};
  one_a_day(s.raw, 0, 20);
  s.apply(10);
  CHECK(s.agg.size() == 8);  // days 3..10
  CHECK(s.apply(10) == incremental);  // same window
  // The upper bound moved: day 11 was excluded.
  CHECK(s.apply(11) == recompute("UNSUPPORTED_REPLACE_WHERE_PREDICATE"));
  CHECK(s.agg.size() == 9);  // days 3..11: day 3 is kept (outside the window now)
}

TEST_CASE("R-WHERE-7: a lower bound moving forward stays incremental") {
  standalone s{last_days(2)};
  for (int n = 0; n < 6; ++n) {
    s.raw.append(Event{day(n), 1, 1});
    CHECK(s.apply(n) == (n == 0 ? recompute("none") : incremental));
  }
}

TEST_CASE("R-WHERE-5/R-WHERE-8: a direct insert inside the window falls back; outside it survives") {
  standalone s{last_days(1)};
  s.history(3);
  // Outside the next window: kept, the update stays incremental.
  fl::dml_insert(s.agg, std::vector<Agg>{{day(-30), 7, 7, std::nullopt}});
  s.raw.append(Event{day(3), 1, 1});
  CHECK(s.apply(3) == incremental);
  CHECK(rows_of(s.agg, day(-30)).size() == 1);
  // Inside the window: a complete recompute, which replaces the row.
  fl::dml_insert(s.agg, std::vector<Agg>{{day(3), 100, 100, std::nullopt}});
  CHECK(s.apply(3) == recompute("EXTERNAL_CHANGE_IN_REPLACE_WINDOW"));
  CHECK(rows_of(s.agg, day(3)) == std::vector<Agg>{{day(3), 1, 1, std::nullopt}});
  CHECK(rows_of(s.agg, day(-30)).size() == 1);
  CHECK(s.apply(3) == incremental);  // eligible again
}

TEST_CASE("R-WHERE-1/R-WHERE-5: a failed update changes nothing, and its retry still sees the direct insert") {
  standalone s{last_days(1)};
  s.history(3);
  fl::dml_insert(s.agg, std::vector<Agg>{{day(2), 100, 100, std::nullopt}});
  const auto before = s.agg.sorted_all_rows();
  const auto failing = [](std::span<const Event>) -> std::vector<Agg> { throw std::runtime_error("query failed"); };
  CHECK_THROWS_AS(s.flow.apply(s.agg, at(2), failing, s.raw), std::runtime_error);
  CHECK(s.agg.sorted_all_rows() == before);
  CHECK(s.apply(2) == recompute("EXTERNAL_CHANGE_IN_REPLACE_WINDOW"));
  CHECK(rows_of(s.agg, day(2)) == std::vector<Agg>{{day(2), 1, 1, std::nullopt}});
}

TEST_CASE("R-WHERE-7/R-WHERE-8: rand() falls back, and so does the update after it") {
  standalone s{last_days(2)};
  for (int n = 0; n < 5; ++n) s.raw.append(Event{day(n), 1, 1});
  s.apply(4);
  CHECK_FALSE((w::rand() < 2.0).deterministic());
  s.flow.apply_override(s.agg, last_days(2) && w::rand() < 2.0, at(4), daily, s.raw);
  CHECK(plan_of(s.flow) == recompute("REPLACE_WHERE_NOT_DETERMINISTIC"));  // before the override's
  CHECK(s.apply(4) == recompute("PRIOR_REPLACE_WHERE_NOT_DETERMINISTIC"));
  CHECK(s.apply(4) == incremental);
  CHECK(s.agg.size() == 3);
}

TEST_CASE("R-WHERE-7/R-WHERE-8: a predicate the sources cannot take, or with no single range, falls back") {
  fl::MemorySource<Event> raw{"events"};
  for (int n = 0; n < 5; ++n) raw.append(Event{day(n), 1, n});
  SUBCASE("not pushable") {
    fl::StreamingTable<Renamed> t{"renamed"};
    fl::ReplaceWhere flow{"renamed", w::col("day") >= w::current_date() - w::days(1)};
    flow.apply(t, at(4), renamed, raw);
    flow.apply(t, at(4), renamed, raw);
    CHECK(plan_of(flow) == recompute("UNSUPPORTED_REPLACE_WHERE_PREDICATE"));
    CHECK(t.size() == 2);
  }
  SUBCASE("no single-column window") {
    fl::StreamingTable<Agg> t{"agg"};
    fl::ReplaceWhere flow{"agg", last_days(1) || w::col("events") > 100};
    flow.apply(t, at(4), daily, raw);
    flow.apply(t, at(4), daily, raw);
    CHECK(plan_of(flow) == recompute("UNSUPPORTED_REPLACE_WHERE_PREDICATE"));
    CHECK(t.size() == 2);
  }
}

TEST_CASE("R-WHERE-8: with incremental updates disabled every update recomputes, with no reason") {
  standalone s{last_days(1), fl::ReplaceWhereOptions{.incremental = false}};
  s.history(1);
  s.apply(1);
  CHECK(technique_of(s.flow.last_plan()) == "COMPLETE_RECOMPUTE");
  CHECK_FALSE(s.flow.last_plan().reason.has_value());
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
    CHECK(plan_of(flow) == recompute("none"));  // a first update again
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
  one_a_day(raw, 0, 10);
  for (const bool reset_allowed : {true, false}) {
    CAPTURE(reset_allowed);
    fl::StreamingTable<Agg> agg{"agg", fl::table_options<Agg>().reset_allowed(reset_allowed)};
    fl::MemoryCheckpoint ck;
    fl::Pipeline p{"p", ck};
    p.flow("agg").from(raw).query(daily).into(agg, fl::ReplaceWhere{last_days(1)});
    update_at(p, 9, {{"agg", last_days(9)}});
    CHECK(agg.size() == 10);
    if (!reset_allowed) {
      CHECK_THROWS_AS(p.full_refresh(agg), fl::error);
      CHECK(agg.size() == 10);
      continue;
    }
    p.full_refresh(agg);
    update_at(p, 9);
    CHECK(agg.size() == 2);
  }
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
    const fl::error e = flowtest::error_of(
        [&] { p.flow("b").from(raw).query(daily).into(agg, fl::ReplaceWhere{last_days(2)}); });
    CHECK(e.code() == fl::errc::invalid_target);
    CHECK(flowtest::contains(e.what(), "REPLACE WHERE"));
    fl::StreamingTable<Agg> checked{
        "checked", fl::table_options<Agg>().expect(fl::expect("positive", [](const Agg& x) { return x.events > 0; }))};
    CHECK_THROWS_AS(p.flow("c").from(raw).query(daily).into(checked, fl::ReplaceWhere{last_days(1)}), fl::error);
    fl::UpdateOptions o;
    o.replace_where_overrides.emplace("nope", last_days(1));
    CHECK_THROWS_AS(p.update(o), fl::error);
  }
}

// --- Pipelines: checkpoints, restarts, faults, events ---------------------------------------

/// One update (`updates` updates) of a new pipeline over `ck`, as a
/// restarted program runs it: the flow "agg" with `predicate`, `query` and
/// its `version`, at noon of day n, each with `override_predicate` when
/// given. Returns the last update's plan.
template <class Query>
plan_pair update_restarted(fl::MemoryCheckpoint& ck, fl::MemorySource<Event>& raw, fl::StreamingTable<Agg>& agg,
                           w::expr predicate, Query query, std::string version, int n,
                           fl::ReplaceWhereOptions options = {}, int updates = 1,
                           std::optional<w::expr> override_predicate = std::nullopt) {
  plan_pair plan;
  const auto log = plan_log(plan);
  fl::Pipeline p{"p", ck};
  p.event_log(*log);
  p.flow("agg").from(raw).query(query, std::move(version)).into(agg, fl::ReplaceWhere{std::move(predicate), options});
  std::map<std::string, w::expr> overrides;
  if (override_predicate) overrides.emplace("agg", *override_predicate);
  for (int i = 0; i < updates; ++i) update_at(p, n, overrides);
  return plan;
}

using query_fn = std::vector<Agg> (*)(std::span<const Event>);

/// What a complete recompute writes for day d: daily() over the source's rows of d.
inline std::vector<Agg> recomputed(const fl::MemorySource<Event>& raw, Day d) {
  std::vector<Event> es;
  raw.scan([&](const Event& e) {
    if (e.event_date == d) es.push_back(e);
  });
  return daily(es);
}

/// A target written by restarted pipelines over one checkpoint.
struct restarts {
  fl::MemorySource<Event> raw{"events"};
  fl::StreamingTable<Agg> agg{"agg"};
  fl::MemoryCheckpoint ck;
  /// update_restarted() of query `query` at `version` (daily at v1 by default).
  plan_pair update(w::expr predicate, int n, query_fn query = daily, std::string version = "v1",
                   fl::ReplaceWhereOptions options = {}, int updates = 1,
                   std::optional<w::expr> override_predicate = std::nullopt) {
    return update_restarted(ck, raw, agg, std::move(predicate), query, std::move(version), n, options, updates,
                            std::move(override_predicate));
  }
  /// Days [0, days) of one_a_day(), each followed by an update with `predicate`.
  void history(int days, const w::expr& predicate) {
    for (int n = 0; n < days; ++n) {
      one_a_day(raw, n, n + 1);
      update(predicate, n);
    }
  }
  /// Every day of [from, to] holds what a recompute writes.
  void check_recomputed(int from, int to) const {
    for (int n = from; n <= to; ++n) {
      CAPTURE(n);
      CHECK(rows_of(agg, day(n)) == recomputed(raw, day(n)));
    }
  }
};

TEST_CASE("R-WHERE-7: a restarted pipeline goes on incrementally from its checkpoint") {
  restarts r;
  std::vector<std::string> techniques;
  fl::EventLog log{[&](std::string_view line) {
    const auto j = nlohmann::json::parse(line);
    if (j["event_type"] == "planning_information") techniques.push_back(j["technique"]);
  }};
  const auto restarted = [&](int n) {
    fl::Pipeline p{"p", r.ck};  // a new pipeline every update, the same query version
    p.event_log(log);
    p.flow("agg").from(r.raw).query(daily, "v1").into(r.agg, fl::ReplaceWhere{last_days(2)});
    return update_at(p, n);
  };
  for (int n = 0; n < 6; ++n) {
    one_a_day(r.raw, n, n + 1);
    const auto s = restarted(n);
    CHECK(s.flow("agg")->batches == 1);
    CHECK(s.flow("agg")->upserted_rows == 1);
  }
  CHECK(techniques == std::vector<std::string>{"COMPLETE_RECOMPUTE", "INCREMENTAL", "INCREMENTAL",
                                               "INCREMENTAL", "INCREMENTAL", "INCREMENTAL"});
  CHECK(r.agg.size() == 6);
  // A direct insert made while no pipeline ran is noticed after a restart.
  fl::dml_insert(r.agg, std::vector<Agg>{{day(5), 50, 50, std::nullopt}});
  restarted(5);
  CHECK(techniques.back() == "COMPLETE_RECOMPUTE");
  CHECK(rows_of(r.agg, day(5)).size() == 1);
}

// --- R-WHERE-10: the flow's recorded definition -----------------------------------------------

TEST_CASE("R-WHERE-10: a new query version recomputes the whole window, once") {
  restarts r;
  // Query v1 over days 0..6 (one event a day, two users on even days).
  for (int n = 0; n < 7; ++n) {
    one_a_day(r.raw, n, n + 1);
    if (n % 2 == 0) r.raw.append(Event{day(n), 2, 1});
    r.update(last_days(6), n);
  }
  CHECK(r.agg.size() == 7);
  // A new program: query v2 also computes uniq_users. One more day of rows.
  one_a_day(r.raw, 7, 8);
  CHECK(r.update(last_days(6), 7, daily_with_uniq, "v2") == recompute("REPLACE_WHERE_DEFINITION_CHANGED"));
  // Every row of the window (days 1..7) has v2's values; day 0 keeps v1's.
  for (const Agg& a : r.agg.sorted_all_rows()) {
    CAPTURE(a.event_date);
    if (a.event_date == day(0)) {
      CHECK(!a.uniq_users.has_value());
    } else {
      REQUIRE(a.uniq_users.has_value());
      const int n = static_cast<int>((a.event_date - day(0)).count());
      CHECK(*a.uniq_users == (n % 2 == 0 ? 2 : 1));
    }
  }
  CHECK(r.agg.size() == 8);
  // The definition is recorded: the next run with v2 is incremental again.
  r.raw.append(Event{day(8), 3, 8});
  CHECK(r.update(last_days(6), 8, daily_with_uniq, "v2") == incremental);
  CHECK(rows_of(r.agg, day(8)).at(0).uniq_users == 1);
}

TEST_CASE("R-WHERE-10: a changed incremental option recomputes the window; the predicate is not in the definition") {
  restarts r;
  one_a_day(r.raw, 0, 4);
  r.update(last_days(3), 3);
  // Each day one more event, then an update: its predicate, its options,
  // the plan. A narrower predicate: its window is covered by the previous
  // one, so the update is incremental (R-WHERE-7), whatever the predicate's
  // text; then incremental updates switched off, and on again. The version
  // may be given in the options instead; the same version is the same
  // definition.
  struct step {
    int n;
    int days;
    fl::ReplaceWhereOptions options;
    std::string version;
    plan_pair want;
  };
  const step steps[] = {{4, 2, {}, "v1", incremental},
                        {5, 2, {}, "v1", incremental},
                        {6, 2, {.incremental = false}, "v1", recompute("none")},
                        {7, 2, {}, "v1", recompute("REPLACE_WHERE_DEFINITION_CHANGED")},
                        {8, 2, {.query_version = "v1"}, "", incremental}};
  for (const step& s : steps) {
    CAPTURE(s.n);
    one_a_day(r.raw, s.n, s.n + 1);
    CHECK(r.update(last_days(s.days), s.n, daily, s.version, s.options) == s.want);
    if (s.n == 7) CHECK(r.agg.size() == 8);
  }
}

TEST_CASE("R-WHERE-10: an unversioned query recomputes the window at the first update of each pipeline") {
  restarts r;
  one_a_day(r.raw, 0, 3);
  CHECK(r.update(last_days(2), 2, daily, "") == recompute("none"));
  // A new pipeline: nothing says its query is the one that wrote the rows.
  one_a_day(r.raw, 3, 4);
  CHECK(r.update(last_days(2), 3, daily, "") == recompute("REPLACE_WHERE_QUERY_NOT_VERSIONED"));
  // Within one pipeline, the second update is incremental: its flow object
  // wrote the state it goes on from.
  restarts fresh;
  one_a_day(fresh.raw, 0, 5);
  fresh.update(last_days(2), 4, daily, "");
  CHECK(fresh.update(last_days(2), 4, daily, "", {}, 2) == incremental);
  // A versioned query over an unversioned flow's state: a definition change.
  CHECK(fresh.update(last_days(2), 4) == recompute("REPLACE_WHERE_DEFINITION_CHANGED"));
}

TEST_CASE("R-WHERE-10: standalone flows compare definitions through their checkpoint") {
  fl::MemorySource<Event> raw{"events"};
  one_a_day(raw, 0, 5);
  fl::StreamingTable<Agg> agg{"agg"};
  std::string blob;
  {
    fl::ReplaceWhere v1{"agg", last_days(2), {.query_version = "v1"}};
    v1.apply(agg, at(4), daily, raw);
    blob = snapshot_of(v1);
  }
  const auto restored = [&](fl::ReplaceWhereOptions o) {
    auto f = std::make_unique<fl::ReplaceWhere<>>("agg", last_days(2), std::move(o));
    restore(*f, agg, blob);
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
  restarts r;
  fl::Pipeline p{"p", r.ck};
  CHECK(flowtest::contains(flowtest::message_of(fl::errc::invalid_argument,
                                                [&] {
                                                  p.flow("agg").from(r.raw).query(daily, "v2").into(
                                                      r.agg, fl::ReplaceWhere{last_days(2), {.query_version = "v1"}});
                                                }),
                           "\"v1\""));
  // The same version twice is one version.
  p.flow("agg").from(r.raw).query(daily, "v1").into(r.agg, fl::ReplaceWhere{last_days(2), {.query_version = "v1"}});
}

// --- A changed predicate is judged by its window (R-WHERE-7, R-WHERE-8) ------------------------

/// A flow with predicate `narrow` over a new target `t`, taking over the
/// state of a flow with `last_days(4)` that wrote it at day 6 (a program
/// restarted with a narrower predicate).
inline std::unique_ptr<fl::ReplaceWhere<>> narrowed_from_four_days(fl::StreamingTable<Agg>& t,
                                                                    const fl::MemorySource<Event>& raw,
                                                                    w::expr narrow) {
  std::string blob;
  {
    fl::ReplaceWhere wide{"t", last_days(4), {.query_version = "v1"}};
    wide.apply(t, at(6), daily, raw);
    blob = snapshot_of(wide);
  }
  auto f = std::make_unique<fl::ReplaceWhere<>>("t", std::move(narrow), fl::ReplaceWhereOptions{.query_version = "v1"});
  restore(*f, t, blob);
  return f;
}

TEST_CASE("R-WHERE-8: a widened predicate takes in rows not processed before: UNSUPPORTED_REPLACE_WHERE_PREDICATE") {
  restarts r;
  r.history(6, last_days(2));
  // The last update processed days 3 onwards. A late event for day 1, which
  // no update of that predicate would see, and a new day.
  r.raw.append(Event{day(1), 2, 100});
  one_a_day(r.raw, 6, 7);
  const std::vector<Agg> day0 = rows_of(r.agg, day(0));
  // Five days from day 6: days 1 and 2 were outside the window processed.
  CHECK(r.update(last_days(5), 6) == recompute("UNSUPPORTED_REPLACE_WHERE_PREDICATE"));
  // The whole window recomputed, the late event included; day 0 untouched.
  r.check_recomputed(1, 6);
  CHECK(rows_of(r.agg, day(1)).at(0).amount == 101);
  CHECK(rows_of(r.agg, day(0)) == day0);
  CHECK(r.agg.size() == 7);
  // The widened window is the one processed now: the next update goes on incrementally.
  one_a_day(r.raw, 7, 8);
  CHECK(r.update(last_days(5), 7) == incremental);
  // Widened on the other side: an open upper bound after a closed one.
  CHECK(r.update(w::col("event_date").between(w::current_date() - w::days(2), w::current_date()), 7) ==
        incremental);
  r.raw.append(Event{day(9), 1, 9});  // a row of the future, outside [day 5, day 7]
  CHECK(r.update(last_days(2), 7) == recompute("UNSUPPORTED_REPLACE_WHERE_PREDICATE"));
  r.check_recomputed(9, 9);
}

TEST_CASE("R-WHERE-8: a narrowed predicate stays INCREMENTAL") {
  restarts r;
  r.history(6, last_days(4));
  // The last update processed days 1 onwards. Late events for day 2 (inside
  // that window, outside the narrowed one) and day 5 (inside both), and a new day.
  r.raw.append(Event{day(2), 2, 100});
  r.raw.append(Event{day(5), 2, 50});
  one_a_day(r.raw, 6, 7);
  const std::vector<Agg> day2 = rows_of(r.agg, day(2));
  // One day from day 6: days 5 onwards, inside the window processed.
  CHECK(r.update(last_days(1), 6) == incremental);
  r.check_recomputed(5, 6);
  CHECK(rows_of(r.agg, day(5)).at(0).amount == 55);
  // Day 2 is outside the predicate now: untouched (R-WHERE-1).
  CHECK(rows_of(r.agg, day(2)) == day2);
  CHECK(r.agg.size() == 7);
  // A narrowed absolute range inside it, then the relative window again:
  // [day 5, day 6] lies in [day 5, +inf); [day 5, +inf) does not lie in [day 5, day 6].
  CHECK(r.update(w::col("event_date").between(w::lit(day(5)), w::lit(day(6))), 6) == incremental);
  CHECK(r.update(last_days(1), 6) == recompute("UNSUPPORTED_REPLACE_WHERE_PREDICATE"));
  // Standalone: a flow object with a narrower predicate taking over the state.
  fl::StreamingTable<Agg> t{"t"};
  const auto narrow = narrowed_from_four_days(t, r.raw, last_days(1));
  r.raw.append(Event{day(6), 3, 1});
  r.raw.append(Event{day(3), 3, 1});  // outside the narrowed window
  const std::vector<Agg> day3 = rows_of(t, day(3));
  narrow->apply(t, at(6), daily, r.raw);
  CHECK(plan_of(*narrow) == incremental);
  CHECK(narrow->last_plan().slices == 1);  // day 6 only
  CHECK(rows_of(t, day(6)) == recomputed(r.raw, day(6)));
  CHECK(rows_of(t, day(3)) == day3);
}

TEST_CASE("R-WHERE-5/R-WHERE-8: a changed predicate, a direct insert in it: EXTERNAL_CHANGE_IN_REPLACE_WINDOW") {
  restarts r;
  r.history(6, last_days(4));
  one_a_day(r.raw, 6, 7);
  SUBCASE("narrowed: the direct insert decides (pipeline)") {
    fl::dml_insert(r.agg, std::vector<Agg>{{day(5), 100, 100, std::nullopt}});
    CHECK(r.update(last_days(1), 6) == recompute("EXTERNAL_CHANGE_IN_REPLACE_WINDOW"));
    r.check_recomputed(5, 6);  // the inserted row replaced
    r.raw.append(Event{day(6), 2, 1});
    CHECK(r.update(last_days(1), 6) == incremental);
  }
  SUBCASE("widened: the predicate comes first (R-WHERE-8's order)") {
    fl::dml_insert(r.agg, std::vector<Agg>{{day(5), 100, 100, std::nullopt}});
    CHECK(r.update(last_days(6), 6) == recompute("UNSUPPORTED_REPLACE_WHERE_PREDICATE"));
    r.check_recomputed(5, 5);
  }
  SUBCASE("narrowed, standalone: inside the new window, or only inside the old one") {
    fl::StreamingTable<Agg> t{"t"};
    const auto narrow = narrowed_from_four_days(t, r.raw, last_days(1));
    // Day 3 lay in the window processed, not in the new one: kept, incremental.
    fl::dml_insert(t, std::vector<Agg>{{day(3), 100, 100, std::nullopt}});
    narrow->apply(t, at(6), daily, r.raw);
    CHECK(plan_of(*narrow) == incremental);
    CHECK(rows_of(t, day(3)).size() == 2);
    // Day 6 lies in the new window.
    fl::dml_insert(t, std::vector<Agg>{{day(6), 100, 100, std::nullopt}});
    narrow->apply(t, at(6), daily, r.raw);
    CHECK(plan_of(*narrow) == recompute("EXTERNAL_CHANGE_IN_REPLACE_WINDOW"));
    CHECK(rows_of(t, day(6)) == recomputed(r.raw, day(6)));
    CHECK(rows_of(t, day(3)).size() == 2);
  }
}

TEST_CASE("R-WHERE-10: a changed query version is REPLACE_WHERE_DEFINITION_CHANGED, the predicate changed or not") {
  restarts r;
  r.history(6, last_days(4));
  one_a_day(r.raw, 6, 7);
  // Narrowed, under a new version: the version decides (R-WHERE-8's order).
  CHECK(r.update(last_days(1), 6, daily_with_uniq, "v2") == recompute("REPLACE_WHERE_DEFINITION_CHANGED"));
  CHECK(rows_of(r.agg, day(5)).at(0).uniq_users == 1);
  CHECK(rows_of(r.agg, day(6)).at(0).uniq_users == 1);
  CHECK_FALSE(rows_of(r.agg, day(4)).at(0).uniq_users.has_value());
  // Widened, under a new version.
  one_a_day(r.raw, 7, 8);
  CHECK(r.update(last_days(5), 7, daily_with_uniq, "v3") == recompute("REPLACE_WHERE_DEFINITION_CHANGED"));
  CHECK(rows_of(r.agg, day(2)).at(0).uniq_users == 1);
  // The same version, narrowed again: incremental.
  r.raw.append(Event{day(7), 2, 7});
  CHECK(r.update(last_days(2), 7, daily_with_uniq, "v3") == incremental);
  CHECK(rows_of(r.agg, day(7)).at(0).uniq_users == 2);
  // A changed predicate with incremental updates switched back on: the option decides.
  r.update(last_days(2), 7, daily_with_uniq, "v3", {.incremental = false});
  CHECK(r.update(last_days(1), 7, daily_with_uniq, "v3") == recompute("REPLACE_WHERE_DEFINITION_CHANGED"));
}

TEST_CASE("R-WHERE-8: a changed predicate next to a non-deterministic one reports the non-determinism") {
  restarts r;
  one_a_day(r.raw, 0, 6);
  r.update(last_days(4), 5);
  // rand() < 2.0 keeps every row: the target is the same, the plan is not.
  CHECK(r.update(last_days(3) && w::rand() < 2.0, 5) == recompute("REPLACE_WHERE_NOT_DETERMINISTIC"));
  CHECK(r.update(last_days(2), 5) == recompute("PRIOR_REPLACE_WHERE_NOT_DETERMINISTIC"));
  CHECK(r.update(last_days(1), 5) == incremental);
  CHECK(rows_of(r.agg, day(0)).empty());  // outside every window
  r.check_recomputed(1, 5);
}

TEST_CASE("R-WHERE-4/R-WHERE-8: a changed predicate after an override is compared with the override's window") {
  restarts r;
  r.history(10, last_days(1));
  // A backfill of days 3 onwards, under the flow's own predicate as declared.
  CHECK(r.update(last_days(1), 9, daily, "v1", {}, 1, last_days(6)) ==
        recompute("UNSUPPORTED_REPLACE_WHERE_PREDICATE"));
  CHECK(r.agg.size() == 10);
  one_a_day(r.raw, 10, 11);
  // Day 10's updates: the predicate (in days), the override's (0: none),
  // the plan. A wider predicate than the flow had, inside the backfilled
  // window: incremental; wider than the previous update's window
  // [day 6, +inf): a recompute. An override is a recompute even when it is
  // the flow's predicate itself or narrower than the window processed
  // (R-WHERE-4). The override's window [day 9, +inf) was the last
  // processed: a predicate of two days is wider, one of one day is not.
  const auto unsupported = recompute("UNSUPPORTED_REPLACE_WHERE_PREDICATE");
  const std::tuple<int, int, plan_pair> steps[] = {{4, 0, incremental}, {8, 0, unsupported}, {8, 8, unsupported},
                                                   {8, 1, unsupported}, {2, 0, unsupported}, {1, 0, incremental}};
  for (const auto& [days, override_days, want] : steps) {
    CAPTURE(days);
    CAPTURE(override_days);
    const std::optional<w::expr> backfill =
        override_days > 0 ? std::optional<w::expr>(last_days(override_days)) : std::nullopt;
    CHECK(r.update(last_days(days), 10, daily, "v1", {}, 1, backfill) == want);
  }
  r.check_recomputed(0, 10);
}

TEST_CASE("R-WHERE-10: checkpoints of formats 1 and 2 still open; a format-2 definition's predicate text is dropped") {
  fl::MemorySource<Event> raw{"events"};
  one_a_day(raw, 0, 6);
  // A blob of `format`, written by a flow with last_days(4) at day 5. Format
  // 2 has format 3's fields; its definition was "REPLACE WHERE ", the
  // predicate's text, and " (no incremental)" when incremental updates were
  // off. Format 1 ends before the definition and the query.
  const auto older = [&](fl::StreamingTable<Agg>& t, int format, bool incremental_on) {
    fl::ReplaceWhere v1{"t", last_days(4), {.incremental = incremental_on, .query_version = "v1"}};
    v1.apply(t, at(5), daily, raw);
    const std::string blob = snapshot_of(v1);
    REQUIRE(blob.size() > 6);
    CHECK(blob.substr(0, 6) == std::string("FLRW\x03\x00", 6));
    fl::detail::replace_where_state s =
        fl::detail::decode_replace_where_state(blob, fl::checkpoint_scope::snapshot, "t");
    s.definition = "REPLACE WHERE " + last_days(4).to_string() + (incremental_on ? "" : " (no incremental)");
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
    restore(f, t, blob);
    f.apply(t, at(6), daily, raw);
    return plan_of(f);
  };
  one_a_day(raw, 6, 7);
  fl::StreamingTable<Agg> same{"t"}, narrower{"t"}, wider{"t"}, off{"t"}, unknown{"t"};
  CHECK(reopened(same, older(same, 2, true), last_days(4)) == incremental);
  CHECK(reopened(narrower, older(narrower, 2, true), last_days(1)) == incremental);
  CHECK(reopened(wider, older(wider, 2, true), last_days(6)) == recompute("UNSUPPORTED_REPLACE_WHERE_PREDICATE"));
  CHECK(reopened(off, older(off, 2, false), last_days(4)) == recompute("REPLACE_WHERE_DEFINITION_CHANGED"));
  // Format 1 recorded no definition: unknown, so a recompute.
  CHECK(reopened(unknown, older(unknown, 1, true), last_days(4)) == recompute("REPLACE_WHERE_DEFINITION_CHANGED"));
  for (auto* t : {&same, &narrower, &wider, &off, &unknown}) CHECK(rows_of(*t, day(6)) == recomputed(raw, day(6)));
  // A format this build does not know is refused, naming the one it reads.
  fl::StreamingTable<Agg> later{"t"};
  std::string blob = older(later, 2, true);
  blob[4] = 4;
  fl::ReplaceWhere f{"t", last_days(4), {.query_version = "v1"}};
  CHECK(flowtest::contains(flowtest::message_of(fl::errc::checkpoint_corrupt, [&] { restore(f, later, blob); }),
                           "unknown format version 4 (this build reads version 3)"));
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
    CHECK(plan_of(flow) == recompute("UNSUPPORTED_REPLACE_WHERE_PREDICATE"));
  }
  SUBCASE("a flow predicate with a range: the override's window covers the next update's") {
    fl::StreamingTable<Agg> agg{"agg"};
    fl::ReplaceWhere flow{"agg", last_days(1), {.query_version = "v1"}};
    flow.apply(agg, at(9), daily, raw);
    flow.apply_override(agg, last_days(5), at(9), daily, raw);
    REQUIRE(flow.last_plan().window.has_value());
    raw.append(Event{day(10), 1, 1});
    flow.apply(agg, at(10), daily, raw);
    CHECK(plan_of(flow) == incremental);
  }
}

TEST_CASE("R-WHERE-1: a failed update is undone and replayed exactly once") {
  restarts r;
  bool fail = false;
  fl::PipelineOptions po;
  po.fault_hook = [&](fl::fault_point fp, std::string_view, std::uint64_t) {
    if (fail && fp == fl::fault_point::before_commit) throw std::runtime_error("injected");
  };
  fl::Pipeline p{"p", r.ck, po};
  p.flow("agg").from(r.raw).query(daily).into(r.agg, fl::ReplaceWhere{last_days(2)});
  for (int n = 0; n < 3; ++n) {
    r.raw.append(Event{day(n), 1, 1});
    update_at(p, n);
  }
  const auto before = r.agg.sorted_all_rows();
  r.raw.append(Event{day(2), 2, 5});
  fail = true;
  CHECK_THROWS_AS(update_at(p, 2), std::runtime_error);
  CHECK(r.agg.sorted_all_rows() == before);
  fail = false;
  update_at(p, 2);
  CHECK(rows_of(r.agg, day(2)) == std::vector<Agg>{{day(2), 2, 6, std::nullopt}});
  CHECK(r.agg.size() == 3);
}

TEST_CASE("R-WHERE-8: planning_information events carry the technique and the reason") {
  restarts r;
  one_a_day(r.raw, 0, 5);
  flowtest::json_events plans{"planning_information"};
  auto& [type, events, log] = plans;
  fl::Pipeline p{"p", r.ck};
  p.event_log(log);
  p.flow("agg").from(r.raw).query(daily).into(r.agg, fl::ReplaceWhere{last_days(1)});
  update_at(p, 4);
  update_at(p, 4);
  update_at(p, 4, {{"agg", last_days(4)}});
  REQUIRE(events.size() == 3);
  CHECK(events[0]["flow"] == "agg");
  const std::string techniques[] = {"COMPLETE_RECOMPUTE", "INCREMENTAL", "COMPLETE_RECOMPUTE"};
  for (std::size_t i = 0; i < 3; ++i) CHECK(events[i]["technique"] == techniques[i]);
  CHECK(events[0]["reason"].is_null());
  CHECK(events[1]["reason"].is_null());
  CHECK(events[2]["reason"] == "UNSUPPORTED_REPLACE_WHERE_PREDICATE");
  CHECK(events[2]["pipeline"] == "p");
  CHECK(r.agg.size() == 5);
}

TEST_CASE("R-WHERE-7: a corrupt checkpoint blob is refused, the flow unchanged") {
  fl::StreamingTable<Agg> agg{"agg"};
  fl::ReplaceWhere flow{"agg", last_days(1)};
  CHECK(flowtest::error_of([&] { restore(flow, agg, std::string("FLRW\x01")); }).code() ==
        fl::errc::checkpoint_corrupt);
  CHECK(flow.updates() == 0);
}

// --- Randomised equivalence -------------------------------------------------------------------

TEST_CASE("R-WHERE-7: incremental updates give the target a complete recompute gives (random histories)") {
  int incremental_updates = 0, updates = 0;
  for (std::uint32_t seed = 1; seed <= 40; ++seed) {
    std::mt19937 rng(seed);
    const auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    const int shape = seed % 4;
    const w::expr pred = shape == 0   ? last_days(3)
                         : shape == 1 ? w::col("event_date").between(w::current_date() - w::days(4), w::current_date())
                         : shape == 2 ? (w::col("event_date") > w::current_date() - w::days(5) &&
                                         w::col("event_date") <= w::current_date() + w::days(1))
                                      : last_days(6);
    world wd;
    side inc{"inc"}, full{"full"};
    inc.open(wd, pred, "", true);
    full.open(wd, pred, "", false);
    int today = 0;
    for (int step = 0; step < 30; ++step) {
      for (int k = pick(1, 4); k > 0; --k) wd.change(pick, today, 8, 1);
      if (pick(0, 7) == 0) inc.open(wd, pred, "", true);  // a restart over the same checkpoint
      inc.update(today);
      full.update(today);
      ++updates;
      if (inc.last == incremental) ++incremental_updates;
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
  one_a_day(raw, 0, 4);
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
    one_a_day(raw, 0, 4);  // version 4
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
