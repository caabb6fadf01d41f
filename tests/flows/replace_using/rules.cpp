// REPLACE USING: the seed examples and the semantic rules of docs/semantics.md
// section 1, one TEST_CASE per rule. The semantic cases are templated over
// the storage policies of tests/support/storage_policies.hpp, so they also
// prove that the flow relies on the row_store contract only.
#include <flowlib/flowlib.hpp>

#include <support/errors.hpp>
#include <support/reference_model.hpp>
#include <support/storage_policies.hpp>

#include <doctest/doctest.h>

#include <range/v3/view/iota.hpp>
#include <range/v3/view/move.hpp>
#include <range/v3/view/transform.hpp>

#include <chrono>
#include <compare>
#include <cstdint>
#include <iterator>
#include <list>
#include <optional>
#include <ranges>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace flows_replace_using_rules {

namespace fl = flowlib;

struct Event {
  std::int64_t region_id;
  std::string device_type;
  std::string event_type;
  std::int64_t seq;
  friend bool operator==(const Event&, const Event&) = default;
};
FLOWLIB_SCHEMA(Event, region_id, device_type, event_type, seq);

namespace rut {

using EventFlow = fl::ReplaceUsing<fl::Key<&Event::region_id>, fl::Seq<&Event::seq>>;

template <class Storage>
using EventTable = fl::StreamingTable<Event, Storage>;

const std::vector<Event> seed_target{{1, "iOS", "click", 1},
                                     {1, "Android", "conversion", 1},
                                     {2, "iOS", "click", 1},
                                     {2, "desktop", "click", 1}};
const std::vector<Event> seed_batch{{1, "iOS", "click", 2},
                                    {1, "Android", "conversion", 2},
                                    {1, "desktop", "click", 2},
                                    {3, "iOS", "click", 1},
                                    {3, "desktop", "click", 2}};

using flowtest::sorted;

}  // namespace rut
using namespace rut;

TEST_CASE_TEMPLATE("R-USING-1 R-USING-2 R-USING-3: the seed example", Storage, FLOWTEST_STORAGE_POLICIES) {
  EventTable<Storage> events{"events"};
  EventFlow flow{"events_flow"};
  const auto first = flow.apply(events, seed_target);
  CHECK(first.inserted_rows == 4);
  CHECK(events.size() == 4);
  const auto stats = flow.apply(events, seed_batch);
  // Region 1: three seq-2 rows (replaced); region 2 untouched; region 3:
  // only (3,desktop,click,2), the seq-1 row is not added.
  CHECK(events.sorted_rows() == sorted<Event>({{1, "iOS", "click", 2},
                                               {1, "Android", "conversion", 2},
                                               {1, "desktop", "click", 2},
                                               {2, "iOS", "click", 1},
                                               {2, "desktop", "click", 1},
                                               {3, "desktop", "click", 2}}));
  CHECK(events.size() == 6);
  CHECK(flow.key_count() == 3);
  CHECK(flow.sequence_of(1) == 2);
  CHECK(flow.sequence_of(2) == 1);
  CHECK(flow.sequence_of(3) == 2);
  CHECK(flow.sequence_of(4) == std::nullopt);
  CHECK(flowtest::counts_of(stats) ==
        flowtest::using_counts{.input = 5, .superseded = 1, .applied = 4, .inserted = 1, .replaced = 2});
  CHECK(stats.expectations.empty());
}

// ---------------------------------------------------------------------------
// The bookings examples (seed replace-using.ja.txt, examples 1-3)
// ---------------------------------------------------------------------------

namespace bookings {
struct Booking {
  std::int64_t booking_id;
  std::string status;
  std::int64_t total_amount;  // in cents
  std::int64_t booking_update_id;
  std::int64_t updated_at;  // a timestamp several updates may share
  friend auto operator<=>(const Booking&, const Booking&) = default;
};
FLOWLIB_SCHEMA(Booking, booking_id, status, total_amount, booking_update_id, updated_at);

struct PropertyBooking {
  std::optional<std::int64_t> property_id;
  std::optional<std::int64_t> booking_id;
  std::string status;
  std::int64_t total_amount;
  std::int64_t booking_update_id;
  friend auto operator<=>(const PropertyBooking&, const PropertyBooking&) = default;
};
FLOWLIB_SCHEMA(PropertyBooking, property_id, booking_id, status, total_amount, booking_update_id);
}  // namespace bookings

namespace rut {
using bookings::Booking;
using bookings::PropertyBooking;

// samples.wanderbricks.booking_updates, in the shape the examples use: each
// booking appears once per change, with a new booking_update_id.
const std::vector<Booking> booking_updates{
    {100, "pending", 25000, 1, 1000},   {101, "pending", 8000, 2, 1000},
    {100, "confirmed", 25000, 3, 1010}, {102, "pending", 12000, 4, 1010},
    {101, "cancelled", 0, 5, 1020},     {100, "checked_in", 26500, 6, 1030},
    {102, "confirmed", 12000, 7, 1030}, {102, "modified", 13000, 8, 1030},
};
}  // namespace rut

