// The memory store's change journal (storage/memory.hpp; the capability
// flowlib::journaled_row_store of storage/row_store.hpp): rollback restores
// the store exactly, ids of later inserts included; commit leaves it as a
// store that never had a journal; journal_inserted() lists the live rows the
// journal inserted, in order. Checked on random operation sequences against
// a twin store without a journal and a map model of the rows.
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

Row make_row(std::mt19937_64& rng) {
  const std::uint64_t k = rng() % 1000;
  std::string s = "v" + std::to_string(k);
  if (rng() % 2) s += std::string(24 + rng() % 16, static_cast<char>('a' + k % 26));
  return {k, std::move(s)};
}

using model = std::map<fl::row_id, Row>;

// The store's rows by id. rows() yields the live rows in id order; an id
// is matched to its row by the row's address.
model contents(const store& s) {
  model m;
  std::vector<const Row*> live;
  for (const Row& r : s.rows()) live.push_back(&r);
  for (std::size_t i = 0, j = 0; i < s.id_bound() && j < live.size(); ++i) {
    const fl::row_id id = static_cast<fl::row_id>(i);
    if (&s.get(id) == live[j]) {
      m.emplace(id, *live[j]);
      ++j;
    }
  }
  return m;
}

void check_same(const store& a, const model& expect, const char* what) {
  INFO(what);
  CHECK(a.size() == expect.size());
  CHECK(contents(a) == expect);
}

struct thrown : std::runtime_error {
  thrown() : std::runtime_error("make failed") {}
};

// One random operation, applied to the stores in `ss` alike (the journaled
// store first), with `m` the model of their rows and `inserted` the model
// of journal_inserted() (ids the journal inserted, still live, in order).
struct driver {
  std::mt19937_64& rng;
  model& m;
  std::vector<fl::row_id>* inserted;  // null when not journaling

  fl::row_id pick() {
    auto it = m.begin();
    std::advance(it, static_cast<std::ptrdiff_t>(rng() % m.size()));
    return it->first;
  }
  void note_insert(fl::row_id id, const Row& r) {
    REQUIRE(m.count(id) == 0);
    m.emplace(id, r);
    if (inserted) inserted->push_back(id);
  }
  void note_erase(fl::row_id id) {
    m.erase(id);
    if (inserted) std::erase(*inserted, id);
  }

