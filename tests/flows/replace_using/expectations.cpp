// Expectations (docs/semantics.md#expectations) and their interplay with REPLACE
// USING (R-USING-8): one TEST_CASE per clause, templated over every storage
// policy.
#include <flowlib/flowlib.hpp>

#include <support/reference_model.hpp>
#include <support/storage_policies.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <list>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace flows_replace_using_expectations {

namespace fl = flowlib;

struct Booking {
  std::int64_t booking_id;
  std::string status;
  std::int64_t total_amount;
  std::optional<std::int64_t> booking_update_id;
  friend auto operator<=>(const Booking&, const Booking&) = default;
};
FLOWLIB_SCHEMA(Booking, booking_id, status, total_amount, booking_update_id);

using Flow = fl::ReplaceUsing<fl::Key<&Booking::booking_id>, fl::Seq<&Booking::booking_update_id>>;
template <class Storage>
using Table = fl::StreamingTable<Booking, Storage>;

inline auto positive_amount() {
  return fl::expectations(
      fl::expect_or_drop("positive_amount", [](const Booking& b) { return b.total_amount > 0; }));
}

using flowtest::sorted;

/// Everything observable about a target and its flow.
template <class Storage>
auto snapshot(const Table<Storage>& t, const Flow& f) {
  std::vector<std::optional<std::int64_t>> seqs;
  for (std::int64_t k = 0; k < 10; ++k) seqs.push_back(f.sequence_of(k));
  return std::tuple{t.sorted_rows(), t.size(), f.key_count(), seqs, t.writers().size()};
}

/// Target: booking 1 with two rows at update 5, booking 2 with one at 5.
template <class Storage>
void fill(Table<Storage>& t, Flow& f) {
  f.apply(t, std::vector<Booking>{{1, "a", 100, 5}, {1, "b", 200, 5}, {2, "c", 300, 5}});
}

TEST_CASE_TEMPLATE("R-USING-8 (a): a dropped row replaces, deletes and modifies nothing", Storage,
                   FLOWTEST_STORAGE_POLICIES) {
  Table<Storage> t{"bookings"};
  Flow flow{"bookings_flow"};
  fill(t, flow);
  const auto before = snapshot(t, flow);
  const auto stats = flow.apply(t,
                                std::vector<Booking>{
                                    {1, "higher but invalid", 0, 9},  // would replace booking 1
                                    {2, "equal but invalid", -1, 5},  // would append to booking 2
                                    {3, "new but invalid", 0, 1},     // would insert booking 3
                                },
                                positive_amount());
  CHECK(snapshot(t, flow) == before);
  CHECK(flow.sequence_of(3) == std::nullopt);
  CHECK(stats.input_rows == 3);
  CHECK(stats.dropped_rows == 3);
  CHECK(stats.applied_rows == 0);
  CHECK(stats.replaced_rows == 0);
  CHECK(stats.superseded_rows == 0);
  CHECK(stats.ignored_late_rows == 0);
  CHECK(flowtest::rows_accounted(stats));
}

TEST_CASE_TEMPLATE("R-USING-8 (b): drops happen before the per-key maximum: the latest VALID "
                   "version wins",
                   Storage, FLOWTEST_STORAGE_POLICIES) {
  Table<Storage> t{"bookings"};
  Flow flow{"bookings_flow"};
  fill(t, flow);
  const auto stats = flow.apply(t,
                                std::vector<Booking>{
                                    {1, "valid 6", 10, 6},
                                    {1, "invalid 9", 0, 9},
                                    {1, "valid 7", 20, 7},
                                    {1, "invalid 8", -5, 8},
                                    {2, "invalid 6", 0, 6},
                                    {2, "valid 4", 1, 4},  // older than the target: ignored
                                },
                                positive_amount());
  CHECK(t.sorted_rows() == sorted<Booking>({{1, "valid 7", 20, 7}, {2, "c", 300, 5}}));
  CHECK(flow.sequence_of(1) == 7);
  CHECK(flow.sequence_of(2) == 5);
  CHECK(stats.dropped_rows == 3);
  CHECK(stats.superseded_rows == 1);  // "valid 6", below the valid maximum 7
  CHECK(stats.replaced_rows == 2);
  CHECK(stats.applied_rows == 1);
  CHECK(stats.ignored_late_rows == 1);
  CHECK(flowtest::rows_accounted(stats));
}