TEST_CASE_TEMPLATE("Bookings example 1: the latest update of each booking_id wins (R-USING-1/2)",
                   Storage, FLOWTEST_STORAGE_POLICIES) {
  fl::StreamingTable<Booking, Storage> bookings_current{"bookings_current"};
  fl::ReplaceUsing<fl::Key<&Booking::booking_id>, fl::Seq<&Booking::booking_update_id>> flow{
      "bookings_current_flow"};
  // Two micro-batches, split in the middle of booking 100's history.
  flow.apply(bookings_current, std::vector<Booking>(booking_updates.begin(), booking_updates.begin() + 3));
  flow.apply(bookings_current, std::vector<Booking>(booking_updates.begin() + 3, booking_updates.end()));
  CHECK(bookings_current.sorted_rows() == std::vector<Booking>{{100, "checked_in", 26500, 6, 1030},
                                                               {101, "cancelled", 0, 5, 1020},
                                                               {102, "modified", 13000, 8, 1030}});
  CHECK(flow.sequence_of(100) == 6);
  CHECK(flow.sequence_of(102) == 8);

  SUBCASE("sequenced by the updated_at timestamp instead, tied updates are all kept (appended)") {
    fl::StreamingTable<Booking, Storage> by_time{"bookings_by_time"};
    fl::ReplaceUsing<fl::Key<&Booking::booking_id>, fl::Seq<&Booking::updated_at>> timed{"timed"};
    const auto stats = timed.apply(by_time, booking_updates);
    // Booking 102 has two updates at 1030: both rows stay, as the seed warns.
    CHECK(by_time.sorted_rows() == std::vector<Booking>{{100, "checked_in", 26500, 6, 1030},
                                                        {101, "cancelled", 0, 5, 1020},
                                                        {102, "confirmed", 12000, 7, 1030},
                                                        {102, "modified", 13000, 8, 1030}});
    CHECK(stats.superseded_rows == 4);
    CHECK(stats.applied_rows == 4);
  }
}

TEST_CASE_TEMPLATE("Bookings example 2: composite key (property_id, booking_id), null matches null "
                   "(R-USING-5)",
                   Storage, FLOWTEST_STORAGE_POLICIES) {
  fl::StreamingTable<PropertyBooking, Storage> by_property{"bookings_by_property"};
  fl::ReplaceUsing<fl::Key<&PropertyBooking::property_id, &PropertyBooking::booking_id>,
                   fl::Seq<&PropertyBooking::booking_update_id>>
      flow{"bookings_by_property_flow"};
  const std::optional<std::int64_t> null;
  flow.apply(by_property, std::vector<PropertyBooking>{{7, 100, "pending", 25000, 1},
                                                       {8, 100, "pending", 9000, 2},
                                                       {null, 101, "pending", 8000, 3},
                                                       {7, null, "pending", 500, 4},
                                                       {null, null, "pending", 100, 5}});
  CHECK(flow.key_count() == 5);  // (7,100) and (8,100) are different keys
  const auto stats = flow.apply(by_property, std::vector<PropertyBooking>{{7, 100, "confirmed", 25000, 6},
                                                                          {null, 101, "cancelled", 0, 7},
                                                                          {7, null, "confirmed", 500, 8},
                                                                          {null, null, "confirmed", 100, 9}});
  // Every null-bearing key matched its stored row (null == null) and replaced it.
  CHECK(stats.replaced_rows == 4);
  CHECK(stats.inserted_rows == 0);
  CHECK(flow.key_count() == 5);
  CHECK(by_property.sorted_rows() == sorted<PropertyBooking>({{7, 100, "confirmed", 25000, 6},
                                                              {8, 100, "pending", 9000, 2},
                                                              {null, 101, "cancelled", 0, 7},
                                                              {7, null, "confirmed", 500, 8},
                                                              {null, null, "confirmed", 100, 9}}));
  using key = std::tuple<std::optional<std::int64_t>, std::optional<std::int64_t>>;
  CHECK(flow.sequence_of(key{null, null}) == 9);
  CHECK(flow.sequence_of(key{null, 101}) == 7);
  CHECK(flow.sequence_of(key{101, null}) == std::nullopt);
}

TEST_CASE_TEMPLATE("Bookings example 3: expect_or_drop(\"positive_amount\", total_amount > 0) "
                   "(R-USING-8)",
                   Storage, FLOWTEST_STORAGE_POLICIES) {
  fl::StreamingTable<Booking, Storage> validated{"bookings_validated"};
  fl::ReplaceUsing<fl::Key<&Booking::booking_id>, fl::Seq<&Booking::booking_update_id>> flow{
      "bookings_validated_flow"};
  const auto checks = fl::expectations(
      fl::expect_or_drop("positive_amount", [](const Booking& b) { return b.total_amount > 0; }));
  const auto stats = flow.apply(validated, booking_updates, checks);
  // Booking 101's latest update (amount 0) is dropped: the flow falls back
  // to the booking's latest VALID row.
  CHECK(validated.sorted_rows() == std::vector<Booking>{{100, "checked_in", 26500, 6, 1030},
                                                        {101, "pending", 8000, 2, 1000},
                                                        {102, "modified", 13000, 8, 1030}});
  CHECK(stats.dropped_rows == 1);
  REQUIRE(stats.expectations.size() == 1);
  CHECK(stats.expectations[0] == fl::ExpectationMetrics{"positive_amount", fl::on_violation::drop, 7, 1});
  CHECK(flowtest::rows_accounted(stats));
}

// ---------------------------------------------------------------------------
// The rules one by one
// ---------------------------------------------------------------------------

TEST_CASE_TEMPLATE("R-USING-1: only a key's highest sequence in the batch is considered", Storage,
                   FLOWTEST_STORAGE_POLICIES) {
  EventTable<Storage> t{"t"};
  EventFlow flow{"f"};
  // The maximum comes first, in the middle and last; lower rows are discarded
  // wherever they are.
  const auto stats = flow.apply(t, std::vector<Event>{{1, "a", "x", 9}, {1, "b", "x", 3},                     // key 1
                                                      {2, "a", "x", 1}, {2, "b", "x", 5}, {2, "c", "x", 2},  // key 2
                                                      {3, "a", "x", 1}, {3, "b", "x", 1}, {3, "c", "x", 4},  // key 3
                                                      {1, "c", "x", 9}});
  CHECK(t.sorted_rows() ==
        sorted<Event>({{1, "a", "x", 9}, {1, "c", "x", 9}, {2, "b", "x", 5}, {3, "c", "x", 4}}));
  CHECK(flowtest::counts_of(stats) == flowtest::using_counts{.input = 9, .superseded = 5, .applied = 4, .inserted = 4});
}

