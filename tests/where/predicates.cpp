// The REPLACE WHERE predicate language (flowlib/where.hpp) and the change
// reporting of MemorySource (source/memory.hpp): evaluation on rows of every
// readable column type with SQL null semantics, the injected clock, rand()'s
// seeding, inspection (columns, deterministic, to_string), windows and
// covers() (R-WHERE-7), binding errors, and MemorySource's version,
// erase_where, scan/read_all and changed_values with its history bound.
#include <flowlib/source/memory.hpp>
#include <flowlib/where.hpp>

#include <doctest/doctest.h>

#include "support/errors.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace where_predicates {

namespace fl = flowlib;
namespace w = flowlib::where;
using namespace std::chrono_literals;

struct All {
  std::int64_t i64 = 0;
  int i32 = 0;
  std::uint16_t u16 = 0;
  double dbl = 0;
  float flt = 0;
  bool flag = false;
  std::string str;
  std::string_view view;
  std::chrono::sys_days day{};
  std::chrono::year_month_day ymd{};
  std::chrono::sys_time<std::chrono::microseconds> ts{};
  std::chrono::sys_seconds ts_s{};
  std::optional<std::int64_t> opt_i;
  std::optional<std::string> opt_s;
  std::optional<std::chrono::sys_days> opt_day;
  std::vector<int> unreadable;
  std::int64_t spaced = 0;
};
FLOWLIB_SCHEMA(All, i64, i32, u16, dbl, flt, flag, str, view, day, ymd, ts, ts_s, opt_i, opt_s,
               opt_day, unreadable, (spaced, "event date"));

struct Ev {
  std::chrono::sys_days event_date{};
  std::string region;
  std::int64_t qty = 0;
  std::uint32_t seq = 0;
  friend bool operator==(const Ev&, const Ev&) = default;
};
FLOWLIB_SCHEMA(Ev, event_date, region, qty);

namespace {

std::chrono::sys_days ymd(int y, unsigned m, unsigned d) {
  return std::chrono::sys_days(std::chrono::year{y} / std::chrono::month{m} / std::chrono::day{d});
}

w::context at(int y, unsigned m, unsigned d, int h = 0, std::uint64_t seed = 0) {
  return w::context{w::timestamp_type(ymd(y, m, d)) + std::chrono::hours(h), seed};
}

All sample_row() {
  All r;
  r.i64 = 42;
  r.i32 = -7;
  r.u16 = 9;
  r.dbl = 2.5;
  r.flt = 0.25f;
  r.flag = true;
  r.str = "asia";
  r.view = "emea";
  r.day = ymd(2026, 1, 10);
  r.ymd = std::chrono::year{2026} / 1 / 11;
  r.ts = w::timestamp_type(ymd(2026, 1, 10)) + 6h + 30min;
  r.ts_s = std::chrono::sys_seconds(ymd(2026, 1, 12)) + 1s;
  r.opt_i = std::nullopt;
  r.opt_s = std::string("x");
  r.opt_day = std::nullopt;
  r.spaced = 5;
  return r;
}

bool eval(const w::expr& p, const All& r, const w::context& ctx = {}) {
  return w::bind<All>(p, ctx)(r);
}
std::optional<bool> eval3(const w::expr& p, const All& r, const w::context& ctx = {}) {
  return w::bind<All>(p, ctx).evaluate(r);
}

std::string bind_error(const w::expr& p) {
  const fl::error e = flowtest::error_of([&] { (void)w::bind<All>(p, "events_agg"); });
  CHECK(e.code() == fl::errc::invalid_argument);
  CHECK(e.flow() == "events_agg");
  return e.what();
}

bool has(std::string_view s, std::string_view part) { return flowtest::contains(s, part); }

}  // namespace

// --- evaluation ---------------------------------------------------------------

TEST_CASE("R-WHERE-3: every readable column type evaluates against literals") {
  const All r = sample_row();
  CHECK(eval(w::col("i64") == 42, r));
  CHECK_FALSE(eval(w::col("i64") != 42, r));
  CHECK(eval(w::col("i32") < 0, r));
  CHECK(eval(w::col("u16") >= 9, r));
  CHECK_FALSE(eval(w::col("u16") > 9, r));
  CHECK(eval(w::col("dbl") > 2, r));   // double column, int literal
  CHECK(eval(w::col("i64") < 42.5, r));  // int column, double literal
  CHECK_FALSE(eval(w::col("i64") < 41.5, r));
  CHECK(eval(w::col("flt") == 0.25, r));
  CHECK(eval(w::col("flag") == true, r));
  CHECK(eval(w::col("flag"), r));  // a bool column is a condition by itself
  CHECK_FALSE(eval(!w::col("flag"), r));
  CHECK(eval(w::col("str") == "asia", r));
  CHECK(eval(w::col("str") < std::string("b"), r));
  CHECK(eval(w::col("view") == std::string_view("emea"), r));
  CHECK(eval(w::col("day") == w::date(2026, 1, 10), r));
  CHECK(eval(w::col("day") == ymd(2026, 1, 10), r));
  CHECK(eval(w::col("ymd") == w::date(2026, 1, 11), r));
  CHECK(eval(w::col("ymd") > w::col("day"), r));
  CHECK(eval(w::col("ts") == w::timestamp(2026, 1, 10, 6, 30), r));
  CHECK(eval(w::col("ts_s") == std::chrono::sys_seconds(ymd(2026, 1, 12)) + 1s, r));
  CHECK(eval(w::col("ts_s") > w::col("ts"), r));
  CHECK(eval(w::col("opt_s") == "x", r));
  CHECK(eval(w::col("event date") == 5, r));
  CHECK(eval(w::col("i64") + 1 == 43, r));
  CHECK(eval(w::col("i64") - w::col("i32") == 49, r));
  CHECK(eval(w::col("dbl") + 1 == 3.5, r));
  CHECK(eval(w::col("day") + w::days(1) == w::col("ymd"), r));
  CHECK(eval(w::col("day") + w::hours(6) + w::minutes(30) == w::col("ts"), r));
  CHECK(eval(w::col("i64").between(40, 42), r));
  CHECK_FALSE(eval(w::col("i64").between(43, 50), r));
  CHECK(eval(w::col("str").in({"emea", "asia"}), r));
  CHECK_FALSE(eval(w::col("str").in({"emea", "amer"}), r));
  CHECK(eval(w::col("i64").in(std::vector<w::value>{1, 42}), r));
  CHECK(eval(w::expr{}, r));  // the default expression is TRUE
  CHECK_FALSE(eval(w::lit(false), r));
}

