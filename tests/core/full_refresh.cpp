// Full refresh (R-EXACT-5, R-TABLE-2): after table.full_refresh(), the next
// apply of every flow that writes the table gives exactly the result of
// applying the same batches to a fresh, empty table with a fresh flow; a
// ONCE flow runs again; a refused refresh changes nothing.
#include <flowlib/flows/append.hpp>
#include <flowlib/flows/auto_cdc_snapshot.hpp>
#include <flowlib/flows/replace_using.hpp>
#include <flowlib/table.hpp>

#include <support/rows.hpp>
#include <support/storage_policies.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace core_full_refresh {

namespace fl = flowlib;

struct Ev {
  std::int64_t k = 0;
  std::string v;
  std::int64_t seq = 0;
  friend bool operator==(const Ev&, const Ev&) = default;
  friend auto operator<=>(const Ev&, const Ev&) = default;
};
FLOWLIB_SCHEMA(Ev, k, v, seq);

using flowtest::Item;
using flowtest::ItemHistory;

using Replace = fl::ReplaceUsing<fl::Key<&Ev::k>, fl::Seq<&Ev::seq>>;
using Snap1 = fl::AutoCdcFromSnapshot<fl::Key<&Item::k>, fl::Scd1>;
using Snap2 = fl::AutoCdcFromSnapshot<fl::Key<&Item::k>, fl::Scd2<>>;

template <class Storage>
using EvTable = fl::StreamingTable<Ev, Storage>;

std::vector<Ev> before() { return {{1, "a", 1}, {2, "b", 1}}; }
std::vector<Ev> after() { return {{1, "c", 2}, {3, "d", 1}}; }

TEST_CASE_TEMPLATE("R-EXACT-5: REPLACE USING after a full refresh gives the fresh flow's result",
                   Storage, FLOWTEST_STORAGE_POLICIES) {
  EvTable<Storage> t{"t"};
  Replace flow{"f"};
  flow.apply(t, before());
  t.full_refresh();
  const fl::BatchStats s = flow.apply(t, after());
  flow.apply(t, std::vector<Ev>{{3, "e", 1}, {2, "x", 0}});

  EvTable<Storage> fresh_t{"fresh"};
  Replace fresh{"fresh"};
  const fl::BatchStats fs = fresh.apply(fresh_t, after());
  fresh.apply(fresh_t, std::vector<Ev>{{3, "e", 1}, {2, "x", 0}});

  CHECK(t.sorted_rows() == fresh_t.sorted_rows());
  CHECK(t.sorted_rows() ==
        std::vector<Ev>{{1, "c", 2}, {2, "x", 0}, {3, "d", 1}, {3, "e", 1}});
  CHECK(s.inserted_rows == fs.inserted_rows);
  CHECK(s.replaced_rows == fs.replaced_rows);
  CHECK(flow.key_count() == fresh.key_count());
  CHECK(flow.sequence_of(2) == std::optional<std::int64_t>(0));
}

TEST_CASE_TEMPLATE("R-EXACT-5: a refused full refresh leaves table and flow state intact",
                   Storage, FLOWTEST_STORAGE_POLICIES) {
  fl::StreamingTable<Ev, Storage> t{"t", fl::table_options<Ev>().reset_allowed(false)};
  Replace flow{"f"};
  flow.apply(t, before());
  CHECK_THROWS_AS(t.full_refresh(), fl::error);
  CHECK(t.sorted_rows() == before());
  CHECK(flow.key_count() == 2);
  flow.apply(t, after());

  EvTable<Storage> ref_t{"ref"};
  Replace ref{"ref"};
  ref.apply(ref_t, before());
  ref.apply(ref_t, after());
  CHECK(t.sorted_rows() == ref_t.sorted_rows());
  CHECK(t.sorted_rows() == std::vector<Ev>{{1, "c", 2}, {2, "b", 1}, {3, "d", 1}});

  // Append ONCE on a refused refresh: still done, still skipped.
  fl::StreamingTable<Ev, Storage> m{"m", fl::table_options<Ev>().reset_allowed(false)};
  fl::AppendOnce<> once{"once"};
  once.apply(m, before());
  CHECK_THROWS_AS(m.full_refresh(), fl::error);
  CHECK(once.apply(m, after()).skipped);
  CHECK(m.sorted_rows() == before());
}

