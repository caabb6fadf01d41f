// Append flows (INSERT [ONCE] BY NAME): docs/semantics.md R-TABLE-1, R-TABLE-2,
// and expectations on tables (section 6), over the suites' storage policies.
#include <flowlib/flowlib.hpp>

#include <support/errors.hpp>
#include <support/storage_policies.hpp>

#include <doctest/doctest.h>

#include <range/v3/range/concepts.hpp>
#include <range/v3/view/iota.hpp>
#include <range/v3/view/transform.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <list>
#include <optional>
#include <ranges>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace flows_append_append {

namespace fl = flowlib;

// The table's declared schema.
struct Event {
  std::int64_t id = 0;
  std::string bucket;
  std::optional<std::string> source;  // grown later: older flows leave it null
  friend auto operator<=>(const Event&, const Event&) = default;
};
FLOWLIB_SCHEMA(Event, id, bucket, source);

// A query's rows with the table's columns in another order, without `source`.
struct WebEvent {
  std::string bucket;
  std::int64_t id = 0;
};
FLOWLIB_SCHEMA(WebEvent, bucket, id);

// A query with an extra column the table does not have, and `source` as a
// non-nullable value (written into the nullable column).
struct AppEvent {
  std::int64_t id = 0;
  std::string bucket;
  std::string source;
  std::string debug;
};
FLOWLIB_SCHEMA(AppEvent, id, bucket, source, debug);

// The seed's `SELECT id FROM ...`.
struct IdOnly {
  std::int64_t id = 0;
};
FLOWLIB_SCHEMA(IdOnly, id);
struct ValidEvent {
  std::int64_t id = 0;
  friend auto operator<=>(const ValidEvent&, const ValidEvent&) = default;
};
FLOWLIB_SCHEMA(ValidEvent, id);

// A row whose copy throws on demand (for all-or-nothing tests).
inline int copies_until_throw = -1;
struct Fragile {
  std::int64_t id = 0;
  Fragile() = default;
  explicit Fragile(std::int64_t i) : id(i) {}
  Fragile(const Fragile& o) : id(o.id) {
    if (copies_until_throw == 0) throw std::runtime_error("copy failed");
    if (copies_until_throw > 0) --copies_until_throw;
  }
  Fragile(Fragile&&) noexcept = default;
  Fragile& operator=(const Fragile& o) { return *this = Fragile(o); }  // throws as the copy does
  Fragile& operator=(Fragile&&) noexcept = default;
  friend bool operator==(const Fragile& a, const Fragile& b) { return a.id == b.id; }
  friend bool operator<(const Fragile& a, const Fragile& b) { return a.id < b.id; }
};
FLOWLIB_SCHEMA(Fragile, id);

// A change row mapped onto a target row (as a change-feed flow would).
struct Change {
  std::int64_t user_id;
  std::optional<std::string> city;
  std::string operation;
  std::int64_t seq;
};
FLOWLIB_SCHEMA(Change, user_id, city, operation, seq);
struct User {
  std::int64_t user_id;
  std::optional<std::string> city;
  std::optional<std::int64_t> start_at;
};
FLOWLIB_SCHEMA(User, user_id, city, start_at);

// Rows without a schema: the same row type is copied whole.
struct Plain {
  std::int64_t id;
  std::int64_t v;
  friend auto operator<=>(const Plain&, const Plain&) = default;
};
struct KeyedRow {
  std::int64_t k;
  std::int64_t seq;
  friend auto operator<=>(const KeyedRow&, const KeyedRow&) = default;
};

TEST_CASE_TEMPLATE("R-TABLE-2: an append flow inserts every row of each batch", Storage,
                   FLOWTEST_STORAGE_POLICIES) {
  fl::StreamingTable<Event, Storage> t{"events"};
  fl::Append<> flow{"events_flow"};
  const std::vector<Event> b1{{1, "a", std::nullopt}, {2, "b", "x"}};
  const auto s1 = flow.apply(t, b1);
  CHECK(s1.input_rows == 2);
  CHECK(s1.applied_rows == 2);
  CHECK(s1.inserted_rows == 2);
  CHECK_FALSE(s1.skipped);
  // Duplicates are appended, not merged: an append flow has no key.
  const auto s2 = flow.apply(t, b1);
  CHECK(s2.applied_rows == 2);
  CHECK(t.size() == 4);
  const std::vector<Event> expected{{1, "a", std::nullopt}, {1, "a", std::nullopt}, {2, "b", "x"},
                                    {2, "b", "x"}};
  CHECK(t.sorted_rows() == expected);
  CHECK(b1[1].bucket == "b");  // lvalue batches are copied, never moved from
  // An empty batch is a no-op.
  CHECK(flow.apply(t, std::vector<Event>{}).applied_rows == 0);
  CHECK(t.size() == 4);
}