TEST_CASE("R-WHERE-3: a date compares with a timestamp as its midnight UTC") {
  All r = sample_row();  // day = 2026-01-10, ts = 2026-01-10 06:30
  CHECK(eval(w::col("day") == w::timestamp(2026, 1, 10), r));
  CHECK(eval(w::col("day") < w::timestamp(2026, 1, 10, 0, 0, 1), r));
  CHECK(eval(w::col("ts") > w::date(2026, 1, 10), r));
  CHECK(eval(w::col("ts") < w::date(2026, 1, 11), r));
  CHECK(eval(w::col("day") < w::col("ts"), r));
  CHECK(w::compare(w::date(2026, 1, 10), w::timestamp(2026, 1, 10)) == w::compare_result::equal);
  CHECK(w::compare(w::value(1), w::value(1.0)) == w::compare_result::equal);
  CHECK_FALSE(w::compare(w::value(1), w::value("1")).has_value());
  CHECK_FALSE(w::value(1) == w::value(1.0));  // structural equality differs from SQL's
}

TEST_CASE("R-WHERE-3: SQL null semantics: a row matches only when the predicate is true") {
  All r = sample_row();  // opt_i and opt_day are null
  CHECK(eval3(w::col("opt_i") > 3, r) == std::nullopt);
  CHECK_FALSE(eval(w::col("opt_i") > 3, r));
  CHECK_FALSE(eval(!(w::col("opt_i") > 3), r));  // NOT unknown is unknown
  CHECK_FALSE(eval(w::col("opt_i") == w::null(), r));
  CHECK(eval(w::col("opt_i").is_null(), r));
  CHECK_FALSE(eval(w::col("opt_i").is_not_null(), r));
  CHECK(eval(w::col("opt_day").is_null(), r));
  CHECK_FALSE(eval(w::col("opt_day") < w::date(2030, 1, 1), r));
  // and/or with unknown
  CHECK(eval3(w::col("opt_i") > 3 && w::col("i64") == 0, r) == false);
  CHECK(eval3(w::col("opt_i") > 3 && w::col("i64") == 42, r) == std::nullopt);
  CHECK(eval3(w::col("opt_i") > 3 || w::col("i64") == 42, r) == true);
  CHECK(eval3(w::col("opt_i") > 3 || w::col("i64") == 0, r) == std::nullopt);
  // IN: unknown when x is null or an item is null and none matched
  CHECK(eval3(w::col("opt_i").in({1, 2}), r) == std::nullopt);
  CHECK(eval3(w::col("i64").in({1, w::null()}), r) == std::nullopt);
  CHECK(eval3(w::col("i64").in({42, w::null()}), r) == true);
  CHECK(eval3(w::col("opt_i").between(1, 2), r) == std::nullopt);
  CHECK(eval3(w::col("opt_i") + 1 > 0, r) == std::nullopt);
  // once set, the optional is compared as its value
  r.opt_i = 5;
  CHECK(eval(w::col("opt_i") > 3, r));
  CHECK(eval(w::col("opt_i").is_not_null(), r));
  r.opt_day = ymd(2026, 2, 1);
  CHECK(eval(w::col("opt_day") < w::date(2030, 1, 1), r));
}

TEST_CASE("R-WHERE-3: the clock is the update's context, injected through prepare()") {
  const w::expr p = w::col("day") >= w::current_date() - w::days(3);
  All r = sample_row();  // day = 2026-01-10
  auto b = w::bind<All>(p);
  CHECK(b.prepare(at(2026, 1, 13, 23)).operator()(r));
  CHECK_FALSE(b.prepare(at(2026, 1, 14)).operator()(r));
  CHECK(b.prepare(at(2026, 1, 10)).operator()(r));
  // now(): hours
  const w::expr q = w::col("ts") >= w::now() - w::hours(6);  // ts = 2026-01-10 06:30
  auto bq = w::bind<All>(q);
  CHECK(bq.prepare(at(2026, 1, 10, 12)).operator()(r));
  CHECK_FALSE(bq.prepare(at(2026, 1, 10, 13)).operator()(r));
  // date +/- sub-day interval becomes a timestamp
  CHECK(eval(w::col("ts") > w::current_date() + w::hours(6), r, at(2026, 1, 10, 20)));
  CHECK_FALSE(eval(w::col("ts") > w::current_date() + w::hours(7), r, at(2026, 1, 10, 20)));
  // a clock predicate evaluated before prepare() is an error, not a guess
  auto unprepared = w::bind<All>(p);
  CHECK(has(flowtest::error_of([&] { (void)unprepared(r); }).what(), "prepare"));
  CHECK(p.uses_clock());
  CHECK(p.deterministic());  // clock functions are deterministic (R-WHERE-7)
  CHECK_FALSE((w::col("i64") > 1).uses_clock());
  CHECK(w::context{w::timestamp_type(ymd(2026, 3, 1)) + 23h}.current_date() == ymd(2026, 3, 1));
}

