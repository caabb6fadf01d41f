// AUTO CDC: the reference vectors of docs/semantics.md#auto-cdc, and every
// option (R-CDC-1..R-CDC-7, R-CDC-9), over the suites' storage policies. Randomised
// reference-model tests are in random/ (flows_auto_cdc_random_test), AUTO CDC
// FROM SNAPSHOT in snapshot.cpp (here only its null keys, R-CDC-9).
#include <flowlib/checkpoint/store.hpp>
#include <flowlib/detail/byte_codec.hpp>
#include <flowlib/flows/auto_cdc.hpp>
#include <flowlib/flows/auto_cdc_snapshot.hpp>
#include <flowlib/table.hpp>

#include <support/checkpoint_blobs.hpp>
#include <support/errors.hpp>
#include <support/rows.hpp>
#include <support/storage_policies.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <iterator>
#include <ranges>
#include <chrono>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

namespace flows_auto_cdc_reference {

namespace fl = flowlib;

using ostr = std::optional<std::string>;

struct Change {
  std::int64_t userId;
  ostr name;
  ostr city;
  std::string operation;
  std::optional<std::int64_t> sequenceNum;
};
FLOWLIB_SCHEMA(Change, userId, name, city, operation, sequenceNum);

struct User {
  std::int64_t userId;
  ostr name;
  ostr city;
  friend bool operator==(const User&, const User&) = default;
};
FLOWLIB_SCHEMA(User, userId, name, city);

struct UserHistory {
  std::int64_t userId;
  ostr name;
  ostr city;
  std::int64_t start_at;
  std::optional<std::int64_t> end_at;
  friend bool operator==(const UserHistory&, const UserHistory&) = default;
};
FLOWLIB_SCHEMA(UserHistory, userId, name, city, (start_at, "__START_AT"), (end_at, "__END_AT"));

struct IsDelete {
  bool operator()(const Change& c) const { return c.operation == "DELETE"; }
};
struct IsTruncate {
  bool operator()(const Change& c) const { return c.operation == "TRUNCATE"; }
};

using UserKey = fl::Key<&Change::userId>;
using UserSeq = fl::Seq<&Change::sequenceNum>;
using NotStored = fl::except_column_list<"operation", "sequenceNum">;

using Scd1Flow = fl::AutoCdc<UserKey, UserSeq, fl::Scd1, fl::apply_as_deletes<IsDelete>,
                             fl::apply_as_truncates<IsTruncate>, NotStored>;
using Scd2Flow =
    fl::AutoCdc<UserKey, UserSeq, fl::Scd2<>, fl::apply_as_deletes<IsDelete>, NotStored>;
using Scd2NoCityFlow =
    fl::AutoCdc<UserKey, UserSeq, fl::Scd2<fl::track_history_except_column_list<"city">>,
                fl::apply_as_deletes<IsDelete>, NotStored>;

// The users flows with ignore_null_updates (R-CDC-6).
using Ign1 = fl::AutoCdc<UserKey, UserSeq, fl::Scd1, fl::apply_as_deletes<IsDelete>, NotStored,
                         fl::ignore_null_updates>;
using Ign2 = fl::AutoCdc<UserKey, UserSeq, fl::Scd2<>, fl::apply_as_deletes<IsDelete>, NotStored,
                         fl::ignore_null_updates>;

// The reference docs' users example (docs/semantics.md#auto-cdc), verbatim.
std::vector<Change> feed() {
  return {
      {124, "Raul", "Oaxaca", "INSERT", 1},
      {123, "Isabel", "Monterrey", "INSERT", 1},
      {125, "Mercedes", "Tijuana", "INSERT", 2},
      {126, "Lily", "Cancun", "INSERT", 2},
      {123, std::nullopt, std::nullopt, "DELETE", 6},
      {125, "Mercedes", "Guadalajara", "UPDATE", 6},
      {125, "Mercedes", "Mexicali", "UPDATE", 5},
      {123, "Isabel", "Chihuahua", "UPDATE", 5},
  };
}

const std::vector<User> scd1_expected{
    {124, "Raul", "Oaxaca"}, {125, "Mercedes", "Guadalajara"}, {126, "Lily", "Cancun"}};

const std::vector<UserHistory> scd2_expected{
    {123, "Isabel", "Chihuahua", 5, 6},       {123, "Isabel", "Monterrey", 1, 5},
    {124, "Raul", "Oaxaca", 1, std::nullopt}, {125, "Mercedes", "Guadalajara", 6, std::nullopt},
    {125, "Mercedes", "Mexicali", 5, 6},      {125, "Mercedes", "Tijuana", 2, 5},
    {126, "Lily", "Cancun", 2, std::nullopt},
};

const std::vector<UserHistory> scd2_no_city_expected{
    {123, "Isabel", "Chihuahua", 1, 6},
    {124, "Raul", "Oaxaca", 1, std::nullopt},
    {125, "Mercedes", "Guadalajara", 2, std::nullopt},
    {126, "Lily", "Cancun", 2, std::nullopt},
};

/// The feed's counts in one batch: within a batch changes apply in
/// sequence order, so all 7 upserts and the delete count, none is late.
inline void check_feed_stats(const fl::BatchStats& s) {
  CHECK(s.input_rows == 8);
  CHECK(s.upserted_rows == 7);
  CHECK(s.deleted_rows == 1);
  CHECK(s.ignored_late_rows == 0);
  CHECK(s.tied_rows == 0);
}

/// An SCD1 flow into `t` and an SCD2 flow into `h`, given the same changes.
template <class Storage, class F1 = Scd1Flow, class F2 = Scd2Flow>
struct scd_pair {
  fl::StreamingTable<User, Storage> t{"u"};
  fl::StreamingTable<UserHistory, Storage> h{"h"};
  F1 f1;
  F2 f2;
  scd_pair() : f1("users_cdc"), f2("users_scd2") {}
  scd_pair(F1 a, F2 b) : f1(std::move(a)), f2(std::move(b)) {}
  std::pair<fl::BatchStats, fl::BatchStats> apply(const std::vector<Change>& changes) {
    return {f1.apply(t, changes), f2.apply(h, changes)};
  }
  /// Both hold the feed's results.
  void check_feed() const {
    CHECK(t.sorted_rows() == scd1_expected);
    CHECK(h.sorted_rows() == scd2_expected);
  }
  /// After the feed, `bad` fails in both with `E` and changes nothing: the
  /// feed's results stay, and the flows' state too (the feed again is a no-op).
  template <class E>
  void check_refused(const std::vector<Change>& bad) {
    CHECK_THROWS_AS(f1.apply(t, bad), E);
    CHECK_THROWS_AS(f2.apply(h, bad), E);
    check_feed();
    apply(feed());
    check_feed();
  }
};

TEST_CASE_TEMPLATE("R-CDC-2: reference vector, SCD type 1", Storage, FLOWTEST_STORAGE_POLICIES) {
  fl::StreamingTable<User, Storage> target{"users"};
  Scd1Flow flow{"users_cdc"};
  check_feed_stats(flow.apply(target, feed()));
  CHECK(target.sorted_rows() == scd1_expected);
  // The same late changes in a later batch are ignored.
  const auto late =
      flow.apply(target, std::vector<Change>{{125, "Mercedes", "Mexicali", "UPDATE", 5},
                                             {123, "Isabel", "Chihuahua", "UPDATE", 5}});
  CHECK(late.ignored_late_rows == 2);
  CHECK(late.upserted_rows == 0);
  CHECK(target.sorted_rows() == scd1_expected);
  CHECK(flow.tombstone_count() == 1);
}

TEST_CASE_TEMPLATE("R-CDC-3: reference vector, SCD type 1 with TRUNCATE at 3", Storage,
                   FLOWTEST_STORAGE_POLICIES) {
  fl::StreamingTable<User, Storage> target{"users"};
  Scd1Flow flow{"users_cdc"};
  auto changes = feed();
  changes.push_back({0, std::nullopt, std::nullopt, "TRUNCATE", 3});
  flow.apply(target, changes);
  CHECK(target.sorted_rows() == std::vector<User>{{125, "Mercedes", "Guadalajara"}});

  SUBCASE("the truncate in a later batch") {
    fl::StreamingTable<User, Storage> t2{"users2"};
    Scd1Flow f2{"users_cdc"};
    f2.apply(t2, feed());
    const auto s = f2.apply(t2, std::vector<Change>{{0, {}, {}, "TRUNCATE", 3}});
    CHECK(t2.sorted_rows() == std::vector<User>{{125, "Mercedes", "Guadalajara"}});
    CHECK(s.truncated_rows == 2);  // 124 (seq 1) and 126 (seq 2)
    // A change older than the truncate is ignored afterwards (R-CDC-1).
    const auto late = f2.apply(t2, std::vector<Change>{{127, "Ana", "Puebla", "INSERT", 2}});
    CHECK(late.ignored_late_rows == 1);
    CHECK(t2.size() == 1);
  }
}

TEST_CASE_TEMPLATE("R-CDC-4: reference vector, SCD type 2", Storage, FLOWTEST_STORAGE_POLICIES) {
  fl::StreamingTable<UserHistory, Storage> target{"users_history"};
  check_feed_stats(Scd2Flow{"users_cdc"}.apply(target, feed()));
  CHECK(target.sorted_rows() == scd2_expected);
}

TEST_CASE_TEMPLATE("R-CDC-4: reference vector, SCD type 2 tracking all columns but city", Storage,
                   FLOWTEST_STORAGE_POLICIES) {
  fl::StreamingTable<UserHistory, Storage> target{"users_history"};
  Scd2NoCityFlow{"users_cdc"}.apply(target, feed());
  CHECK(target.sorted_rows() == scd2_no_city_expected);
}

TEST_CASE_TEMPLATE("R-CDC-1: reference vectors, one change per batch, in reverse, applied twice",
                   Storage, FLOWTEST_STORAGE_POLICIES) {
  auto changes = feed();
  fl::StreamingTable<User, Storage> t1{"u1"};
  fl::StreamingTable<UserHistory, Storage> t2{"u2"};
  fl::StreamingTable<UserHistory, Storage> t3{"u3"};
  Scd1Flow f1;
  Scd2Flow f2;
  Scd2NoCityFlow f3;
  for (int pass = 0; pass < 2; ++pass) {
    for (auto it = changes.rbegin(); it != changes.rend(); ++it) {
      const std::vector<Change> one{*it};
      f1.apply(t1, one);
      f2.apply(t2, one);
      f3.apply(t3, one);
    }
    CHECK(t1.sorted_rows() == scd1_expected);
    CHECK(t2.sorted_rows() == scd2_expected);
    CHECK(t3.sorted_rows() == scd2_no_city_expected);
  }
}

TEST_CASE_TEMPLATE("R-CDC-4: SCD2 late changes split versions and fix both neighbours", Storage,
                   FLOWTEST_STORAGE_POLICIES) {
  fl::StreamingTable<UserHistory, Storage> t{"h"};
  Scd2Flow flow;
  flow.apply(t, std::vector<Change>{{1, "A", "X", "INSERT", 10}, {1, "A", "Z", "UPDATE", 30}});
  CHECK(t.sorted_rows() == std::vector<UserHistory>{{1, "A", "X", 10, 30}, {1, "A", "Z", 30, {}}});
  // Late: a version in the middle.
  flow.apply(t, std::vector<Change>{{1, "A", "Y", "UPDATE", 20}});
  CHECK(t.sorted_rows() == std::vector<UserHistory>{{1, "A", "X", 10, 20},
                                                    {1, "A", "Y", 20, 30},
                                                    {1, "A", "Z", 30, {}}});
  // Late: before the first version.
  flow.apply(t, std::vector<Change>{{1, "A", "W", "UPDATE", 5}});
  CHECK(t.sorted_rows() == std::vector<UserHistory>{{1, "A", "W", 5, 10},
                                                    {1, "A", "X", 10, 20},
                                                    {1, "A", "Y", 20, 30},
                                                    {1, "A", "Z", 30, {}}});
  // Late delete: closes the version it falls in; the next change reopens.
  flow.apply(t, std::vector<Change>{{1, {}, {}, "DELETE", 25}});
  CHECK(t.sorted_rows() == std::vector<UserHistory>{{1, "A", "W", 5, 10},
                                                    {1, "A", "X", 10, 20},
                                                    {1, "A", "Y", 20, 25},
                                                    {1, "A", "Z", 30, {}}});
}

TEST_CASE_TEMPLATE(
    "R-CDC-4 R-CDC-5: SCD2 late changes and ties among changes that opened or closed no version",
    Storage, FLOWTEST_STORAGE_POLICIES) {
  // A key's history keeps only the changes its versions do not show (an
  // upsert with the open version's values, a delete with none open); late
  // changes are placed among both kinds, in the planned path and the one pass.
  fl::CdcOptions one_pass;
  one_pass.tuning.scd2_one_pass_min_keys = 0;  // however few keys
  for (const fl::CdcOptions& settings : {fl::CdcOptions{}, one_pass}) {
    fl::StreamingTable<UserHistory, Storage> t{"h"};
    Scd2Flow flow{"late_among_kept", settings};
    const auto apply = [&](Change c) {
      return flow.apply(t, std::vector<Change>{std::move(c)});
    };
    apply({1, "A", "X", "INSERT", 10});
    apply({1, "A", "X", "UPDATE", 20});  // the same values: opens nothing
    apply({1, {}, {}, "DELETE", 30});
    apply({1, {}, {}, "DELETE", 40});    // nothing open: closes nothing
    apply({1, "B", "Y", "INSERT", 50});
    // The expected table, changed step by step.
    std::vector<UserHistory> want{{1, "A", "X", 10, 30}, {1, "B", "Y", 50, {}}};
    const auto version = [&](const char* name, std::int64_t start) -> UserHistory& {
      return *std::find_if(want.begin(), want.end(),
                           [&](const UserHistory& v) { return v.name == name && v.start_at == start; });
    };
    const auto check = [&] { CHECK(t.sorted_rows() == flowtest::sorted(want)); };
    check();
    // Before the upsert that opened nothing: that one now reopens (A, X).
    apply({1, "C", "Z", "UPDATE", 15});
    version("A", 10).end_at = 15;
    want.push_back({1, "A", "X", 20, 30});
    want.push_back({1, "C", "Z", 15, 20});
    check();
    // After the delete that closed nothing: it stays without effect.
    apply({1, "D", "W", "UPDATE", 45});
    want.push_back({1, "D", "W", 45, 50});
    check();
    // A late delete inside a version closed by an upsert.
    apply({1, {}, {}, "DELETE", 47});
    version("D", 45).end_at = 47;
    check();
    // Ties, the later change winning: with the delete that closed nothing,
    // then with a delete that closed a version.
    CHECK(apply({1, "E", "E", "UPDATE", 40}).tied_rows == 1);
    want.push_back({1, "E", "E", 40, 45});
    check();
    CHECK(apply({1, "F", "F", "UPDATE", 30}).tied_rows == 1);
    want.push_back({1, "F", "F", 30, 40});
    check();
    // In order again, then a tie with the upsert that opened the last version.
    apply({1, "B", "Y", "UPDATE", 60});  // the same values: opens nothing
    CHECK(apply({1, "G", "G", "UPDATE", 50}).tied_rows == 1);
    version("B", 50).start_at = 60;
    want.push_back({1, "G", "G", 50, 60});
    check();
  }
}

TEST_CASE_TEMPLATE(
    "R-CDC-4 R-CDC-5 R-CDC-7: SCD2 one batch mixing a key's late, tied and in-order changes",
    Storage, FLOWTEST_STORAGE_POLICIES) {
  // The one pass sets a late or tied change aside and still applies the
  // key's later in-order changes; the planned path takes the batch whole.
  // Both give the replay in sequence order, the later of two tied changes
  // winning, with the same metrics.
  const std::vector<Change> batch = {
      {1, "B", "Y", "UPDATE", 20},  // in order
      {1, "C", "Z", "UPDATE", 15},  // late: set aside
      {1, "D", "W", "UPDATE", 30},  // in order, after a late change of the key
      {1, "E", "E", "UPDATE", 30},  // tied with D, later: wins
      {1, "F", "F", "UPDATE", 25},  // late
      {1, {}, {}, "DELETE", 40},    // in order
      {2, "P", "Q", "UPDATE", 35},  // another key, in order
  };
  const std::vector<UserHistory> want = {
      {1, "A", "X", 10, 15}, {1, "B", "Y", 20, 25}, {1, "C", "Z", 15, 20}, {1, "E", "E", 30, 40},
      {1, "F", "F", 25, 30}, {2, "P", "Q", 35, {}}, {2, "R", "S", 10, 35}};
  fl::CdcOptions one_pass;
  one_pass.tuning.scd2_one_pass_min_keys = 0;  // however few keys
  std::vector<fl::BatchStats> stats;
  for (const fl::CdcOptions& settings : {fl::CdcOptions{}, one_pass}) {
    fl::StreamingTable<UserHistory, Storage> t{"h"};
    Scd2Flow flow{"mixed_batch", settings};
    flow.apply(t, std::vector<Change>{{1, "A", "X", "INSERT", 10}, {2, "R", "S", "INSERT", 10}});
    stats.push_back(flow.apply(t, batch));
    CHECK(t.sorted_rows() == want);
    CHECK(stats.back().tied_rows == 1);
    CHECK(stats.back().input_rows == batch.size());
  }
  CHECK(stats[0] == stats[1]);
  // R-CDC-1: one change per batch gives the same table.
  fl::StreamingTable<UserHistory, Storage> t{"h"};
  Scd2Flow flow{"mixed_batch", one_pass};
  flow.apply(t, std::vector<Change>{{1, "A", "X", "INSERT", 10}, {2, "R", "S", "INSERT", 10}});
  for (const Change& c : batch) flow.apply(t, std::vector<Change>{c});
  CHECK(t.sorted_rows() == want);
}

TEST_CASE_TEMPLATE(
    "R-CDC-4: SCD2 identical tracked values open no version; untracked update in place", Storage,
    FLOWTEST_STORAGE_POLICIES) {
  fl::StreamingTable<UserHistory, Storage> t{"h"};
  Scd2NoCityFlow flow;
  const auto apply = [&](Change c) { flow.apply(t, std::vector<Change>{std::move(c)}); };
  apply({1, "A", "X", "INSERT", 1});
  apply({1, "A", "X", "UPDATE", 2});  // identical
  CHECK(t.sorted_rows() == std::vector<UserHistory>{{1, "A", "X", 1, {}}});
  apply({1, "A", "Y", "UPDATE", 3});  // untracked city
  CHECK(t.sorted_rows() == std::vector<UserHistory>{{1, "A", "Y", 1, {}}});
  apply({1, "B", "Y", "UPDATE", 4});  // tracked name
  CHECK(t.sorted_rows() == std::vector<UserHistory>{{1, "A", "Y", 1, 4}, {1, "B", "Y", 4, {}}});
  // A delete, then the same values again: a new version (the key was closed).
  flow.apply(t, std::vector<Change>{{1, {}, {}, "DELETE", 5}, {1, "B", "Y", "INSERT", 6}});
  CHECK(t.sorted_rows() == std::vector<UserHistory>{
                               {1, "A", "Y", 1, 4}, {1, "B", "Y", 4, 5}, {1, "B", "Y", 6, {}}});
  Scd2Flow all;  // every column tracked: identical consecutive rows still open nothing
  fl::StreamingTable<UserHistory, Storage> t2{"h2"};
  all.apply(t2, std::vector<Change>{{1, "A", "X", "INSERT", 1}, {1, "A", "X", "UPDATE", 2},
                                    {1, "A", "X", "UPDATE", 3}});
  CHECK(t2.sorted_rows() == std::vector<UserHistory>{{1, "A", "X", 1, {}}});
}

TEST_CASE_TEMPLATE(
    "R-CDC-2: a delete leaves a tombstone; an older change does not resurrect the key", Storage,
    FLOWTEST_STORAGE_POLICIES) {
  fl::StreamingTable<User, Storage> t{"u"};
  Scd1Flow flow;
  flow.apply(t, std::vector<Change>{{1, "A", "X", "INSERT", 1}});
  const auto d = flow.apply(t, std::vector<Change>{{1, {}, {}, "DELETE", 5}});
  CHECK(d.deleted_rows == 1);
  CHECK(t.empty());
  CHECK(flow.tombstone_count() == 1);
  const auto late = flow.apply(t, std::vector<Change>{{1, "A", "Y", "UPDATE", 3}});
  CHECK(late.ignored_late_rows == 1);
  CHECK(late.upserted_rows == 0);
  CHECK(t.empty());
  flow.apply(t, std::vector<Change>{{1, "A", "Z", "UPDATE", 7}});  // newer: back
  CHECK(t.sorted_rows() == std::vector<User>{{1, "A", "Z"}});
  CHECK(flow.tombstone_count() == 0);
  // A delete of a key never seen is remembered too.
  flow.apply(t, std::vector<Change>{{2, {}, {}, "DELETE", 9}});
  flow.apply(t, std::vector<Change>{{2, "B", "X", "INSERT", 8}});
  CHECK(t.size() == 1);
}

TEST_CASE_TEMPLATE("R-CDC-2: tombstone GC on the injected clock; an older change then resurrects",
                   Storage, FLOWTEST_STORAGE_POLICIES) {
  using namespace std::chrono_literals;
  fl::cdc_clock::time_point now{};
  fl::CdcOptions settings;
  settings.tombstone_gc_threshold = 10s;
  settings.clock = [&now] { return now; };
  Scd1Flow flow{"users_cdc", settings};
  fl::StreamingTable<User, Storage> t{"u"};
  flow.apply(t, std::vector<Change>{{1, "A", "X", "INSERT", 1}, {1, {}, {}, "DELETE", 5}});
  CHECK(flow.tombstone_count() == 1);
  now += 9s;  // not yet: the tombstone holds
  flow.apply(t, std::vector<Change>{{1, "A", "Y", "UPDATE", 3}});
  CHECK(t.empty());
  CHECK(flow.tombstone_count() == 1);
  now += 1s;  // threshold reached: collected at this batch
  flow.apply(t, std::vector<Change>{{2, "B", "Z", "INSERT", 1}});
  CHECK(flow.tombstone_count() == 0);
  CHECK(flow.key_count() == 1);
  // Documented caveat: a change older than the collected delete resurrects the key.
  flow.apply(t, std::vector<Change>{{1, "A", "Y", "UPDATE", 3}});
  CHECK(t.sorted_rows() == std::vector<User>{{1, "A", "Y"}, {2, "B", "Z"}});

  SUBCASE("an expired tombstone does not stop a change arriving in the same batch") {
    flow.apply(t, std::vector<Change>{{3, {}, {}, "DELETE", 5}});
    now += 20s;
    flow.apply(t, std::vector<Change>{{3, "C", "W", "INSERT", 2}});
    CHECK(t.size() == 3);
  }
  SUBCASE("a tombstone renewed by a later delete lives on") {
    flow.apply(t, std::vector<Change>{{4, {}, {}, "DELETE", 5}});
    now += 5s;
    flow.apply(t, std::vector<Change>{{4, {}, {}, "DELETE", 6}});
    now += 6s;  // 11s after the first delete, 6s after the second
    flow.apply(t, std::vector<Change>{{4, "D", "V", "INSERT", 4}});
    CHECK(t.size() == 2);
    CHECK(flow.tombstone_count() == 1);
  }
}

// The one pass looks keys up a few changes ahead. When a new key makes the
// index grow, the entries it moves must be looked up again: an update right
// after the insert that grew the index would otherwise be applied to the old
// array, and its sequence lost (a later, older change would then win). The
// key counts sweep the points where the index grows, whatever its growth
// policy; every batch of new keys here grows it once.
TEST_CASE_TEMPLATE("R-CDC-2 R-CDC-4: updates right after new keys that make the key index grow",
                   Storage, FLOWTEST_STORAGE_POLICIES) {
  for (std::int64_t n = 40; n <= 1100; n += 27) {
    CAPTURE(n);
    std::vector<Change> initial, grow, late;
    std::vector<User> want;
    for (std::int64_t k = 0; k < n; ++k) {
      initial.push_back({k, "A", "X", "INSERT", 1});
      grow.push_back({n + k, "N", "Y", "INSERT", 2});  // a new key, then an update
      grow.push_back({k, "U", "Z", "UPDATE", 10});
      late.push_back({k, "L", "W", "UPDATE", 5});  // older than the update: ignored
      want.push_back({n + k, "N", "Y"});
      want.push_back({k, "U", "Z"});
    }
    std::sort(want.begin(), want.end(),
              [](const User& a, const User& b) { return a.userId < b.userId; });

    Scd1Flow flow{"users_cdc"};
    fl::StreamingTable<User, Storage> t{"u"};
    flow.apply(t, initial);
    CHECK(flow.apply(t, grow).upserted_rows == static_cast<std::uint64_t>(2 * n));
    CHECK(flow.apply(t, late).ignored_late_rows == static_cast<std::uint64_t>(n));
    CHECK(t.sorted_rows() == want);

    // SCD2: the one pass against the planned path (which reserves first).
    fl::CdcOptions one, planned;
    one.tuning.scd2_one_pass_min_keys = 0;
    planned.tuning.scd2_one_pass_min_keys = std::numeric_limits<std::size_t>::max();
    Scd2Flow f1{"users_cdc", one}, f2{"users_cdc", planned};
    fl::StreamingTable<UserHistory, Storage> t1{"h1"}, t2{"h2"};
    for (const auto* b : {&initial, &grow, &late}) {
      const fl::BatchStats s1 = f1.apply(t1, *b), s2 = f2.apply(t2, *b);
      CHECK(s1.upserted_rows == s2.upserted_rows);
    }
    CHECK(t1.size() == static_cast<std::size_t>(4 * n));  // key k: [1,5) [5,10) [10,-); n + k: one
    CHECK(t1.sorted_rows() == t2.sorted_rows());
  }
}

TEST_CASE_TEMPLATE(
    "R-CDC-3: truncate keeps rows at or above its sequence, and applies in order within a batch",
    Storage, FLOWTEST_STORAGE_POLICIES) {
  fl::StreamingTable<User, Storage> t{"u"};
  Scd1Flow flow;
  const auto s = flow.apply(t, std::vector<Change>{{1, "A", "X", "INSERT", 1},
                                                   {0, {}, {}, "TRUNCATE", 4},
                                                   {2, "B", "Y", "INSERT", 4},
                                                   {3, "C", "Z", "INSERT", 5},
                                                   {4, {}, {}, "DELETE", 2}});
  CHECK(t.sorted_rows() == std::vector<User>{{2, "B", "Y"}, {3, "C", "Z"}});
  CHECK(s.ignored_late_rows == 2);  // 1@1 and the delete of 4@2 are below the truncate
  CHECK(flow.truncate_floor() == std::optional<std::int64_t>(4));
  // A lower truncate later changes nothing.
  const auto s2 = flow.apply(t, std::vector<Change>{{0, {}, {}, "TRUNCATE", 2}});
  CHECK(s2.truncated_rows == 0);
  CHECK(t.size() == 2);
}

TEST_CASE_TEMPLATE("R-CDC-5: a null sequence fails the batch and changes nothing", Storage,
                   FLOWTEST_STORAGE_POLICIES) {
  scd_pair<Storage> p;
  p.apply(feed());
  const std::vector<Change> bad{{124, "Raul", "Puebla", "UPDATE", 9},
                                {127, "Ana", "Leon", "INSERT", std::nullopt}};
  const fl::error e = flowtest::error_of([&] { p.f1.apply(p.t, bad); });
  CHECK(e.code() == fl::errc::null_sequence);
  CHECK(e.flow() == "users_cdc");
  CHECK(e.column() == "sequenceNum");
  CHECK(e.key() == "userId=127");
  p.template check_refused<fl::error>(bad);
}

TEST_CASE_TEMPLATE("R-CDC-5: ties: the later change in source order wins and is counted", Storage,
                   FLOWTEST_STORAGE_POLICIES) {
  fl::StreamingTable<User, Storage> t{"u"};
  Scd1Flow flow;
  const auto s = flow.apply(t, std::vector<Change>{{1, "A", "X", "INSERT", 1},
                                                   {1, "A", "Y", "UPDATE", 1},
                                                   {2, "B", "X", "INSERT", 1}});
  CHECK(t.sorted_rows() == std::vector<User>{{1, "A", "Y"}, {2, "B", "X"}});
  CHECK(s.tied_rows == 1);
  CHECK(s.upserted_rows == 2);
  // Across batches: the later batch is later in source order.
  const auto s2 = flow.apply(t, std::vector<Change>{{1, "A", "Z", "UPDATE", 1}});
  CHECK(s2.tied_rows == 1);
  CHECK(t.sorted_rows() == std::vector<User>{{1, "A", "Z"}, {2, "B", "X"}});

  fl::StreamingTable<UserHistory, Storage> h{"h"};
  Scd2Flow f2;
  const auto s3 = f2.apply(h, std::vector<Change>{{1, "A", "X", "INSERT", 1},
                                                  {1, "A", "Y", "UPDATE", 2},
                                                  {1, "A", "Q", "UPDATE", 2}});
  CHECK(s3.tied_rows == 1);
  CHECK(h.sorted_rows() == std::vector<UserHistory>{{1, "A", "Q", 2, {}}, {1, "A", "X", 1, 2}});
  const auto s4 = f2.apply(h, std::vector<Change>{{1, "A", "R", "UPDATE", 1}});  // replaces 1
  CHECK(s4.tied_rows == 1);
  CHECK(h.sorted_rows() == std::vector<UserHistory>{{1, "A", "Q", 2, {}}, {1, "A", "R", 1, 2}});
}

// The users example's flows with strict_sequence (R-CDC-5).
using Strict1 = fl::AutoCdc<UserKey, UserSeq, fl::Scd1, fl::apply_as_deletes<IsDelete>, NotStored,
                            fl::strict_sequence>;
using Strict2 = fl::AutoCdc<UserKey, UserSeq, fl::Scd2<>, fl::apply_as_deletes<IsDelete>, NotStored,
                            fl::strict_sequence>;

TEST_CASE_TEMPLATE("R-CDC-5: strict_sequence makes a tie an error (a redelivery is not one)",
                   Storage, FLOWTEST_STORAGE_POLICIES) {
  scd_pair<Storage, Strict1, Strict2> p;
  p.apply(feed());
  const std::vector<Change> tie{{124, "Raul", "Puebla", "UPDATE", 8},
                                {124, "Raul", "Leon", "UPDATE", 8}};
  for (const fl::error& e : {flowtest::error_of([&] { p.f1.apply(p.t, tie); }),
                             flowtest::error_of([&] { p.f2.apply(p.h, tie); })}) {
    CHECK(e.code() == fl::errc::tied_sequence);
    CHECK(e.key() == "userId=124");
  }
  // A tie with a stored change; redelivering the same changes is
  // idempotent, not an error (R-CDC-1).
  p.template check_refused<fl::error>({{124, "Raul", "Leon", "UPDATE", 1}});
}

TEST_CASE_TEMPLATE("R-CDC-6: ignore_null_updates keeps stored values; without it nulls overwrite",
                   Storage, FLOWTEST_STORAGE_POLICIES) {
  const std::vector<Change> first{{1, "A", "X", "INSERT", 1}};
  const std::vector<Change> update{{1, std::nullopt, "Y", "UPDATE", 2}};
  // The rows flow F leaves after `first`, then `then`.
  const auto after_first = [&]<class F>(std::type_identity<F>, const std::vector<Change>& then) {
    fl::StreamingTable<User, Storage> t{"u"};
    F flow;
    flow.apply(t, first);
    flow.apply(t, then);
    return t.sorted_rows();
  };
  const std::vector<Change> both_null{{1, std::nullopt, std::nullopt, "UPDATE", 2}};
  SUBCASE("without it") {
    CHECK(after_first(std::type_identity<Scd1Flow>{}, update) == std::vector<User>{{1, std::nullopt, "Y"}});
  }
  SUBCASE("for every column") {
    fl::StreamingTable<User, Storage> t{"u"};
    Ign1 flow;
    flow.apply(t, first);
    flow.apply(t, update);
    CHECK(t.sorted_rows() == std::vector<User>{{1, "A", "Y"}});
    flow.apply(t, std::vector<Change>{{1, "B", std::nullopt, "UPDATE", 3}});
    CHECK(t.sorted_rows() == std::vector<User>{{1, "B", "Y"}});
    // After a delete nothing is kept: a null stays null.
    flow.apply(t,
               std::vector<Change>{{1, {}, {}, "DELETE", 4}, {1, std::nullopt, "Z", "INSERT", 5}});
    CHECK(t.sorted_rows() == std::vector<User>{{1, std::nullopt, "Z"}});
  }
  SUBCASE("for a list of columns, or all columns but a list") {
    using Only = fl::AutoCdc<UserKey, UserSeq, fl::Scd1, NotStored, fl::ignore_null_updates_column_list<"name">>;
    using AllBut =
        fl::AutoCdc<UserKey, UserSeq, fl::Scd1, NotStored, fl::ignore_null_updates_except_column_list<"name">>;
    CHECK(after_first(std::type_identity<Only>{}, both_null) == std::vector<User>{{1, "A", std::nullopt}});
    CHECK(after_first(std::type_identity<AllBut>{}, both_null) == std::vector<User>{{1, std::nullopt, "X"}});
  }
  SUBCASE("order-independent: a late change fills a column a newer null kept") {
    fl::StreamingTable<User, Storage> t{"u"};
    Ign1 flow;
    flow.apply(t, std::vector<Change>{{1, std::nullopt, "Y", "UPDATE", 5}});
    const auto s = flow.apply(t, std::vector<Change>{{1, "A", "X", "INSERT", 3}});
    CHECK(t.sorted_rows() == std::vector<User>{{1, "A", "Y"}});  // as if applied 3 then 5
    CHECK(s.upserted_rows == 1);
    // A late delete between them clears what came before it.
    flow.apply(t, std::vector<Change>{{1, {}, {}, "DELETE", 4}});
    CHECK(t.sorted_rows() == std::vector<User>{{1, std::nullopt, "Y"}});
  }
  SUBCASE("SCD2") {
    fl::StreamingTable<UserHistory, Storage> h{"h"};
    Ign2 flow;
    flow.apply(h, first);
    flow.apply(h, update);
    CHECK(h.sorted_rows() == std::vector<UserHistory>{{1, "A", "X", 1, 2}, {1, "A", "Y", 2, {}}});
    flow.apply(h, std::vector<Change>{{1, std::nullopt, std::nullopt, "UPDATE", 3}});  // no change
    CHECK(h.size() == 2);
  }
}

namespace opt {

// A composite, nullable key; a struct sequence; deletes and truncates with state.
struct Event {
  std::string region;
  std::optional<std::int64_t> device;
  std::int64_t ts;
  std::int64_t tiebreak;
  std::string payload;
  std::string kind;
};
FLOWLIB_SCHEMA(Event, region, device, ts, tiebreak, payload, kind);

struct Current {
  std::string region;
  std::optional<std::int64_t> device;
  std::string payload;
  friend bool operator==(const Current&, const Current&) = default;
};
FLOWLIB_SCHEMA(Current, region, device, payload);

struct History {
  std::string region;
  std::optional<std::int64_t> device;
  std::string payload;
  std::tuple<std::int64_t, std::int64_t> from;
  std::optional<std::tuple<std::int64_t, std::int64_t>> to;
  friend bool operator==(const History&, const History&) = default;
};
FLOWLIB_SCHEMA(History, region, device, payload, (from, "__START_AT"), (to, "__END_AT"));

struct KindIs {
  std::string value;
  bool operator()(const Event& e) const { return e.kind == value; }
};

using EKey = fl::Key<&Event::region, &Event::device>;
using ESeq = fl::Seq<&Event::ts, &Event::tiebreak>;

}  // namespace opt

TEST_CASE_TEMPLATE("R-CDC-2 R-CDC-3 R-CDC-5: composite nullable keys, struct sequence, predicates with state",
                   Storage, FLOWTEST_STORAGE_POLICIES) {
  using namespace opt;
  using F =
      fl::AutoCdc<EKey, ESeq, fl::Scd1, fl::apply_as_deletes<KindIs>,
                  fl::apply_as_truncates<KindIs>, fl::column_list<"region", "device", "payload">>;
  F flow{"events", fl::CdcOptions{}, fl::apply_as_deletes<KindIs>{{"gone"}},
         fl::apply_as_truncates<KindIs>{{"wipe"}},
         fl::column_list<"region", "device", "payload">{}};
  fl::StreamingTable<Current, Storage> t{"current"};
  flow.apply(t, std::vector<Event>{{"eu", 1, 10, 0, "a", "up"},
                                   {"eu", std::nullopt, 10, 0, "b", "up"},
                                   {"eu", std::nullopt, 10, 1, "c", "up"},  // tiebreak wins
                                   {"us", 1, 5, 0, "d", "up"}});
  CHECK(t.sorted_rows() ==
        std::vector<Current>{{"eu", std::nullopt, "c"}, {"eu", 1, "a"}, {"us", 1, "d"}});
  flow.apply(t, std::vector<Event>{{"eu", 1, 10, 1, "", "gone"}});
  CHECK(t.size() == 2);
  flow.apply(t, std::vector<Event>{{"", std::nullopt, 10, 1, "", "wipe"}});
  CHECK(t.sorted_rows() == std::vector<Current>{{"eu", std::nullopt, "c"}});

  using F2 =
      fl::AutoCdc<EKey, ESeq, fl::Scd2<fl::track_history_column_list<"payload">>,
                  fl::apply_as_deletes<KindIs>, fl::column_list<"region", "device", "payload">>;
  F2 f2{"events2", fl::CdcOptions{}, fl::apply_as_deletes<KindIs>{{"gone"}},
        fl::column_list<"region", "device", "payload">{}};
  fl::StreamingTable<History, Storage> h{"history"};
  f2.apply(h, std::vector<Event>{{"eu", std::nullopt, 10, 2, "x", "up"},
                                 {"eu", std::nullopt, 10, 1, "w", "up"},
                                 {"eu", std::nullopt, 11, 0, "", "gone"}});
  using T2 = std::tuple<std::int64_t, std::int64_t>;
  CHECK(h.sorted_rows() == std::vector<History>{{"eu", std::nullopt, "w", T2{10, 1}, T2{10, 2}},
                                                {"eu", std::nullopt, "x", T2{10, 2}, T2{11, 0}}});
}

TEST_CASE_TEMPLATE("R-CDC-7: metrics, expectations, and one target per flow", Storage,
                   FLOWTEST_STORAGE_POLICIES) {
  fl::StreamingTable<User, Storage> t{"u"};
  Scd1Flow flow{"users_cdc"};
  auto checks = fl::expectations(
      fl::expect_or_drop("known_user", [](const Change& c) { return c.userId != 126; }));
  const auto s = flow.apply(t, feed(), checks);
  CHECK(s.input_rows == 8);
  CHECK(s.dropped_rows == 1);
  CHECK(s.upserted_rows == 6);
  CHECK(t.size() == 2);
  REQUIRE(s.expectation("known_user") != nullptr);
  CHECK(s.expectation("known_user")->failed == 1);

  fl::StreamingTable<User, Storage> other{"other"};
  CHECK_THROWS_AS(flow.apply(other, feed()), fl::error);
  // The table is claimed: another flow cannot write it.
  Scd1Flow second{"second"};
  const fl::error e = flowtest::error_of([&] { second.apply(t, feed()); });
  CHECK(e.code() == fl::errc::invalid_target);
}

TEST_CASE_TEMPLATE("an input range of rvalues is moved from; a container is not", Storage,
                   FLOWTEST_STORAGE_POLICIES) {
  // A container (lvalue elements): copied, left as it was.
  fl::StreamingTable<User, Storage> t{"u"};
  Scd1Flow flow;
  const auto kept = feed();
  flow.apply(t, kept);
  for (std::size_t i = 0; i < kept.size(); ++i) {
    CHECK(kept[i].name == feed()[i].name);
    CHECK(kept[i].operation == feed()[i].operation);
  }
  // A range of rvalues (move iterators): every staged change is moved from;
  // a flow that copied would leave the strings as they were.
  fl::StreamingTable<User, Storage> t2{"u2"};
  Scd1Flow f2;
  auto changes = feed();
  f2.apply(t2, std::ranges::subrange(std::make_move_iterator(changes.begin()),
                                     std::make_move_iterator(changes.end())));
  CHECK(t2.sorted_rows() == scd1_expected);
  for (const Change& c : changes) {
    CAPTURE(c.userId);
    CHECK(c.operation.empty());  // moved-from std::string (libstdc++ and libc++ leave it empty)
  }
  CHECK(changes[0].name == std::optional<std::string>(""));
}

// A delete predicate that throws on one user: a user exception mid-batch.
struct ThrowingDelete {
  std::int64_t poison = -1;
  bool operator()(const Change& c) const {
    if (c.userId == poison) throw std::runtime_error("predicate failed");
    return c.operation == "DELETE";
  }
};

TEST_CASE_TEMPLATE(
    "a user exception mid-batch propagates and changes nothing (SCD1, SCD2)", Storage,
    FLOWTEST_STORAGE_POLICIES) {
  using F1 =
      fl::AutoCdc<UserKey, UserSeq, fl::Scd1, fl::apply_as_deletes<ThrowingDelete>, NotStored>;
  using F2 =
      fl::AutoCdc<UserKey, UserSeq, fl::Scd2<>, fl::apply_as_deletes<ThrowingDelete>, NotStored>;
  scd_pair<Storage, F1, F2> p{F1{"f1", fl::CdcOptions{}, fl::apply_as_deletes<ThrowingDelete>{{999}}, NotStored{}},
                              F2{"f2", fl::CdcOptions{}, fl::apply_as_deletes<ThrowingDelete>{{999}}, NotStored{}}};
  p.apply(feed());
  p.template check_refused<std::runtime_error>({{124, "Raul", "Puebla", "UPDATE", 9},
                                                {125, "Mercedes", "Leon", "UPDATE", 3},  // late for SCD2
                                                {999, "X", "Y", "INSERT", 10}});
}

TEST_CASE_TEMPLATE(
    "AUTO CDC ONCE: one batch is applied, later ones are skipped until reset (SCD1, "
    "SCD2)",
    Storage, FLOWTEST_STORAGE_POLICIES) {
  using Once1 = fl::AutoCdc<UserKey, UserSeq, fl::Scd1, fl::Once, fl::apply_as_deletes<IsDelete>,
                            NotStored>;
  using Once2 = fl::AutoCdc<UserKey, UserSeq, fl::Scd2<>, fl::apply_as_deletes<IsDelete>,
                            NotStored, fl::Once>;
  static_assert(Once1::once && Once2::once && !Scd1Flow::once);
  scd_pair<Storage, Once1, Once2> p{Once1{"backfill"}, Once2{"backfill_history"}};
  auto& [t, h, f1, f2] = p;
  const std::vector<Change> later{{124, "Raul", "Puebla", "UPDATE", 9}};

  // A failed first run does not count: the flow still runs.
  const std::vector<Change> bad{{127, "Ana", "Leon", "INSERT", std::nullopt}};
  CHECK_THROWS_AS(f1.apply(t, bad), fl::error);
  CHECK_THROWS_AS(f2.apply(h, bad), fl::error);
  CHECK_FALSE(f1.done());
  CHECK_FALSE(f2.done());

  const auto [s1, s2] = p.apply(feed());
  CHECK_FALSE(s1.skipped);
  CHECK(s1.input_rows == feed().size());
  CHECK(s2.input_rows == feed().size());
  CHECK(f1.done());
  CHECK(f2.done());
  p.check_feed();

  // Later batches are not read.
  const auto [again1, again2] = p.apply(later);
  CHECK(again1.skipped);
  CHECK(again2.skipped);
  CHECK(again1.input_rows == 0);
  CHECK(again1.upserted_rows == 0);
  p.check_feed();

  // After reset() (a full refresh) the flow runs again; restore() sets the
  // marker from a checkpoint.
  f1.reset();
  CHECK_FALSE(f1.done());
  CHECK(f1.apply(t, later).upserted_rows == 1);
  CHECK(t.sorted_rows() == std::vector<User>{{124, "Raul", "Puebla"},
                                             {125, "Mercedes", "Guadalajara"},
                                             {126, "Lily", "Cancun"}});
  f2.restore(false);
  CHECK(f2.apply(h, later).upserted_rows == 1);
  CHECK(f2.done());
  f1.restore(true);
  CHECK(f1.apply(t, feed()).skipped);
}

namespace dated_cdc {
struct Change {
  std::chrono::year_month_day day;
  std::optional<std::string> note;
  std::string operation;
  std::int64_t seq;
};
FLOWLIB_SCHEMA(Change, day, note, operation, seq);
struct Day {
  std::chrono::year_month_day day;
  std::optional<std::string> note;
  friend auto operator<=>(const Day&, const Day&) = default;
};
FLOWLIB_SCHEMA(Day, day, note);
struct IsDelete {
  bool operator()(const Change& c) const { return c.operation == "DELETE"; }
};
}  // namespace dated_cdc

TEST_CASE_TEMPLATE("R-CDC-2: a calendar date is a key column", Storage, FLOWTEST_STORAGE_POLICIES) {
  using namespace std::chrono;
  using dated_cdc::Change;
  using dated_cdc::Day;
  using Flow = fl::AutoCdc<fl::Key<&Change::day>, fl::Seq<&Change::seq>, fl::Scd1,
                           fl::apply_as_deletes<dated_cdc::IsDelete>,
                           fl::except_column_list<"operation", "seq">>;
  const year_month_day a = 2026y / December / 1;
  const year_month_day b = 2026y / December / 2;
  fl::StreamingTable<Day, Storage> t{"days"};
  Flow flow{"days_cdc"};
  flow.apply(t, std::vector<Change>{{a, "open", "INSERT", 1}, {b, "open", "INSERT", 1}});
  flow.apply(t, std::vector<Change>{{a, "closed", "UPDATE", 3}, {b, std::nullopt, "DELETE", 2},
                                    {a, "late", "UPDATE", 2}});
  CHECK(t.sorted_rows() == std::vector<Day>{{a, "closed"}});
  CHECK(flow.tombstone_count() == 1);
}

namespace fragile_cdc {
// A value whose copy throws once a shared countdown reaches zero: a column
// whose assignment fails part way through a batch (as an allocation can).
struct Fragile {
  static inline int copies_left = -1;  // below zero: never throws
  int v = 0;
  Fragile() = default;
  explicit Fragile(int x) : v(x) {}
  Fragile(const Fragile& o) : v(o.v) { tick(); }
  Fragile& operator=(const Fragile& o) {
    tick();
    v = o.v;
    return *this;
  }
  Fragile(Fragile&&) noexcept = default;
  Fragile& operator=(Fragile&&) noexcept = default;
  friend auto operator<=>(const Fragile&, const Fragile&) = default;
  static void tick() {
    if (copies_left >= 0 && copies_left-- == 0) throw std::runtime_error("copy failed");
  }
};
struct Change {
  std::int64_t key;
  std::optional<std::string> note;
  Fragile value;  // after `note`: a failing row write has already changed `note`
  bool del;
  std::int64_t seq;
};
FLOWLIB_SCHEMA(Change, key, note, value, del, seq);
struct Row {
  std::int64_t key;
  std::optional<std::string> note;
  Fragile value;
  friend auto operator<=>(const Row&, const Row&) = default;
};
FLOWLIB_SCHEMA(Row, key, note, value);
struct IsDelete {
  bool operator()(const Change& c) const { return c.del; }
};
}  // namespace fragile_cdc

TEST_CASE_TEMPLATE("a row write failing anywhere in a batch changes nothing (SCD1)",
                   Storage, FLOWTEST_STORAGE_POLICIES) {
  using fragile_cdc::Change;
  using fragile_cdc::Fragile;
  using fragile_cdc::Row;
  using Flow = fl::AutoCdc<fl::Key<&Change::key>, fl::Seq<&Change::seq>, fl::Scd1,
                           fl::apply_as_deletes<fragile_cdc::IsDelete>,
                           fl::except_column_list<"del", "seq">>;
  const auto F = [](int v) { return Fragile{v}; };
  fl::StreamingTable<Row, Storage> t{"t"};
  Flow flow{"fragile_cdc"};
  flow.apply(t, std::vector<Change>{{1, "a", F(1), false, 1},
                                    {2, "b", F(2), false, 1},
                                    {3, "c", F(3), false, 1},
                                    {4, "d", F(4), false, 1}});
  // Keys changed several times (a key's later upserts are written once the
  // whole batch has passed), a delete and re-insert of a stored key, a new
  // key, and a late change.
  const std::vector<Change> batch{
      {1, "a5", F(15), false, 5}, {2, "b5", F(25), false, 5}, {1, "a6", F(16), false, 6},
      {3, std::nullopt, F(0), true, 5}, {1, "a7", F(17), false, 7}, {3, "c6", F(36), false, 6},
      {5, "e2", F(52), false, 2}, {3, "c7", F(37), false, 7}, {5, "e3", F(53), false, 3},
      {2, "b4", F(24), false, 4}, {1, "a8", F(18), false, 8}};
  const std::vector<Row> before = t.sorted_rows();
  int fail_at = 0;
  for (;; ++fail_at) {
    INFO("the copy that fails: " << fail_at);
    Fragile::copies_left = fail_at;
    bool failed = false;
    try {
      flow.apply(t, batch);
    } catch (const std::runtime_error& e) {
      failed = true;
      CHECK(std::string(e.what()) == "copy failed");
    }
    Fragile::copies_left = -1;
    if (!failed) break;
    REQUIRE(t.sorted_rows() == before);
    REQUIRE(flow.key_count() == 4);
    REQUIRE(flow.tombstone_count() == 0);
  }
  // Six copies: keys 1 and 5 (a new key) are written in the pass and again
  // after it, key 2 in the pass only, key 3 (deleted, then upserted twice)
  // after it only; failing at the fourth to sixth hits the writes after it.
  CHECK(fail_at >= 6);
  CHECK(t.sorted_rows() == std::vector<Row>{{1, "a8", F(18)},
                                            {2, "b5", F(25)},
                                            {3, "c7", F(37)},
                                            {4, "d", F(4)},
                                            {5, "e3", F(53)}});
}

TEST_CASE(
    "the search from the back that places a late change agrees with std::upper_bound and "
    "std::lower_bound") {
  std::mt19937 rng(4242);
  const auto less = [](int a, int b) { return a < b; };
  using fl::detail::partition_point_from_back;
  for (int n = 0; n < 2000; ++n) {
    std::vector<int> v(static_cast<std::size_t>(std::uniform_int_distribution<int>(0, 40)(rng)));
    for (int& x : v) x = std::uniform_int_distribution<int>(0, 20)(rng);  // with duplicates
    std::sort(v.begin(), v.end());
    for (int value = -1; value <= 21; ++value) {
      INFO("case " << n << ", value " << value);
      REQUIRE(partition_point_from_back(v.begin(), v.end(), [&](int x) { return !(value < x); }) ==
              std::upper_bound(v.begin(), v.end(), value, less));
      REQUIRE(partition_point_from_back(v.begin(), v.end(), [&](int x) { return x < value; }) ==
              std::lower_bound(v.begin(), v.end(), value, less));
    }
  }
}

namespace counting {
/// The memory store, counting the rows it writes whole (insert, assign)
/// and erases: what a flow rewrote, whatever the rows' values.
template <class Row>
class counting_row_store : public fl::detail::memory_row_store<Row> {
  using base = fl::detail::memory_row_store<Row>;