TEST_CASE_TEMPLATE("R-TABLE-2: columns are matched by name; missing nullable columns are null",
                   Storage, FLOWTEST_STORAGE_POLICIES) {
  fl::ManagedTable<Event, Storage> t{"events"};
  fl::Append<> web{"web"};
  fl::Append<fl::DropColumns<"debug">> app{"app"};
  web.apply(t, std::vector<WebEvent>{{"b1", 1}, {"b2", 2}});
  app.apply(t, std::vector<AppEvent>{{3, "b3", "phone", "trace-1"}});
  const std::vector<Event> expected{{1, "b1", std::nullopt}, {2, "b2", std::nullopt},
                                    {3, "b3", std::string("phone")}};
  CHECK(t.sorted_rows() == expected);
}

TEST_CASE_TEMPLATE("R-TABLE-2: rvalue batches are moved; single-pass and range-v3 ranges work",
                   Storage, FLOWTEST_STORAGE_POLICIES) {
  fl::StreamingTable<Event, Storage> t{"events"};
  fl::Append<> flow{"f"};
  // A view of prvalues (single pass, not sized): rows are moved in.
  auto gen = std::views::iota(0, 3) | std::views::transform([](int i) {
               return WebEvent{"bucket-with-a-name-long-enough-to-allocate", i};
             });
  CHECK(flow.apply(t, gen).applied_rows == 3);
  // A range-v3 view of prvalues of the table's own row type.
  std::vector<Event> v{{10, "m", "s"}};
  CHECK(flow.apply(t, v | ranges::views::transform([](const Event& e) { return e; })).applied_rows == 1);
  // A std::list (sized, not contiguous: the direct path with undo).
  std::list<Event> l{{11, "l", std::nullopt}};
  CHECK(flow.apply(t, l).applied_rows == 1);
  CHECK(t.size() == 5);
  CHECK(t.sorted_rows().back() == Event{11, "l", std::nullopt});
}

// Append::apply() picks its path at compile time (flows/append.hpp): a batch
// that is sized (std::ranges::sized_range or ranges::sized_range), with no
// flow expectation, into a table without expectations, is written directly;
// every other batch is staged in scratch rows first. The same condition:
template <class R>
inline constexpr bool append_takes_direct_path =
    std::ranges::sized_range<R> || ranges::sized_range<R>;

TEST_CASE_TEMPLATE("R-TABLE-2: direct path and staged path agree", Storage,
                   FLOWTEST_STORAGE_POLICIES) {
  using Table = fl::StreamingTable<Plain, Storage>;
  Table direct{"direct"};
  Table staged{"staged"};
  REQUIRE(direct.table_expectation_sets().empty());
  REQUIRE(staged.table_expectation_sets().empty());
  fl::Append<> fd{"fd"};
  fl::Append<> fs{"fs"};
  std::vector<Plain> rows;
  for (std::int64_t i = 0; i < 100; ++i) rows.push_back({i % 7, i});

  // Each batch copies the rows and notes, for every row read, whether its
  // flow had already claimed the table (the first thing either path does to
  // the table). Only the staged path reads the whole batch before it touches
  // the table; the direct path reserves and claims first, then writes each
  // row as it is read.
  struct reads {
    std::size_t rows = 0;
    std::size_t after_claim = 0;
  };
  const auto watch = [](const Table& t, reads& r) {
    return [&t, &r](const Plain& p) {
      ++r.rows;
      if (!t.writers().empty()) ++r.after_claim;
      return p;
    };
  };
  reads rd;
  reads rs;
  const auto all = [](const Plain&) { return true; };
  auto sized = rows | std::views::transform(watch(direct, rd));
  auto unsized = rows | std::views::filter(all) | std::views::transform(watch(staged, rs));
  // apply() deduces an lvalue batch as R&.
  static_assert(append_takes_direct_path<decltype(sized)&>);
  static_assert(!append_takes_direct_path<decltype(unsized)&>);

  CHECK(fd.apply(direct, sized).applied_rows == rows.size());
  CHECK(fs.apply(staged, unsized).applied_rows == rows.size());
  CHECK(rd.rows == rows.size());
  CHECK(rd.after_claim == rows.size());  // direct: written as read
  CHECK(rs.rows == rows.size());
  CHECK(rs.after_claim == 0);  // staged: all read before the table was touched
  CHECK(direct.sorted_rows() == staged.sorted_rows());

  // Again, into tables that hold rows (the staged path reuses its scratch
  // rows), and with the plain vector (contiguous: the direct path without
  // undo) against the filter view.
  auto unsized_plain = rows | std::views::filter(all);
  static_assert(append_takes_direct_path<std::vector<Plain>&>);
  static_assert(!append_takes_direct_path<decltype(unsized_plain)&>);
  CHECK(fd.apply(direct, rows).applied_rows == rows.size());
  CHECK(fs.apply(staged, unsized_plain).applied_rows == rows.size());
  CHECK(direct.size() == 200);
  CHECK(direct.sorted_rows() == staged.sorted_rows());
  std::vector<Plain> expected = rows;
  expected.insert(expected.end(), rows.begin(), rows.end());
  std::ranges::sort(expected);
  CHECK(direct.sorted_rows() == expected);
}