TEST_CASE_TEMPLATE("R-USING-8 (c): a key all of whose incoming rows were dropped keeps its target rows",
                   Storage, FLOWTEST_STORAGE_POLICIES) {
  Table<Storage> t{"bookings"};
  Flow flow{"bookings_flow"};
  fill(t, flow);
  const auto stats = flow.apply(t,
                                std::vector<Booking>{
                                    {1, "x", 0, 6},
                                    {1, "y", 0, 5},
                                    {1, "z", -1, 100},
                                    {2, "updated", 400, 6},
                                },
                                positive_amount());
  CHECK(t.sorted_rows() == sorted<Booking>({{1, "a", 100, 5}, {1, "b", 200, 5}, {2, "updated", 400, 6}}));
  CHECK(flow.sequence_of(1) == 5);
  CHECK(flow.key_count() == 2);
  CHECK(stats.dropped_rows == 3);
  CHECK(stats.replaced_rows == 1);
}

TEST_CASE_TEMPLATE("R-USING-8 (d): a dropped row sets no sequence floor", Storage,
                   FLOWTEST_STORAGE_POLICIES) {
  Table<Storage> t{"bookings"};
  Flow flow{"bookings_flow"};
  fill(t, flow);

  SUBCASE("in a later batch") {
    flow.apply(t, std::vector<Booking>{{1, "invalid 50", 0, 50}, {4, "invalid new key", 0, 50}},
               positive_amount());
    CHECK(flow.sequence_of(1) == 5);
    CHECK(flow.sequence_of(4) == std::nullopt);
    const auto stats = flow.apply(t, std::vector<Booking>{{1, "valid 6", 1, 6}, {4, "valid 1", 1, 1}},
                                  positive_amount());
    CHECK(stats.applied_rows == 2);
    CHECK(stats.ignored_late_rows == 0);
    CHECK(t.sorted_rows() ==
          sorted<Booking>({{1, "valid 6", 1, 6}, {2, "c", 300, 5}, {4, "valid 1", 1, 1}}));
  }
  SUBCASE("in the same batch, after the dropped row") {
    const auto stats = flow.apply(
        t, std::vector<Booking>{{1, "invalid 50", 0, 50}, {1, "valid 6", 1, 6}}, positive_amount());
    CHECK(stats.applied_rows == 1);
    CHECK(stats.superseded_rows == 0);
    CHECK(flow.sequence_of(1) == 6);
  }
}

TEST_CASE_TEMPLATE("R-USING-8 R-USING-7: a dropped row with a null sequence does not fail the batch",
                   Storage, FLOWTEST_STORAGE_POLICIES) {
  Table<Storage> t{"bookings"};
  Flow flow{"bookings_flow"};
  const auto checks = fl::expectations(fl::expect_or_drop(
      "has_update_id", [](const Booking& b) { return b.booking_update_id.has_value(); }));
  const auto stats =
      flow.apply(t, std::vector<Booking>{{1, "a", 1, std::nullopt}, {2, "b", 1, 3}}, checks);
  CHECK(stats.dropped_rows == 1);
  CHECK(t.sorted_rows() == std::vector<Booking>{{2, "b", 1, 3}});
  // A warn expectation keeps the row, so its null sequence still fails the batch.
  const auto warn_only = fl::expectations(fl::expect(
      "has_update_id", [](const Booking& b) { return b.booking_update_id.has_value(); }));
  CHECK_THROWS_AS(flow.apply(t, std::vector<Booking>{{2, "c", 1, 4}, {1, "a", 1, std::nullopt}}, warn_only),
                  fl::error);
  CHECK(t.sorted_rows() == std::vector<Booking>{{2, "b", 1, 3}});
}

