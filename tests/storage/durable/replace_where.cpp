// REPLACE WHERE on a durable target, on each durable configuration: the
// target is reopened from the database or directory and compared with a
// memory run (R-DURABLE-1, R-WHERE-1, R-WHERE-7), and rows inserted into it
// directly are written at once and found after a restart (R-WHERE-5).
#include <doctest/doctest.h>

#include <flowlib/checkpoint/memory.hpp>
#include <flowlib/flowlib.hpp>
#include <flowlib/pipeline.hpp>
#include <flowlib/source/memory.hpp>

#include <storage/durable/suite.hpp>
#include <support/durable_configs.hpp>
#include <support/errors.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace storage_durable_replace_where {

using namespace storage_durable_suite;

struct Sale {
  std::chrono::sys_days day{};
  std::int64_t id = 0;
  std::int64_t amount = 0;
};
FLOWLIB_SCHEMA(Sale, day, id, amount);

struct DayTotal {
  std::chrono::sys_days day{};
  std::int64_t sales = 0;
  std::int64_t amount = 0;
  friend bool operator==(const DayTotal&, const DayTotal&) = default;
  friend auto operator<=>(const DayTotal&, const DayTotal&) = default;
};
FLOWLIB_SCHEMA(DayTotal, day, sales, amount);

/// Day n of the calendar (day 0 is 2026-01-01).
std::chrono::sys_days sale_day(int n) {
  return std::chrono::sys_days{std::chrono::year{2026} / std::chrono::January / 1} + std::chrono::days(n);
}
/// The options of the update at noon of day n.
fl::UpdateOptions at_noon(int n) {
  fl::UpdateOptions o;
  o.now = std::chrono::system_clock::time_point(sale_day(n)) + std::chrono::hours(12);
  return o;
}

/// The query: one row per day (it keeps days apart, so an incremental update
/// gives what a complete recompute gives, R-WHERE-7).
std::vector<DayTotal> daily_totals(std::span<const Sale> sales) {
  std::map<std::chrono::sys_days, DayTotal> by_day;
  for (const Sale& s : sales) {
    DayTotal& t = by_day[s.day];
    t.day = s.day;
    t.sales += 1;
    t.amount += s.amount;
  }
  std::vector<DayTotal> out;
  for (const auto& [d, t] : by_day) out.push_back(t);
  return out;
}

/// The sales a program appends before the update at noon of day n (one
/// append call per update): late sales of days the window has left are
/// never counted (R-WHERE-1).
std::vector<Sale> sales_before(int n) {
  switch (n) {
    case 1: return {{sale_day(0), 1, 10}, {sale_day(0), 2, 20}, {sale_day(1), 3, 5}};
    case 2: return {{sale_day(2), 4, 7}, {sale_day(1), 5, 3}, {sale_day(0), 6, 100}};
    case 3: return {{sale_day(3), 7, 1}, {sale_day(2), 8, 2}, {sale_day(1), 9, 50}};
    case 4: return {{sale_day(4), 10, 4}};
    default: return {};
  }
}

/// The technique of each REPLACE WHERE update in the event log's lines
/// (its planning_information events), in order.
std::vector<std::string> techniques_of(const std::vector<std::string>& lines) {
  std::vector<std::string> out;
  for (const std::string& l : lines) {
    if (l.find("\"event_type\":\"planning_information\"") == std::string::npos) continue;
    out.push_back(l.find("\"technique\":\"INCREMENTAL\"") != std::string::npos ? "INCREMENTAL"
                                                                                : "COMPLETE_RECOMPUTE");
  }
  return out;
}

/// One program over a checkpoint: the sales source, fed with the sales of
/// updates 1..`fed`; the REPLACE WHERE flow "totals" (window: yesterday and
/// later, on the update's clock) into `totals`; the event log's lines in
/// `events`. Members are destroyed in reverse: the pipeline, the table, then
/// the checkpoint it uses.
template <class Storage>
struct program {
  fl::MemorySource<Sale> sales{"sales"};
  fl::StreamingTable<DayTotal, Storage> totals{"totals"};
  std::vector<std::string> events;
  fl::EventLog log{[this](std::string_view line) { events.emplace_back(line); }};
  fl::Pipeline p;
  program(fl::checkpoint_store& ck, int fed) : p{"sales", ck} {
    namespace w = flowlib::where;
    for (int n = 1; n <= fed; ++n) sales.append(sales_before(n));
    p.event_log(log);
    p.flow("totals").from(sales).query(daily_totals, "v1").into(
        totals, fl::ReplaceWhere{w::col("day") >= w::current_date() - w::days(1)});
  }
  /// Appends the sales of update n and runs it.
  fl::UpdateSummary update(int n) {
    sales.append(sales_before(n));
    return p.update(at_noon(n));
  }
};

