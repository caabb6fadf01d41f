// Expectations (docs/semantics.md#expectations) and their interplay with REPLACE
// USING (R-USING-8): one TEST_CASE per clause, templated over the suites'
// storage policies.
#include <flowlib/flowlib.hpp>

#include <support/errors.hpp>
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

/// The drop expectation most cases use, alone or with others.
inline auto drop_non_positive() {
  return fl::expect_or_drop("positive_amount", [](const Booking& b) { return b.total_amount > 0; });
}
inline auto positive_amount() { return fl::expectations(drop_non_positive()); }

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

/// A filled target and its flow, given batches under positive_amount().
template <class Storage>
struct filled {
  Table<Storage> t{"bookings"};
  Flow flow{"bookings_flow"};
  filled() { fill(t, flow); }
  fl::BatchStats apply(const std::vector<Booking>& batch) { return flow.apply(t, batch, positive_amount()); }
};

TEST_CASE_TEMPLATE("R-USING-8 (a): a dropped row replaces, deletes and modifies nothing", Storage,
                   FLOWTEST_STORAGE_POLICIES) {
  filled<Storage> f;
  const auto before = snapshot(f.t, f.flow);
  const auto stats = f.apply({
      {1, "higher but invalid", 0, 9},  // would replace booking 1
      {2, "equal but invalid", -1, 5},  // would append to booking 2
      {3, "new but invalid", 0, 1},     // would insert booking 3
  });
  CHECK(snapshot(f.t, f.flow) == before);
  CHECK(f.flow.sequence_of(3) == std::nullopt);
  CHECK(flowtest::counts_of(stats) == flowtest::using_counts{.input = 3, .dropped = 3});
}

TEST_CASE_TEMPLATE("R-USING-8 (b): drops happen before the per-key maximum: the latest VALID "
                   "version wins",
                   Storage, FLOWTEST_STORAGE_POLICIES) {
  filled<Storage> f;
  const auto stats = f.apply({
      {1, "valid 6", 10, 6},
      {1, "invalid 9", 0, 9},
      {1, "valid 7", 20, 7},
      {1, "invalid 8", -5, 8},
      {2, "invalid 6", 0, 6},
      {2, "valid 4", 1, 4},  // older than the target: ignored
  });
  CHECK(f.t.sorted_rows() == sorted<Booking>({{1, "valid 7", 20, 7}, {2, "c", 300, 5}}));
  CHECK(f.flow.sequence_of(1) == 7);
  CHECK(f.flow.sequence_of(2) == 5);
  // Superseded: "valid 6", below the valid maximum 7.
  CHECK(flowtest::counts_of(stats) == flowtest::using_counts{.input = 6, .dropped = 3, .superseded = 1,
                                                             .ignored_late = 1, .applied = 1, .replaced = 2});
}

TEST_CASE_TEMPLATE("R-USING-8 (c): a key all of whose incoming rows were dropped keeps its target rows",
                   Storage, FLOWTEST_STORAGE_POLICIES) {
  filled<Storage> f;
  const auto stats = f.apply({{1, "x", 0, 6}, {1, "y", 0, 5}, {1, "z", -1, 100}, {2, "updated", 400, 6}});
  CHECK(f.t.sorted_rows() == sorted<Booking>({{1, "a", 100, 5}, {1, "b", 200, 5}, {2, "updated", 400, 6}}));
  CHECK(f.flow.sequence_of(1) == 5);
  CHECK(f.flow.key_count() == 2);
  CHECK(stats.dropped_rows == 3);
  CHECK(stats.replaced_rows == 1);
}