TEST_CASE_TEMPLATE("R-TABLE-2: the seed's fan-in of two sources into one table", Storage,
                   FLOWTEST_STORAGE_POLICIES) {
  // CREATE TABLE events; CREATE FLOW web AS INSERT INTO events BY NAME ...;
  // CREATE FLOW app AS INSERT INTO events BY NAME ...
  fl::ManagedTable<Event, Storage> events{"events"};
  fl::Append<> web{"web"};
  fl::Append<fl::DropColumns<"debug">> app{"app"};
  web.apply(events, std::vector<WebEvent>{{"north", 1}});
  app.apply(events, std::vector<AppEvent>{{2, "south", "ios", "x"}, {3, "north", "android", "y"}});
  web.apply(events, std::vector<WebEvent>{{"east", 4}});
  REQUIRE(events.writers().size() == 2);
  CHECK(events.writers()[0].name == "web");
  CHECK(events.writers()[1].name == "app");
  CHECK(events.writers()[0].kind == "APPEND");
  const std::vector<Event> expected{{1, "north", std::nullopt},
                                    {2, "south", std::string("ios")},
                                    {3, "north", std::string("android")},
                                    {4, "east", std::nullopt}};
  CHECK(events.sorted_rows() == expected);
}

TEST_CASE_TEMPLATE("R-TABLE-2: ONCE runs a single time, and again after a full refresh", Storage,
                   FLOWTEST_STORAGE_POLICIES) {
  fl::ManagedTable<Event, Storage> t{"events"};
  fl::AppendOnce<> backfill{"backfill"};
  fl::Append<> live{"live"};
  static_assert(fl::AppendOnce<>::once && !fl::Append<>::once);
  // Class template argument deduction: `fl::Append f{"name"}` is Append<>.
  fl::Append deduced{"deduced"};
  fl::AppendOnce deduced_once{"deduced_once"};
  static_assert(std::is_same_v<decltype(deduced), fl::Append<>>);
  static_assert(std::is_same_v<decltype(deduced_once), fl::Append<fl::Once>>);
  const std::vector<WebEvent> history{{"h", 1}, {"h", 2}};
  CHECK_FALSE(backfill.done());
  const auto first = backfill.apply(t, history);
  CHECK(first.applied_rows == 2);
  CHECK_FALSE(first.skipped);
  CHECK(backfill.done());
  live.apply(t, std::vector<WebEvent>{{"l", 3}});
  // Later calls are no-ops that say so; the live flow keeps appending.
  const auto again = backfill.apply(t, history);
  CHECK(again.skipped);
  CHECK(again.input_rows == 0);
  CHECK(again.applied_rows == 0);
  live.apply(t, std::vector<WebEvent>{{"l", 4}});
  CHECK(t.size() == 4);

  // Full refresh: the table empties, the ONCE flow runs again.
  t.full_refresh();
  backfill.reset();
  CHECK(t.size() == 0);
  CHECK(backfill.apply(t, history).applied_rows == 2);
  CHECK(backfill.apply(t, history).skipped);
  CHECK(t.size() == 2);

  // The marker can be restored from a checkpoint.
  fl::AppendOnce<> restored{"backfill"};
  restored.restore(true);
  CHECK(restored.apply(t, history).skipped);
}

