// The row_store contract (storage/row_store.hpp) for every storage policy:
// flowlib::MemoryStorage, flowtest::DequeStorage (tests/support/
// storage_policies.hpp), and flowlib::SqliteStorage and flowlib::FileStorage
// unattached (no pipeline opened them). The semantics suites run the flows
// on the first two only; what a flow may assume of any store is checked
// here, once per policy.
//
// Random sequences (many seeds) of inserts, assigns, erases, in-place
// changes, clears, reserves and the optional hooks run against a model, a
// map from id to row, and after every step the store equals it:
//   - an id stays valid until its row is erased; every id handed out is
//     below id_bound(), one insert raises id_bound() by at most one, and
//     id_bound() falls only at clear() and rollback;
//   - size() counts, get(id) reads, rows() yields exactly the live rows
//     (each once, the objects get() returns; a second pass the same), and
//     for_each_row(), where present, each with its id in id order;
//   - after reserve(n), n inserts allocate nothing, and neither do assigns
//     and erases while no journal is open; a reserve() that fails for want
//     of memory changes no row;
//   - insert_made (emplace_with) and emplace_each change nothing when the
//     row's construction throws; prepared assigns, in any order, are the
//     assigns in prepare order;
//   - the change journal, where present: rollback restores the model and
//     id_bound(), and the batch replayed after it receives the same ids;
//     journal_inserted(), journal_changed() and journal_erased() follow the
//     model.
// Each run records the ids handed out and id_bound() after every step (its
// trace): a store whose journals are all committed, or rolled back and
// replayed, gives the trace of one that never had a journal, and the
// unattached durable stores give the memory store's trace.
#include <flowlib/storage/file.hpp>
#include <flowlib/storage/memory.hpp>
#include <flowlib/storage/row_store.hpp>
#include <flowlib/storage/sqlite.hpp>

#include <support/failing_allocator.hpp>
#include <support/storage_policies.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <map>
#include <new>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

TYPE_TO_STRING(flowlib::SqliteStorage);
TYPE_TO_STRING(flowlib::FileStorage);

namespace storage_row_store_contract {

namespace fl = flowlib;

// A unique uid per row made, so rows() matches the model row for row; long
// strings leave the small buffer (ASan sees leaks and double destructions).
struct Row {
  std::uint64_t uid{};
  std::string s;
  friend bool operator==(const Row&, const Row&) = default;
};

template <class Storage>
using store_of = typename Storage::template store<Row>;

template <class Storage>
constexpr bool meets_contract() {
  using S = store_of<Storage>;
  return fl::row_store<S> && fl::table_storage<Storage, Row> && fl::mutable_row_store<S> &&
         noexcept(std::declval<S&>().insert(std::declval<Row&&>())) &&
         noexcept(std::declval<S&>().assign(fl::row_id{}, std::declval<Row&&>())) &&
         noexcept(std::declval<S&>().erase(fl::row_id{})) && noexcept(std::declval<S&>().clear());
}
static_assert(meets_contract<fl::MemoryStorage>() && meets_contract<flowtest::DequeStorage>() &&
              meets_contract<fl::SqliteStorage>() && meets_contract<fl::FileStorage>());
// The durable stores keep their rows in a memory store: its capabilities.
static_assert(fl::journaled_row_store<store_of<fl::SqliteStorage>> &&
              fl::journaled_row_store<store_of<fl::FileStorage>> &&
              fl::parallel_assign_row_store<store_of<fl::SqliteStorage>> &&
              fl::parallel_assign_row_store<store_of<fl::FileStorage>>);
static_assert(!fl::journaled_row_store<store_of<flowtest::DequeStorage>> &&
              !fl::parallel_assign_row_store<store_of<flowtest::DequeStorage>>);

/// What a make function throws (no allocation: counted windows stay exact).
struct thrown {};

/// Allocations `f` makes.
template <class F>
long allocations(F&& f) {
  constexpr long budget = 1'000'000'000;
  failing_allocator::arm(budget);
  f();
  const long used = budget - failing_allocator::allocations_left;
  failing_allocator::disarm();
  return used;
}

/// A make function for emplace_each that throws at row `fail_at`.
struct copy_until {
  std::size_t* made;
  std::size_t fail_at;
  Row operator()(const Row& r) const {
    if ((*made)++ == fail_at) throw thrown{};
    return r;
  }
};

enum class journal_mode {
  none,    // no journal
  commit,  // every batch in a journal, committed
  any,     // every batch in a journal, committed, or rolled back and replayed
};

template <class Store>
class contract_run {
  static constexpr bool journaled = fl::journaled_row_store<Store>;
  static constexpr bool with_ids = requires(const Store& s) { s.for_each_row([](fl::row_id, const Row&) {}); };
  static constexpr bool with_changes = requires(const Store& s, std::vector<fl::row_id>& v) {
    s.journal_changed(v);
    s.journal_erased(v);
  };
  using rng_t = std::mt19937_64;

