// AUTO CDC FROM SNAPSHOT (R-CDC-8): the reference vector of
// docs/semantics.md#auto-cdc, SCD1, version checks, and a randomised
// comparison with a model, over the suites' storage policies.
#include <flowlib/flows/auto_cdc_snapshot.hpp>
#include <flowlib/table.hpp>

#include <support/errors.hpp>
#include <support/rows.hpp>
#include <support/storage_policies.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace flows_auto_cdc_snapshot {

namespace fl = flowlib;

using Item = flowtest::Entry;
using ItemHistory = flowtest::EntryHistory;

using Snapshot = std::pair<std::vector<Item>, std::int64_t>;

// A source that yields the given snapshots, then nothing.
struct Source {
  std::vector<Snapshot> snapshots;
  std::size_t next = 0;
  std::optional<Snapshot> operator()() {
    if (next == snapshots.size()) return std::nullopt;
    return snapshots[next++];
  }
};

Source reference_source() {
  return Source{{{{{1, "a1", "b1"}, {2, "a2", "b2"}, {4, "a4", "b4"}}, 1},
                 {{{2, "a2_new", "b2"}, {3, "a3", "b3"}, {4, "a4", "b4_new"}}, 2}}};
}

TEST_CASE_TEMPLATE("R-CDC-8: reference vector, SCD2 tracking history on column a", Storage,
                   FLOWTEST_STORAGE_POLICIES) {
  using Flow =
      fl::AutoCdcFromSnapshot<fl::Key<&Item::id>, fl::Scd2<fl::track_history_column_list<"a">>>;
  fl::StreamingTable<ItemHistory, Storage> target{"items"};
  Flow flow{"items_from_snapshots"};
  const fl::BatchStats s = flow.apply(target, reference_source());
  const std::vector<ItemHistory> expected{
      {1, "a1", "b1", 1, 2},         {2, "a2", "b2", 1, 2},
      {2, "a2_new", "b2", 2, std::nullopt}, {3, "a3", "b3", 2, std::nullopt},
      {4, "a4", "b4_new", 1, std::nullopt},  // the untracked change is in place
  };
  CHECK(target.sorted_rows() == expected);
  CHECK(s.input_rows == 6);
  CHECK(s.upserted_rows == 6);  // v1: 3 inserts; v2: 2 updates, 1 insert
  CHECK(s.deleted_rows == 1);   // key 1
  CHECK(flow.last_version() == std::optional<std::int64_t>(2));
}

TEST_CASE_TEMPLATE("R-CDC-8: SCD1 inserts, updates only changed rows, deletes missing keys",
                   Storage, FLOWTEST_STORAGE_POLICIES) {
  fl::StreamingTable<Item, Storage> target{"items"};
  fl::AutoCdcFromSnapshot<fl::Key<&Item::id>> flow{"items_scd1"};
  auto src = reference_source();
  const auto s1 = flow.apply_snapshot(target, src.snapshots[0].first, 1);
  CHECK(s1.upserted_rows == 3);
  const auto s2 = flow.apply_snapshot(target, src.snapshots[1].first, 2);
  CHECK(target.sorted_rows() ==
        std::vector<Item>{{2, "a2_new", "b2"}, {3, "a3", "b3"}, {4, "a4", "b4_new"}});
  CHECK(s2.upserted_rows == 3);
  CHECK(s2.deleted_rows == 1);
  // The same content again: nothing is written.
  const auto s3 = flow.apply_snapshot(target, src.snapshots[1].first, 3);
  CHECK(s3.upserted_rows == 0);
  CHECK(s3.deleted_rows == 0);
  // An empty snapshot deletes everything.
  flow.apply_snapshot(target, std::vector<Item>{}, 4);
  CHECK(target.empty());
  CHECK(flow.key_count() == 0);
}

TEST_CASE_TEMPLATE("R-CDC-8: a non-increasing version or a duplicate key fails and changes nothing",
                   Storage, FLOWTEST_STORAGE_POLICIES) {
  fl::StreamingTable<Item, Storage> target{"items"};
  fl::AutoCdcFromSnapshot<fl::Key<&Item::id>> flow{"items_scd1"};
  flow.apply_snapshot(target, std::vector<Item>{{1, "a", "b"}}, 5);
  for (std::int64_t v : {5, 4}) {
    const fl::error e = flowtest::error_of(
        [&] { flow.apply_snapshot(target, std::vector<Item>{{2, "x", "y"}}, v); });
    CHECK(e.code() == fl::errc::version_not_increasing);
    CHECK(e.flow() == "items_scd1");
  }
  const fl::error e = flowtest::error_of(
      [&] { flow.apply_snapshot(target, std::vector<Item>{{2, "x", "y"}, {2, "x", "z"}}, 6); });
  CHECK(e.code() == fl::errc::invalid_argument);
  CHECK(e.key() == "id=2");
  CHECK(target.sorted_rows() == std::vector<Item>{{1, "a", "b"}});
  CHECK(flow.last_version() == std::optional<std::int64_t>(5));
  // The source form stops at the failing snapshot; those before stay applied.
  Source src{{{{{1, "a", "c"}}, 6}, {{{1, "a", "d"}}, 6}}};
  CHECK_THROWS_AS(flow.apply(target, src), fl::error);
  CHECK(target.sorted_rows() == std::vector<Item>{{1, "a", "c"}});
}