TEST_CASE_TEMPLATE("R-USING-2: absent key inserted, higher replaces, equal appends, lower ignored",
                   Storage, FLOWTEST_STORAGE_POLICIES) {
  EventTable<Storage> t{"t"};
  EventFlow flow{"f"};
  flow.apply(t, std::vector<Event>{{1, "a", "x", 5}, {2, "a", "x", 5}, {2, "b", "x", 5},
                                   {3, "a", "x", 5}, {4, "a", "x", 5}});
  REQUIRE(t.size() == 5);

  const auto stats = flow.apply(t, std::vector<Event>{
                                       {1, "n1", "x", 6}, {1, "n2", "x", 6}, {1, "n3", "x", 6},  // more rows
                                       {2, "n", "x", 7},                                       // fewer rows
                                       {3, "e", "x", 5},                                       // equal: append
                                       {4, "late", "x", 4},                                    // lower: ignored
                                       {5, "new", "x", 1},                                     // absent: insert
                                   });
  CHECK(t.sorted_rows() == sorted<Event>({{1, "n1", "x", 6},
                                          {1, "n2", "x", 6},
                                          {1, "n3", "x", 6},
                                          {2, "n", "x", 7},
                                          {3, "a", "x", 5},
                                          {3, "e", "x", 5},
                                          {4, "a", "x", 5},
                                          {5, "new", "x", 1}}));
  // Replaced: key 1's one row and key 2's two rows.
  CHECK(flowtest::counts_of(stats) == flowtest::using_counts{.input = 7, .ignored_late = 1, .applied = 6,
                                                             .inserted = 1, .appended = 1, .replaced = 3});
  CHECK(flow.sequence_of(1) == 6);
  CHECK(flow.sequence_of(2) == 7);
  CHECK(flow.sequence_of(3) == 5);
  CHECK(flow.sequence_of(4) == 5);  // the late row set nothing
  CHECK(flow.sequence_of(5) == 1);
  CHECK(flow.key_count() == 5);
  CHECK(t.size() == 8);

  SUBCASE("a late batch older than every key changes nothing") {
    const auto late = flow.apply(t, std::vector<Event>{{1, "old", "x", 1}, {2, "old", "x", 6}});
    CHECK(late.ignored_late_rows == 2);
    CHECK(late.applied_rows == 0);
    CHECK(t.size() == 8);
  }
  SUBCASE("replaying a batch appends its equal-sequence rows again; an older replay is ignored") {
    const std::vector<Event> batch{{6, "a", "x", 3}};
    flow.apply(t, batch);
    const auto again = flow.apply(t, batch);
    CHECK(again.appended_rows == 1);  // s == t: appended, not replaced (R-USING-2)
    CHECK(t.size() == 10);
    flow.apply(t, std::vector<Event>{{6, "b", "x", 4}});
    const auto old = flow.apply(t, batch);
    CHECK(old.ignored_late_rows == 1);
    CHECK(t.size() == 9);
  }
}

TEST_CASE_TEMPLATE("R-USING-3: keys absent from the batch are untouched", Storage,
                   FLOWTEST_STORAGE_POLICIES) {
  EventTable<Storage> t{"t"};
  EventFlow flow{"f"};
  std::vector<Event> first;
  for (int k = 0; k < 50; ++k) first.push_back({k, std::to_string(k), "x", 10});
  flow.apply(t, first);
  for (int round = 0; round < 5; ++round) {
    const auto stats = flow.apply(t, std::vector<Event>{{100 + round, "other", "x", 1},
                                                        {round, "changed", "x", 11 + round}});
    CHECK(stats.replaced_rows == 1);
  }
  std::vector<Event> expected;
  for (int k = 0; k < 50; ++k) {
    expected.push_back(k < 5 ? Event{k, "changed", "x", 11 + k} : Event{k, std::to_string(k), "x", 10});
  }
  for (int k = 100; k < 105; ++k) expected.push_back({k, "other", "x", 1});
  CHECK(t.sorted_rows() == sorted(expected));
  CHECK(flow.key_count() == 55);
  SUBCASE("an empty batch changes nothing") {
    const auto stats = flow.apply(t, std::vector<Event>{});
    CHECK(stats == fl::BatchStats{});
    CHECK(t.sorted_rows() == sorted(expected));
  }
}

namespace rut {
struct Nullable {
  std::optional<std::int64_t> id;
  std::optional<std::string> region;
  std::int64_t seq;
  std::string v;
  friend auto operator<=>(const Nullable&, const Nullable&) = default;
};
FLOWLIB_SCHEMA(Nullable, id, region, seq, v);
}  // namespace rut