 public:
  contract_run(std::uint64_t seed, journal_mode mode) : rng_(seed), mode_(journaled ? mode : journal_mode::none) {}

  /// Ids handed out and id_bound() after each step.
  std::vector<std::uint64_t> trace;

  /// `n` batches, each a journal where the mode says so; now and then a
  /// clear() between them.
  void run(int n) {
    check();
    for (int b = 0; b < n; ++b) {
      CAPTURE(b);
      const std::uint64_t draw = rng_(), batch_seed = rng_();  // the same draws in every mode
      if (draw % 7 == 0) {
        do_clear();
      } else if (mode_ == journal_mode::none) {
        batch(batch_seed);
      } else {
        journaled_batch(batch_seed, mode_ == journal_mode::any && (draw >> 8) % 3 == 0);
      }
      check();
    }
  }

 private:
  // --- Batches and the journal ----------------------------------------------

  void batch(std::uint64_t seed) {
    rng_t rng(seed);
    const std::size_t ops = rng() % 16;
    for (std::size_t i = 0; i < ops; ++i) {
      step(rng);
      check();
    }
  }

  void journaled_batch(std::uint64_t seed, bool roll_back) {
    if constexpr (journaled) {
      const auto model_before = m_;
      const std::size_t bound_before = s_.id_bound(), trace_at = trace.size();
      const std::uint64_t uid_before = uid_;
      begin();
      batch(seed);
      if (roll_back) {
        const auto model_after = m_;
        const std::vector<std::uint64_t> first(trace.begin() + static_cast<std::ptrdiff_t>(trace_at), trace.end());
        s_.rollback_journal();
        end_journal();
        m_ = model_before;
        CHECK(s_.id_bound() == bound_before);
        bound_ = bound_before;
        check();
        // The replay receives the ids of the first attempt.
        trace.resize(trace_at);
        uid_ = uid_before;
        begin();
        batch(seed);
        CHECK(m_ == model_after);
        CHECK(std::equal(first.begin(), first.end(), trace.begin() + static_cast<std::ptrdiff_t>(trace_at), trace.end()));
      }
      s_.commit_journal();
      end_journal();
    }
  }

  void begin() {
    if constexpr (journaled) {
      s_.begin_journal();
      open_ = true;
      live_before_.clear();
      for (const auto& [id, r] : m_) live_before_.insert(id);
    }
  }
  void end_journal() {
    open_ = false;
    inserted_.clear();
    first_changed_.clear();
    live_before_.clear();
  }

  // --- Operations -------------------------------------------------------------

  Row make_row(rng_t& rng) {
    std::string s = "v" + std::to_string(rng() % 1000);
    if (rng() % 2) s += std::string(24 + rng() % 16, static_cast<char>('a' + rng() % 26));
    return {++uid_, std::move(s)};
  }
  fl::row_id pick(rng_t& rng) const {
    auto it = m_.begin();
    std::advance(it, static_cast<std::ptrdiff_t>(rng() % m_.size()));
    return it->first;
  }