TEST_CASE("R-WHERE-7: rand() is seeded from the context and makes a predicate non-deterministic") {
  const w::expr p = w::rand() < 0.5;
  CHECK_FALSE(p.deterministic());
  CHECK_FALSE((w::col("i64") > 1 && w::rand() < 0.5).deterministic());
  CHECK(w::col("i64").in({1, 2}).deterministic());
  CHECK_FALSE(p.uses_clock());
  const All r = sample_row();
  auto draws = [&](std::uint64_t seed) {
    auto b = w::bind<All>(p, w::context{{}, seed});
    std::vector<bool> out;
    for (int i = 0; i < 200; ++i) out.push_back(b(r));
    return out;
  };
  const auto a = draws(7), b = draws(7), c = draws(8);
  CHECK(a == b);
  CHECK(a != c);
  const auto yes = std::count(a.begin(), a.end(), true);
  CHECK(yes > 50);
  CHECK(yes < 150);
  // prepare() restarts the sequence
  auto bound = w::bind<All>(p, w::context{{}, 7});
  std::vector<bool> first, again;
  for (int i = 0; i < 20; ++i) first.push_back(bound(r));
  bound.prepare(w::context{{}, 7});
  for (int i = 0; i < 20; ++i) again.push_back(bound(r));
  CHECK(first == again);
  CHECK_FALSE(eval(w::rand() < 0, r));
  CHECK(eval(w::rand() < 1, r));
  CHECK(eval(w::rand() >= 0, r));
}

// --- inspection -------------------------------------------------------------

TEST_CASE("R-WHERE-3: columns() lists the referenced columns, sorted and unique") {
  const w::expr p = w::col("region").in({"asia"}) || (w::col("qty") > 3 && w::col("event_date") >
                                                      w::current_date() - w::days(1) &&
                                                      w::col("qty") < 10);
  CHECK(p.columns() == std::vector<std::string>{"event_date", "qty", "region"});
  CHECK(w::expr{}.columns().empty());
  CHECK((w::rand() < 0.1).columns().empty());
}