TEST_CASE_TEMPLATE("R-USING-5: nullable key columns; null matches null and only null", Storage,
                   FLOWTEST_STORAGE_POLICIES) {
  fl::StreamingTable<Nullable, Storage> t{"t"};
  fl::ReplaceUsing<fl::Key<&Nullable::id>, fl::Seq<&Nullable::seq>> by_id{"by_id"};
  by_id.apply(t, std::vector<Nullable>{{std::nullopt, {}, 1, "null-a"},
                                       {std::nullopt, {}, 1, "null-b"},
                                       {0, {}, 1, "zero"}});
  CHECK(by_id.key_count() == 2);  // null is not 0
  const auto stats = by_id.apply(t, std::vector<Nullable>{{std::nullopt, {}, 2, "null-c"}});
  CHECK(stats.replaced_rows == 2);
  CHECK(t.sorted_rows() ==
        sorted<Nullable>({{std::nullopt, {}, 2, "null-c"}, {0, {}, 1, "zero"}}));
  CHECK(by_id.sequence_of(std::nullopt) == 2);
  CHECK(by_id.sequence_of(0) == 1);

  SUBCASE("a nullable string column in a composite key") {
    fl::StreamingTable<Nullable, Storage> t2{"t2"};
    fl::ReplaceUsing<fl::Key<&Nullable::region, &Nullable::id>, fl::Seq<&Nullable::seq>> flow{"f"};
    flow.apply(t2, std::vector<Nullable>{{1, std::nullopt, 1, "a"},
                                         {1, "", 1, "b"},
                                         {std::nullopt, std::nullopt, 1, "c"},
                                         {std::nullopt, "eu", 1, "d"}});
    CHECK(flow.key_count() == 4);  // a null string is not the empty string
    flow.apply(t2, std::vector<Nullable>{{1, std::nullopt, 2, "a2"},
                                         {std::nullopt, std::nullopt, 1, "c2"},
                                         {std::nullopt, "eu", 0, "d-late"}});
    CHECK(t2.sorted_rows() == sorted<Nullable>({{1, std::nullopt, 2, "a2"},
                                                {1, "", 1, "b"},
                                                {std::nullopt, std::nullopt, 1, "c"},
                                                {std::nullopt, std::nullopt, 1, "c2"},
                                                {std::nullopt, "eu", 1, "d"}}));
  }
}

// ---------------------------------------------------------------------------
// R-USING-7 and user exceptions: all-or-nothing
// ---------------------------------------------------------------------------

namespace rut {
struct Versioned {
  std::int64_t id;
  std::optional<std::int64_t> version;
  std::string v;
  friend auto operator<=>(const Versioned&, const Versioned&) = default;
};
FLOWLIB_SCHEMA(Versioned, id, version, v);
using VersionedFlow = fl::ReplaceUsing<fl::Key<&Versioned::id>, fl::Seq<&Versioned::version>>;

/// Everything observable about a target and its flow.
template <class Table, class Flow, class Keys>
auto snapshot(const Table& t, const Flow& f, const Keys& keys) {
  std::vector<std::optional<typename Flow::sequence_type>> seqs;
  for (const auto& k : keys) seqs.push_back(f.sequence_of(k));
  return std::tuple{t.sorted_rows(), t.size(), f.key_count(), seqs, t.writers().size()};
}
}  // namespace rut

TEST_CASE_TEMPLATE("R-USING-7: a null sequence fails the batch; nothing of it is applied", Storage,
                   FLOWTEST_STORAGE_POLICIES) {
  fl::StreamingTable<Versioned, Storage> t{"versions"};
  VersionedFlow flow{"versions_flow"};
  const std::vector<std::int64_t> keys{1, 2, 3, 4};

  SUBCASE("in the first batch: the table is not even claimed") {
    const auto before = snapshot(t, flow, keys);
    CHECK_THROWS_AS(flow.apply(t, std::vector<Versioned>{{1, 1, "a"}, {2, std::nullopt, "b"}}), fl::error);
    CHECK(snapshot(t, flow, keys) == before);
    CHECK(t.writers().empty());
  }

  flow.apply(t, std::vector<Versioned>{{1, 1, "a"}, {2, 1, "b"}, {3, 1, "c"}});
  const auto before = snapshot(t, flow, keys);

  // Valid rows of every kind precede the null: a replace, an append, an insert.
  const std::vector<Versioned> bad{{1, 2, "a2"}, {2, 1, "b2"}, {4, 1, "d"}, {3, std::nullopt, "c?"},
                                   {4, 5, "d5"}};
  flowtest::check_flow_error(flowtest::error_of([&] { flow.apply(t, bad); }), fl::errc::null_sequence, "versions_flow",
                             "version", "id=3", {"'version'", "NULL_SEQUENCE"});
  CHECK(snapshot(t, flow, keys) == before);

  // The flow is usable afterwards, and behaves as if the failed batch never came.
  const auto stats = flow.apply(t, std::vector<Versioned>{{1, 2, "a2"}, {3, 1, "c2"}});
  CHECK(stats.replaced_rows == 1);
  CHECK(stats.appended_rows == 1);
  CHECK(t.sorted_rows() ==
        sorted<Versioned>({{1, 2, "a2"}, {2, 1, "b"}, {3, 1, "c"}, {3, 1, "c2"}}));
}

namespace rut {
struct TimedEvent {
  std::int64_t id = 0;
  std::optional<std::int64_t> ts;  // the sequence's first component, nullable
  std::int64_t tiebreak = 0;
  std::string v;
  friend auto operator<=>(const TimedEvent&, const TimedEvent&) = default;
};
FLOWLIB_SCHEMA(TimedEvent, id, ts, tiebreak, v);
}  // namespace rut

TEST_CASE("R-USING-7: a null component of a struct sequence is a null sequence") {
  fl::StreamingTable<TimedEvent> t{"t"};
  fl::ReplaceUsing<fl::Key<&TimedEvent::id>, fl::Seq<&TimedEvent::ts, &TimedEvent::tiebreak>> flow{"tf"};
  const fl::error e = flowtest::error_of(
      [&] { flow.apply(t, std::vector<TimedEvent>{{1, 5, 1, "ok"}, {2, std::nullopt, 1, "bad"}}); });
  CHECK(e.code() == fl::errc::null_sequence);
  CHECK(e.column() == "(ts, tiebreak)");
  CHECK(e.key() == "id=2");
  CHECK(t.empty());
}