TEST_CASE_TEMPLATE("R-EXACT-5: plain append after a full refresh gives the fresh flow's result",
                   Storage, FLOWTEST_STORAGE_POLICIES) {
  fl::ManagedTable<Ev, Storage> t{"t"};
  fl::Append<> flow{"f"};
  flow.apply(t, before());
  t.full_refresh();
  CHECK(t.empty());
  flow.apply(t, after());

  fl::ManagedTable<Ev, Storage> fresh_t{"fresh"};
  fl::Append<> fresh{"fresh"};
  fresh.apply(fresh_t, after());
  CHECK(t.sorted_rows() == fresh_t.sorted_rows());
  CHECK(t.sorted_rows() == after());
}

TEST_CASE_TEMPLATE("R-EXACT-5 R-TABLE-2: a ONCE append runs again after a full refresh", Storage,
                   FLOWTEST_STORAGE_POLICIES) {
  fl::ManagedTable<Ev, Storage> t{"t"};
  fl::AppendOnce<> flow{"backfill"};
  CHECK_FALSE(flow.apply(t, before()).skipped);
  CHECK(flow.done());
  CHECK(flow.apply(t, after()).skipped);
  t.full_refresh();
  const fl::AppendStats s = flow.apply(t, after());  // no reset(): the flow sees the refresh
  CHECK_FALSE(s.skipped);
  CHECK(flow.done());
  CHECK(flow.apply(t, before()).skipped);

  fl::ManagedTable<Ev, Storage> fresh_t{"fresh"};
  fl::AppendOnce<> fresh{"fresh"};
  fresh.apply(fresh_t, after());
  fresh.apply(fresh_t, before());
  CHECK(t.sorted_rows() == fresh_t.sorted_rows());
  CHECK(t.sorted_rows() == after());
}

TEST_CASE_TEMPLATE("R-EXACT-5 R-TABLE-2: fan-in of two appends (one ONCE) after a full refresh",
                   Storage, FLOWTEST_STORAGE_POLICIES) {
  const auto run = [](fl::StreamingTable<Ev, Storage>& t, fl::Append<>& a, fl::AppendOnce<>& b) {
    a.apply(t, after());
    b.apply(t, std::vector<Ev>{{9, "once", 1}});
    a.apply(t, std::vector<Ev>{{4, "z", 5}});
    b.apply(t, std::vector<Ev>{{8, "skipped", 1}});
  };
  fl::StreamingTable<Ev, Storage> t{"t"};
  fl::Append<> a{"a"};
  fl::AppendOnce<> b{"b"};
  a.apply(t, before());
  b.apply(t, before());
  CHECK(t.size() == 4);
  t.full_refresh();
  run(t, a, b);
  CHECK(t.writers().size() == 2);

  fl::StreamingTable<Ev, Storage> fresh_t{"fresh"};
  fl::Append<> fa{"a"};
  fl::AppendOnce<> fb{"b"};
  run(fresh_t, fa, fb);
  CHECK(t.sorted_rows() == fresh_t.sorted_rows());
  CHECK(t.size() == 4);
}