  void step(rng_t& rng) {
    const unsigned op = static_cast<unsigned>(rng() % 10);
    if (m_.empty() && (op == 2 || op == 3 || op == 4 || op == 8)) return;
    switch (op) {
      case 0:
      case 1: insert_some(rng); break;
      case 2: assign(rng); break;
      case 3: erase(rng); break;
      case 4: change_in_place(rng); break;
      case 5: insert_made(rng); break;
      case 6: emplace_each(rng); break;
      case 7: reserve_only(rng); break;
      case 8: prepared_assigns(rng); break;
      default: insert_some(rng); break;
    }
  }

  /// reserve(n), then n inserts, with assigns and erases among them.
  void insert_some(rng_t& rng) {
    const std::size_t n = 1 + rng() % 5;
    s_.reserve(n + rng() % 3);
    for (std::size_t i = 0; i < n; ++i) {
      if (!m_.empty() && rng() % 4 == 0) (rng() % 2 ? assign(rng) : erase(rng));
      Row r = make_row(rng);
      const Row want = r;
      const std::size_t bound = s_.id_bound();
      fl::row_id id = 0;
      const long used = allocations([&] { id = s_.insert(std::move(r)); });
      // First changes among them may allocate; the inserts never do.
      CHECK(used == 0);
      note_insert(id, bound, want);
    }
  }
  void assign(rng_t& rng) {
    const fl::row_id id = pick(rng);
    Row r = make_row(rng);
    const Row want = r;
    const long used = allocations([&] { s_.assign(id, std::move(r)); });
    if (!open_) CHECK(used == 0);
    note_change(id);
    m_[id] = want;
  }
  void erase(rng_t& rng) {
    const fl::row_id id = pick(rng);
    const long used = allocations([&] { s_.erase(id); });
    if (!open_) CHECK(used == 0);
    note_change(id);
    m_.erase(id);
    if (open_) std::erase(inserted_, id);
  }
  /// A mutable get(): changed in place, or only reached.
  void change_in_place(rng_t& rng) {
    const fl::row_id id = pick(rng);
    const bool change = rng() % 3 != 0;
    const std::string tail = std::to_string(rng() % 100);
    Row& r = s_.get(id);
    if (change) r.s += tail;
    note_change(id);
    if (change) m_[id].s += tail;
  }
  /// detail::insert_made: the emplace_with hook where the store has it;
  /// a throwing make() leaves the store as it was.
  void insert_made(rng_t& rng) {
    const bool fail = rng() % 4 == 0;
    Row r = make_row(rng);
    const Row want = r;
    s_.reserve(1);
    const std::size_t bound = s_.id_bound();
    fl::row_id id = 0;
    bool threw = false;
    const long used = allocations([&] {
      try {
        id = fl::detail::insert_made(s_, [&]() -> Row {
          if (fail) throw thrown{};
          return std::move(r);
        });
      } catch (const thrown&) {
        threw = true;
      }
    });
    CHECK(threw == fail);
    if (!open_) CHECK(used == 0);
    if (!fail) note_insert(id, bound, want);
  }
  /// The emplace_each hook, all or nothing, where the store has it.
  void emplace_each(rng_t& rng) {
    const std::size_t n = rng() % 9;
    std::vector<Row> batch;
    for (std::size_t i = 0; i < n; ++i) batch.push_back(make_row(rng));
    const std::size_t fail_at = n > 0 && rng() % 3 == 0 ? rng() % n : n;
    if constexpr (fl::detail::has_emplace_each<Store, std::vector<Row>, copy_until>) {
      static_assert(with_ids, "emplace_each's ids are learnt through for_each_row");
      s_.reserve(n);
      const std::size_t bound = s_.id_bound();
      std::size_t made = 0, got = 0;
      try {
        got = s_.emplace_each(batch, copy_until{&made, fail_at});
      } catch (const thrown&) {
        CHECK(fail_at < n);
        return;  // check() finds the store as it was
      }
      CHECK(got == n);
      CHECK(fail_at == n);
      // Each row's id, in batch order (the journal's insertion order).
      std::map<std::uint64_t, fl::row_id> by_uid;
      s_.for_each_row([&](fl::row_id id, const Row& r) {
        if (m_.count(id) == 0) by_uid.emplace(r.uid, id);
      });
      REQUIRE(by_uid.size() == n);
      CHECK(s_.id_bound() <= bound + n);
      for (const Row& r : batch) note_insert(by_uid.at(r.uid), s_.id_bound() - 1, r);
    }
  }
  /// reserve(), or reserve_rows() (the reserve_fresh hook), now and then
  /// failing for want of memory: the rows stay as they were either way.
  void reserve_only(rng_t& rng) {
    const std::size_t n = rng() % 70;
    const bool fail = rng() % 4 == 0;
    const bool fresh = rng() % 2 == 0;
    if (fail) failing_allocator::arm(static_cast<long>(rng() % 3));
    try {
      if (fresh) {
        fl::detail::reserve_rows(s_, n);
      } else {
        s_.reserve(n);
      }
    } catch (const std::bad_alloc&) {
      failing_allocator::disarm();
      CHECK(fail);
    }
    failing_allocator::disarm();
  }
  /// Prepared assigns in a shuffled order (as threads would run them); a
  /// store without the capability gets the same assign() calls.
  void prepared_assigns(rng_t& rng) {
    std::vector<fl::row_id> ids;
    const std::size_t k = std::min<std::size_t>(1 + rng() % 6, m_.size());
    while (ids.size() < k) {
      const fl::row_id id = pick(rng);
      if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
    }
    std::vector<Row> rows;
    for (std::size_t i = 0; i < k; ++i) rows.push_back(make_row(rng));
    const std::vector<Row> want = rows;
    std::vector<std::size_t> order(k);
    for (std::size_t i = 0; i < k; ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), rng);
    if constexpr (fl::parallel_assign_row_store<Store>) {
      s_.prepare_assigns(k);
      std::vector<std::size_t> tickets(k);
      CHECK(allocations([&] {
              for (std::size_t i = 0; i < k; ++i) tickets[i] = s_.prepare_assign(ids[i]);
              for (const std::size_t i : order) s_.assign_prepared(tickets[i], ids[i], std::move(rows[i]));
              s_.finish_assigns();
            }) == 0);
    } else {
      for (std::size_t i = 0; i < k; ++i) s_.assign(ids[i], std::move(rows[i]));
    }
    for (std::size_t i = 0; i < k; ++i) {
      note_change(ids[i]);
      m_[ids[i]] = want[i];
    }
  }
  void do_clear() {
    s_.clear();
    m_.clear();
    bound_ = s_.id_bound();
  }