TEST_CASE_TEMPLATE("R-EXPECT-1 warn: the row is kept and the violation counted", Storage,
                   FLOWTEST_STORAGE_POLICIES) {
  Table<Storage> t{"bookings"};
  Flow flow{"bookings_flow"};
  const auto checks = fl::expectations(
      fl::expect("has_status", [](const Booking& b) { return !b.status.empty(); }));
  const auto stats =
      flow.apply(t, std::vector<Booking>{{1, "", 1, 1}, {2, "ok", 1, 1}, {3, "", 1, 1}}, checks);
  CHECK(t.size() == 3);
  CHECK(stats.dropped_rows == 0);
  CHECK(stats.applied_rows == 3);
  REQUIRE(stats.expectations.size() == 1);
  CHECK(stats.expectations[0] == fl::ExpectationMetrics{"has_status", fl::on_violation::warn, 1, 2});
}

TEST_CASE_TEMPLATE("R-EXPECT-1 fail: the batch stops, the error names the expectation and the row's "
                   "key, the target is exactly as before",
                   Storage, FLOWTEST_STORAGE_POLICIES) {
  Table<Storage> t{"bookings"};
  Flow flow{"bookings_flow"};
  const auto checks = fl::expectations(
      fl::expect_or_drop("positive_amount", [](const Booking& b) { return b.total_amount > 0; }),
      fl::expect_or_fail("known_status", [](const Booking& b) { return b.status != "???"; }));

  SUBCASE("on the first batch: the table is not even claimed") {
    CHECK_THROWS_AS(flow.apply(t, std::vector<Booking>{{1, "a", 1, 1}, {2, "???", 1, 1}}, checks),
                    fl::error);
    CHECK(t.empty());
    CHECK(t.writers().empty());
    CHECK(flow.key_count() == 0);
  }

  fill(t, flow);
  const auto before = snapshot(t, flow);
  const std::vector<Booking> batch{
      {1, "replace", 10, 6},    // would replace booking 1
      {2, "append", 10, 5},     // would append to booking 2
      {5, "insert", 10, 1},     // would insert booking 5
      {0, "dropped", 0, 1},     // dropped before the failure
      {7, "???", 10, 3},        // fails the batch
      {8, "after", 10, 1},
  };
  try {
    flow.apply(t, batch, checks);
    FAIL("no exception");
  } catch (const fl::error& e) {
    CHECK(e.code() == fl::errc::expectation_failed);
    CHECK(e.flow() == "bookings_flow");
    CHECK(e.column() == "known_status");
    CHECK(e.key() == "booking_id=7");
    const std::string what = e.what();
    CHECK(what.find("known_status") != std::string::npos);
    CHECK(what.find("booking_id=7") != std::string::npos);
    CHECK(what.find("bookings_flow") != std::string::npos);
    CHECK(what.find("EXPECTATION_VIOLATION") != std::string::npos);
  }
  CHECK(snapshot(t, flow) == before);

  // The flow goes on as if the failed batch never came; its counts do not leak.
  auto fixed = batch;
  fixed[4].status = "fixed";
  const auto stats = flow.apply(t, fixed, checks);
  CHECK(stats.input_rows == 6);
  CHECK(stats.dropped_rows == 1);
  CHECK(stats.expectation("positive_amount")->failed == 1);
  CHECK(stats.expectation("positive_amount")->passed == 5);
  CHECK(stats.expectation("known_status")->failed == 0);
  CHECK(stats.expectation("known_status")->passed == 6);
  CHECK(t.sorted_rows() == sorted<Booking>({{1, "replace", 10, 6},
                                            {2, "append", 10, 5},
                                            {2, "c", 300, 5},
                                            {5, "insert", 10, 1},
                                            {7, "fixed", 10, 3},
                                            {8, "after", 10, 1}}));
}

