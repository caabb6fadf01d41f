// The memory store's change journal (storage/memory.hpp; the capability
// flowlib::journaled_row_store of storage/row_store.hpp) beyond what
// tests/storage/row_store_contract.cpp checks of every journaled store on
// random sequences: journal_inserted() in corner cases, a mutable get()
// saved once, a failed journal record, steady batches allocating nothing,
// a moved journal, and the changes() count.
#include <flowlib/storage/memory.hpp>

#include <support/failing_allocator.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace storage_journal {

namespace fl = flowlib;

// A row with a heap-owning member (long strings leave the small buffer), so
// that leaks and double destructions show under ASan.
struct Row {
  std::uint64_t k = 0;
  std::string s;
  friend bool operator==(const Row&, const Row&) = default;
};

using store = fl::detail::memory_row_store<Row>;
static_assert(fl::journaled_row_store<store>);
static_assert(fl::mutable_row_store<store>);

TEST_CASE("journal: journal_inserted() excludes rows inserted then erased, keeps order") {
  store s;
  s.reserve(4);
  const fl::row_id a = s.insert({1, "a"});
  const fl::row_id b = s.insert({2, "b"});
  s.erase(a);  // a hole before the journal
  s.begin_journal();
  CHECK(s.journal_inserted().empty());
  s.reserve(8);
  const fl::row_id x = s.insert({3, "x"});  // reuses a
  CHECK(x == a);
  const fl::row_id y = s.insert({4, "y"});
  const fl::row_id z = s.insert({5, "z"});
  s.erase(y);                               // inserted then erased: excluded
  const fl::row_id w = s.insert({6, "w"});  // reuses y's slot: listed once, here
  CHECK(w == y);
  s.erase(b);  // a row from before the journal: not listed either way
  {
    const auto ins = s.journal_inserted();
    CHECK(std::vector<fl::row_id>(ins.begin(), ins.end()) == std::vector<fl::row_id>{x, z, w});
  }
  s.erase(x);
  {
    const auto ins = s.journal_inserted();
    CHECK(std::vector<fl::row_id>(ins.begin(), ins.end()) == std::vector<fl::row_id>{z, w});
  }
  std::vector<Row> batch{{7, "p"}, {8, "q"}};
  s.reserve(batch.size());
  CHECK(s.emplace_each(batch, [](const Row& r) { return r; }) == 2);
  const auto ins = s.journal_inserted();
  REQUIRE(ins.size() == 4);
  CHECK(s.get(ins[2]) == Row{7, "p"});  // emplace_each's rows, in batch order
  CHECK(s.get(ins[3]) == Row{8, "q"});
  s.commit_journal();
  CHECK(s.journal_inserted().empty());
  // A new journal starts with an empty list; the old flags are gone.
  s.begin_journal();
  s.erase(z);
  CHECK(s.journal_inserted().empty());
  s.rollback_journal();
  CHECK(s.get(z) == Row{5, "z"});
}

TEST_CASE("journal: a mutable get() saves the row once; rollback brings the value back") {
  store s;
  s.reserve(2);
  const fl::row_id a = s.insert({1, std::string(40, 'a')});
  s.begin_journal();
  s.get(a).s = "first";
  s.get(a).s += " second";                 // not saved again
  s.assign(a, {9, std::string(50, 'z')});  // nor here
  s.erase(a);
  s.reserve(1);
  CHECK(s.insert({2, "reuses"}) == a);
  s.rollback_journal();
  CHECK(s.size() == 1);
  CHECK(s.get(a) == Row{1, std::string(40, 'a')});
}

TEST_CASE("journal: an emplace_with whose journal record cannot be allocated changes nothing") {
  store s;
  s.reserve(3);
  const fl::row_id a = s.insert({1, "a"});
  s.insert({2, "b"});
  s.erase(a);
  s.begin_journal();  // no reserve(): the records must be allocated here
  bool threw = false;
  failing_allocator::arm(0);
  try {
    s.emplace_with([] { return Row{3, "c"}; });
  } catch (const std::bad_alloc&) {
    threw = true;
  }
  failing_allocator::disarm();
  CHECK(threw);
  CHECK(s.size() == 1);
  CHECK(s.journal_inserted().empty());
  s.reserve(1);
  CHECK(s.insert({4, "d"}) == a);  // the free list is intact
  s.rollback_journal();
  CHECK(s.size() == 1);
  s.reserve(1);
  CHECK(s.insert({5, "e"}) == a);
}

TEST_CASE("journal: steady batches of the same shape allocate nothing") {
  // Trivially copyable rows: every allocation counted is the store's own.
  struct Plain {
    std::uint64_t a = 0, b = 0;
  };
  fl::detail::memory_row_store<Plain> s;
  s.reserve(1000);
  std::vector<fl::row_id> ids;
  for (std::uint64_t i = 0; i < 1000; ++i) ids.push_back(s.insert({i, i}));
  const auto batch = [&](bool commit) {
    s.begin_journal();
    for (std::size_t i = 0; i < 100; ++i) s.get(ids[i]).b += 1;      // in place
    for (std::size_t i = 100; i < 200; ++i) s.assign(ids[i], {i, 0});
    for (std::size_t i = 200; i < 300; ++i) s.erase(ids[i]);
    s.reserve(100);
    for (std::size_t i = 200; i < 300; ++i) ids[i] = s.insert({i, 1});
    (void)s.journal_inserted();
    if (commit) {
      s.commit_journal();
    } else {
      s.rollback_journal();
    }
  };
  batch(true);
  batch(false);  // warm-up: the journal's buffers reach their size
  constexpr long budget = 1'000'000;
  failing_allocator::arm(budget);
  for (int i = 0; i < 10; ++i) batch(i % 2 == 0);
  const long used = budget - failing_allocator::allocations_left;
  failing_allocator::disarm();
  CHECK(used == 0);
}