TEST_CASE("R-TABLE-2: a failed ONCE run does not count as its run") {
  fl::ManagedTable<ValidEvent> t{
      "t", fl::table_options<ValidEvent>().expect(fl::expect_or_fail(
               "positive_id", [](const ValidEvent& e) { return e.id > 0; }))};
  fl::AppendOnce<> once{"once"};
  CHECK_THROWS_AS(once.apply(t, std::vector<IdOnly>{{1}, {-1}}), fl::error);
  CHECK_FALSE(once.done());
  CHECK(t.size() == 0);
  CHECK(once.apply(t, std::vector<IdOnly>{{1}, {2}}).applied_rows == 2);
  CHECK(once.done());
}

TEST_CASE("R-TABLE-2: each ONCE flow has its own marker") {
  fl::StreamingTable<Event> t{"t"};
  fl::AppendOnce<> a{"a"};
  fl::AppendOnce<fl::DropColumns<"debug">> b{"b"};
  a.apply(t, std::vector<WebEvent>{{"x", 1}});
  CHECK_FALSE(b.done());
  CHECK(b.apply(t, std::vector<AppEvent>{{2, "y", "s", "d"}}).applied_rows == 1);
  CHECK(a.apply(t, std::vector<WebEvent>{{"x", 1}}).skipped);
  CHECK(b.apply(t, std::vector<AppEvent>{{2, "y", "s", "d"}}).skipped);
  CHECK(t.size() == 2);
}

TEST_CASE("R-TABLE-2 R-WHERE-6: a refused full refresh leaves data and ONCE markers as they were") {
  fl::ManagedTable<Event> t{"t", fl::table_options<Event>().reset_allowed(false)};
  fl::AppendOnce<> once{"once"};
  once.apply(t, std::vector<WebEvent>{{"x", 1}});
  const fl::error e = flowtest::error_of([&] { t.full_refresh(); });
  CHECK(e.code() == fl::errc::invalid_argument);
  CHECK(flowtest::contains(e.what(), "reset_allowed"));
  CHECK(t.size() == 1);
  CHECK(once.done());
}

TEST_CASE("R-TABLE-1: append flows write streaming and managed tables, not exclusive targets") {
  using Row = KeyedRow;
  fl::StreamingTable<Row> st{"st"};
  fl::ReplaceUsing<fl::Key<&Row::k>, fl::Seq<&Row::seq>> ru{"ru"};
  ru.apply(st, std::vector<Row>{{1, 1}});
  fl::Append<> app{"app"};
  const fl::error e = flowtest::error_of([&] { app.apply(st, std::vector<Row>{{2, 1}}); });
  CHECK(e.code() == fl::errc::invalid_target);
  CHECK(e.flow() == "app");
  CHECK(st.size() == 1);

  // And the other way round: an appended table refuses REPLACE USING.
  fl::StreamingTable<Row> st2{"st2"};
  fl::Append<> app2{"app2"};
  app2.apply(st2, std::vector<Row>{{1, 1}});
  fl::ReplaceUsing<fl::Key<&Row::k>, fl::Seq<&Row::seq>> ru2{"ru2"};
  CHECK_THROWS_AS(ru2.apply(st2, std::vector<Row>{{1, 2}}), fl::error);
  CHECK(st2.sorted_rows() == std::vector<Row>{{1, 1}});
}

TEST_CASE("a flow writes one table; a moved flow keeps its claim") {
  fl::StreamingTable<Event> t1{"t1"};
  fl::StreamingTable<Event> t2{"t2"};
  fl::Append<> f{"f"};
  f.apply(t1, std::vector<WebEvent>{{"a", 1}});
  const fl::error e = flowtest::error_of([&] { f.apply(t2, std::vector<WebEvent>{{"a", 1}}); });
  CHECK(e.code() == fl::errc::invalid_target);
  CHECK(flowtest::contains(e.what(), "t1"));
  fl::Append<> g = std::move(f);
  g.apply(t1, std::vector<WebEvent>{{"b", 2}});
  CHECK(t1.writers().size() == 1);
  CHECK(t1.size() == 2);
  CHECK(t2.size() == 0);
}