  void step(std::vector<store*> ss) {
    const unsigned op = static_cast<unsigned>(rng() % 11);
    if (m.empty() && op >= 2 && op <= 5) return;
    switch (op) {
      case 0:
      case 1: {  // reserve, then a few inserts
        const std::size_t n = 1 + rng() % 4;
        for (store* s : ss) s->reserve(n + rng() % 3);
        for (std::size_t i = 0; i < n; ++i) {
          const Row r = make_row(rng);
          fl::row_id id = 0;
          for (std::size_t j = 0; j < ss.size(); ++j) {
            const fl::row_id got = ss[j]->insert(Row(r));
            if (j == 0) id = got;
            CHECK(got == id);
          }
          note_insert(id, r);
        }
        break;
      }
      case 2: {  // assign
        const fl::row_id id = pick();
        const Row r = make_row(rng);
        for (store* s : ss) s->assign(id, Row(r));
        m[id] = r;
        break;
      }
      case 3:
      case 4: {  // erase
        const fl::row_id id = pick();
        for (store* s : ss) s->erase(id);
        note_erase(id);
        break;
      }
      case 5: {  // mutable get: changed in place, or only read
        const fl::row_id id = pick();
        const bool change = rng() % 3 != 0;
        const std::string tail = std::to_string(rng() % 100);
        for (store* s : ss) {
          Row& r = s->get(id);
          if (change) r.s += tail;
        }
        if (change) m[id].s += tail;
        break;
      }
      case 6: {  // emplace_with, which may throw
        const bool fail = rng() % 4 == 0;
        const Row r = make_row(rng);
        for (store* s : ss) s->reserve(1);
        fl::row_id id = 0;
        for (std::size_t j = 0; j < ss.size(); ++j) {
          try {
            const fl::row_id got = ss[j]->emplace_with([&]() -> Row {
              if (fail) throw thrown();
              return r;
            });
            CHECK_FALSE(fail);
            if (j == 0) id = got;
            CHECK(got == id);
          } catch (const thrown&) {
            CHECK(fail);
          }
        }
        if (!fail) note_insert(id, r);
        break;
      }
      case 7: {  // emplace_each, which may throw part way
        const std::size_t n = rng() % 9;
        std::vector<Row> batch;
        for (std::size_t i = 0; i < n; ++i) batch.push_back(make_row(rng));
        const std::size_t fail_at = rng() % 3 == 0 && n > 0 ? rng() % n : n;
        for (store* s : ss) s->reserve(n);
        for (store* s : ss) {
          const std::size_t size_before = s->size();
          std::size_t i = 0;
          try {
            const std::size_t got = s->emplace_each(batch, [&](const Row& r) -> Row {
              if (i++ == fail_at) throw thrown();
              return r;
            });
            CHECK(fail_at == n);
            CHECK(got == n);
          } catch (const thrown&) {
            CHECK(fail_at < n);
            CHECK(s->size() == size_before);
          }
        }
        if (fail_at == n && n > 0) {
          // Which ids: the store's new live ids, in the order rows were
          // made (dead slots first, head of the free list first, then fresh).
          const model now = contents(*ss[0]);
          std::vector<fl::row_id> fresh;
          for (const auto& [id, r] : now) {
            if (m.count(id) == 0) fresh.push_back(id);
          }
          REQUIRE(fresh.size() == n);
          // Map each new id to its row: the journal's list gives the order
          // when journaling; otherwise match by value through the twin.
          if (inserted) {
            const auto ins = ss[0]->journal_inserted();
            REQUIRE(ins.size() >= n);
            for (std::size_t i = 0; i < n; ++i) {
              const fl::row_id id = ins[ins.size() - n + i];
              CHECK(now.at(id) == batch[i]);
              note_insert(id, batch[i]);
            }
          } else {
            for (const auto id : fresh) m.emplace(id, now.at(id));
          }
          for (std::size_t j = 1; j < ss.size(); ++j) CHECK(contents(*ss[j]) == now);
        }
        break;
      }
      case 8: {  // reserve only, or reserve_fresh
        const std::size_t n = rng() % 70;
        for (store* s : ss) {
          if (rng() % 2) {
            s->reserve(n);
          } else {
            s->reserve_fresh(n);
          }
        }
        break;
      }
      case 9: {  // journal_inserted(), mid-journal
        if (inserted) {
          const auto ins = ss[0]->journal_inserted();
          CHECK(std::vector<fl::row_id>(ins.begin(), ins.end()) == *inserted);
        }
        break;
      }
      case 10: {  // read through the const interface: never journaled
        const fl::row_id id = m.empty() ? 0 : pick();
        for (store* s : ss) {
          if (!m.empty()) CHECK(std::as_const(*s).get(id) == m.at(id));
        }
        break;
      }
    }
  }
};

// The same fixed sequence after the journal, on both stores: the ids each
// insert receives must agree (the free list is the same, in the same order).
void check_later_inserts(store& a, store& b, model& m, std::mt19937_64& rng) {
  std::vector<fl::row_id> erase_order;
  for (const auto& [id, r] : m) erase_order.push_back(id);
  std::shuffle(erase_order.begin(), erase_order.end(), rng);
  erase_order.resize(erase_order.size() / 3);
  for (const auto id : erase_order) {
    a.erase(id);
    b.erase(id);
    m.erase(id);
  }
  const std::size_t n = 5 + rng() % 40;
  a.reserve(n);
  b.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    Row r{i, "later" + std::to_string(i)};
    const fl::row_id x = a.insert(Row(r)), y = b.insert(Row(r));
    CHECK(x == y);
    m.emplace(x, r);
  }
  CHECK(a.id_bound() == b.id_bound());
  check_same(a, m, "after the later inserts");
  check_same(b, m, "twin after the later inserts");
}