  // --- The model ----------------------------------------------------------------

  void note_insert(fl::row_id id, std::size_t bound_before, const Row& r) {
    CHECK(m_.count(id) == 0);  // never the id of a live row
    CHECK(id < s_.id_bound());
    CHECK(s_.id_bound() <= bound_before + 1);
    m_.emplace(id, r);
    if (open_) inserted_.push_back(id);
    trace.push_back(id);
  }
  /// A row live before the journal, changed (assigned, reached in place or
  /// erased) for the first time: the order of journal_changed()'s second part.
  void note_change(fl::row_id id) {
    if (open_ && live_before_.count(id) != 0 &&
        std::find(first_changed_.begin(), first_changed_.end(), id) == first_changed_.end()) {
      first_changed_.push_back(id);
    }
  }

  void check() {
    const Store& cs = s_;
    REQUIRE(cs.size() == m_.size());
    CHECK(cs.id_bound() >= bound_);  // it never falls, but at clear() and rollback
    bound_ = cs.id_bound();
    trace.push_back(bound_);
    // get(id) reads each live row; rows() yields those objects, each once,
    // and the same again on a second pass.
    std::vector<const Row*> live, seen, again;
    bool gets = true;
    for (const auto& [id, r] : m_) {
      if (id >= bound_ || !(cs.get(id) == r)) {
        gets = false;
        break;
      }
      live.push_back(&cs.get(id));
    }
    REQUIRE(gets);
    for (const Row& r : cs.rows()) seen.push_back(&r);
    for (const Row& r : cs.rows()) again.push_back(&r);
    CHECK(again == seen);
    std::sort(live.begin(), live.end());
    std::sort(seen.begin(), seen.end());
    REQUIRE(seen == live);
    if constexpr (with_ids) {
      auto it = m_.begin();
      bool same = true;
      cs.for_each_row([&](fl::row_id id, const Row& r) {
        same = same && it != m_.end() && it->first == id && it->second == r;
        if (it != m_.end()) ++it;
      });
      CHECK((same && it == m_.end()));
    }
    if constexpr (journaled) {
      REQUIRE(cs.journaling() == open_);
      if (!open_) return;
      const auto ins = cs.journal_inserted();
      CHECK(std::equal(ins.begin(), ins.end(), inserted_.begin(), inserted_.end()));
      if constexpr (with_changes) {
        std::vector<fl::row_id> changed, erased, want_changed = inserted_, want_erased;
        cs.journal_changed(changed);
        cs.journal_erased(erased);
        for (const fl::row_id id : first_changed_) {
          if (m_.count(id) == 0) {
            want_erased.push_back(id);
          } else if (std::find(inserted_.begin(), inserted_.end(), id) == inserted_.end()) {
            want_changed.push_back(id);
          }
        }
        CHECK(changed == want_changed);
        CHECK(erased == want_erased);
      }
    }
  }