TEST_CASE_TEMPLATE("R-CDC-8: a deleted key that comes back opens a new SCD2 version", Storage,
                   FLOWTEST_STORAGE_POLICIES) {
  using Flow = fl::AutoCdcFromSnapshot<fl::Key<&Item::id>, fl::Scd2<>>;
  fl::StreamingTable<ItemHistory, Storage> target{"items"};
  Flow flow;
  flow.apply_snapshot(target, std::vector<Item>{{1, "a", "b"}}, 10);
  flow.apply_snapshot(target, std::vector<Item>{}, 20);
  flow.apply_snapshot(target, std::vector<Item>{{1, "a", "b"}}, 30);
  CHECK(target.sorted_rows() ==
        std::vector<ItemHistory>{{1, "a", "b", 10, 20}, {1, "a", "b", 30, std::nullopt}});
}

struct Wide {
  std::int64_t id;
  std::string a;
  std::string b;
  std::string noise;
};
FLOWLIB_SCHEMA(Wide, id, a, b, noise);
struct WideHistory {
  std::int64_t id;
  std::string a, b;
  std::string start_at;
  std::optional<std::string> end_at;
  friend bool operator==(const WideHistory&, const WideHistory&) = default;
};
FLOWLIB_SCHEMA(WideHistory, id, a, b, (start_at, "__START_AT"), (end_at, "__END_AT"));

TEST_CASE_TEMPLATE("R-CDC-8: except_column_list and a string version", Storage,
                   FLOWTEST_STORAGE_POLICIES) {
  using Flow =
      fl::AutoCdcFromSnapshot<fl::Key<&Wide::id>, fl::Scd2<>, fl::except_column_list<"noise">,
                              fl::snapshot_version<std::string>>;
  fl::StreamingTable<WideHistory, Storage> target{"wide"};
  Flow flow;
  flow.apply_snapshot(target, std::vector<Wide>{{1, "a", "b", "x"}}, "2024-01-01");
  flow.apply_snapshot(target, std::vector<Wide>{{1, "a", "b", "y"}}, "2024-01-02");  // noise only
  flow.apply_snapshot(target, std::vector<Wide>{{1, "A", "b", "y"}}, "2024-01-03");
  CHECK(target.sorted_rows() ==
        std::vector<WideHistory>{{1, "A", "b", "2024-01-03", std::nullopt},
                                 {1, "a", "b", "2024-01-01", "2024-01-03"}});
}

TEST_CASE_TEMPLATE("R-CDC-8: random snapshot sequences against a model", Storage,
                   FLOWTEST_STORAGE_POLICIES) {
  std::mt19937 rng(77);
  std::uniform_int_distribution<int> pct(0, 99), val(0, 2);
  for (int n = 0; n < 300; ++n) {
    using Flow =
        fl::AutoCdcFromSnapshot<fl::Key<&Item::id>, fl::Scd2<fl::track_history_column_list<"a">>>;
    fl::StreamingTable<ItemHistory, Storage> h{"h"};
    fl::StreamingTable<Item, Storage> t{"t"};
    Flow f2;
    fl::AutoCdcFromSnapshot<fl::Key<&Item::id>> f1;
    std::map<std::int64_t, std::size_t> open;  // key -> index of its open version
    std::vector<ItemHistory> model;
    std::vector<Item> last;
    const int versions = 1 + pct(rng) % 6;
    for (std::int64_t v = 1; v <= versions; ++v) {
      std::vector<Item> snapshot;
      for (std::int64_t id = 0; id < 5; ++id) {
        if (pct(rng) < 30) continue;
        static const char* as[] = {"a0", "a1", "a2"};
        static const char* bs[] = {"b0", "b1", "b2"};
        snapshot.push_back({id, as[val(rng)], bs[val(rng)]});
      }
      std::shuffle(snapshot.begin(), snapshot.end(), rng);
      // Model.
      std::map<std::int64_t, Item> now;
      for (const Item& i : snapshot) now[i.id] = i;
      for (auto it = open.begin(); it != open.end();) {
        if (!now.count(it->first)) {
          model[it->second].end_at = v;
          it = open.erase(it);
        } else {
          ++it;
        }
      }
      for (const auto& [id, i] : now) {
        auto it = open.find(id);
        if (it == open.end()) {
          model.push_back({id, i.a, i.b, v, std::nullopt});
          open[id] = model.size() - 1;
        } else if (model[it->second].a != i.a) {
          model[it->second].end_at = v;
          model.push_back({id, i.a, i.b, v, std::nullopt});
          it->second = model.size() - 1;
        } else {
          model[it->second].b = i.b;
        }
      }
      f2.apply_snapshot(h, snapshot, v);
      f1.apply_snapshot(t, snapshot, v);
      last.clear();
      for (const auto& [id, i] : now) last.push_back(i);
    }
    auto want = model;
    std::sort(want.begin(), want.end(), [](const ItemHistory& x, const ItemHistory& y) {
      return fl::detail::canonical_less(x, y);
    });
    REQUIRE(h.sorted_rows() == want);
    REQUIRE(t.sorted_rows() == last);
  }
}

}  // namespace flows_auto_cdc_snapshot