TEST_CASE_TEMPLATE("R-DURABLE-1, R-DURABLE-6 (FileStorage), R-WHERE-1, R-WHERE-7: a durable REPLACE WHERE target is written with each update, loaded when the pipeline opens again, and ends equal to a memory run",
                   Config, FLOWTEST_DURABLE_CONFIGS) {
  const std::vector<DayTotal> after_two{
      {sale_day(0), 2, 30}, {sale_day(1), 2, 8}, {sale_day(2), 1, 7}};
  const std::vector<DayTotal> after_three{
      {sale_day(0), 2, 30}, {sale_day(1), 2, 8}, {sale_day(2), 2, 9}, {sale_day(3), 1, 1}};

  // The reference: memory tables and checkpoint, one program, three updates.
  std::vector<DayTotal> memory_after_two;
  {
    fl::MemoryCheckpoint ck;
    program<fl::MemoryStorage> prog{ck, 0};
    for (int n = 1; n <= 3; ++n) {
      prog.update(n);
      if (n == 2) memory_after_two = prog.totals.sorted_rows();
    }
    CHECK(memory_after_two == after_two);
    CHECK(prog.totals.sorted_rows() == after_three);
    CHECK(techniques_of(prog.events) ==
          std::vector<std::string>{"COMPLETE_RECOMPUTE", "INCREMENTAL", "INCREMENTAL"});
  }

  const typename Config::place at{"flowlib_durable_where"};
  // The first program: two updates, then everything is destroyed.
  {
    const auto ck = Config::open(at);
    program<typename Config::storage> prog{*ck, 0};
    for (int n = 1; n <= 2; ++n) prog.update(n);
    CHECK(prog.totals.sorted_rows() == after_two);
  }
  // The rows are stored, written with each update.
  CHECK(Config::template stored_rows<DayTotal>(at, "totals") == after_two);

  // The second program: new checkpoint, table, source and pipeline over the
  // same place. The source gets the same records again, by the same appends.
  {
    const auto ck = Config::open(at);
    program<typename Config::storage> prog{*ck, 2};
    CHECK(prog.totals.empty());  // loaded when the pipeline opens, at its first update
    const fl::UpdateSummary s = prog.update(3);
    REQUIRE(s.flow("totals") != nullptr);
    CHECK(s.flow("totals")->batches == 1);
    CHECK(prog.totals.sorted_rows() == after_three);
    // The flow's state came back with the rows: the update is incremental,
    // as the memory run's third update is.
    CHECK(techniques_of(prog.events) == std::vector<std::string>{"INCREMENTAL"});
  }
  CHECK(Config::template stored_rows<DayTotal>(at, "totals") == after_three);
}

TEST_CASE_TEMPLATE("R-WHERE-5, R-DURABLE-1, R-DURABLE-6 (FileStorage): a direct insert into a durable REPLACE WHERE target is refused before the pipeline opens, then written at once, and is there after a restart",
                   Config, FLOWTEST_DURABLE_CONFIGS) {
  const typename Config::place at{"flowlib_durable_dml"};
  const DayTotal old_day{sale_day(-30), 9, 99};  // outside every window of the updates below
  const DayTotal in_window{sale_day(3), 100, 100};
  const auto stored = [&] { return Config::template stored_rows<DayTotal>(at, "totals"); };
  {
    const auto ck = Config::open(at);
    program<typename Config::storage> prog{*ck, 0};
    // Not attached before the pipeline's first update: the stored rows
    // would replace it when the pipeline opens, so it is refused.
    CHECK(flowtest::error_of([&] { fl::dml_insert(prog.totals, std::vector<DayTotal>{old_day}); }).code() ==
          fl::errc::invalid_argument);
    CHECK(prog.totals.empty());
    for (int n = 1; n <= 2; ++n) prog.update(n);
    const auto committed = prog.totals.sorted_rows();
    CHECK(stored() == committed);
    // Written at once, before any further update.
    fl::dml_insert(prog.totals, std::vector<DayTotal>{old_day});
    auto with_old = committed;
    with_old.insert(with_old.begin(), old_day);
    CHECK(prog.totals.sorted_rows() == with_old);
    CHECK(stored() == with_old);
    prog.update(3);
  }
  // A new program over the same place: the inserted row is there, and the
  // flow's restored state still sees the table as the first program left
  // it.
  std::vector<DayTotal> after;
  {
    const auto ck = Config::open(at);
    program<typename Config::storage> prog{*ck, 3};
    prog.p.update(at_noon(3));  // nothing new: opens the pipeline, loads the table
    const auto rows = prog.totals.sorted_rows();
    REQUIRE(!rows.empty());
    CHECK(rows.front() == old_day);
    // A direct insert inside the next window: that update recomputes the
    // window (R-WHERE-5), which replaces the inserted row.
    fl::dml_insert(prog.totals, std::vector<DayTotal>{in_window});
    CHECK(stored().size() == rows.size() + 1);
    prog.update(4);
    after = prog.totals.sorted_rows();
    CHECK(after.front() == old_day);
    CHECK(std::count(after.begin(), after.end(), in_window) == 0);
    CHECK(std::count_if(after.begin(), after.end(), [](const DayTotal& t) { return t.day == sale_day(3); }) == 1);
    CHECK(stored() == after);
    REQUIRE(!techniques_of(prog.events).empty());
    CHECK(techniques_of(prog.events).back() == "COMPLETE_RECOMPUTE");
  }
  // And once more: a third program loads what the second left.
  {
    const auto ck = Config::open(at);
    program<typename Config::storage> prog{*ck, 4};
    prog.p.update(at_noon(4));  // an update of REPLACE WHERE is a batch, whatever is new (R-EXACT-2)
    CHECK(prog.totals.sorted_rows() == after);
    CHECK(stored() == after);
  }
}

}  // namespace storage_durable_replace_where