  Store s_;
  std::map<fl::row_id, Row> m_;  // the live rows
  rng_t rng_;
  journal_mode mode_;
  std::uint64_t uid_ = 0;
  std::size_t bound_ = 0;  // id_bound() at the last check
  // The open journal's model: inserted ids still live, in insertion order;
  // rows live before it, in first-change order.
  bool open_ = false;
  std::vector<fl::row_id> inserted_, first_changed_;
  std::set<fl::row_id> live_before_;
};

template <class Storage>
std::vector<std::uint64_t> trace_of(std::uint64_t seed, journal_mode mode) {
  CAPTURE(seed);
  contract_run<store_of<Storage>> r(seed, mode);
  r.run(8);
  return r.trace;
}

TEST_CASE_TEMPLATE("R-EXACT-1 R-EXACT-5 R-EXACT-7: every storage policy meets the row_store contract on "
                   "random sequences against a model: ids stable and below id_bound(), rows() exactly "
                   "the live rows, nothing allocated after reserve(), clear(), the hooks and prepared "
                   "assigns",
                   Storage, fl::MemoryStorage, flowtest::DequeStorage, fl::SqliteStorage, fl::FileStorage) {
  for (std::uint64_t seed = 1; seed <= 100; ++seed) trace_of<Storage>(seed, journal_mode::none);
}

TEST_CASE_TEMPLATE("R-EXACT-1: a journaled store's rollback restores the rows, size() and id_bound(), "
                   "and the replayed batch receives the same ids; committing is as if no journal was "
                   "open; journal_inserted(), journal_changed() and journal_erased() follow the model",
                   Storage, fl::MemoryStorage, fl::SqliteStorage, fl::FileStorage) {
  for (std::uint64_t seed = 1; seed <= 40; ++seed) {
    const auto plain = trace_of<Storage>(seed * 7919, journal_mode::none);
    CHECK(trace_of<Storage>(seed * 7919, journal_mode::commit) == plain);
    CHECK(trace_of<Storage>(seed * 7919, journal_mode::any) == plain);
  }
}