namespace rut {
/// A row whose copy throws when it is marked: a user type failing mid-batch.
struct Fragile {
  std::int64_t id = 0;
  std::int64_t seq = 0;
  bool bomb = false;
  Fragile() = default;
  Fragile(std::int64_t i, std::int64_t s, bool b = false) : id(i), seq(s), bomb(b) {}
  Fragile(const Fragile& o) : id(o.id), seq(o.seq), bomb(o.bomb) {
    if (bomb) throw std::runtime_error("copying a marked row");
  }
  Fragile& operator=(const Fragile& o) { return *this = Fragile(o); }  // throws as the copy does
  Fragile(Fragile&&) noexcept = default;
  Fragile& operator=(Fragile&&) noexcept = default;
  friend auto operator<=>(const Fragile&, const Fragile&) = default;
};
FLOWLIB_SCHEMA(Fragile, id, seq, bomb);

/// A sequence extractor that throws on one value: user code failing mid-batch.
struct ThrowingSeq {
  using row_type = Versioned;
  using value_type = std::int64_t;
  std::optional<std::int64_t> operator()(const Versioned& r) const {
    if (r.v == "boom") throw std::logic_error("sequence extractor failed");
    return r.version;
  }
  std::string_view name() const { return "version"; }
};
}  // namespace rut

TEST_CASE_TEMPLATE("User exceptions propagate unchanged and leave the target and flow unchanged",
                   Storage, FLOWTEST_STORAGE_POLICIES) {
  SUBCASE("a row whose copy constructor throws") {
    fl::StreamingTable<Fragile, Storage> t{"fragile"};
    fl::ReplaceUsing<fl::Key<&Fragile::id>, fl::Seq<&Fragile::seq>> flow{"fragile_flow"};
    std::vector<Fragile> first;
    for (int i = 0; i < 4; ++i) first.emplace_back(i, 1);
    flow.apply(t, first);
    const std::vector<std::int64_t> keys{0, 1, 2, 3, 4};
    const auto before = snapshot(t, flow, keys);

    std::vector<Fragile> bad;
    bad.emplace_back(0, 2);        // would replace
    bad.emplace_back(1, 1);        // would append
    bad.emplace_back(4, 1);        // would insert
    bad.emplace_back(2, 3, true);  // throws when staged
    bad.emplace_back(3, 9);
    CHECK_THROWS_WITH_AS(flow.apply(t, bad), "copying a marked row", std::runtime_error);
    CHECK(snapshot(t, flow, keys) == before);

    bad[3].bomb = false;
    // (Fragile's move is noexcept and does not check the mark.)
    const auto stats = flow.apply(t, bad);
    CHECK(stats.applied_rows == 5);
    CHECK(t.size() == 6);
  }
  SUBCASE("an expectation predicate that throws") {
    fl::StreamingTable<Versioned, Storage> t{"t"};
    VersionedFlow flow{"f"};
    flow.apply(t, std::vector<Versioned>{{1, 1, "a"}, {2, 1, "b"}});
    const std::vector<std::int64_t> keys{1, 2, 3};
    const auto before = snapshot(t, flow, keys);
    const auto checks = fl::expectations(fl::expect("nonempty", [](const Versioned& r) {
      if (r.v == "boom") throw std::domain_error("predicate failed");
      return !r.v.empty();
    }));
    CHECK_THROWS_AS(flow.apply(t, std::vector<Versioned>{{1, 2, "a2"}, {3, 1, "c"}, {2, 2, "boom"}}, checks),
                    std::domain_error);
    CHECK(snapshot(t, flow, keys) == before);
    const auto stats = flow.apply(t, std::vector<Versioned>{{1, 2, "a2"}, {3, 1, "c"}}, checks);
    CHECK(stats.applied_rows == 2);
    CHECK(t.sorted_rows() == sorted<Versioned>({{1, 2, "a2"}, {2, 1, "b"}, {3, 1, "c"}}));
  }
  SUBCASE("a custom sequence extractor that throws") {
    fl::StreamingTable<Versioned, Storage> t{"t"};
    fl::ReplaceUsing<fl::Key<&Versioned::id>, ThrowingSeq> flow{"f"};
    flow.apply(t, std::vector<Versioned>{{1, 1, "a"}});
    const std::vector<std::int64_t> keys{1, 2};
    const auto before = snapshot(t, flow, keys);
    CHECK_THROWS_AS(flow.apply(t, std::vector<Versioned>{{1, 2, "a2"}, {2, 1, "boom"}}), std::logic_error);
    CHECK(snapshot(t, flow, keys) == before);
  }
}

// ---------------------------------------------------------------------------
// R-USING-9: one REPLACE USING flow per target, and no other flow on it
// ---------------------------------------------------------------------------

TEST_CASE_TEMPLATE("R-USING-9: a flow keeps one target; a REPLACE USING target keeps one flow",
                   Storage, FLOWTEST_STORAGE_POLICIES) {
  EventTable<Storage> a{"table_a"};
  EventTable<Storage> b{"table_b"};
  EventFlow flow{"flow_1"};
  flow.apply(a, seed_target);

  SUBCASE("applying the flow to a second table") {
    const fl::error e = flowtest::error_of([&] { flow.apply(b, seed_batch); });
    CHECK(e.code() == fl::errc::invalid_target);
    CHECK(e.flow() == "flow_1");
    CHECK(flowtest::contains(e.what(), "table_a"));
    CHECK(b.empty());
    CHECK(b.writers().empty());
  }
  SUBCASE("a second REPLACE USING flow on the target") {
    EventFlow other{"flow_2"};
    const fl::error e = flowtest::error_of([&] { other.apply(a, seed_batch); });
    CHECK(e.code() == fl::errc::invalid_target);
    CHECK(e.flow() == "flow_2");
    for (const char* part : {"table_a", "flow_1"}) {
      CAPTURE(part);
      CHECK(flowtest::contains(e.what(), part));
    }
    CHECK(other.key_count() == 0);
    // The second flow is not tied to table a: it may still own another table.
    other.apply(b, seed_batch);
    CHECK(b.size() == 5 - 1);
  }
  SUBCASE("another flow type on a REPLACE USING target, and REPLACE USING on another flow's target") {
    int append_flow = 0;
    CHECK_THROWS_AS(a.claim(&append_flow, "APPEND", "appender", /*exclusive=*/false), fl::error);
    b.claim(&append_flow, "APPEND", "appender", /*exclusive=*/false);
    EventFlow late{"late"};
    const fl::error e = flowtest::error_of([&] { late.apply(b, seed_batch); });
    CHECK(e.code() == fl::errc::invalid_target);
    CHECK(flowtest::contains(e.what(), "appender"));
    CHECK(b.empty());
  }
  // Whatever was refused, the owning flow still works on its table.
  flow.apply(a, seed_batch);
  CHECK(a.size() == 6);
  CHECK(a.writers().size() == 1);
}