TEST_CASE("journal: moving a store moves its open journal") {
  store s;
  s.reserve(2);
  const fl::row_id a = s.insert({1, "a"});
  s.begin_journal();
  s.get(a).s = "changed";
  s.reserve(1);
  s.insert({2, "b"});
  store t = std::move(s);
  CHECK(t.journaling());
  CHECK(t.journal_inserted().size() == 1);
  t.rollback_journal();
  CHECK(t.size() == 1);
  CHECK(t.get(a) == Row{1, "a"});
}

TEST_CASE("journal: after reserve(n), n inserts and emplace_each allocate nothing") {
  // The row_store contract: a flow reserves, then commits without a failure
  // point; the journal's records of those inserts are part of the reserve.
  struct Plain {
    std::uint64_t a = 0;
  };
  for (std::size_t holes : {0, 3, 50}) {
    CAPTURE(holes);
    fl::detail::memory_row_store<Plain> s;
    s.reserve(100);
    std::vector<fl::row_id> ids;
    for (std::uint64_t i = 0; i < 100; ++i) ids.push_back(s.insert({i}));
    for (std::size_t i = 0; i < holes; ++i) s.erase(ids[i * 2]);
    s.begin_journal();
    s.reserve(80);
    std::vector<Plain> batch(40);
    constexpr long budget = 1'000'000;
    failing_allocator::arm(budget);
    for (int i = 0; i < 40; ++i) s.insert({1});
    const std::size_t made = s.emplace_each(batch, [](const Plain& p) { return p; });
    const long used = budget - failing_allocator::allocations_left;
    failing_allocator::disarm();
    CHECK(made == 40);
    CHECK(used == 0);
    CHECK(s.journal_inserted().size() == 80);
    s.rollback_journal();
    CHECK(s.size() == 100 - holes);
  }
}

// A first change under the journal (assign, erase, mutable get) records its
// row in the buffer where reserve() made room for the inserts' dead-slot
// records: it must leave that room to them, so that the noexcept insert
// after it does not allocate.
TEST_CASE("R-EXACT-1: journal: after reserve(n), a first change of a row leaves the n inserts' records their room") {
  store s;
  s.reserve(3);
  const fl::row_id a = s.insert({1, "a"});
  const fl::row_id b = s.insert({2, "b"});
  s.insert({3, "c"});
  s.erase(a);  // a dead slot from before the journal: its insert is recorded
  s.begin_journal();
  s.reserve(1);
  s.assign(b, {9, std::string(40, 'z')});  // may allocate: a first change
  constexpr long budget = 1'000'000;
  failing_allocator::arm(budget);
  CHECK(s.insert({4, "d"}) == a);
  const long used = budget - failing_allocator::allocations_left;
  failing_allocator::disarm();
  CHECK(used == 0);
  s.rollback_journal();
  CHECK(s.size() == 2);
}

TEST_CASE("store: changes() grows with every change of the rows and only then (R-STAGE-6: a lookup keeps its index while it is unchanged)") {
  // A lookup stage keeps its index of a dimension while changes() is
  // unchanged (runtime/lookup.hpp), so every way of changing the rows must
  // move it, and reading must not.
  store s;
  std::uint64_t last = s.changes();
  const auto moved = [&](const char* what) {
    CAPTURE(what);
    CHECK(s.changes() > last);
    last = s.changes();
  };
  s.reserve(8);
  CHECK(s.changes() == last);  // capacity is not a change
  const fl::row_id a = s.insert(Row{1, "a"});
  moved("insert");
  s.emplace_with([] { return Row{2, "b"}; });
  moved("emplace_with");
  const std::vector<Row> more{{3, "c"}, {4, "d"}};
  s.emplace_each(more, [](const Row& r) { return r; });
  moved("emplace_each");
  s.assign(a, Row{1, "a2"});
  moved("assign");
  s.get(a).s = "a3";
  moved("mutable get");
  const store& cs = s;
  CHECK(cs.get(a).s == "a3");
  std::size_t n = 0;
  for (const Row& r : cs.rows()) n += r.k > 0 ? 1 : 0;
  CHECK(n == 4);
  CHECK(s.changes() == last);  // reads are not changes
  s.begin_journal();
  s.erase(a);
  moved("erase in a journal");
  s.rollback_journal();
  moved("rollback");
  s.begin_journal();
  s.commit_journal();
  CHECK(s.changes() == last);  // an empty journal changes nothing
  s.clear();
  moved("clear");
  std::vector<std::pair<fl::row_id, Row>> rows{{0, Row{9, "z"}}};
  s.restore_rows(rows, 1);
  moved("restore_rows");
  store t(std::move(s));
  CHECK(t.changes() > last);  // a moved-to store never matches an index of the old one
}

}  // namespace storage_journal