TEST_CASE_TEMPLATE("R-EXPECT-2: passed and failed counts per expectation, in declaration order",
                   Storage, FLOWTEST_STORAGE_POLICIES) {
  Table<Storage> t{"bookings"};
  Flow flow{"bookings_flow"};
  const auto checks = fl::expectations(
      fl::expect("has_status", [](const Booking& b) { return !b.status.empty(); }),
      fl::expect_or_drop("positive_amount", [](const Booking& b) { return b.total_amount > 0; }),
      fl::expect("small_amount", [](const Booking& b) { return b.total_amount < 1000; },
                 fl::on_violation::warn),
      fl::expect("id_positive", [](const Booking& b) { return b.booking_id > 0; }, fl::on_violation::drop));
  const std::vector<Booking> batch{
      {1, "ok", 10, 1},     // passes all
      {2, "", 0, 1},        // violates has_status (warn) and positive_amount (drop): both counted
      {3, "", 5000, 1},     // violates has_status and small_amount (both warn): kept
      {-4, "ok", -1, 1},    // violates positive_amount and id_positive (both drop)
      {5, "ok", 2000, 1},   // violates small_amount: kept
  };
  const auto stats = flow.apply(t, batch, checks);
  REQUIRE(stats.expectations.size() == 4);
  CHECK(stats.expectations[0] == fl::ExpectationMetrics{"has_status", fl::on_violation::warn, 3, 2});
  CHECK(stats.expectations[1] == fl::ExpectationMetrics{"positive_amount", fl::on_violation::drop, 3, 2});
  CHECK(stats.expectations[2] == fl::ExpectationMetrics{"small_amount", fl::on_violation::warn, 3, 2});
  CHECK(stats.expectations[3] == fl::ExpectationMetrics{"id_positive", fl::on_violation::drop, 4, 1});
  CHECK(stats.expectation("small_amount") == &stats.expectations[2]);
  CHECK(stats.expectation("no_such") == nullptr);
  CHECK(stats.dropped_rows == 2);
  CHECK(stats.applied_rows == 3);
  CHECK(flowtest::rows_accounted(stats));
  CHECK(t.sorted_rows() == sorted<Booking>({{1, "ok", 10, 1}, {3, "", 5000, 1}, {5, "ok", 2000, 1}}));

  // Metrics are per batch: the next batch starts from zero.
  const auto next = flow.apply(t, std::vector<Booking>{{1, "ok", 10, 2}}, checks);
  CHECK(next.expectations[0] == fl::ExpectationMetrics{"has_status", fl::on_violation::warn, 1, 0});
  CHECK(next.expectations[1] == fl::ExpectationMetrics{"positive_amount", fl::on_violation::drop, 1, 0});
}

TEST_CASE_TEMPLATE("R-EXPECT-1: a row violating a drop and a fail expectation fails the batch, and the "
                   "first failing expectation is named",
                   Storage, FLOWTEST_STORAGE_POLICIES) {
  Table<Storage> t{"bookings"};
  Flow flow{"bookings_flow"};
  const auto checks = fl::expectations(
      fl::expect_or_drop("positive_amount", [](const Booking& b) { return b.total_amount > 0; }),
      fl::expect_or_fail("has_status", [](const Booking& b) { return !b.status.empty(); }),
      fl::expect_or_fail("bounded_amount",
                         [](const Booking& b) { return b.total_amount > -1000 && b.total_amount < 1000; }));
  try {
    flow.apply(t, std::vector<Booking>{{1, "ok", 1, 1}, {2, "", -5000, 1}}, checks);
    FAIL("no exception");
  } catch (const fl::error& e) {
    CHECK(e.code() == fl::errc::expectation_failed);
    CHECK(e.column() == "has_status");
    CHECK(e.key() == "booking_id=2");
  }
  CHECK(t.empty());
}

TEST_CASE("Expectations::filter: the standalone operator") {
  const auto checks = fl::expectations(
      fl::expect_or_drop("positive_amount", [](const Booking& b) { return b.total_amount > 0; }),
      fl::expect("has_status", [](const Booking& b) { return !b.status.empty(); }));
  const std::list<Booking> batch{{1, "a", 1, 1}, {2, "", 1, 1}, {3, "c", 0, 1}};
  fl::BatchStats stats;
  const auto describe = [](const Booking& b) { return "booking_id=" + std::to_string(b.booking_id); };
  const std::vector<Booking> kept = checks.filter(batch, stats, "filter_op", describe);
  CHECK(kept == std::vector<Booking>{{1, "a", 1, 1}, {2, "", 1, 1}});
  CHECK(stats.input_rows == 3);
  CHECK(stats.dropped_rows == 1);
  REQUIRE(stats.expectations.size() == 2);
  CHECK(stats.expectations[0] == fl::ExpectationMetrics{"positive_amount", fl::on_violation::drop, 2, 1});
  CHECK(stats.expectations[1] == fl::ExpectationMetrics{"has_status", fl::on_violation::warn, 2, 1});

  const auto failing = fl::expectations(
      fl::expect_or_fail("positive_amount", [](const Booking& b) { return b.total_amount > 0; }));
  fl::BatchStats fstats;
  try {
    (void)failing.filter(batch, fstats, "filter_op", describe);
    FAIL("no exception");
  } catch (const fl::error& e) {
    CHECK(e.code() == fl::errc::expectation_failed);
    CHECK(e.flow() == "filter_op");
    CHECK(e.key() == "booking_id=3");
  }
  CHECK(fstats.expectations.empty());  // nothing reported for a failed batch
}