TEST_CASE_TEMPLATE("A moved flow keeps its target; the moved-from flow cannot write it", Storage,
                   FLOWTEST_STORAGE_POLICIES) {
  EventTable<Storage> t{"t"};
  EventFlow flow{"f"};
  flow.apply(t, seed_target);
  EventFlow moved = std::move(flow);
  const auto stats = moved.apply(t, seed_batch);
  CHECK(stats.replaced_rows == 2);
  CHECK(t.size() == 6);
  CHECK(moved.key_count() == 3);
  std::vector<EventFlow> flows;
  flows.push_back(std::move(moved));
  flows.front().apply(t, std::vector<Event>{{2, "x", "y", 3}});
  CHECK(t.size() == 5);
  // The moved-from flow lost the index: letting it write would duplicate rows.
  CHECK_THROWS_AS(flow.apply(t, seed_batch), fl::error);  // NOLINT(bugprone-use-after-move)
  CHECK(t.size() == 5);
}

// ---------------------------------------------------------------------------
// Inputs: any input range of the row type
// ---------------------------------------------------------------------------

namespace rut {
/// A single-pass generator: input_range only; begin() may be called once.
template <class Row>
class single_pass {
 public:
  explicit single_pass(std::vector<Row> src) : src_(std::move(src)) {}
  struct iterator {
    using value_type = Row;
    using difference_type = std::ptrdiff_t;
    using iterator_concept = std::input_iterator_tag;
    single_pass* p = nullptr;
    Row operator*() const { return p->src_[p->pos_]; }  // a prvalue, as a generator yields
    iterator& operator++() {
      ++p->pos_;
      return *this;
    }
    void operator++(int) { ++*this; }
    friend bool operator==(const iterator& i, std::default_sentinel_t) {
      return i.p->pos_ == i.p->src_.size();
    }
  };
  iterator begin() {
    ++begins;
    return iterator{this};
  }
  std::default_sentinel_t end() const { return {}; }
  int begins = 0;
  std::vector<Row> src_;
  std::size_t pos_ = 0;
};
static_assert(std::ranges::input_range<single_pass<Event>>);
static_assert(!std::ranges::forward_range<single_pass<Event>>);

/// Counts copies, to see which inputs are moved from.
struct Counted {
  std::int64_t id = 0;
  std::int64_t seq = 0;
  std::string payload;
  static inline int copies = 0;
  Counted() = default;
  Counted(std::int64_t i, std::int64_t s, std::string p) : id(i), seq(s), payload(std::move(p)) {}
  Counted(const Counted& o) : id(o.id), seq(o.seq), payload(o.payload) { ++copies; }
  Counted& operator=(const Counted& o) { return *this = Counted(o); }  // one copy, counted
  Counted(Counted&&) noexcept = default;
  Counted& operator=(Counted&&) noexcept = default;
  friend auto operator<=>(const Counted&, const Counted&) = default;
};
FLOWLIB_SCHEMA(Counted, id, seq, payload);

struct Reading {
  int sensor = 0;
  int seq = 0;
  int value = 0;
  friend auto operator<=>(const Reading&, const Reading&) = default;
  friend std::istream& operator>>(std::istream& is, Reading& r) {
    return is >> r.sensor >> r.seq >> r.value;
  }
};
FLOWLIB_SCHEMA(Reading, sensor, seq, value);

const std::vector<Event> seed_result = [] {
  std::vector<Event> v{{1, "iOS", "click", 2},  {1, "Android", "conversion", 2},
                       {1, "desktop", "click", 2}, {2, "iOS", "click", 1},
                       {2, "desktop", "click", 1}, {3, "desktop", "click", 2}};
  flowtest::sort_rows(v);
  return v;
}();

template <class Storage, class Batch>
std::vector<Event> seed_with(Batch&& batch) {
  EventTable<Storage> t{"t"};
  EventFlow flow{"f"};
  flow.apply(t, seed_target);
  const auto stats = flow.apply(t, std::forward<Batch>(batch));
  CHECK(stats.input_rows == 5);
  return t.sorted_rows();
}
}  // namespace rut

