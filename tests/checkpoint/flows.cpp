// Flows' checkpoints: write_checkpoint() deltas and snapshots, and
// read_checkpoint() restoring an equivalent flow (REPLACE USING, append and
// append ONCE, AUTO CDC FROM SNAPSHOT SCD1 and SCD2), randomised: a flow
// restored from the blobs written up to batch k, over a table holding the
// same rows, gives the same tables and the same BatchStats as the flow that
// wrote them, batch after batch. Also: a restore on a live flow discards an
// uncommitted batch, the reset flag after a full refresh (R-EXACT-5),
// corrupt blobs, and delta sizes that do not grow with the state.
#include <flowlib/flows/append.hpp>
#include <flowlib/flows/auto_cdc_snapshot.hpp>
#include <flowlib/flows/replace_using.hpp>
#include <flowlib/table.hpp>

#include <support/checkpoint_blobs.hpp>
#include <support/errors.hpp>
#include <support/rows.hpp>
#include <support/storage_policies.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace checkpoint_flows {

namespace fl = flowlib;

struct Event {
  std::int64_t k = 0, seq = 0, v = 0;
  friend bool operator==(const Event&, const Event&) = default;
};
FLOWLIB_SCHEMA(Event, k, seq, v);

using Item = flowtest::Entry;
using ItemHistory = flowtest::EntryHistory;

using Using = fl::ReplaceUsing<fl::Key<&Event::k>, fl::Seq<&Event::seq>>;
using Scd1 = fl::AutoCdcFromSnapshot<fl::Key<&Item::id>>;
using Scd2 = fl::AutoCdcFromSnapshot<fl::Key<&Item::id>, fl::Scd2<>>;

// One step of a run: a batch, and whether the table is fully refreshed first.
template <class Batch>
struct step {
  Batch batch;
  bool refresh = false;
};

using flowtest::write_commit;
using flowtest::written;

// A table holding `from`'s rows, as a restarted program reloads it.
template <class Table>
void copy_rows(const Table& from, Table& to) {
  std::vector<typename Table::row_type> rows;
  for (const auto& r : from.all_rows()) rows.push_back(r);
  to.store().reserve(rows.size());
  for (auto& r : rows) to.store().insert(std::move(r));
}

// The equivalence check (see the file comment). `make` makes a flow, `apply`
// applies one batch, `make_table` makes an empty table (a unique_ptr).
template <class MakeFlow, class MakeTable, class Apply, class Batch>
void check_equivalence(std::uint64_t seed, MakeFlow make, MakeTable make_table, Apply apply,
                       const std::vector<step<Batch>>& steps) {
  std::mt19937_64 rng(seed);
  const auto plan = flowtest::restore_plan::random(rng, steps.size());
  const std::size_t k = plan.k;
  CAPTURE(seed);
  CAPTURE(plan);

  // Step i on two flows and their tables (refreshed first when the step
  // says so): the same BatchStats.
  const auto both = [&](std::size_t i, auto& f1, auto& t1, auto& f2, auto& t2) {
    if (steps[i].refresh) {
      t1.full_refresh();
      t2.full_refresh();
    }
    const auto s1 = apply(f1, t1, steps[i].batch);
    REQUIRE(s1 == apply(f2, t2, steps[i].batch));
  };
  auto ta = make_table();
  auto a = make();
  written wa;
  // The twin: the same first k batches, on another table.
  auto tt = make_table();
  auto twin = make();
  for (std::size_t i = 0; i < k; ++i) {
    both(i, a, *ta, twin, *tt);
    write_commit(a, wa, plan);
  }
  auto tb = make_table();
  copy_rows(*tt, *tb);
  auto b = make();
  b.read_checkpoint(*tb, wa.upto(k));
  REQUIRE(ta->sorted_rows() == tb->sorted_rows());

  // With some probability, a batch B applies and does not commit: the
  // runtime puts the table back and restores the flow from the blobs.
  if (k < steps.size() && rng() % 2 == 0) {
    auto before = make_table();
    copy_rows(*tb, *before);
    apply(b, *tb, steps[k].batch);
    tb->store().clear();
    copy_rows(*before, *tb);
    b.read_checkpoint(*tb, wa.upto(k));
  }

  written wb;
  wb.commits.resize(k);  // B's commits are numbered on from A's
  for (std::size_t i = k; i < steps.size(); ++i) {
    CAPTURE(i);
    both(i, a, *ta, b, *tb);
    REQUIRE(ta->sorted_rows() == tb->sorted_rows());
    write_commit(a, wa, plan);
    write_commit(b, wb, plan);
    // The same state gives the same bytes (but for the reset flag: after a
    // refresh, only a flow that was bound to the table had state to reset).
    if (!steps[i].refresh) REQUIRE(wa.commits.back().delta == wb.commits.back().delta);
    REQUIRE(wa.commits.back().snapshot == wb.commits.back().snapshot);
  }
}