TEST_CASE("R-DURABLE-1 R-DURABLE-6: unattached, SqliteStorage and FileStorage stores are the memory "
          "store: the same ids and id_bound() as MemoryStorage on every sequence, journals and "
          "rollbacks included") {
  for (std::uint64_t seed = 1; seed <= 25; ++seed) {
    for (const journal_mode mode : {journal_mode::none, journal_mode::any}) {
      const auto memory = trace_of<fl::MemoryStorage>(seed * 104729, mode);
      CHECK(trace_of<fl::SqliteStorage>(seed * 104729, mode) == memory);
      CHECK(trace_of<fl::FileStorage>(seed * 104729, mode) == memory);
    }
  }
}

// Counts the moves of rows (insert_made builds in the slot where it can).
inline int moves = 0;
struct Moved {
  int value = 0;
  explicit Moved(int v) : value(v) {}
  Moved(Moved&& o) noexcept : value(o.value) { ++moves; }
  Moved& operator=(Moved&& o) noexcept {
    value = o.value;
    ++moves;
    return *this;
  }
  Moved(const Moved&) = delete;
  Moved& operator=(const Moved&) = delete;
  ~Moved() = default;
};

TEST_CASE_TEMPLATE("R-CDC-4: detail::insert_made (SCD2's new versions) builds the row in its slot where "
                   "the store can (emplace_with), else moves it in; a failing build changes nothing",
                   Storage, fl::MemoryStorage, flowtest::DequeStorage, fl::SqliteStorage, fl::FileStorage) {
  using Store = typename Storage::template store<Moved>;
  constexpr bool in_place = requires(Store& s) { s.emplace_with([] { return Moved(0); }); };
  // SqliteStorage's and FileStorage's stores are the memory store (their working set).
  CHECK(in_place == !std::is_same_v<Storage, flowtest::DequeStorage>);
  Store s;
  s.reserve(2);
  moves = 0;
  const fl::row_id a = fl::detail::insert_made(s, [] {
    Moved m(7);  // named: the one pass builds its row so
    m.value += 1;
    return m;
  });
  CHECK(s.get(a).value == 8);
  CHECK(moves == (in_place ? 0 : 1));
  CHECK_THROWS_AS(fl::detail::insert_made(s, []() -> Moved { throw std::runtime_error("no"); }),
                  std::runtime_error);
  CHECK(s.size() == 1);
  const fl::row_id b = fl::detail::insert_made(s, [] { return Moved(9); });
  CHECK(b != a);
  CHECK(s.get(b).value == 9);
  CHECK(s.get(a).value == 8);
}

TEST_CASE("flowtest::DequeStorage is unlike MemoryStorage where the contract leaves room: ids start "
          "above zero and are never reused, rows() is newest first") {
  flowtest::deque_row_store<Row> s;
  s.reserve(3);
  const fl::row_id a = s.insert(Row{1, "a"});
  const fl::row_id b = s.insert(Row{2, "b"});
  CHECK(a == flowtest::deque_row_store<Row>::first_id);
  s.erase(a);
  const fl::row_id c = s.insert(Row{3, "c"});
  CHECK(c != a);
  CHECK(c == b + 1);
  CHECK(s.tombstones() == 1);
  std::vector<std::uint64_t> order;
  for (const Row& r : s.rows()) order.push_back(r.uid);
  CHECK(order == std::vector<std::uint64_t>{3, 2});
  s.clear();
  s.reserve(1);
  CHECK(s.insert(Row{4, "d"}) == c + 1);  // clear() does not restart the ids

  fl::detail::memory_row_store<Row> m;
  m.reserve(3);
  const fl::row_id ma = m.insert(Row{1, "a"});
  m.insert(Row{2, "b"});
  m.erase(ma);
  CHECK(m.insert(Row{3, "c"}) == ma);  // the memory store reuses freed ids
}

}  // namespace storage_row_store_contract