TEST_CASE_TEMPLATE("Inputs: containers, std and range-v3 views, single-pass and rvalue ranges",
                   Storage, FLOWTEST_STORAGE_POLICIES) {
  SUBCASE("std::vector lvalue, const lvalue and prvalue") {
    std::vector<Event> v = seed_batch;
    const std::vector<Event>& cv = seed_batch;
    CHECK(seed_with<Storage>(v) == seed_result);
    CHECK(seed_with<Storage>(cv) == seed_result);
    CHECK(seed_with<Storage>(std::vector<Event>(seed_batch)) == seed_result);
  }
  SUBCASE("std::list") {
    CHECK(seed_with<Storage>(std::list<Event>(seed_batch.begin(), seed_batch.end())) == seed_result);
  }
  SUBCASE("std::views::filter and std::views::transform") {
    std::vector<Event> noisy = seed_batch;
    noisy.push_back({9, "noise", "click", 100});
    auto filtered = noisy | std::views::filter([](const Event& e) { return e.region_id != 9; });
    CHECK(seed_with<Storage>(filtered) == seed_result);
    auto same = seed_batch | std::views::transform([](const Event& e) { return e; });
    CHECK(seed_with<Storage>(same) == seed_result);
    CHECK(seed_with<Storage>(std::views::iota(std::size_t{0}, seed_batch.size()) |
                             std::views::transform([](std::size_t i) { return seed_batch[i]; })) ==
          seed_result);
  }
  SUBCASE("a range-v3 view") {
    auto view = ranges::views::iota(std::size_t{0}, seed_batch.size()) |
                ranges::views::transform([](std::size_t i) { return seed_batch[i]; });
    CHECK(seed_with<Storage>(view) == seed_result);
  }
  SUBCASE("a single-pass input range") {
    single_pass<Event> gen{seed_batch};
    CHECK(seed_with<Storage>(gen) == seed_result);
    CHECK(gen.begins == 1);
  }
  SUBCASE("std::ranges::istream_view") {
    fl::StreamingTable<Reading, Storage> t{"readings"};
    fl::ReplaceUsing<fl::Key<&Reading::sensor>, fl::Seq<&Reading::seq>> flow{"readings_flow"};
    std::istringstream in("1 1 10  1 2 11  2 1 20  1 2 12  2 0 19");
    const auto stats = flow.apply(t, std::ranges::istream_view<Reading>(in));
    CHECK(stats.input_rows == 5);
    CHECK(t.sorted_rows() == std::vector<Reading>{{1, 2, 11}, {1, 2, 12}, {2, 1, 20}});
  }
  SUBCASE("an rvalue container is read like an lvalue: the caller keeps its rows") {
    std::vector<Event> v = seed_batch;
    CHECK(seed_with<Storage>(std::move(v)) == seed_result);
    CHECK(v == seed_batch);  // NOLINT(bugprone-use-after-move): documented in detail/batch.hpp
  }
}

TEST_CASE_TEMPLATE("Inputs: prvalue and rvalue elements are moved, lvalue elements copied once", Storage,
                   FLOWTEST_STORAGE_POLICIES) {
  fl::StreamingTable<Counted, Storage> t{"t"};
  fl::ReplaceUsing<fl::Key<&Counted::id>, fl::Seq<&Counted::seq>> flow{"f"};
  const std::string big(64, 'x');  // beyond the small-string buffer

  Counted::copies = 0;
  flow.apply(t, std::views::iota(0, 20) | std::views::transform([&](int i) {
                  return Counted{i % 10, i / 10, big};
                }));
  CHECK(Counted::copies == 0);
  CHECK(t.size() == 10);

  std::vector<Counted> source;
  for (int i = 0; i < 10; ++i) source.emplace_back(i, 5, big);
  Counted::copies = 0;
  flow.apply(t, ranges::views::move(source));
  CHECK(Counted::copies == 0);
  CHECK(t.size() == 10);

  std::vector<Counted> kept;
  for (int i = 0; i < 10; ++i) kept.emplace_back(i, 6, big);
  Counted::copies = 0;
  flow.apply(t, kept);
  CHECK(Counted::copies == 10);
  CHECK(kept[3].payload == big);
  for (const Counted& c : t.rows()) CHECK(c.payload == big);
}

TEST_CASE_TEMPLATE("Inputs: a batch that is a view of the target's own rows", Storage,
                   FLOWTEST_STORAGE_POLICIES) {
  // The batch aliases the storage the flow writes: every row comes back at
  // its key's stored sequence, so it is appended again (R-USING-2, s == t).
  EventTable<Storage> t{"t"};
  EventFlow flow{"f"};
  flow.apply(t, seed_target);
  flow.apply(t, seed_batch);
  const auto once = t.sorted_rows();
  const auto stats = flow.apply(t, t.rows());
  CHECK(stats.appended_rows == once.size());
  std::vector<Event> twice;
  for (const Event& e : once) {
    twice.push_back(e);
    twice.push_back(e);
  }
  CHECK(t.sorted_rows() == sorted(twice));
}

// ---------------------------------------------------------------------------
// Keys and sequences
// ---------------------------------------------------------------------------

TEST_CASE_TEMPLATE("Struct sequence Seq<&R::ts, &R::id>: ties on ts are broken by id", Storage,
                   FLOWTEST_STORAGE_POLICIES) {
  fl::StreamingTable<TimedEvent, Storage> t{"t"};
  fl::ReplaceUsing<fl::Key<&TimedEvent::id>, fl::Seq<&TimedEvent::ts, &TimedEvent::tiebreak>> flow{"f"};
  flow.apply(t, std::vector<TimedEvent>{{1, 10, 1, "a"}, {1, 10, 3, "b"}, {1, 9, 99, "old"},
                                        {2, 10, 1, "c"}, {2, 10, 1, "c-tie"}});
  CHECK(t.sorted_rows() ==
        sorted<TimedEvent>({{1, 10, 3, "b"}, {2, 10, 1, "c"}, {2, 10, 1, "c-tie"}}));
  CHECK(flow.sequence_of(1) == std::tuple<std::int64_t, std::int64_t>{10, 3});
  const auto stats = flow.apply(t, std::vector<TimedEvent>{{1, 10, 2, "late"}, {2, 10, 2, "newer"},
                                                           {1, 11, 0, "next"}});
  CHECK(stats.replaced_rows == 3);
  CHECK(t.sorted_rows() == sorted<TimedEvent>({{1, 11, 0, "next"}, {2, 10, 2, "newer"}}));
}