// --- Random inputs -----------------------------------------------------------

std::vector<step<std::vector<Event>>> using_steps(std::mt19937_64& rng) {
  std::vector<step<std::vector<Event>>> steps(5 + rng() % 12);
  for (auto& s : steps) {
    s.refresh = rng() % 10 == 0;
    const std::size_t n = rng() % 12;
    for (std::size_t i = 0; i < n; ++i) {
      s.batch.push_back({static_cast<std::int64_t>(rng() % 15),
                         static_cast<std::int64_t>(rng() % 6),
                         static_cast<std::int64_t>(rng() % 100)});
    }
  }
  return steps;
}

using snapshot_batch = std::pair<std::vector<Item>, std::int64_t>;

std::vector<step<snapshot_batch>> snapshot_steps(std::mt19937_64& rng) {
  std::vector<step<snapshot_batch>> steps(5 + rng() % 12);
  std::int64_t version = 0;
  for (auto& s : steps) {
    s.refresh = rng() % 10 == 0;
    version += 1 + static_cast<std::int64_t>(rng() % 3);
    s.batch.second = version;
    for (std::int64_t id = 0; id < 12; ++id) {
      if (rng() % 3 == 0) continue;
      // append, not "a" + std::string: g++ 12 warns falsely about the latter (-Wrestrict)
      s.batch.first.push_back({id, std::string("a").append(std::to_string(rng() % 3)),
                               std::string("b").append(std::to_string(rng() % 3))});
    }
  }
  return steps;
}

TEST_CASE_TEMPLATE("R-USING-2: a REPLACE USING flow restored from its blobs behaves as the one "
                   "that wrote them",
                   Storage, FLOWTEST_STORAGE_POLICIES) {
  for (std::uint64_t seed = 1; seed <= 150; ++seed) {
    std::mt19937_64 rng(seed);
    check_equivalence(
        seed, [] { return Using{"events_flow"}; },
        [] { return std::make_unique<fl::StreamingTable<Event, Storage>>("events"); },
        [](Using& f, auto& t, const std::vector<Event>& b) { return f.apply(t, b); },
        using_steps(rng));
  }
}

TEST_CASE_TEMPLATE("R-TABLE-2: append and append ONCE flows restored from their blobs behave as "
                   "the ones that wrote them",
                   Storage, FLOWTEST_STORAGE_POLICIES) {
  for (std::uint64_t seed = 1; seed <= 100; ++seed) {
    std::mt19937_64 rng(seed);
    const auto steps = using_steps(rng);
    const auto table = [] { return std::make_unique<fl::ManagedTable<Event, Storage>>("events"); };
    const auto apply = [](auto& f, auto& t, const std::vector<Event>& b) {
      return static_cast<fl::BatchStats>(f.apply(t, b));
    };
    check_equivalence(seed, [] { return fl::Append<>{"append"}; }, table, apply, steps);
    check_equivalence(seed, [] { return fl::AppendOnce<>{"backfill"}; }, table, apply, steps);
  }
}