TEST_CASE_TEMPLATE("R-EXPECT-1 R-TABLE-3: the seed's drop expectation (CONSTRAINT positive_id "
                   "EXPECT (id > 0) ON VIOLATION DROP ROW)",
                   Storage, FLOWTEST_STORAGE_POLICIES) {
  // CREATE TABLE valid_events (CONSTRAINT positive_id EXPECT (id > 0) ON VIOLATION DROP ROW)
  // FLOW INSERT BY NAME SELECT id FROM STREAM read_files(...);
  fl::ManagedTable<ValidEvent, Storage> valid_events{
      "valid_events",
      fl::table_options<ValidEvent>().expect(
          fl::expect_or_drop("positive_id", [](const ValidEvent& e) { return e.id > 0; }))};
  CHECK(valid_events.expectation_count() == 1);
  fl::Append<> flow{"valid_events"};
  const auto stats = flow.apply(valid_events, std::vector<IdOnly>{{1}, {0}, {5}, {-3}, {2}});
  CHECK(stats.input_rows == 5);
  CHECK(stats.dropped_rows == 2);
  CHECK(stats.applied_rows == 3);
  REQUIRE(stats.expectation("positive_id") != nullptr);
  CHECK(stats.expectation("positive_id")->passed == 3);
  CHECK(stats.expectation("positive_id")->failed == 2);
  CHECK(stats.expectation("positive_id")->action == fl::on_violation::drop);
  CHECK(valid_events.sorted_rows() == std::vector<ValidEvent>{{1}, {2}, {5}});
}

TEST_CASE_TEMPLATE("R-EXPECT-1 R-EXPECT-2: warn keeps rows, fail writes nothing", Storage,
                   FLOWTEST_STORAGE_POLICIES) {
  fl::StreamingTable<Event, Storage> t{
      "t", fl::table_options<Event>()
               .expect(fl::expect("has_source", [](const Event& e) { return e.source.has_value(); }))
               .expect(fl::expect_or_fail("known_bucket",
                                          [](const Event& e) { return e.bucket != "bad"; }))};
  CHECK(t.expectation_count() == 2);
  fl::Append<> f{"f"};
  const auto s = f.apply(t, std::vector<WebEvent>{{"a", 1}, {"b", 2}});
  CHECK(s.applied_rows == 2);
  CHECK(s.dropped_rows == 0);
  REQUIRE(s.expectations.size() == 2);
  CHECK(s.expectations[0].name == "has_source");
  CHECK(s.expectations[0].failed == 2);
  CHECK(s.expectations[1].passed == 2);

  // FAIL UPDATE: the table is left as it was; the error names flow, expectation, row.
  const fl::error e = flowtest::error_of(
      [&] { f.apply(t, std::vector<WebEvent>{{"c", 3}, {"bad", 4}, {"d", 5}}); });
  CHECK(e.code() == fl::errc::expectation_failed);
  CHECK(e.flow() == "f");
  CHECK(e.column() == "known_bucket");
  CHECK(e.key().find("id=4") != std::string::npos);
  CHECK(t.size() == 2);
  const std::vector<Event> expected{{1, "a", std::nullopt}, {2, "b", std::nullopt}};
  CHECK(t.sorted_rows() == expected);
}

TEST_CASE("R-EXPECT-1: flow expectations on the source row run before the table's") {
  fl::ManagedTable<ValidEvent> t{
      "t", fl::table_options<ValidEvent>().expect(
               fl::expect_or_drop("positive_id", [](const ValidEvent& e) { return e.id > 0; }))};
  fl::Append<> f{"f"};
  const auto s = f.apply(
      t, std::vector<IdOnly>{{1}, {-1}, {100}, {7}},
      fl::expectations(fl::expect_or_drop("small", [](const IdOnly& r) { return r.id < 50; })));
  CHECK(s.input_rows == 4);
  CHECK(s.dropped_rows == 2);
  REQUIRE(s.expectations.size() == 2);
  CHECK(s.expectations[0].name == "small");
  CHECK(s.expectations[0].failed == 1);
  CHECK(s.expectations[1].name == "positive_id");
  CHECK(s.expectations[1].passed == 2);  // the row dropped by `small` never reached the table
  CHECK(s.expectations[1].failed == 1);
  CHECK(t.sorted_rows() == std::vector<ValidEvent>{{1}, {7}});
}