TEST_CASE("Expectation builders record name and action") {
  const auto pred = [](const Booking&) { return true; };
  CHECK(fl::expect("w", pred).action == fl::on_violation::warn);
  CHECK(fl::expect_or_drop("d", pred).action == fl::on_violation::drop);
  CHECK(fl::expect_or_fail("f", pred).action == fl::on_violation::fail);
  CHECK(fl::expect("x", pred, fl::on_violation::fail).action == fl::on_violation::fail);
  CHECK(fl::expect("named", pred).name == "named");
  CHECK(decltype(fl::expectations(fl::expect("a", pred), fl::expect("b", pred)))::size == 2);
  CHECK(fl::NoExpectations::size == 0);
}

namespace ex {
struct Reading {
  std::int64_t sensor;
  std::int64_t seq;
  std::int64_t value;
  friend auto operator<=>(const Reading&, const Reading&) = default;
};
FLOWLIB_SCHEMA(Reading, sensor, seq, value);
}  // namespace ex

TEST_CASE_TEMPLATE("R-USING-8: expectations declared on the table apply to REPLACE USING, after the "
                   "flow's", Storage, FLOWTEST_STORAGE_POLICIES) {
  using Flow = fl::ReplaceUsing<fl::Key<&ex::Reading::sensor>, fl::Seq<&ex::Reading::seq>>;
  fl::StreamingTable<ex::Reading, Storage> t{
      "readings", fl::table_options<ex::Reading>()
                      .expect(fl::expect_or_drop("non_negative",
                                                 [](const ex::Reading& r) { return r.value >= 0; }))
                      .expect(fl::expect_or_fail("not_huge",
                                                 [](const ex::Reading& r) { return r.value < 1000; }))};
  Flow flow{"readings_flow"};
  flow.apply(t, std::vector<ex::Reading>{{1, 1, 10}, {2, 1, 20}});

  // Sensor 1's row at seq 5 is dropped by the table: it sets no floor, so
  // the row at seq 3 replaces the stored one (R-USING-8).
  const std::vector<ex::Reading> batch{{1, 5, -1}, {1, 3, 11}, {2, 4, 21}, {3, 1, -7}};
  const auto warn_odd_sensors = fl::expectations(  // warn: counted, kept
      fl::expect("even_sensor", [](const ex::Reading& r) { return r.sensor % 2 == 0; }));
  const fl::BatchStats s = flow.apply(t, batch, warn_odd_sensors);
  CHECK(s.input_rows == 4);
  CHECK(s.dropped_rows == 2);
  CHECK(s.applied_rows == 2);
  REQUIRE(s.expectations.size() == 3);  // the flow's, then the table's
  CHECK(s.expectations[0].name == "even_sensor");
  CHECK(s.expectations[0].failed == 3);
  CHECK(s.expectations[1].name == "non_negative");
  CHECK(s.expectations[1].failed == 2);
  CHECK(s.expectations[2].name == "not_huge");
  CHECK(s.expectations[2].passed == 4);  // the table's expectations each see every row
  CHECK(t.sorted_rows() == std::vector<ex::Reading>{{1, 3, 11}, {2, 4, 21}});
  CHECK(flow.sequence_of(1) == 3);

  // A `fail` on the table stops the batch: nothing is applied.
  CHECK_THROWS_AS(flow.apply(t, std::vector<ex::Reading>{{1, 9, 12}, {2, 9, 5000}}), fl::error);
  CHECK(t.sorted_rows() == std::vector<ex::Reading>{{1, 3, 11}, {2, 4, 21}});
  CHECK(flow.sequence_of(1) == 3);
}

}  // namespace flows_replace_using_expectations