TEST_CASE_TEMPLATE("R-CDC-8: AUTO CDC FROM SNAPSHOT (SCD1, SCD2) restored from its blobs behaves "
                   "as the flow that wrote them",
                   Storage, FLOWTEST_STORAGE_POLICIES) {
  const auto apply = [](auto& f, auto& t, const snapshot_batch& b) {
    return f.apply_snapshot(t, b.first, b.second);
  };
  for (std::uint64_t seed = 1; seed <= 100; ++seed) {
    std::mt19937_64 rng(seed);
    const auto steps = snapshot_steps(rng);
    check_equivalence(
        seed, [] { return Scd1{"items_scd1"}; },
        [] { return std::make_unique<fl::StreamingTable<Item, Storage>>("items"); }, apply, steps);
    check_equivalence(
        seed, [] { return Scd2{"items_scd2"}; },
        [] { return std::make_unique<fl::StreamingTable<ItemHistory, Storage>>("items"); }, apply,
        steps);
  }
}

// --- The reset flag -----------------------------------------------------------

using flowtest::delta_of;
using flowtest::snapshot_of;

TEST_CASE("R-EXACT-5: a delta says when a full refresh reset the flow, once") {
  // Byte 7 (after the tag, version and scope) holds the flags; bit 0 is the reset.
  fl::StreamingTable<Event> t{"events"};
  Using u{"u"};
  u.apply(t, std::vector<Event>{{1, 1, 1}});
  CHECK(delta_of(u)[7] == 0);
  t.full_refresh();
  u.apply(t, std::vector<Event>{{2, 1, 1}});
  CHECK(delta_of(u)[7] == 1);
  u.apply(t, std::vector<Event>{{3, 1, 1}});
  CHECK(delta_of(u)[7] == 0);

  fl::ManagedTable<Event> m{"m"};
  fl::AppendOnce<> once{"once"};
  once.apply(m, std::vector<Event>{{1, 1, 1}});
  const std::string before_refresh = snapshot_of(once);
  CHECK(delta_of(once) == std::string("FLAP\x01\x00\x01\x00\x01", 9));
  m.full_refresh();
  once.apply(m, std::vector<Event>{{2, 1, 1}});  // runs again after the refresh
  const std::string after = delta_of(once);
  CHECK(after == std::string("FLAP\x01\x00\x01\x01\x01", 9));
  // Restored from the snapshot before the refresh and the delta with the
  // reset: ran once since the refresh, so the next apply is skipped.
  fl::ManagedTable<Event> m2{"m2"};
  fl::AppendOnce<> restored{"once"};
  fl::checkpoint_blobs blobs;
  blobs.snapshot = before_refresh;
  blobs.deltas.push_back(after);
  restored.read_checkpoint(m2, blobs);
  CHECK(restored.done());
  CHECK(restored.apply(m2, std::vector<Event>{{3, 1, 1}}).skipped);

  fl::StreamingTable<Item> items{"items"};
  Scd1 cdc{"cdc"};
  cdc.apply_snapshot(items, std::vector<Item>{{1, "a", "b"}}, 5);
  (void)delta_of(cdc);
  items.full_refresh();
  cdc.apply_snapshot(items, std::vector<Item>{{1, "a", "b"}}, 2);  // versions restart
  const std::string d = delta_of(cdc);
  CHECK(d[7] == 1);
  fl::StreamingTable<Item> items2{"items2"};
  copy_rows(items, items2);
  Scd1 cdc2{"cdc"};
  blobs = {};
  blobs.deltas.push_back(d);
  cdc2.read_checkpoint(items2, blobs);
  CHECK(cdc2.last_version() == std::optional<std::int64_t>(2));
  CHECK(cdc2.key_count() == 1);
}