 public:
  static inline std::size_t writes = 0;
  fl::row_id insert(Row&& r) noexcept {
    ++writes;
    return base::insert(std::move(r));
  }
  void assign(fl::row_id id, Row&& r) noexcept {
    ++writes;
    base::assign(id, std::move(r));
  }
  void erase(fl::row_id id) noexcept {
    ++writes;
    base::erase(id);
  }
};
struct CountingStorage {
  template <class Row>
  using store = counting_row_store<Row>;
};

/// Key 1 with 201 versions: [10, 20), [20, 30), ..., [2000, 2010) named
/// v0..v199, and v200 open from 2010 (applied in order, by the one pass
/// when the flow takes it). Returns the expected table.
template <class Flow, class Table>
std::vector<UserHistory> long_history(Flow& flow, Table& t) {
  std::vector<Change> changes;
  std::vector<UserHistory> want;
  for (std::int64_t i = 0; i < 200; ++i) {
    const std::int64_t s = 10 * (i + 1);
    const std::string name = std::string("v").append(std::to_string(i));
    changes.push_back({1, name, "c", "UPDATE", s});
    want.push_back(
        {1, name, "c", s, i + 1 < 200 ? std::optional<std::int64_t>(s + 10) : std::nullopt});
  }
  flow.apply(t, changes);
  flow.apply(t, std::vector<Change>{{1, "v200", "c", "UPDATE", 2010}});
  want.back().end_at = 2010;
  want.push_back({1, "v200", "c", 2010, std::nullopt});
  return want;
}
inline UserHistory& version_at(std::vector<UserHistory>& want, std::int64_t start) {
  return *std::find_if(want.begin(), want.end(),
                       [&](const UserHistory& r) { return r.start_at == start; });
}
inline std::vector<UserHistory> by_start(std::vector<UserHistory> v) {
  std::sort(v.begin(), v.end(),
            [](const UserHistory& a, const UserHistory& b) { return a.start_at < b.start_at; });
  return v;
}
/// body(one_pass, flow, t, at, check) over long_history(), on the planned
/// path and on the one pass (which sets late changes aside, then plans
/// them): at(start) is the expected version starting there, check()
/// compares the table with the expected one.
template <class Body>
void on_long_history(Body&& body) {
  fl::CdcOptions one_pass;
  one_pass.tuning.scd2_one_pass_min_keys = 0;
  for (const fl::CdcOptions& settings : {fl::CdcOptions{}, one_pass}) {
    const bool is_one_pass = settings.tuning.scd2_one_pass_min_keys == 0;
    CAPTURE(is_one_pass);
    fl::StreamingTable<UserHistory, CountingStorage> t{"h"};
    Scd2Flow flow{"late_in_long_history", settings};
    std::vector<UserHistory> want = long_history(flow, t);
    const auto at = [&](std::int64_t start) -> UserHistory& { return version_at(want, start); };
    const auto check = [&] { CHECK(by_start(t.sorted_rows()) == by_start(want)); };
    body(is_one_pass, flow, t, want, at, check);
  }
}
}  // namespace counting

TEST_CASE("R-CDC-4: a late change rewrites a few versions, however long the history") {
  // Re-deriving a key's history from the version a late change falls in
  // stops where the derivation meets the stored versions again: the later
  // versions stay as they are. Written are the versions the change splits,
  // replaces or adds, and the one before them, from whose state the
  // derivation starts (a key with 200 versions here; before the stop, a
  // late change rewrote every version after it).
  using Store = counting::counting_row_store<UserHistory>;
  counting::on_long_history([](bool, auto& flow, auto& t, auto& want, auto& at, auto& check) {
    const auto late = [&](Change c) {
      Store::writes = 0;
      flow.apply(t, std::vector<Change>{std::move(c)});
      return Store::writes;
    };
    // An upsert inside [1000, 1010): that version ends at 1005, and a new
    // one holds the late values until 1010 (written: [990, 1000), [1000,
    // 1005) and the new one).
    CHECK(late({1, "late", "c", "UPDATE", 1005}) == 3);
    at(1000).end_at = 1005;
    want.push_back({1, "late", "c", 1005, 1010});
    // A delete inside [500, 510): that version ends at 505.
    CHECK(late({1, {}, {}, "DELETE", 505}) == 2);
    at(500).end_at = 505;
    // An upsert inside [300, 310) with the next version's values: that
    // version ends at 305, the next starts there, and its own opening at 310
    // becomes a change the versions do not show.
    CHECK(late({1, "v30", "c", "UPDATE", 305}) == 3);
    at(300).end_at = 305;
    at(310).start_at = 305;
    // An upsert inside [305, 320): the change at 310 opens a version again.
    CHECK(late({1, "x", "c", "UPDATE", 307}) == 4);
    at(305).end_at = 307;
    want.push_back({1, "x", "c", 307, 310});
    want.push_back({1, "v30", "c", 310, 320});
    check();
    // The history after those cuts still places changes everywhere.
    flow.apply(t, std::vector<Change>{{1, "y", "c", "UPDATE", 303},  // late
                                      {1, "end", "c", "UPDATE", 2020}});
    at(300).end_at = 303;
    want.push_back({1, "y", "c", 303, 305});
    at(2010).end_at = 2020;
    want.push_back({1, "end", "c", 2020, std::nullopt});
    check();
  });
}

TEST_CASE("R-CDC-4: several late changes to one key in a batch each rewrite a few versions") {
  // A key's late changes of one batch are placed one stretch at a time: the
  // derivation from the earliest stops where it meets the stored versions
  // again and resumes at the version the next one falls in, so the versions
  // between them stay as they are (before, the derivation ran from the
  // earliest to the last and rewrote every version in between).
  using Store = counting::counting_row_store<UserHistory>;
  counting::on_long_history([](bool one_pass, auto& flow, auto& t, auto& want, auto& at, auto& check) {
    // In source order: late upserts inside [1500, 1510), [100, 110) and
    // [1000, 1010), a late delete inside [600, 610), a change in order, and
    // a late upsert inside [1000, 1010) again, after the first one there.
    const std::vector<Change> batch{{1, "a", "c", "UPDATE", 1505},   {1, "b", "c", "UPDATE", 105},
                                    {1, "d", "c", "UPDATE", 1003},   {1, {}, {}, "DELETE", 605},
                                    {1, "end", "c", "UPDATE", 2020}, {1, "e", "c", "UPDATE", 1007}};
    Store::writes = 0;
    const fl::BatchStats stats = flow.apply(t, batch);
    // Each late upsert writes the version before the one it falls in, that
    // one, and its own; the two in [1000, 1010) share one stretch (the
    // version before, the split one, and their two); the delete writes the
    // version before and the one it ends; the change in order opens a
    // version (the one pass builds it in its slot, which the store does not
    // count). Derived from the earliest late change to the last, this batch
    // wrote 198 rows (146 on the one pass).
    CHECK(Store::writes == 3 + 3 + 4 + 2 + (one_pass ? 0 : 1));
    CHECK(stats.upserted_rows == 5);
    CHECK(stats.deleted_rows == 1);
    at(1500).end_at = 1505;
    want.push_back({1, "a", "c", 1505, 1510});
    at(100).end_at = 105;
    want.push_back({1, "b", "c", 105, 110});
    at(1000).end_at = 1003;
    want.push_back({1, "d", "c", 1003, 1007});
    want.push_back({1, "e", "c", 1007, 1010});
    at(600).end_at = 605;
    at(2010).end_at = 2020;
    want.push_back({1, "end", "c", 2020, std::nullopt});
    check();
    // The same batch again changes nothing (R-CDC-1): every change ties
    // with the one it placed.
    flow.apply(t, batch);
    check();
  });
}

// --- full refresh (R-EXACT-5) -------------------------------------------------------

TEST_CASE_TEMPLATE("R-EXACT-5: SCD1 after a full refresh of its target applies as to a new table",
                   Storage, FLOWTEST_STORAGE_POLICIES) {
  const std::vector<Change> before{{1, "a", "x", "INSERT", 1}, {2, "b", "x", "INSERT", 1},
                                   {4, "d", "x", "DELETE", 9}, {5, "e", "x", "TRUNCATE", 1}};
  const std::vector<Change> after{{1, "c", "y", "UPDATE", 2}, {3, "d", "y", "INSERT", 2},
                                  {4, "e", "y", "INSERT", 3}};
  fl::StreamingTable<User, Storage> users{"users"};
  Scd1Flow flow{"users_cdc"};
  flow.apply(users, before);
  users.full_refresh();
  const fl::BatchStats s = flow.apply(users, after);
  fl::StreamingTable<User, Storage> fresh{"fresh"};
  Scd1Flow fresh_flow{"fresh_cdc"};
  const fl::BatchStats r = fresh_flow.apply(fresh, after);
  CHECK(users.sorted_rows() == std::vector<User>{{1, "c", "y"}, {3, "d", "y"}, {4, "e", "y"}});
  CHECK(users.sorted_rows() == fresh.sorted_rows());
  CHECK(s == r);
  CHECK(flow.key_count() == fresh_flow.key_count());
  CHECK(flow.tombstone_count() == 0);
  CHECK(!flow.truncate_floor().has_value());
  // And again, a second refresh, in one pass this time (the flow maintains the table).
  flow.apply(users, after);
  users.full_refresh();
  flow.apply(users, before);
  flow.apply(users, after);
  fl::StreamingTable<User, Storage> fresh2{"fresh2"};
  Scd1Flow fresh_flow2{"fresh_cdc2"};
  fresh_flow2.apply(fresh2, before);
  fresh_flow2.apply(fresh2, after);
  CHECK(users.sorted_rows() == fresh2.sorted_rows());
}

TEST_CASE_TEMPLATE("R-EXACT-5: SCD2 after a full refresh of its target applies as to a new table",
                   Storage, FLOWTEST_STORAGE_POLICIES) {
  for (const std::size_t min_keys : {std::size_t{0}, std::numeric_limits<std::size_t>::max()}) {
    CAPTURE(min_keys);
    fl::CdcOptions settings;
    settings.tuning.scd2_one_pass_min_keys = min_keys;  // one pass, or planned
    const std::vector<Change> before{{1, "a", "x", "INSERT", 1}, {2, "b", "x", "INSERT", 1},
                                     {1, "a", "z", "UPDATE", 4}};
    const std::vector<Change> after{{1, "c", "y", "UPDATE", 2}, {3, "d", "y", "INSERT", 2}};
    const std::vector<Change> later{{1, "e", "y", "UPDATE", 3}, {3, "d", "y", "DELETE", 5}};
    fl::StreamingTable<UserHistory, Storage> users{"users"};
    Scd2Flow flow{"users_cdc", settings};
    flow.apply(users, before);
    users.full_refresh();
    flow.apply(users, after);
    const fl::BatchStats s = flow.apply(users, later);
    fl::StreamingTable<UserHistory, Storage> fresh{"fresh"};
    Scd2Flow fresh_flow{"fresh_cdc", settings};
    fresh_flow.apply(fresh, after);
    const fl::BatchStats r = fresh_flow.apply(fresh, later);
    CHECK(users.sorted_rows() == std::vector<UserHistory>{{1, "c", "y", 2, 3},
                                                          {1, "e", "y", 3, std::nullopt},
                                                          {3, "d", "y", 2, 5}});
    CHECK(users.sorted_rows() == fresh.sorted_rows());
    CHECK(s == r);
    CHECK(flow.key_count() == fresh_flow.key_count());
  }
}

TEST_CASE_TEMPLATE("R-EXACT-5: a ONCE flow runs again after a full refresh of its target",
                   Storage, FLOWTEST_STORAGE_POLICIES) {
  using OnceFlow = fl::AutoCdc<UserKey, UserSeq, fl::Scd1, fl::apply_as_deletes<IsDelete>,
                               NotStored, fl::Once>;
  const std::vector<Change> backfill{{1, "a", "x", "INSERT", 1}, {2, "b", "x", "INSERT", 1}};
  const std::vector<Change> again{{1, "c", "y", "INSERT", 1}, {3, "d", "y", "INSERT", 1}};
  fl::StreamingTable<User, Storage> users{"users"};
  OnceFlow flow{"backfill"};
  flow.apply(users, backfill);
  CHECK(flow.done());
  CHECK(flow.apply(users, again).skipped);  // ONCE: nothing read
  users.full_refresh();
  const fl::BatchStats s = flow.apply(users, again);
  CHECK(!s.skipped);
  CHECK(flow.done());
  fl::StreamingTable<User, Storage> fresh{"fresh"};
  OnceFlow fresh_flow{"fresh"};
  CHECK(s == fresh_flow.apply(fresh, again));
  CHECK(users.sorted_rows() == std::vector<User>{{1, "c", "y"}, {3, "d", "y"}});
  CHECK(users.sorted_rows() == fresh.sorted_rows());
  // reset() keeps its meaning: the ONCE marker only.
  flow.reset();
  CHECK(!flow.done());
  CHECK(flow.key_count() == 2);
}

// --- a moved flow (R-CDC-7) ----------------------------------------------------------

// A moved flow keeps writing its table (its claim, index and history move with
// it); the moved-from flow, which lost that state, is refused by the table.
template <class Flow, class Table>
void check_moved_flow(const fl::CdcOptions& settings, const std::vector<Change>& first,
                      const std::vector<Change>& second, const std::vector<Change>& third) {
  Table users{"users"};
  Flow flow{"users_cdc", settings};
  flow.apply(users, first);
  Flow moved{std::move(flow)};
  const fl::BatchStats s = moved.apply(users, second);
  Flow assigned{"other", settings};
  assigned = std::move(moved);
  const fl::BatchStats t = assigned.apply(users, third);

  Table fresh{"fresh"};
  Flow fresh_flow{"fresh_cdc", settings};
  fresh_flow.apply(fresh, first);
  CHECK(s == fresh_flow.apply(fresh, second));
  CHECK(t == fresh_flow.apply(fresh, third));
  CHECK(users.sorted_rows() == fresh.sorted_rows());
  CHECK(assigned.key_count() == fresh_flow.key_count());

  const auto rows = users.sorted_rows();
  for (Flow* gone : {&flow, &moved}) {
    const fl::error e = flowtest::error_of([&] { gone->apply(users, third); });
    CHECK(e.code() == fl::errc::invalid_target);
  }
  CHECK(users.sorted_rows() == rows);
}

TEST_CASE_TEMPLATE("a moved AUTO CDC flow keeps writing its table; the moved-from one is refused",
                   Storage, FLOWTEST_STORAGE_POLICIES) {
  const std::vector<Change> first{{1, "a", "x", "INSERT", 1}, {2, "b", "x", "INSERT", 1},
                                  {3, "c", "x", "INSERT", 1}};
  const std::vector<Change> second{{1, "a", "y", "UPDATE", 2}, {2, "b", "x", "DELETE", 3},
                                   {4, "d", "x", "INSERT", 2}};
  const std::vector<Change> third{{1, "e", "y", "UPDATE", 4}, {3, "c", "z", "UPDATE", 0},
                                  {4, "d", "w", "UPDATE", 5}};
  SUBCASE("SCD1") {
    check_moved_flow<Scd1Flow, fl::StreamingTable<User, Storage>>({}, first, second, third);
  }
  SUBCASE("SCD2") {
    for (const std::size_t min_keys : {std::size_t{0}, std::numeric_limits<std::size_t>::max()}) {
      CAPTURE(min_keys);
      fl::CdcOptions settings;
      settings.tuning.scd2_one_pass_min_keys = min_keys;  // one pass, or planned
      check_moved_flow<Scd2Flow, fl::StreamingTable<UserHistory, Storage>>(settings, first,
                                                                          second, third);
    }
  }
}

// --- ties under ignore_null_updates (R-CDC-5) --------------------------------------

TEST_CASE_TEMPLATE(
    "R-CDC-5 R-CDC-6: ignore_null_updates: tied changes apply in source order, SCD1 and SCD2 alike",
    Storage, FLOWTEST_STORAGE_POLICIES) {
  const std::vector<Change> stored{{1, "P", "X", "INSERT", 1}};
  const std::vector<Change> tied{{1, "A", std::nullopt, "UPDATE", 5},
                                 {1, std::nullopt, "Y", "UPDATE", 5}};
  const std::vector<UserHistory> scd2_want{{1, "A", "Y", 5, std::nullopt}, {1, "P", "X", 1, 5}};
  for (const bool one_batch : {true, false}) {
    CAPTURE(one_batch);
    scd_pair<Storage, Ign1, Ign2> p;
    p.apply(stored);
    if (one_batch) {
      const auto [s1, s2] = p.apply(tied);
      CHECK(s1.tied_rows == 1);
      CHECK(s2.tied_rows == 1);
    } else {
      for (const Change& c : tied) p.apply({c});
    }
    CHECK(p.t.sorted_rows() == std::vector<User>{{1, "A", "Y"}});
    CHECK(p.h.sorted_rows() == scd2_want);
    if (one_batch) continue;
    // A late change then re-derives the key's history.
    p.f2.apply(p.h, std::vector<Change>{{1, std::nullopt, "Z", "UPDATE", 3}});
    CHECK(p.h.sorted_rows() == std::vector<UserHistory>{{1, "A", "Y", 5, std::nullopt},
                                                        {1, "P", "X", 1, 3},
                                                        {1, "P", "Z", 3, 5}});
  }
}

namespace tie_delete {

/// SCD2's current versions (null __END_AT) as SCD1 rows.
inline std::vector<User> current(const std::vector<UserHistory>& h) {
  std::vector<User> out;
  for (const UserHistory& v : h) {
    if (!v.end_at) out.push_back({v.userId, v.name, v.city});
  }
  std::sort(out.begin(), out.end(), [](const User& a, const User& b) {
    return std::tie(a.userId, a.name, a.city) < std::tie(b.userId, b.name, b.city);
  });
  return out;
}

/// Replaces `flow` by a new flow restored from a snapshot of its state, over
/// the same table (the old flow is destroyed first, releasing its claim).
template <class Flow, class Table>
void restore_from_snapshot(std::optional<Flow>& flow, Table& table) {
  const std::string blob = flowtest::snapshot_of(*flow);
  flow.reset();
  flow.emplace();
  fl::checkpoint_blobs b;
  b.snapshot = blob;
  flow->read_checkpoint(table, b);
}

}  // namespace tie_delete

TEST_CASE_TEMPLATE(
    "R-CDC-5: ignore_null_updates: a delete inside a tie group resets what later tied upserts "
    "inherit, SCD1 and SCD2 alike (in one batch, split over batches, restored from a checkpoint)",
    Storage, FLOWTEST_STORAGE_POLICIES) {
  using namespace tie_delete;
  // One key, every change at sequence 2, in source order.
  const std::vector<Change> tied{{1, "Bob", std::nullopt, "UPDATE", 2},
                                 {1, "Bob", "X", "UPDATE", 2},
                                 {1, std::nullopt, std::nullopt, "DELETE", 2},
                                 {1, "Bob", std::nullopt, "UPDATE", 2}};
  const std::vector<User> scd1_want{{1, "Bob", std::nullopt}};
  for (const bool prior : {false, true}) {
    // Every cut of the tie group into consecutive batches (bit i: a cut after change i).
    for (unsigned cuts = 0; cuts < 8; ++cuts) {
      for (const bool restore : {false, true}) {
        CAPTURE(prior);
        CAPTURE(cuts);
        CAPTURE(restore);
        fl::StreamingTable<User, Storage> t{"t"};
        fl::StreamingTable<UserHistory, Storage> h{"h"};
        std::optional<Ign1> f1;
        std::optional<Ign2> f2;
        f1.emplace();
        f2.emplace();
        if (prior) {  // a stored version the delete closes: nothing of it may come back
          const std::vector<Change> p{{1, "P", "Z", "INSERT", 1}};
          f1->apply(t, p);
          f2->apply(h, p);
        }
        std::vector<Change> batch;
        for (std::size_t i = 0; i < tied.size(); ++i) {
          batch.push_back(tied[i]);
          if (i + 1 < tied.size() && (cuts & (1u << i)) == 0) continue;
          f1->apply(t, batch);
          f2->apply(h, batch);
          batch.clear();
          if (restore) {
            restore_from_snapshot(f1, t);
            restore_from_snapshot(f2, h);
          }
        }
        CHECK(t.sorted_rows() == scd1_want);
        if (prior) {
          CHECK(h.sorted_rows() == std::vector<UserHistory>{{1, "Bob", std::nullopt, 2, {}},
                                                            {1, "P", "Z", 1, 2}});
        } else {
          CHECK(h.sorted_rows() == std::vector<UserHistory>{{1, "Bob", std::nullopt, 2, {}}});
        }
        CHECK(current(h.sorted_rows()) == t.sorted_rows());
        // A later tied upsert inherits from the one after the delete only.
        const std::vector<Change> more{{1, std::nullopt, std::nullopt, "UPDATE", 2}};
        f1->apply(t, more);
        f2->apply(h, more);
        CHECK(t.sorted_rows() == scd1_want);
        CHECK(current(h.sorted_rows()) == t.sorted_rows());
        // A late change makes SCD2 replay the stored tie: the delete still resets it.
        const std::vector<Change> late{{1, "Q", "W", "UPDATE", 1}};
        f1->apply(t, late);
        f2->apply(h, late);
        CHECK(t.sorted_rows() == scd1_want);
        CHECK(h.sorted_rows() == std::vector<UserHistory>{{1, "Bob", std::nullopt, 2, {}},
                                                          {1, "Q", "W", 1, 2}});
      }
    }
  }
}

// --- null keys (R-CDC-9) ------------------------------------------------------------

namespace null_key {

// A one-column nullable key: an integer (kept in the batch index's slots)
// and a string (compared through the batch's rows).
template <class Id>
struct KeyChange {
  std::optional<Id> id;
  std::optional<std::string> v;
  std::string op;
  std::int64_t seq;
};
template <class Id>
struct KeyRow {
  std::optional<Id> id;
  std::optional<std::string> v;
  friend bool operator==(const KeyRow&, const KeyRow&) = default;
};
template <class Id>
struct KeyHistory {
  std::optional<Id> id;
  std::optional<std::string> v;
  std::int64_t start_at;
  std::optional<std::int64_t> end_at;
  friend bool operator==(const KeyHistory&, const KeyHistory&) = default;
};
FLOWLIB_SCHEMA(KeyChange<std::int64_t>, id, v, op, seq);
FLOWLIB_SCHEMA(KeyRow<std::int64_t>, id, v);
FLOWLIB_SCHEMA(KeyHistory<std::int64_t>, id, v, (start_at, "__START_AT"), (end_at, "__END_AT"));
FLOWLIB_SCHEMA(KeyChange<std::string>, id, v, op, seq);
FLOWLIB_SCHEMA(KeyRow<std::string>, id, v);
FLOWLIB_SCHEMA(KeyHistory<std::string>, id, v, (start_at, "__START_AT"), (end_at, "__END_AT"));
using IntRow = KeyRow<std::int64_t>;
using IntHistory = KeyHistory<std::int64_t>;

struct OpIsDelete {
  template <class C>
  bool operator()(const C& c) const {
    return c.op == "DELETE";
  }
};

/// One feed, SCD1 and SCD2 (both SCD2 engines): `other` is a non-null key.
template <class Storage, class Change, class Row, class History, class Id>
void null_key_matches_null(const Id& other) {
  using KeyP = fl::Key<&Change::id>;
  using SeqP = fl::Seq<&Change::seq>;
  using Sel = fl::except_column_list<"op", "seq">;
  using F1 = fl::AutoCdc<KeyP, SeqP, fl::Scd1, fl::apply_as_deletes<OpIsDelete>, Sel>;
  using F2 = fl::AutoCdc<KeyP, SeqP, fl::Scd2<>, fl::apply_as_deletes<OpIsDelete>, Sel>;
  const Id null{};
  const std::vector<std::vector<Change>> batches{
      {{null, "a", "UPSERT", 1}, {other, "b", "UPSERT", 1}, {null, "c", "UPSERT", 2}},
      {{null, "d", "UPSERT", 3}},
      {{null, {}, "DELETE", 4}},
      {{null, "e", "UPSERT", 3}},  // late: the delete's tombstone (SCD1) keeps it out
      {{null, "f", "UPSERT", 5}}};
  fl::StreamingTable<Row, Storage> t{"t"};
  F1 f1{"null_keys_scd1"};
  std::vector<fl::BatchStats> s1;
  for (const auto& b : batches) s1.push_back(f1.apply(t, b));
  CHECK(t.sorted_rows() == std::vector<Row>{{null, "f"}, {other, "b"}});
  CHECK(f1.key_count() == 2);  // the null key is one key
  CHECK(s1[0].upserted_rows == 3);
  CHECK(s1[2].deleted_rows == 1);
  CHECK(s1[3].ignored_late_rows == 1);

  // The late upsert at 3 ties with the stored one (R-CDC-5) and replaces it.
  const std::vector<History> want{{null, "a", 1, 2}, {null, "c", 2, 3}, {null, "e", 3, 4},
                                  {null, "f", 5, {}}, {other, "b", 1, {}}};
  for (const std::size_t min_keys : {std::size_t{0}, std::numeric_limits<std::size_t>::max()}) {
    CAPTURE(min_keys);
    fl::CdcOptions settings;
    settings.tuning.scd2_one_pass_min_keys = min_keys;  // one pass, or planned
    fl::StreamingTable<History, Storage> h{"h"};
    F2 f2{"null_keys_scd2", settings};
    for (const auto& b : batches) f2.apply(h, b);
    CHECK(h.sorted_rows() == want);
    CHECK(f2.key_count() == 2);
  }
}

}  // namespace null_key

TEST_CASE_TEMPLATE("R-CDC-9: a null key matches a null key, SCD1 and SCD2", Storage,
                   FLOWTEST_STORAGE_POLICIES) {
  using namespace null_key;
  null_key_matches_null<Storage, KeyChange<std::int64_t>, IntRow, IntHistory>(std::optional<std::int64_t>{1});
  null_key_matches_null<Storage, KeyChange<std::string>, KeyRow<std::string>, KeyHistory<std::string>>(
      std::optional<std::string>{"one"});
}

TEST_CASE_TEMPLATE("R-CDC-9 R-CDC-8: a null key matches a null key in AUTO CDC FROM SNAPSHOT",
                   Storage, FLOWTEST_STORAGE_POLICIES) {
  using namespace null_key;
  using Item = IntRow;  // a snapshot row: the key and a value
  using F1 = fl::AutoCdcFromSnapshot<fl::Key<&Item::id>, fl::Scd1>;
  using F2 = fl::AutoCdcFromSnapshot<fl::Key<&Item::id>, fl::Scd2<>>;
  const std::vector<Item> v1{{std::nullopt, "a"}, {1, "b"}};
  const std::vector<Item> v2{{std::nullopt, "c"}, {1, "b"}};
  const std::vector<Item> v3{{1, "b"}};
  fl::StreamingTable<IntRow, Storage> t{"t"};
  fl::StreamingTable<IntHistory, Storage> h{"h"};
  F1 f1{"snap1"};
  F2 f2{"snap2"};
  f1.apply_snapshot(t, v1, 1);
  f2.apply_snapshot(h, v1, 1);
  const fl::BatchStats s1 = f1.apply_snapshot(t, v2, 2);
  f2.apply_snapshot(h, v2, 2);
  CHECK(s1.inserted_rows == 0);  // the null key was there: an update
  CHECK(s1.upserted_rows == 1);
  CHECK(t.sorted_rows() == std::vector<IntRow>{{std::nullopt, "c"}, {1, "b"}});
  CHECK(h.sorted_rows() == std::vector<IntHistory>{{std::nullopt, "a", 1, 2},
                                                   {std::nullopt, "c", 2, {}},
                                                   {1, "b", 1, {}}});
  f1.apply_snapshot(t, v3, 3);
  f2.apply_snapshot(h, v3, 3);
  CHECK(t.sorted_rows() == std::vector<IntRow>{{1, "b"}});
  CHECK(h.sorted_rows() == std::vector<IntHistory>{{std::nullopt, "a", 1, 2},
                                                   {std::nullopt, "c", 2, 3},
                                                   {1, "b", 1, {}}});
  // Two null keys in one snapshot are the same key twice.
  const std::vector<Item> twice{{std::nullopt, "x"}, {std::nullopt, "y"}};
  const fl::error e = flowtest::error_of([&] { f1.apply_snapshot(t, twice, 4); });
  CHECK(e.code() == fl::errc::invalid_argument);
  CHECK(t.sorted_rows() == std::vector<IntRow>{{1, "b"}});
}

// --- a sequence column in an SCD2 target ----------------------------------------------

struct SeqHistory {
  std::int64_t userId;
  ostr name;
  ostr city;
  std::optional<std::int64_t> sequenceNum;  // the change column, as it is
  std::int64_t start_at;
  std::optional<std::int64_t> end_at;
  friend bool operator==(const SeqHistory&, const SeqHistory&) = default;
};
FLOWLIB_SCHEMA(SeqHistory, userId, name, city, sequenceNum, (start_at, "__START_AT"),
               (end_at, "__END_AT"));

TEST_CASE_TEMPLATE(
    "R-CDC-4 R-CDC-5: a std::optional sequence column; selected into an SCD2 target it is "
    "tracked like any other column",
    Storage, FLOWTEST_STORAGE_POLICIES) {
  // Change::sequenceNum is std::optional<std::int64_t>: the flow's sequence,
  // and so __START_AT, is std::int64_t, and __END_AT std::optional of it.
  static_assert(std::is_same_v<Scd2Flow::sequence_type, std::int64_t>);
  using NotOp = fl::except_column_list<"operation">;
  using Tracked = fl::AutoCdc<UserKey, UserSeq, fl::Scd2<>, fl::apply_as_deletes<IsDelete>, NotOp>;
  using Untracked =
      fl::AutoCdc<UserKey, UserSeq, fl::Scd2<fl::track_history_except_column_list<"sequenceNum">>,
                  fl::apply_as_deletes<IsDelete>, NotOp>;
  // The same values three times: only the sequence differs.
  const std::vector<Change> feed{{1, "A", "X", "INSERT", 1},
                                 {1, "A", "X", "UPDATE", 2},
                                 {1, "A", "X", "UPDATE", 3}};
  for (const std::size_t min_keys : {std::size_t{0}, std::numeric_limits<std::size_t>::max()}) {
    CAPTURE(min_keys);
    fl::CdcOptions settings;
    settings.tuning.scd2_one_pass_min_keys = min_keys;
    {  // tracked (the default): every upsert opens a version
      fl::StreamingTable<SeqHistory, Storage> h{"h"};
      Tracked flow{"tracked", settings};
      for (const Change& c : feed) flow.apply(h, std::vector<Change>{c});
      CHECK(h.sorted_rows() == std::vector<SeqHistory>{{1, "A", "X", 1, 1, 2},
                                                       {1, "A", "X", 2, 2, 3},
                                                       {1, "A", "X", 3, 3, {}}});
      // A tie with equal values (a redelivery) opens none.
      flow.apply(h, std::vector<Change>{{1, "A", "X", "UPDATE", 3}});
      CHECK(h.size() == 3);
    }
    {  // left out of the tracked columns: updated in place
      fl::StreamingTable<SeqHistory, Storage> h{"h"};
      Untracked flow{"untracked", settings};
      for (const Change& c : feed) flow.apply(h, std::vector<Change>{c});
      CHECK(h.sorted_rows() == std::vector<SeqHistory>{{1, "A", "X", 3, 1, {}}});
    }
  }
}

TEST_CASE_TEMPLATE(
    "R-CDC-5: strict_sequence: an identical redelivery is counted and changes nothing, SCD1 and "
    "SCD2",
    Storage, FLOWTEST_STORAGE_POLICIES) {
  scd_pair<Storage, Strict1, Strict2> p;
  p.apply(feed());
  // The same change twice in one batch, and once more than stored.
  std::pair<fl::BatchStats, fl::BatchStats> s;
  REQUIRE_NOTHROW(s = p.apply({{126, "Lily", "Cancun", "INSERT", 2}, {126, "Lily", "Cancun", "INSERT", 2}}));
  CHECK(s.first.tied_rows == 2);
  CHECK(s.second.tied_rows == 2);
  p.check_feed();
}

}  // namespace flows_auto_cdc_reference