TEST_CASE_TEMPLATE("a throwing copy leaves the table as it was", Storage,
                   FLOWTEST_STORAGE_POLICIES) {
  fl::StreamingTable<Fragile, Storage> t{"t"};
  fl::Append<> f{"f"};
  std::vector<Fragile> b;
  for (int i = 0; i < 5; ++i) b.emplace_back(i);
  f.apply(t, b);
  copies_until_throw = 3;
  CHECK_THROWS_AS(f.apply(t, b), std::runtime_error);
  copies_until_throw = -1;
  CHECK(t.size() == 5);
  CHECK(t.sorted_rows() == b);
  f.apply(t, b);
  CHECK(t.size() == 10);
}

TEST_CASE_TEMPLATE("a throw mid-batch on every path leaves the table as it was",
                   Storage, FLOWTEST_STORAGE_POLICIES) {
  fl::StreamingTable<Fragile, Storage> t{"t"};
  fl::Append<> f{"f"};
  std::vector<Fragile> b;
  for (int i = 0; i < 6; ++i) b.emplace_back(i);
  f.apply(t, b);
  const auto before = t.sorted_all_rows();
  // Sized, not contiguous: the direct path with undo.
  const std::list<Fragile> l(b.begin(), b.end());
  copies_until_throw = 4;
  CHECK_THROWS_AS(f.apply(t, l), std::runtime_error);
  copies_until_throw = -1;
  CHECK(t.sorted_all_rows() == before);
  // Not sized (a filter view): the staged path.
  copies_until_throw = 2;
  CHECK_THROWS_AS(f.apply(t, b | std::views::filter([](const Fragile&) { return true; })),
                  std::runtime_error);
  copies_until_throw = -1;
  CHECK(t.sorted_all_rows() == before);
  // A view whose own code throws while it is iterated.
  int calls = 0;
  auto throwing = std::views::iota(0, 5) | std::views::transform([&calls](int i) {
                    if (++calls == 3) throw std::runtime_error("source failed");
                    return Fragile(i);
                  });
  CHECK_THROWS_AS(f.apply(t, throwing), std::runtime_error);
  CHECK(t.sorted_all_rows() == before);
  CHECK(t.size() == 6);
  // And the flow still works afterwards.
  CHECK(f.apply(t, l).applied_rows == 6);
  CHECK(t.size() == 12);
}

TEST_CASE("R-TABLE-2: the table's schema grows; older flows write null into new columns") {
  // The table gained the nullable `source`; a flow whose query predates it
  // (WebEvent) keeps writing, with null in the new column.
  fl::StreamingTable<Event> t{"t"};
  fl::Append<> old_flow{"old"};
  fl::Append<fl::DropColumns<"debug">> new_flow{"new"};
  old_flow.apply(t, std::vector<WebEvent>{{"a", 1}});
  new_flow.apply(t, std::vector<AppEvent>{{2, "b", "app", "dbg"}});
  const auto rows = t.sorted_rows();
  REQUIRE(rows.size() == 2);
  CHECK_FALSE(rows[0].source.has_value());
  CHECK(rows[1].source == std::optional<std::string>("app"));
}

TEST_CASE("by-name mapping: make and assign, dropped and skipped columns") {
  using M = fl::detail::by_name_map<Change, User, fl::detail::name_list<"operation", "seq">,
                                    fl::detail::name_list<"start_at">>;
  static_assert(!M::identity && M::ok);
  Change c{7, "Oaxaca", "INSERT", 3};
  User u = M::make(c);
  CHECK(u.user_id == 7);
  CHECK(u.city == std::optional<std::string>("Oaxaca"));
  CHECK_FALSE(u.start_at.has_value());
  u.start_at = 3;
  Change c2{7, std::nullopt, "UPDATE", 4};
  M::assign(u, std::move(c2));
  CHECK(u.city == std::nullopt);
  CHECK(u.start_at == 3);  // skipped: left to the caller
  static_assert(fl::detail::by_name_map<Event, Event>::identity);
}

}  // namespace flows_append_append