TEST_CASE("R-WHERE-3: to_string() is stable SQL-like text") {
  CHECK((w::col("event_date") >= w::current_date() - w::days(7)).to_string() ==
        "event_date >= current_date() - INTERVAL 7 DAYS");
  CHECK((w::col("event_date").between(w::date(2026, 1, 1), w::date(2026, 1, 30)) &&
         w::col("region") == "asia")
            .to_string() == "event_date BETWEEN DATE '2026-01-01' AND DATE '2026-01-30' AND region = 'asia'");
  CHECK((w::col("region").in({"asia", "emea"}) || !(w::col("qty") > 3)).to_string() ==
        "region IN ('asia', 'emea') OR NOT (qty > 3)");
  CHECK((w::rand() < 0.5).to_string() == "rand() < 0.5");
  CHECK((w::col("ts") >= w::now() - w::hours(6)).to_string() == "ts >= now() - INTERVAL 6 HOURS");
  CHECK(((w::col("a") == 1 || w::col("b") == 2) && w::col("c") != 3.0).to_string() ==
        "(a = 1 OR b = 2) AND c <> 3.0");
  CHECK((w::col("a") == 1 || (w::col("b") == 2 && w::col("c") == 3)).to_string() ==
        "a = 1 OR b = 2 AND c = 3");
  CHECK((w::col("a") - (w::col("b") - 1) > 0).to_string() == "a - (b - 1) > 0");
  CHECK((w::col("name") == "it's").to_string() == "name = 'it''s'");
  CHECK((w::col("event date").is_null()).to_string() == "`event date` IS NULL");
  CHECK((w::col("ts") < w::lit(w::timestamp(2026, 1, 2, 3, 4, 5)) + w::microseconds(7)).to_string() ==
        "ts < TIMESTAMP '2026-01-02 03:04:05' + INTERVAL 7 MICROSECONDS");
  CHECK(w::value(w::timestamp_type(ymd(2026, 1, 2)) + 1500ms).to_string() ==
        "TIMESTAMP '2026-01-02 00:00:01.500000'");
  CHECK((w::col("f") == true && w::col("g") == w::null()).to_string() == "f = TRUE AND g = NULL");
  CHECK(w::minutes(1).to_string() == "INTERVAL 1 MINUTE");
  CHECK(w::seconds(90).to_string() == "INTERVAL 90 SECONDS");
  CHECK(w::value(w::interval{2, 3'600'000'000LL}).to_string() == "INTERVAL 2 DAYS 1 HOUR");
  CHECK(w::expr{}.to_string() == "TRUE");
  CHECK((w::col("x") == -2.5e-10).to_string() == "x = -2.5e-10");
}

TEST_CASE("R-WHERE-3: same() compares trees structurally") {
  const auto p = [] { return w::col("d") >= w::current_date() - w::days(3); };
  CHECK(p().same(p()));
  CHECK_FALSE(p().same(w::col("d") >= w::current_date() - w::days(4)));
  CHECK_FALSE(p().same(w::col("e") >= w::current_date() - w::days(3)));
  CHECK_FALSE((w::col("x") == 1).same(w::col("x") == 1.0));
}

// --- windows ------------------------------------------------------------------

TEST_CASE("R-WHERE-7: window() recognises every bound form on one column") {
  const auto ctx = at(2026, 1, 10, 15);
  auto win = [&](const w::expr& p) { return p.window(ctx); };
  using E = w::endpoint;
  const w::value d10 = w::date(2026, 1, 10);

  CHECK(win(w::col("d") >= w::current_date()) == w::window("d", E{d10, true}, std::nullopt));
  CHECK(win(w::col("d") > w::current_date()) == w::window("d", E{d10, false}, std::nullopt));
  CHECK(win(w::col("d") <= w::current_date()) == w::window("d", std::nullopt, E{d10, true}));
  CHECK(win(w::col("d") < w::current_date()) == w::window("d", std::nullopt, E{d10, false}));
  CHECK(win(w::col("d") == w::current_date()) == w::window("d", E{d10, true}, E{d10, true}));
  CHECK(win(w::current_date() <= w::col("d")) == w::window("d", E{d10, true}, std::nullopt));
  CHECK(win(3 > w::col("q")) == w::window("q", std::nullopt, E{3, false}));
  CHECK(win(w::col("d").between(w::current_date() - w::days(7), w::current_date())) ==
        w::window("d", E{w::date(2026, 1, 3), true}, E{d10, true}));
  CHECK(win(w::col("d") >= w::date(2026, 1, 1) && w::col("d") < w::date(2026, 2, 1)) ==
        w::window("d", E{w::date(2026, 1, 1), true}, E{w::date(2026, 2, 1), false}));
  // tightest bounds win; on a tie the exclusive one
  CHECK(win(w::col("q") > 1 && w::col("q") >= 3 && w::col("q") < 10 && w::col("q") <= 8) ==
        w::window("q", E{3, true}, E{8, true}));
  CHECK(win(w::col("q") >= 3 && w::col("q") > 3 && w::col("q") <= 8 && w::col("q") < 8) ==
        w::window("q", E{3, false}, E{8, false}));
  CHECK(win(w::col("q").between(1, 10) && w::col("q") == 4) == w::window("q", E{4, true}, E{4, true}));
  // int and double bounds combine
  CHECK(win(w::col("q") > 1 && w::col("q") >= 2.5) == w::window("q", E{2.5, true}, std::nullopt));
  // now(): a timestamp window
  CHECK(win(w::col("ts") >= w::now() - w::hours(6)) ==
        w::window("ts", E{w::timestamp(2026, 1, 10, 9), true}, std::nullopt));
  // contradictory bounds: an empty window
  const auto empty = win(w::col("q") > 5 && w::col("q") < 2);
  REQUIRE(empty);
  CHECK(empty->empty());
  CHECK(win(w::col("q") >= 5 && w::col("q") < 5)->empty());
  CHECK_FALSE(win(w::col("q") >= 5 && w::col("q") <= 5)->empty());
}

TEST_CASE("R-WHERE-7: window() is nullopt for a predicate that is not a single-column range") {
  const auto ctx = at(2026, 1, 10);
  CHECK_FALSE((w::col("d") > 1 || w::col("d") < 0).window(ctx));
  CHECK_FALSE(w::col("d").in({1, 2}).window(ctx));
  CHECK_FALSE((w::col("d") != 1).window(ctx));
  CHECK_FALSE((w::col("d") > 1 && w::col("e") < 3).window(ctx));
  CHECK_FALSE((w::col("d") > w::col("e")).window(ctx));
  CHECK_FALSE((w::rand() < 0.5).window(ctx));
  CHECK_FALSE((w::col("d") < w::rand()).window(ctx));
  CHECK_FALSE((w::col("d") > 1 && w::rand() < 0.5).window(ctx));
  CHECK_FALSE(w::col("d").is_null().window(ctx));
  CHECK_FALSE((!(w::col("d") > 1)).window(ctx));
  CHECK_FALSE((w::col("d") + 1 > 3).window(ctx));
  CHECK_FALSE((w::col("d") > w::null()).window(ctx));
  CHECK_FALSE((w::col("d") > 1 && w::col("d") < "x").window(ctx));  // incomparable bounds
  CHECK_FALSE(w::expr{}.window(ctx));
  CHECK_FALSE((w::col("d") > w::current_date() - "x").window(ctx));  // not computable
}

TEST_CASE("R-WHERE-7: covers() - a lower bound moving forward is covered by the previous window") {
  const w::expr p = w::col("d") >= w::current_date() - w::days(3);
  const auto prev = p.window(at(2026, 1, 10));
  const auto cur = p.window(at(2026, 1, 11));
  REQUIRE(prev);
  REQUIRE(cur);
  CHECK(prev->covers(*cur));   // the next day selects fewer old days: incremental is possible
  CHECK_FALSE(cur->covers(*prev));
  CHECK(prev->covers(*prev));
  CHECK(prev->contains(w::date(2026, 1, 7)));
  CHECK_FALSE(cur->contains(w::date(2026, 1, 7)));
  CHECK(cur->contains(w::date(2027, 1, 1)));
  CHECK_FALSE(cur->contains(w::value{}));
  CHECK(cur->contains(w::timestamp(2026, 1, 8, 12)));  // date bound vs timestamp value
  CHECK(cur->to_string() == "d in [DATE '2026-01-08', +inf)");
}

TEST_CASE("R-WHERE-7: covers() - a moving upper bound, a widened window are not covered") {
  // between current_date()-7 and current_date(): the next day's window has a day the previous one
  // excluded
  const w::expr p = w::col("d").between(w::current_date() - w::days(7), w::current_date());
  const auto prev = p.window(at(2026, 1, 10));
  const auto next = p.window(at(2026, 1, 11));
  REQUIRE(prev);
  REQUIRE(next);
  CHECK_FALSE(prev->covers(*next));
  CHECK(next->to_string() == "d in [DATE '2026-01-04', DATE '2026-01-11']");
  // the same day again is covered
  CHECK(prev->covers(*p.window(at(2026, 1, 10, 23))));
  // widened: 3 days -> 7 days
  const auto three = (w::col("d") >= w::current_date() - w::days(3)).window(at(2026, 1, 10));
  const auto seven = (w::col("d") >= w::current_date() - w::days(7)).window(at(2026, 1, 10));
  CHECK_FALSE(three->covers(*seven));
  // narrowed: 7 days -> 3 days
  CHECK(seven->covers(*three));
}

TEST_CASE("R-WHERE-7: covers() handles open, closed and absent bounds") {
  using E = w::endpoint;
  const w::window closed("q", E{1, true}, E{5, true});
  const w::window open("q", E{1, false}, E{5, false});
  const w::window unbounded("q", std::nullopt, std::nullopt);
  const w::window lower_only("q", E{1, true}, std::nullopt);
  CHECK(closed.covers(open));
  CHECK_FALSE(open.covers(closed));
  CHECK(open.covers(w::window("q", E{1, false}, E{5, false})));
  CHECK(open.covers(w::window("q", E{2, true}, E{4.5, true})));
  CHECK_FALSE(open.covers(w::window("q", E{1, true}, E{4, true})));
  CHECK(unbounded.covers(closed));
  CHECK_FALSE(closed.covers(unbounded));
  CHECK(lower_only.covers(closed));
  CHECK_FALSE(lower_only.covers(w::window("q", std::nullopt, E{3, true})));
  CHECK_FALSE(closed.covers(lower_only));
  CHECK_FALSE(closed.covers(w::window("other", E{2, true}, E{3, true})));  // another column
  CHECK(closed.covers(w::window("q", E{9, true}, E{2, true})));            // empty: covered
  CHECK(closed.contains(1));
  CHECK_FALSE(open.contains(1));
  CHECK(open.contains(1.5));
  CHECK_FALSE(open.contains(5));
  CHECK_FALSE(closed.contains("3"));  // incomparable
  CHECK(open.to_string() == "q in (1, 5)");
  CHECK(unbounded.to_string() == "q in (-inf, +inf)");
  // conservative across representations: on integers > 4 and >= 5 select the same rows, but the
  // window cannot know the column is integral
  CHECK_FALSE(w::window("q", E{5, true}, std::nullopt).covers(w::window("q", E{4, false}, std::nullopt)));
}

// --- binding ---------------------------------------------------------------------

TEST_CASE("R-WHERE-3: binding errors name the column and the kinds") {
  std::string m = bind_error(w::col("nope") > 1);
  CHECK(has(m, "column 'nope'"));
  CHECK(has(m, "All has no column"));
  m = bind_error(w::col("str") > 3);
  CHECK(has(m, "column 'str'"));
  CHECK(has(m, "string and int64"));
  m = bind_error(3 < w::col("str"));
  CHECK(has(m, "column 'str'"));
  m = bind_error(w::col("day") == "2026-01-01");
  CHECK(has(m, "column 'day'"));
  CHECK(has(m, "date and string"));
  m = bind_error(w::col("flag") == 1);
  CHECK(has(m, "bool and int64"));
  m = bind_error(w::col("unreadable").is_null());
  CHECK(has(m, "column 'unreadable'"));
  CHECK(has(m, "cannot be read"));
  m = bind_error(w::col("i64") == 1 && w::col("str"));
  CHECK(has(m, "column 'str'"));
  CHECK(has(m, "not a bool"));
  m = bind_error(w::expr(w::col("i64")));
  CHECK(has(m, "not a condition"));
  m = bind_error(w::col("str") + 1 == "a");
  CHECK(has(m, "column 'str'"));
  m = bind_error(w::col("str").in({"a", 2}));
  CHECK(has(m, "column 'str'"));
  m = bind_error(w::col("i64") > w::current_date() - "x");
  CHECK(has(m, "cannot compute"));
  // a null literal compares with anything (and is never true)
  CHECK_NOTHROW((void)w::bind<All>(w::col("str") == w::null()));
}

TEST_CASE("R-WHERE-7: binds_to() tells whether a predicate can be pushed down to a row type") {
  CHECK(w::binds_to<Ev>(w::col("event_date") >= w::current_date() - w::days(1)));
  CHECK(w::binds_to<Ev>(w::col("region") == "asia" && w::col("qty") > 1));
  CHECK_FALSE(w::binds_to<Ev>(w::col("event_date") > w::current_date() && w::col("user") == 1));
  CHECK_FALSE(w::binds_to<Ev>(w::col("seq") == 1));  // a member the schema does not list
  CHECK(w::binds_to<Ev>(w::rand() < 0.5));
  CHECK_FALSE(w::binds_to<int>(w::col("x") == 1));
}

TEST_CASE("R-WHERE-3: column_reader and column_value read a column by name") {
  const All r = sample_row();
  CHECK(w::column_value(r, "day") == w::date(2026, 1, 10));
  CHECK(w::column_value(r, "ymd") == w::date(2026, 1, 11));
  CHECK(w::column_value(r, "opt_i").is_null());
  CHECK(w::column_value(r, "opt_s") == w::value("x"));
  CHECK(w::column_value(r, "u16") == w::value(9));
  CHECK(w::column_value(r, "ts_s").type() == w::kind::timestamp);
  const w::column_reader<All> reader("str");
  CHECK(reader(r) == w::value("asia"));
  CHECK(reader.type() == w::kind::string);
  CHECK(reader.name() == "str");
  CHECK_THROWS_AS(w::column_reader<All>("missing"), fl::error);
  CHECK_THROWS_AS(w::column_reader<All>("unreadable"), fl::error);
}

TEST_CASE("R-WHERE-3: a copied bound predicate keeps its own constants") {
  std::optional<w::bound<All>> original(w::bind<All>(w::col("str") == std::string(40, 'a')));
  w::bound<All> copy = *original;
  w::bound<All> assigned = w::bind<All>(w::col("i64") == 0);
  assigned = *original;
  original.reset();
  All r = sample_row();
  r.str = std::string(40, 'a');
  CHECK(copy(r));
  CHECK(assigned(r));
  r.str = "asia";
  CHECK_FALSE(copy(r));
  w::bound<All> moved = std::move(copy);
  r.str = std::string(40, 'a');
  CHECK(moved(r));
}

namespace {

// The reference evaluation: the row's column values substituted as
// literals, then the whole tree folded by the constant evaluator.
w::detail::node_ptr substitute(const w::detail::node_ptr& n, const All& r) {
  if (n->o == w::detail::op::column) return w::lit(w::column_value(r, n->name)).root();
  auto copy = std::make_shared<w::detail::node>(*n);
  for (auto& k : copy->kids) k = substitute(k, r);
  return copy;
}

w::expr random_operand(std::mt19937_64& g, int& kind_out) {
  std::uniform_int_distribution<int> pick(0, 9);
  switch (pick(g)) {
    case 0: kind_out = 0; return w::col("i64");
    case 1: kind_out = 0; return w::col("dbl");
    case 2: kind_out = 0; return w::col("opt_i");
    case 3: kind_out = 0; return w::lit(static_cast<std::int64_t>(pick(g)) - 3);
    case 4: kind_out = 0; return w::lit(pick(g) * 0.5);
    case 5: kind_out = 1; return w::col("day");
    case 6: kind_out = 1; return w::col("opt_day");
    case 7: kind_out = 1; return w::current_date() - w::days(pick(g));
    case 8: kind_out = 1; return w::col("ts");
    default: kind_out = 0; return w::null();
  }
}

w::expr random_predicate(std::mt19937_64& g, int depth) {
  std::uniform_int_distribution<int> pick(0, 9);
  const int p = depth <= 0 ? 0 : pick(g);
  if (p < 5) {
    int ka = 0, kb = 0;
    w::expr a = random_operand(g, ka);
    w::expr b = random_operand(g, kb);
    while (kb != ka) b = random_operand(g, kb);
    switch (pick(g) % 9) {
      case 0: return a == b;
      case 1: return a != b;
      case 2: return a < b;
      case 3: return a <= b;
      case 4: return a > b;
      case 5: return a >= b;
      case 6: {
        int kc = 0;
        w::expr c = random_operand(g, kc);
        while (kc != ka) c = random_operand(g, kc);
        return a.between(b, c);
      }
      case 7: {
        int kc = 0;
        w::expr c = random_operand(g, kc);
        while (kc != ka) c = random_operand(g, kc);
        return a.in({b, c});
      }
      default: return a.is_null();
    }
  }
  if (p < 7) return random_predicate(g, depth - 1) && random_predicate(g, depth - 1);
  if (p < 9) return random_predicate(g, depth - 1) || random_predicate(g, depth - 1);
  return !random_predicate(g, depth - 1);
}

}  // namespace

TEST_CASE("R-WHERE-3: bound evaluation agrees with the reference evaluator on random predicates") {
  std::mt19937_64 g(20261205);
  const auto ctx = at(2026, 1, 12, 7);
  int checked = 0;
  for (int i = 0; i < 400; ++i) {
    w::expr p = random_predicate(g, 3);
    std::optional<w::bound<All>> b;
    try {
      b.emplace(w::bind<All>(p, ctx));
    } catch (const fl::error& e) {
      FAIL(p.to_string() << ": " << e.what());
      continue;
    }
    for (int j = 0; j < 20; ++j) {
      All r = sample_row();
      r.i64 = static_cast<std::int64_t>(g() % 9) - 3;
      r.dbl = static_cast<double>(g() % 10) * 0.5;
      r.opt_i = g() % 3 == 0 ? std::nullopt : std::optional<std::int64_t>(static_cast<std::int64_t>(g() % 7) - 3);
      r.day = ymd(2026, 1, 12) - std::chrono::days(g() % 10);
      r.opt_day = g() % 3 == 0 ? std::nullopt : std::optional(r.day + std::chrono::days(1));
      r.ts = w::timestamp_type(r.day) + std::chrono::hours(g() % 48);
      const w::value ref = w::detail::fold(*substitute(p.root(), r), ctx);
      const std::optional<bool> want = ref.is_null() ? std::nullopt : std::optional(ref.as_bool());
      INFO(p.to_string());
      CHECK(b->evaluate(r) == want);
      ++checked;
    }
  }
  CHECK(checked > 2000);
}

// --- MemorySource: version, erase_where, scan, changed_values ------------------

namespace {

Ev ev(int day, std::string region, std::int64_t qty = 1, std::uint32_t seq = 0) {
  return Ev{ymd(2026, 1, 1) + std::chrono::days(day), std::move(region), qty, seq};
}

std::vector<w::value> days_of(std::initializer_list<int> ds) {
  std::vector<w::value> out;
  for (int d : ds) out.push_back(w::value(ymd(2026, 1, 1) + std::chrono::days(d)));
  std::sort(out.begin(), out.end());
  return out;
}

fl::source_position pos(std::initializer_list<std::pair<std::uint32_t, std::uint64_t>> parts) {
  fl::source_position p;
  for (auto [part, offset] : parts) p.set(part, offset);
  return p;
}

std::vector<Ev> all_rows(const fl::MemorySource<Ev>& s) {
  std::vector<Ev> out;
  s.read_all(out);
  return out;
}

}  // namespace

TEST_CASE("R-WHERE-7: MemorySource version() grows on every append and removal, and only then") {
  fl::MemorySource<Ev> s("events", {.partitions = 2});
  CHECK(s.version() == 0);
  s.append(ev(0, "a"));
  CHECK(s.version() == 1);
  s.append(std::vector<Ev>{ev(1, "a"), ev(2, "b")});
  CHECK(s.version() == 2);
  s.append(std::vector<Ev>{});
  CHECK(s.version() == 2);  // nothing appended
  s.append_to(1, ev(3, "c"));
  CHECK(s.version() == 3);
  CHECK(s.erase_where([](const Ev& e) { return e.region == "zz"; }) == 0);
  CHECK(s.version() == 3);  // nothing erased
  CHECK(s.erase_where([](const Ev& e) { return e.region == "b"; }) == 1);
  CHECK(s.version() == 4);
  s.discard_before(pos({{0, 1}}));
  CHECK(s.version() == 5);
  s.discard_before(pos({{0, 1}}));
  CHECK(s.version() == 5);  // already discarded
  CHECK(s.size() == 2);
}

TEST_CASE("R-WHERE-7: erase_where removes rows from reads and scans; positions do not move") {
  fl::MemorySource<Ev> s("events", {.partitions = 2});
  for (int i = 0; i < 10; ++i) s.append(ev(i, i % 2 ? "odd" : "even", i));
  for (int i = 0; i < 4; ++i) s.append_to(1, ev(i, "p1", 100 + i));
  const auto latest = s.latest();
  CHECK(s.erase_where([](const Ev& e) { return e.region == "odd" || e.qty == 101; }) == 6);
  CHECK(s.latest() == latest);
  CHECK(s.size() == 8);
  std::vector<Ev> read;
  s.read(s.start(), s.latest(), read);
  std::vector<Ev> scanned = all_rows(s);
  CHECK(read == scanned);
  REQUIRE(scanned.size() == 8);
  // partition 0 first, each in offset order
  std::vector<std::int64_t> qty;
  for (const Ev& e : scanned) qty.push_back(e.qty);
  CHECK(qty == std::vector<std::int64_t>{0, 2, 4, 6, 8, 100, 102, 103});
  // erase_where never sees an erased row again; discard_before across erased rows
  CHECK(s.erase_where([](const Ev& e) { return e.region == "odd"; }) == 0);
  s.discard_before(pos({{0, 5}, {1, 2}}));
  scanned = all_rows(s);
  qty.clear();
  for (const Ev& e : scanned) qty.push_back(e.qty);
  CHECK(qty == std::vector<std::int64_t>{6, 8, 102, 103});
  CHECK(s.size() == 4);
  // scan returns the version it started from
  std::uint64_t n = 0;
  CHECK(s.scan([&](const Ev&) { ++n; }) == s.version());
  CHECK(n == 4);
}

TEST_CASE("R-WHERE-7: changed_values reports appended, discarded and erased rows' values") {
  fl::MemorySource<Ev> s("events", {.partitions = 2});
  for (int d = 0; d < 5; ++d) s.append(ev(d, "a"));
  const auto v1 = s.version();
  CHECK(s.changed_values("event_date", v1) == std::vector<w::value>{});
  CHECK(s.changed_values("event_date", 0) == days_of({0, 1, 2, 3, 4}));

  s.append_to(1, ev(7, "b"));
  s.append_to(1, ev(7, "c"));
  CHECK(s.changed_values("event_date", v1) == days_of({7}));
  CHECK(s.changed_values("region", v1) == std::vector<w::value>{"b", "c"});
  const auto v2 = s.version();

  s.erase_where([](const Ev& e) { return e.event_date == ymd(2026, 1, 3); });  // day 2
  CHECK(s.changed_values("event_date", v2) == days_of({2}));
  const auto v3 = s.version();

  s.discard_before(pos({{0, 2}}));  // days 0 and 1 leave partition 0
  CHECK(s.changed_values("event_date", v3) == days_of({0, 1}));
  CHECK(s.changed_values("event_date", v2) == days_of({0, 1, 2}));
  // an append whose row was erased since is still reported (through the erase)
  const auto v4 = s.version();
  s.append(ev(9, "a"));
  s.erase_where([](const Ev& e) { return e.event_date == ymd(2026, 1, 10); });
  CHECK(s.changed_values("event_date", v4) == days_of({9}));
  CHECK(s.changed_values("event_date", 0) == days_of({0, 1, 2, 3, 4, 7, 9}));
  // unknown or unreadable column: the source cannot tell
  CHECK_FALSE(s.changed_values("nope", 0).has_value());
  CHECK_FALSE(s.changed_values("seq", 0).has_value());
}

TEST_CASE("R-WHERE-7: changed_values is exact for reported versions, a superset otherwise") {
  fl::MemorySource<Ev> s("events");
  for (int d = 0; d < 100; ++d) s.append(ev(d, "a"));  // one initial load
  const auto v = s.version();
  s.append(ev(200, "a"));  // contiguous with the load, but after a reported version
  CHECK(s.changed_values("event_date", v) == days_of({200}));
  s.append(ev(201, "a"));
  s.append(ev(202, "a"));
  s.append(ev(203, "a"));  // none of these versions was reported: one record
  const auto now = s.version();
  CHECK(s.changed_values("event_date", now - 3) == days_of({201, 202, 203}));
  const auto superset = s.changed_values("event_date", now - 1);  // only 203 came after
  REQUIRE(superset);
  CHECK(std::find(superset->begin(), superset->end(), days_of({203})[0]) != superset->end());
  CHECK(superset->size() == 3);
  // scan() and read_all() report versions too
  const auto scanned = s.scan([](const Ev&) {});
  s.append(ev(300, "a"));
  CHECK(s.changed_values("event_date", scanned) == days_of({300}));
}

TEST_CASE("R-WHERE-7: changed_values is nullopt past the history bound") {
  fl::MemorySource<Ev> s("events", {.partitions = 1, .change_history_rows = 3, .change_history_records = 4});
  for (int d = 0; d < 6; ++d) s.append(ev(d, "a"));
  const auto v0 = s.version();
  s.erase_where([](const Ev& e) { return e.event_date == ymd(2026, 1, 1); });  // 1 row kept
  const auto v1 = s.version();
  CHECK(s.changed_values("event_date", v0) == days_of({0}));
  s.erase_where([](const Ev& e) { return e.event_date <= ymd(2026, 1, 4); });  // 3 more rows
  // 4 removed rows > 3: the first erase's record was dropped
  CHECK(s.history_horizon() >= v1);
  CHECK_FALSE(s.changed_values("event_date", v0).has_value());
  CHECK(s.changed_values("event_date", v1) == days_of({1, 2, 3}));
  // record count bound: appends to alternating partitions make one record each
  fl::MemorySource<Ev> t("t", {.partitions = 2, .change_history_records = 4});
  for (int i = 0; i < 10; ++i) t.append_to(static_cast<std::uint32_t>(i % 2), ev(i, "a"));
  CHECK_FALSE(t.changed_values("event_date", 0).has_value());
  CHECK(t.changed_values("event_date", 6) == days_of({6, 7, 8, 9}));
  // forget_changes_before
  const auto v = t.version();
  t.append(ev(20, "a"));
  t.forget_changes_before(v);
  CHECK(t.history_horizon() == v);
  CHECK_FALSE(t.changed_values("event_date", v - 1).has_value());
  CHECK(t.changed_values("event_date", v) == days_of({20}));
  // a single removal larger than the bound is not kept at all
  fl::MemorySource<Ev> u("u", {.partitions = 1, .change_history_rows = 2});
  for (int d = 0; d < 5; ++d) u.append(ev(d, "a"));
  const auto before = u.version();
  u.discard_before(fl::source_position::at(4));
  CHECK_FALSE(u.changed_values("event_date", before).has_value());
  CHECK(u.changed_values("event_date", u.version()) == std::vector<w::value>{});
}

TEST_CASE("R-WHERE-7: MemorySource with a bound predicate: erase by where::expr, big partitions") {
  fl::MemorySource<Ev> s("events", {.partitions = 3});
  // more rows than one chunk per partition
  for (int i = 0; i < 3000; ++i) s.append_to(static_cast<std::uint32_t>(i % 3), ev(i % 30, "r", i));
  const auto v = s.version();
  auto old = w::bind<Ev>(w::col("event_date") < w::current_date() - w::days(20), at(2026, 1, 25));
  CHECK(s.erase_where(std::cref(old)) == 400);  // days 0..3 (2026-01-01..04), 100 rows each
  CHECK(s.size() == 2600);
  CHECK(s.changed_values("event_date", v) == days_of({0, 1, 2, 3}));
  std::size_t n = 0, old_rows = 0;
  s.scan([&](const Ev& e) {
    old_rows += old(e);
    ++n;
  });
  CHECK(n == 2600);
  CHECK(old_rows == 0);
}

TEST_CASE("R-WHERE-7: scans, erases and changed_values run while producers append") {
  fl::MemorySource<Ev> s("live", {.partitions = 2});
  std::atomic<bool> stop{false};
  std::thread producer([&] {
    for (int i = 0; i < 20000 && !stop; ++i) s.append_to(static_cast<std::uint32_t>(i % 2), ev(i % 50, "p", i));
  });
  std::uint64_t last = 0;
  for (int round = 0; round < 20; ++round) {
    std::vector<Ev> rows;
    const auto v = s.read_all(rows);
    CHECK(v >= last);
    last = v;
    CHECK(std::all_of(rows.begin(), rows.end(), [](const Ev& e) { return e.region == "p"; }));
    s.erase_where([&](const Ev& e) { return e.qty % 97 == round; });
    const auto changed = s.changed_values("event_date", v);
    if (changed) CHECK(changed->size() <= 50);
  }
  stop = true;
  producer.join();
  std::vector<Ev> rows;
  s.read_all(rows);
  CHECK(rows.size() == s.size());
}

}  // namespace where_predicates
