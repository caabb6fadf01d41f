// tests/flows/replace_where/world.hpp
//
// What the REPLACE WHERE suites share: the tests' calendar, the source rows
// (events, users) and the per-day-and-region query, the planning events a
// pipeline logs, and a pipeline over a checkpoint of its own that a test
// reopens (a restart) with another predicate, version or option.
#pragma once

#include <flowlib/checkpoint/memory.hpp>
#include <flowlib/event_log.hpp>
#include <flowlib/flows/replace_where.hpp>
#include <flowlib/pipeline.hpp>
#include <flowlib/source/memory.hpp>
#include <flowlib/table.hpp>
#include <flowlib/where.hpp>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace flows_replace_where {

namespace fl = flowlib;
namespace w = flowlib::where;

using Day = std::chrono::sys_days;
/// Day n of the tests' calendar (day 0 is 2026-01-01).
inline Day day(int n) { return Day(std::chrono::year{2026} / std::chrono::January / 1) + std::chrono::days(n); }
/// The update clock at noon of day n, as a time point and as a context.
inline std::chrono::system_clock::time_point clock_at(int n) {
  return std::chrono::system_clock::time_point(day(n)) + std::chrono::hours(12);
}
inline w::context at(int n) { return w::context{w::timestamp_type(day(n)) + std::chrono::hours(12), 7}; }

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

/// Per day and region (fact JOIN dimension).
struct RegionDay {
  Day event_date;
  std::string region;
  std::int64_t amount = 0;
  friend bool operator==(const RegionDay&, const RegionDay&) = default;
  friend auto operator<=>(const RegionDay&, const RegionDay&) = default;
};
FLOWLIB_SCHEMA(RegionDay, event_date, region, amount);

/// The amounts of each day and region; a user's last row gives its region.
inline std::vector<RegionDay> by_region(std::span<const Event> es, std::span<const User> us) {
  std::map<std::int64_t, std::string> region;
  for (const auto& u : us) region[u.user_id] = u.region;
  std::map<std::pair<Day, std::string>, std::int64_t> sums;
  for (const auto& e : es) {
    const auto it = region.find(e.user_id);
    sums[{e.event_date, it == region.end() ? std::string("unknown") : it->second}] += e.amount;
  }
  std::vector<RegionDay> out;
  for (const auto& [k, v] : sums) out.push_back({k.first, k.second, v});
  return out;
}

/// A plan as the planning_information event gives it: technique, reason
/// ("none" for a null reason).
using plan_pair = std::pair<std::string, std::string>;

/// An event log that keeps the last planning_information event's plan.
inline std::unique_ptr<fl::EventLog> plan_log(plan_pair& last) {
  return std::make_unique<fl::EventLog>([&last](std::string_view line) {
    const auto j = nlohmann::json::parse(line);
    if (j["event_type"] != "planning_information") return;
    last = {j["technique"], j["reason"].is_null() ? "none" : std::string(j["reason"])};
  });
}

/// An update of `p` at noon of day `today`, with REPLACE WHERE overrides by flow.
inline auto update_at(fl::Pipeline& p, int today, const std::map<std::string, w::expr>& overrides = {}) {
  fl::UpdateOptions o;
  o.now = clock_at(today);
  for (const auto& [flow, pred] : overrides) o.replace_where_overrides.emplace(flow, pred);
  return p.update(o);
}

/// The sources of the randomised suites.
struct world {
  fl::MemorySource<Event> fact{"fact"};
  fl::MemorySource<User> users{"users"};
  world() {
    for (int u = 0; u < 4; ++u) users.append(User{u, "r" + std::to_string(u % 2)});
  }
  /// A random change of the sources around `today`: events appended from
  /// `back` days before to `ahead` days after it, a day's events of even
  /// users erased, a user moved, or the clock moved on.
  template <class Pick>
  void change(Pick& pick, int& today, int back, int ahead) {
    switch (pick(0, 5)) {
      case 0:
      case 1:
      case 2: fact.append(Event{day(today + pick(-back, ahead)), pick(0, 5), pick(1, 9)}); break;
      case 3: {
        const Day d = day(today + pick(-back, 0));
        fact.erase_where([&](const Event& e) { return e.event_date == d && e.user_id % 2 == 0; });
        break;
      }
      case 4: users.append(User{pick(0, 5), "r" + std::to_string(pick(0, 2))}); break;
      default: today += pick(0, 2); break;
    }
  }
};

/// A pipeline writing by_region into `table` over a checkpoint of its own,
/// opened again (a restart) with a predicate, a query version and the
/// incremental option; `last` is the plan of its last update.
struct side {
  fl::StreamingTable<RegionDay> table;
  fl::MemoryCheckpoint ck;
  plan_pair last;
  std::unique_ptr<fl::EventLog> log = plan_log(last);
  std::unique_ptr<fl::Pipeline> p;
  explicit side(std::string name) : table(std::move(name)) {}
  void open(world& wd, const w::expr& pred, const std::string& version, bool incremental) {
    p.reset();
    p = std::make_unique<fl::Pipeline>("p", ck);
    p->event_log(*log);
    p->flow("f").from(wd.fact).with(wd.users).query(by_region, version).into(
        table, fl::ReplaceWhere{"f", pred, fl::ReplaceWhereOptions{.incremental = incremental}});
  }
  void update(int today, const std::map<std::string, w::expr>& overrides = {}) { update_at(*p, today, overrides); }
};

}  // namespace flows_replace_where