/// Snapshot flow F over a table that held snapshots 5 and 6 and was fully
/// refreshed, given `after` (versions 1, 2, ...: a version below the old
/// last one is accepted, the flow starts afresh), against a fresh flow and
/// table given the same: the same stats, rows, keys and last version. The
/// table's rows and the first snapshot's stats.
template <class F, class Table>
std::pair<std::vector<typename Table::row_type>, fl::BatchStats> refreshed_like_fresh(
    const std::vector<std::vector<Item>>& after) {
  Table t{"t"}, fresh_t{"fresh"};
  F flow{"f"}, fresh{"fresh"};
  flow.apply_snapshot(t, std::vector<Item>{{1, "a"}, {2, "b"}}, 5);
  flow.apply_snapshot(t, std::vector<Item>{{1, "a2"}}, 6);
  t.full_refresh();
  std::vector<fl::BatchStats> stats;
  for (std::size_t i = 0; i < after.size(); ++i) {
    const auto version = static_cast<std::int64_t>(i + 1);
    stats.push_back(flow.apply_snapshot(t, after[i], version));
    CHECK(stats.back() == fresh.apply_snapshot(fresh_t, after[i], version));
  }
  CHECK(t.sorted_rows() == fresh_t.sorted_rows());
  CHECK(flow.key_count() == fresh.key_count());
  CHECK(flow.last_version() == fresh.last_version());
  return {t.sorted_rows(), stats.front()};
}

TEST_CASE_TEMPLATE("R-EXACT-5: AUTO CDC FROM SNAPSHOT (SCD1) after a full refresh", Storage,
                   FLOWTEST_STORAGE_POLICIES) {
  const auto [rows, first] = refreshed_like_fresh<Snap1, fl::StreamingTable<Item, Storage>>(
      {{{1, "a2"}, {3, "c"}}, {{3, "c2"}}});
  CHECK(rows == std::vector<Item>{{3, "c2"}});
  CHECK(first.inserted_rows == 2);
}

TEST_CASE_TEMPLATE("R-EXACT-5: AUTO CDC FROM SNAPSHOT (SCD2) after a full refresh", Storage,
                   FLOWTEST_STORAGE_POLICIES) {
  const auto [rows, first] = refreshed_like_fresh<Snap2, fl::StreamingTable<ItemHistory, Storage>>(
      {{{1, "a2"}, {3, "c"}}, {{1, "a3"}}});
  CHECK(rows == std::vector<ItemHistory>{{1, "a2", 1, 2}, {1, "a3", 2, std::nullopt}, {3, "c", 1, 2}});
  CHECK(first.inserted_rows == 2);
}

TEST_CASE_TEMPLATE("Moved flows keep writing their table, and see its full refresh", Storage,
                   FLOWTEST_STORAGE_POLICIES) {
  EvTable<Storage> t{"t"};
  Replace flow{"f"};
  flow.apply(t, before());
  Replace moved = std::move(flow);
  moved.apply(t, after());
  CHECK(t.sorted_rows() == std::vector<Ev>{{1, "c", 2}, {2, "b", 1}, {3, "d", 1}});
  Replace assigned{"g"};
  assigned = std::move(moved);
  t.full_refresh();
  assigned.apply(t, before());
  CHECK(t.sorted_rows() == before());
  CHECK(t.writers().size() == 1);

  fl::StreamingTable<Item, Storage> s{"s"};
  Snap1 snap{"snap"};
  snap.apply_snapshot(s, std::vector<Item>{{1, "a"}}, 1);
  Snap1 snap_moved = std::move(snap);
  snap_moved.apply_snapshot(s, std::vector<Item>{{2, "b"}}, 2);
  CHECK(s.sorted_rows() == std::vector<Item>{{2, "b"}});
  CHECK_THROWS_AS(snap.apply_snapshot(s, std::vector<Item>{{3, "c"}}, 3),  // NOLINT(bugprone-use-after-move)
                  fl::error);
  CHECK(s.sorted_rows() == std::vector<Item>{{2, "b"}});

  fl::ManagedTable<Ev, Storage> m{"m"};
  fl::AppendOnce<> once{"once"};
  once.apply(m, before());
  fl::AppendOnce<> once_moved = std::move(once);
  CHECK(once_moved.done());
  CHECK(once_moved.apply(m, after()).skipped);
  m.full_refresh();
  CHECK_FALSE(once_moved.apply(m, after()).skipped);
  CHECK(m.sorted_rows() == after());
  CHECK(m.writers().size() == 1);
}

}  // namespace core_full_refresh