// --- Restores with nothing, and tables that contradict the flow ----------------

/// A table holding `rows`, as a restarted program reloads it.
template <class Table>
void hold(Table& t, const std::vector<typename Table::row_type>& rows) {
  t.store().reserve(rows.size());
  for (auto r : rows) t.store().insert(std::move(r));
}

/// `f` (named `name`) restored with empty blobs over `t`, whose rows
/// contradict it, is refused naming `key`, and stays empty.
template <class Flow, class Table>
void check_refused(Flow& f, Table& t, std::string_view name, std::string_view key) {
  const fl::error e = flowtest::error_of([&] { f.read_checkpoint(t, {}); });
  CHECK(e.code() == fl::errc::checkpoint_mismatch);
  CHECK(e.flow() == name);
  CHECK(e.key() == key);
  CHECK(f.key_count() == 0);
}

TEST_CASE("R-USING-2: empty blobs rebuild the index from the table; a table with two sequences "
          "for a key is refused, naming the key") {
  fl::StreamingTable<Event> t{"events"};
  hold(t, {{1, 5, 10}, {1, 5, 11}, {2, 3, 12}});
  Using u{"events_flow"};
  u.read_checkpoint(t, {});
  CHECK(u.key_count() == 2);
  CHECK(u.sequence_of(1) == std::optional<std::int64_t>(5));
  const fl::BatchStats s = u.apply(t, std::vector<Event>{{1, 6, 1}, {2, 3, 2}, {2, 2, 0}});
  CHECK(s.replaced_rows == 2);
  CHECK(s.appended_rows == 1);
  CHECK(s.superseded_rows == 1);
  CHECK(t.sorted_rows() == std::vector<Event>{{1, 6, 1}, {2, 3, 2}, {2, 3, 12}});
  CHECK(u.apply(t, std::vector<Event>{{2, 1, 0}}).ignored_late_rows == 1);

  fl::StreamingTable<Event> bad{"bad"};
  hold(bad, {{7, 1, 0}, {7, 2, 0}});
  Using v{"events_flow"};
  check_refused(v, bad, "events_flow", "k=7");
  CHECK(bad.size() == 2);
  CHECK(bad.writers().empty());
}

TEST_CASE("R-CDC-8: a SCD2 target with two current versions of a key is refused") {
  fl::StreamingTable<ItemHistory> t{"items"};
  hold(t, {{1, "a", "b", 1, 2}, {1, "a", "c", 2, std::nullopt}, {1, "x", "c", 3, std::nullopt}});
  Scd2 f{"items_scd2"};
  check_refused(f, t, "items_scd2", "1");
}

// --- Corrupt blobs -----------------------------------------------------------

// Every truncation, every flipped header byte, a wrong tag and a wrong
// version throw errc::checkpoint_corrupt naming the flow, and `same()`
// (the flow's observable state) holds after each.
template <class Flow, class Table, class Same>
void check_corrupt(Flow& f, Table& t, const std::string& blob, bool is_snapshot, Same same) {
  const auto expect_corrupt = [&](const std::string& bad, const char* what) {
    CAPTURE(what);
    CAPTURE(bad.size());
    fl::checkpoint_blobs b;
    if (is_snapshot) {
      b.snapshot = bad;
    } else {
      b.deltas.push_back(bad);
    }
    const fl::error e = flowtest::error_of([&] { f.read_checkpoint(t, b); });
    CHECK(e.code() == fl::errc::checkpoint_corrupt);
    CHECK(e.flow() == f.name());
    CHECK(flowtest::contains(e.what(), "state is unchanged"));
    CHECK(same());
  };
  for (std::size_t n = 0; n < blob.size(); ++n) expect_corrupt(blob.substr(0, n), "truncated");
  for (std::size_t i = 0; i < 7; ++i) {
    std::string bad = blob;
    bad[i] = static_cast<char>(bad[i] ^ 0x5a);
    expect_corrupt(bad, "header byte flipped");
  }
  std::string tag = blob;
  tag.replace(0, 4, "XXXX");
  expect_corrupt(tag, "wrong tag");
  std::string version = blob;
  version[4] = 2;
  expect_corrupt(version, "unknown version");
  expect_corrupt(blob + "x", "trailing byte");
  // A snapshot among the deltas (and the reverse).
  std::string scope = blob;
  scope[6] = static_cast<char>(is_snapshot ? 1 : 0);
  expect_corrupt(scope, "wrong scope");
}