namespace rut {
struct Page {
  std::string url;
  std::string title;
  std::int64_t crawl;
  friend auto operator<=>(const Page&, const Page&) = default;
};
FLOWLIB_SCHEMA(Page, url, title, crawl);
}  // namespace rut

TEST_CASE_TEMPLATE("String keys, looked up by value", Storage, FLOWTEST_STORAGE_POLICIES) {
  fl::StreamingTable<Page, Storage> t{"pages"};
  fl::ReplaceUsing<fl::Key<&Page::url>, fl::Seq<&Page::crawl>> flow{"pages_flow"};
  const std::string long_url = "https://example.com/" + std::string(100, 'p');
  flow.apply(t, std::vector<Page>{{"", "empty", 1}, {"a", "A", 1}, {long_url, "long", 1}});
  flow.apply(t, std::vector<Page>{{long_url, "long2", 2}, {"a", "A-late", 0}, {"A", "other case", 1}});
  CHECK(flow.key_count() == 4);
  CHECK(flow.sequence_of(long_url) == 2);
  CHECK(flow.sequence_of("") == 1);
  CHECK(flow.sequence_of("a") == 1);
  CHECK(t.sorted_rows() ==
        sorted<Page>({{"", "empty", 1}, {"A", "other case", 1}, {"a", "A", 1}, {long_url, "long2", 2}}));
}

namespace rut {
struct User {
  std::string email;
  std::string login;
  std::string name;
  std::string version;  // "v<number>", or anything else for a null version
  friend auto operator<=>(const User&, const User&) = default;
};
FLOWLIB_SCHEMA(User, email, login, name, version);

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return s;
}

/// A key chosen at run time: which column, compared case-insensitively. No
/// optional hooks (hash, equal): the traits layer must fall back.
struct ColumnKey {
  using row_type = User;
  using value_type = std::string;
  int column = 0;  // 0: email, 1: login
  std::string operator()(const User& u) const { return lower(column == 0 ? u.email : u.login); }
  std::string describe(const User& u) const {
    return std::string(column == 0 ? "email" : "login") + "=" + (*this)(u);
  }
};
/// A sequence parsed from text; unparsable text is a null sequence.
struct VersionSeq {
  using row_type = User;
  using value_type = long;
  std::optional<long> operator()(const User& u) const {
    if (u.version.size() < 2 || u.version[0] != 'v') return std::nullopt;
    return std::stol(u.version.substr(1));
  }
  std::string_view name() const { return "version"; }
};
static_assert(fl::key_extractor<ColumnKey>);
static_assert(fl::sequence_extractor<VersionSeq>);
}  // namespace rut

TEST_CASE_TEMPLATE("Custom key_extractor and sequence_extractor types plug into ReplaceUsing", Storage,
                   FLOWTEST_STORAGE_POLICIES) {
  fl::StreamingTable<User, Storage> t{"users"};
  fl::ReplaceUsing<ColumnKey, VersionSeq> flow{"users_by_login", ColumnKey{1}};
  flow.apply(t, std::vector<User>{{"a@x", "Ann", "Ann", "v2"}, {"b@x", "bob", "Bob", "v10"},
                                  {"a@y", "ANN", "Ann Y", "v9"}});
  CHECK(flow.key_count() == 2);  // "Ann" and "ANN" are one login
  CHECK(flow.sequence_of("ann") == 9);
  CHECK(flow.sequence_of("bob") == 10);
  flow.apply(t, std::vector<User>{{"b@z", "BOB", "Bob Z", "v11"}});
  CHECK(t.sorted_rows() ==
        sorted<User>({{"a@y", "ANN", "Ann Y", "v9"}, {"b@z", "BOB", "Bob Z", "v11"}}));
  const fl::error e = flowtest::error_of(
      [&] { flow.apply(t, std::vector<User>{{"c@x", "Cy", "Cy", "draft"}}); });
  CHECK(e.code() == fl::errc::null_sequence);
  CHECK(e.column() == "version");
  CHECK(e.key() == "login=cy");
  CHECK(t.size() == 2);
}

namespace dated {
// The seed keys daily partial snapshots by date.
struct DailyTotal {
  std::chrono::sys_days day;
  std::int64_t region;
  std::int64_t total;
  std::int64_t seq;
  friend auto operator<=>(const DailyTotal&, const DailyTotal&) = default;
};
FLOWLIB_SCHEMA(DailyTotal, day, region, total, seq);
}  // namespace dated

TEST_CASE_TEMPLATE("R-USING-6: a date is a key column", Storage, FLOWTEST_STORAGE_POLICIES) {
  using namespace std::chrono;
  using dated::DailyTotal;
  using Flow = fl::ReplaceUsing<fl::Key<&DailyTotal::day, &DailyTotal::region>,
                                fl::Seq<&DailyTotal::seq>>;
  const sys_days d1 = 2026y / December / 1;
  const sys_days d2 = 2026y / December / 2;
  fl::StreamingTable<DailyTotal, Storage> t{"daily_totals"};
  Flow flow{"daily_totals_flow"};
  flow.apply(t, std::vector<DailyTotal>{{d1, 1, 10, 1}, {d1, 2, 20, 1}, {d2, 1, 30, 1}});
  const fl::BatchStats s = flow.apply(t, std::vector<DailyTotal>{{d1, 1, 11, 2}, {d2, 1, 5, 0}});
  CHECK(s.replaced_rows == 1);
  CHECK(s.ignored_late_rows == 1);
  CHECK(t.sorted_rows() ==
        std::vector<DailyTotal>{{d1, 1, 11, 2}, {d1, 2, 20, 1}, {d2, 1, 30, 1}});
  CHECK(flow.sequence_of({d1, 1}) == 2);
}

}  // namespace flows_replace_using_rules