// A store with random contents and erased holes (the same in both).
void fill(store& a, store& b, model& m, std::mt19937_64& rng) {
  driver d{rng, m, nullptr};
  const std::size_t n = rng() % 150;
  for (std::size_t i = 0; i < n; ++i) d.step({&a, &b});
}

TEST_CASE("journal: rollback restores rows, size, id_bound and the ids of later inserts") {
  for (std::uint64_t seed = 1; seed <= 300; ++seed) {
    CAPTURE(seed);
    std::mt19937_64 rng(seed);
    store a, b;  // b never sees the journal
    model m;
    fill(a, b, m, rng);
    const model before = m;
    const std::size_t bound = a.id_bound();
    REQUIRE(contents(a) == before);

    a.begin_journal();
    CHECK(a.journaling());
    std::vector<fl::row_id> inserted;
    driver d{rng, m, &inserted};
    const std::size_t ops = rng() % 60;
    for (std::size_t i = 0; i < ops; ++i) d.step({&a});
    const auto ins = a.journal_inserted();
    CHECK(std::vector<fl::row_id>(ins.begin(), ins.end()) == inserted);
    check_same(a, m, "inside the journal");

    a.rollback_journal();
    CHECK_FALSE(a.journaling());
    CHECK(a.journal_inserted().empty());
    m = before;
    CHECK(a.id_bound() == bound);
    check_same(a, before, "after rollback");
    check_later_inserts(a, b, m, rng);
  }
}

TEST_CASE("journal: commit leaves the store as one that never had a journal") {
  for (std::uint64_t seed = 1; seed <= 300; ++seed) {
    CAPTURE(seed);
    std::mt19937_64 rng(seed * 7919);
    store a, b;
    model m;
    fill(a, b, m, rng);

    a.begin_journal();
    std::vector<fl::row_id> inserted;
    driver d{rng, m, &inserted};
    const std::size_t ops = rng() % 60;
    for (std::size_t i = 0; i < ops; ++i) d.step({&a, &b});
    const auto ins = a.journal_inserted();
    CHECK(std::vector<fl::row_id>(ins.begin(), ins.end()) == inserted);

    a.commit_journal();
    CHECK_FALSE(a.journaling());
    CHECK(a.id_bound() == b.id_bound());
    check_same(a, m, "after commit");
    check_same(b, m, "twin");
    check_later_inserts(a, b, m, rng);
  }
}

TEST_CASE("journal: many batches on one store, each committed or rolled back") {
  for (std::uint64_t seed = 1; seed <= 40; ++seed) {
    CAPTURE(seed);
    std::mt19937_64 rng(seed * 104729);
    store a, b;  // b receives only the committed batches
    model m;
    fill(a, b, m, rng);
    for (int batch = 0; batch < 30; ++batch) {
      CAPTURE(batch);
      const bool commit = rng() % 2;
      const std::uint64_t batch_seed = rng();
      // The batch on the journaled store...
      std::mt19937_64 r1(batch_seed);
      model m1 = m;
      std::vector<fl::row_id> inserted;
      a.begin_journal();
      driver d1{r1, m1, &inserted};
      const std::size_t ops = r1() % 40;
      for (std::size_t i = 0; i < ops; ++i) d1.step({&a});
      const auto ins = a.journal_inserted();
      CHECK(std::vector<fl::row_id>(ins.begin(), ins.end()) == inserted);
      if (commit) {
        a.commit_journal();
        // ... and the same batch, without a journal, on the twin.
        std::mt19937_64 r2(batch_seed);
        model m2 = m;
        driver d2{r2, m2, nullptr};
        const std::size_t ops2 = r2() % 40;
        for (std::size_t i = 0; i < ops2; ++i) d2.step({&b});
        CHECK(m2 == m1);
        m = m1;
      } else {
        a.rollback_journal();
      }
      CHECK(a.id_bound() == b.id_bound());
      check_same(a, m, "journaled store");
      check_same(b, m, "twin");
    }
    check_later_inserts(a, b, m, rng);
  }
}

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