TEST_CASE("Checkpoints: corrupt blobs throw checkpoint_corrupt and change nothing") {
  SUBCASE("REPLACE USING") {
    fl::StreamingTable<Event> t{"events"};
    Using u{"events_flow"};
    u.apply(t, std::vector<Event>{{1, 1, 1}, {2, 1, 1}});
    const auto rows = t.sorted_rows();
    const auto same = [&] { return u.key_count() == 2 && t.sorted_rows() == rows; };
    check_corrupt(u, t, snapshot_of(u), true, same);
    check_corrupt(u, t, delta_of(u), false, same);
  }
  SUBCASE("append ONCE") {
    fl::ManagedTable<Event> t{"events"};
    fl::AppendOnce<> f{"backfill"};
    f.apply(t, std::vector<Event>{{1, 1, 1}});
    const auto same = [&] { return f.done() && t.size() == 1; };
    check_corrupt(f, t, snapshot_of(f), true, same);
    check_corrupt(f, t, delta_of(f), false, same);
  }
  SUBCASE("AUTO CDC FROM SNAPSHOT") {
    fl::StreamingTable<ItemHistory> t{"items"};
    Scd2 f{"items_scd2"};
    f.apply_snapshot(t, std::vector<Item>{{1, "a", "b"}, {2, "a", "b"}}, 4);
    const auto same = [&] {
      return f.last_version() == std::optional<std::int64_t>(4) && f.key_count() == 2;
    };
    check_corrupt(f, t, snapshot_of(f), true, same);
    check_corrupt(f, t, delta_of(f), false, same);
  }
}

// --- Delta sizes -----------------------------------------------------------------

TEST_CASE("Checkpoints: a delta's size does not depend on the state's size") {
  const auto batch = [](std::int64_t from) {
    std::vector<Event> b;
    for (std::int64_t i = 0; i < 10; ++i) b.push_back({from + i, 1, i});
    return b;
  };
  std::vector<std::size_t> using_sizes, append_sizes, cdc_sizes;
  for (std::int64_t keys : {10, 100000}) {
    fl::StreamingTable<Event> t{"events"};
    Using u{"events_flow"};
    std::vector<Event> big;
    for (std::int64_t i = 0; i < keys; ++i) big.push_back({1000000 + i, 1, i});
    u.apply(t, big);
    (void)delta_of(u);
    u.apply(t, batch(0));
    using_sizes.push_back(delta_of(u).size());

    fl::ManagedTable<Event> m{"m"};
    fl::Append<> a{"a"};
    a.apply(m, big);
    (void)delta_of(a);
    a.apply(m, batch(0));
    append_sizes.push_back(delta_of(a).size());

    fl::StreamingTable<Item> items{"items"};
    Scd1 c{"c"};
    std::vector<Item> snap;
    for (std::int64_t i = 0; i < keys; ++i) snap.push_back({i, "a", "b"});
    c.apply_snapshot(items, snap, 1);
    (void)delta_of(c);
    snap.resize(10);
    c.apply_snapshot(items, snap, 2);
    cdc_sizes.push_back(delta_of(c).size());
  }
  CHECK(using_sizes[0] == using_sizes[1]);
  CHECK(append_sizes[0] == append_sizes[1]);
  CHECK(cdc_sizes[0] == cdc_sizes[1]);
}

}  // namespace checkpoint_flows