TEST_CASE_TEMPLATE("R-USING-8 (d): a dropped row sets no sequence floor", Storage,
                   FLOWTEST_STORAGE_POLICIES) {
  filled<Storage> f;
  SUBCASE("in a later batch") {
    f.apply({{1, "invalid 50", 0, 50}, {4, "invalid new key", 0, 50}});
    CHECK(f.flow.sequence_of(1) == 5);
    CHECK(f.flow.sequence_of(4) == std::nullopt);
    const auto stats = f.apply({{1, "valid 6", 1, 6}, {4, "valid 1", 1, 1}});
    CHECK(stats.applied_rows == 2);
    CHECK(stats.ignored_late_rows == 0);
    CHECK(f.t.sorted_rows() == sorted<Booking>({{1, "valid 6", 1, 6}, {2, "c", 300, 5}, {4, "valid 1", 1, 1}}));
  }
  SUBCASE("in the same batch, after the dropped row") {
    const auto stats = f.apply({{1, "invalid 50", 0, 50}, {1, "valid 6", 1, 6}});
    CHECK(stats.applied_rows == 1);
    CHECK(stats.superseded_rows == 0);
    CHECK(f.flow.sequence_of(1) == 6);
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
      drop_non_positive(),
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
  flowtest::check_flow_error(flowtest::error_of([&] { flow.apply(t, batch, checks); }), fl::errc::expectation_failed,
                             "bookings_flow", "known_status", "booking_id=7", {"EXPECTATION_VIOLATION"});
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
      drop_non_positive(),
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
  const auto checks = fl::expectations(
      drop_non_positive(),
      fl::expect_or_fail("has_status", [](const Booking& b) { return !b.status.empty(); }),
      fl::expect_or_fail("bounded_amount",
                         [](const Booking& b) { return b.total_amount > -1000 && b.total_amount < 1000; }));
  Table<Storage> t{"bookings"};
  Flow flow{"bookings_flow"};
  const fl::error e = flowtest::error_of(
      [&] { flow.apply(t, std::vector<Booking>{{1, "ok", 1, 1}, {2, "", -5000, 1}}, checks); });
  CHECK(e.code() == fl::errc::expectation_failed);
  CHECK(e.column() == "has_status");
  CHECK(e.key() == "booking_id=2");
  CHECK(t.empty());
}

TEST_CASE("Expectations::filter: the standalone operator") {
  const auto checks = fl::expectations(
      drop_non_positive(),
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
  const fl::error e = flowtest::error_of([&] { (void)failing.filter(batch, fstats, "filter_op", describe); });
  CHECK(e.code() == fl::errc::expectation_failed);
  CHECK(e.flow() == "filter_op");
  CHECK(e.key() == "booking_id=3");
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

struct Reading {
  std::int64_t sensor = 0, seq = 0, value = 0;
  friend auto operator<=>(const Reading&, const Reading&) = default;
};
FLOWLIB_SCHEMA(Reading, sensor, seq, value);

TEST_CASE_TEMPLATE("R-USING-8: expectations declared on the table apply to REPLACE USING, after the "
                   "flow's", Storage, FLOWTEST_STORAGE_POLICIES) {
  using Flow = fl::ReplaceUsing<fl::Key<&Reading::sensor>, fl::Seq<&Reading::seq>>;
  fl::StreamingTable<Reading, Storage> t{
      "readings", fl::table_options<Reading>()
                      .expect(fl::expect_or_drop("non_negative",
                                                 [](const Reading& r) { return r.value >= 0; }))
                      .expect(fl::expect_or_fail("not_huge",
                                                 [](const Reading& r) { return r.value < 1000; }))};
  Flow flow{"readings_flow"};
  flow.apply(t, std::vector<Reading>{{1, 1, 10}, {2, 1, 20}});

  // Sensor 1's row at seq 5 is dropped by the table: it sets no floor, so
  // the row at seq 3 replaces the stored one (R-USING-8).
  const std::vector<Reading> batch{{1, 5, -1}, {1, 3, 11}, {2, 4, 21}, {3, 1, -7}};
  const auto warn_odd_sensors = fl::expectations(  // warn: counted, kept
      fl::expect("even_sensor", [](const Reading& r) { return r.sensor % 2 == 0; }));
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
  CHECK(t.sorted_rows() == std::vector<Reading>{{1, 3, 11}, {2, 4, 21}});
  CHECK(flow.sequence_of(1) == 3);

  // A `fail` on the table stops the batch: nothing is applied.
  CHECK_THROWS_AS(flow.apply(t, std::vector<Reading>{{1, 9, 12}, {2, 9, 5000}}), fl::error);
  CHECK(t.sorted_rows() == std::vector<Reading>{{1, 3, 11}, {2, 4, 21}});
  CHECK(flow.sequence_of(1) == 3);
}

}  // namespace flows_replace_using_expectations
