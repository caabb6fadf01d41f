// REPLACE USING spread over threads (apply_batch with a pool; see "Threads"
// in flows/replace_using.hpp) against the same flow on one thread.
//
//   - Generated batches (several seeds; keys with several rows per
//     sequence, ties, late rows, keys new and already present, replaces
//     with fewer and with more rows than the key holds; batches above and
//     below ReplaceUsing::sharded_min_rows) applied by a twin pair of flows
//     and tables, one with a pool of 2, 3 or 4 threads and one without:
//     after every batch, the same rows under the same ids, the same
//     BatchStats, key_count() and sequence_of() for every key, and, under
//     a journal, the same journal records.
//   - Errors: a fail expectation and a null sequence (R-USING-7) in a
//     sharded batch give the serial error (the first offending row in batch
//     order) and leave the table and the flow as they were.
//   - A journal rollback after a sharded commit restores the table exactly.
//   - Every storage policy of the suites: stores without prepared assigns
//     (flowtest::DequeStorage) take the serial path and agree too. (Prepared
//     assigns of the durable stores: tests/storage/row_store_contract.cpp.)
#include <flowlib/detail/task_pool.hpp>
#include <flowlib/flowlib.hpp>

#include <support/errors.hpp>
#include <support/storage_policies.hpp>

#include <doctest/doctest.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace flows_replace_using_sharded {

namespace fl = flowlib;

struct Row {
  std::int64_t k = 0;
  std::string name;                // a key too (KeyName): strings are not kept inline
  std::optional<std::int64_t> seq;  // nullable, for R-USING-7
  std::int64_t uid = 0;            // tells rows apart
  std::string payload;             // long ones leave the small-string buffer
  friend bool operator==(const Row&, const Row&) = default;
};
FLOWLIB_SCHEMA(Row, k, name, seq, uid, payload);

using KeyInt = fl::Key<&Row::k>;
using KeyName = fl::Key<&Row::name>;

/// Row::seq, counting its calls: a batch that took the sharded path reads
/// each row's sequence twice (by chunk for R-USING-7, then grouping), the
/// serial path once, which tells the tests which path a batch took.
struct Seq {
  using row_type = Row;
  using value_type = std::int64_t;
  static inline std::atomic<std::uint64_t> calls{0};
  std::optional<std::int64_t> operator()(const Row& r) const {
    calls.fetch_add(1, std::memory_order_relaxed);
    return r.seq;
  }
  std::string_view name() const { return "seq"; }
};
static_assert(fl::sequence_extractor<Seq>);

static_assert(fl::parallel_assign_row_store<fl::MemoryStorage::store<Row>>);
static_assert(!fl::parallel_assign_row_store<flowtest::DequeStorage::store<Row>>);

constexpr std::size_t threshold = fl::ReplaceUsing<KeyInt, Seq>::sharded_min_rows;

/// Generates batches over `keys` keys whose sequences rise slowly, so that
/// a key meets ties (equal sequences), late rows (below the target's) and
/// rows that replace its rows by more or by fewer.
struct generator {
  std::mt19937_64 rng;
  std::int64_t keys;
  std::int64_t epoch = 0;
  std::int64_t uid = 0;

  Row make(std::int64_t key) {
    Row r;
    r.k = key;
    r.name = "n" + std::to_string(key);
    // Sequences from a narrow window that moves up batch by batch: many
    // ties within a batch, some rows below what the target holds.
    r.seq = epoch + static_cast<std::int64_t>(rng() % 4);
    r.uid = ++uid;
    r.payload = rng() % 3 == 0 ? std::string(40, static_cast<char>('a' + rng() % 26)) : "p";
    return r;
  }
  std::vector<Row> batch(std::size_t n) {
    std::vector<Row> out;
    out.reserve(n);
    // A quarter of the batch: keys beyond the current range (new keys).
    const std::int64_t range = keys + epoch * 97;
    for (std::size_t i = 0; i < n; ++i) {
      const std::int64_t key =
          rng() % 4 == 0 ? static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(range + 500))
                         : static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(keys));
      out.push_back(make(key));
    }
    epoch += 2;
    return out;
  }
};

/// The rows of a table by id (stores that say which ids are live), or in
/// the order rows() yields them (the others: that order is deterministic).
template <class Table>
std::vector<std::pair<std::int64_t, Row>> rows_by_id(const Table& t) {
  std::vector<std::pair<std::int64_t, Row>> out;
  const auto& store = t.store();
  if constexpr (requires { store.for_each_row([](fl::row_id, const Row&) {}); }) {
    store.for_each_row([&](fl::row_id id, const Row& r) { out.emplace_back(id, r); });
  } else {
    for (const Row& r : store.rows()) out.emplace_back(-1, r);
  }
  return out;
}

template <class Flow, class Table>
void check_same_state(const Flow& serial, const Table& serial_table, const Flow& sharded,
                      const Table& sharded_table, const std::set<std::int64_t>& keys) {
  REQUIRE(rows_by_id(sharded_table) == rows_by_id(serial_table));
  CHECK(sharded_table.store().id_bound() == serial_table.store().id_bound());
  CHECK(sharded.key_count() == serial.key_count());
  std::vector<std::optional<std::int64_t>> a, b;
  for (const std::int64_t k : keys) {
    if constexpr (std::is_same_v<typename Flow::key_type, std::string>) {
      const std::string key = "n" + std::to_string(k);
      a.push_back(serial.sequence_of(key));
      b.push_back(sharded.sequence_of(key));
    } else {
      a.push_back(serial.sequence_of(k));
      b.push_back(sharded.sequence_of(k));
    }
  }
  CHECK(b == a);
}

/// The journal's records: changed and erased ids in order, inserted ids.
template <class Store>
std::vector<std::vector<fl::row_id>> journal_records(const Store& s) {
  std::vector<fl::row_id> changed, erased;
  s.journal_changed(changed);
  s.journal_erased(erased);
  const auto ins = s.journal_inserted();
  return {changed, erased, std::vector<fl::row_id>(ins.begin(), ins.end())};
}

template <class Storage, class Key>
void run_random(std::uint64_t seed, std::size_t threads, bool journal) {
  CAPTURE(seed);
  CAPTURE(threads);
  CAPTURE(journal);
  using Flow = fl::ReplaceUsing<Key, Seq>;
  fl::detail::task_pool pool(threads);
  fl::StreamingTable<Row, Storage> serial_table{"serial"}, sharded_table{"sharded"};
  Flow serial{"serial"}, sharded{"sharded"};
  generator gen{std::mt19937_64(seed), static_cast<std::int64_t>(3000 + seed % 5 * 1000)};
  std::set<std::int64_t> keys;
  // Sizes around the threshold: above it (sharded), below it (serial), and
  // a first batch that fills an empty table.
  const std::vector<std::size_t> sizes = {threshold + 1000, threshold / 2, threshold + 4000,
                                          threshold + 1};
  for (std::size_t b = 0; b < sizes.size(); ++b) {
    CAPTURE(b);
    std::vector<Row> batch = gen.batch(sizes[b]);
    for (const Row& r : batch) keys.insert(r.k);
    std::vector<Row> copy = batch;
    constexpr bool journaled = fl::journaled_row_store<typename Storage::template store<Row>>;
    if constexpr (journaled) {
      if (journal) {
        serial_table.store().begin_journal();
        sharded_table.store().begin_journal();
      }
    }
    Seq::calls = 0;
    const fl::BatchStats a = serial.apply_batch(serial_table, batch, fl::NoExpectations{},
                                                fl::batch_info{"serial", b, nullptr});
    CHECK(Seq::calls == sizes[b]);
    Seq::calls = 0;
    const fl::BatchStats c = sharded.apply_batch(sharded_table, copy, fl::NoExpectations{},
                                                 fl::batch_info{"sharded", b, &pool});
    // The path taken: sharded for large batches on stores with prepared
    // assigns, serial otherwise.
    constexpr bool parallel = fl::parallel_assign_row_store<typename Storage::template store<Row>>;
    CHECK(Seq::calls == (parallel && sizes[b] >= threshold ? 2 : 1) * sizes[b]);
    CHECK(c == a);
    if (b > 0) {  // the data does the work it claims
      CHECK(a.replaced_rows > 0);
      CHECK(a.appended_rows > 0);
      CHECK(a.ignored_late_rows > 0);
      CHECK(a.superseded_rows > 0);
      CHECK(a.inserted_rows > 0);
    }
    if constexpr (journaled) {
      if (journal) {
        CHECK(journal_records(sharded_table.store()) == journal_records(serial_table.store()));
        serial_table.store().commit_journal();
        sharded_table.store().commit_journal();
      }
    }
    check_same_state(serial, serial_table, sharded, sharded_table, keys);
  }
}

TEST_CASE_TEMPLATE("R-USING-1 R-USING-2: a batch spread over 2, 3 and 4 threads gives the one-thread "
                   "result (rows by id, stats, index), generated inputs",
                   Storage, FLOWTEST_STORAGE_POLICIES) {
  for (std::uint64_t seed : {1u, 2u}) {
    for (std::size_t threads : {2u, 3u, 4u}) {
      run_random<Storage, KeyInt>(seed * 7 + threads, threads, /*journal=*/false);
    }
  }
}

TEST_CASE("R-USING-1 R-USING-2: a sharded batch under a journal: the same journal records as one "
          "thread (string keys, several seeds)") {
  for (std::uint64_t seed : {11u, 12u, 13u}) {
    run_random<fl::MemoryStorage, KeyName>(seed, 2 + seed % 3, /*journal=*/true);
  }
}

TEST_CASE("R-USING-8: flow expectations that drop rows in a sharded batch: the one-thread stats "
          "and rows") {
  fl::detail::task_pool pool(3);
  const auto checks = fl::expectations(
      fl::expect_or_drop("even_uid_or_short", [](const Row& r) { return r.uid % 5 != 0 || r.payload.size() < 10; }),
      fl::expect("warned", [](const Row& r) { return r.uid % 7 != 0; }));
  fl::StreamingTable<Row> serial_table{"serial"}, sharded_table{"sharded"};
  fl::ReplaceUsing<KeyInt, Seq> serial{"serial"}, sharded{"sharded"};
  generator gen{std::mt19937_64(5), 4000};
  std::set<std::int64_t> keys;
  for (std::uint64_t b = 0; b < 3; ++b) {
    std::vector<Row> batch = gen.batch(threshold + 2000);
    for (const Row& r : batch) keys.insert(r.k);
    std::vector<Row> copy = batch;
    const fl::BatchStats a = serial.apply_batch(serial_table, batch, checks, fl::batch_info{"s", b, nullptr});
    const fl::BatchStats c = sharded.apply_batch(sharded_table, copy, checks, fl::batch_info{"s", b, &pool});
    CHECK(a.dropped_rows > 0);
    REQUIRE(a.expectations.size() == 2);
    CHECK(a.expectations[1].failed > 0);
    CHECK(c == a);
    check_same_state(serial, serial_table, sharded, sharded_table, keys);
  }
}

/// Applies `bad` with and without the pool to twin tables that already hold
/// the same batch, under a journal; both must throw the same error and leave
/// the tables and flows as they were; a rollback then restores the tables
/// to their state before the journal.
template <class Checks>
void check_failing_batch(std::vector<Row> bad, const Checks& checks, std::uint64_t seed) {
  fl::detail::task_pool pool(2);
  fl::StreamingTable<Row> serial_table{"t"}, sharded_table{"t"};
  fl::ReplaceUsing<KeyInt, Seq> serial{"flow"}, sharded{"flow"};
  generator gen{std::mt19937_64(seed), 3000};
  std::set<std::int64_t> keys;
  std::vector<Row> first = gen.batch(threshold + 500);
  for (const Row& r : first) keys.insert(r.k);
  for (const Row& r : bad) keys.insert(r.k);
  std::vector<Row> first_copy = first;
  serial.apply_batch(serial_table, first, fl::NoExpectations{}, fl::batch_info{"flow", 0, nullptr});
  sharded.apply_batch(sharded_table, first_copy, fl::NoExpectations{}, fl::batch_info{"flow", 0, &pool});
  const auto before = rows_by_id(sharded_table);
  const auto bound_before = sharded_table.store().id_bound();

  serial_table.store().begin_journal();
  sharded_table.store().begin_journal();
  // A good sharded batch inside the journal, then the failing one.
  std::vector<Row> good = gen.batch(threshold + 100);
  for (const Row& r : good) keys.insert(r.k);
  std::vector<Row> good_copy = good;
  serial.apply_batch(serial_table, good, fl::NoExpectations{}, fl::batch_info{"flow", 1, nullptr});
  sharded.apply_batch(sharded_table, good_copy, fl::NoExpectations{}, fl::batch_info{"flow", 1, &pool});
  const auto after_good = rows_by_id(sharded_table);
  REQUIRE(after_good == rows_by_id(serial_table));

  std::vector<Row> bad_copy = bad;
  const fl::error serial_error = flowtest::error_of(
      [&] { serial.apply_batch(serial_table, bad, checks, fl::batch_info{"flow", 2, nullptr}); });
  const fl::error sharded_error = flowtest::error_of(
      [&] { sharded.apply_batch(sharded_table, bad_copy, checks, fl::batch_info{"flow", 2, &pool}); });
  CHECK(sharded_error.code() == serial_error.code());
  CHECK(std::string_view(sharded_error.what()) == serial_error.what());
  // Target and flow unchanged by the failed batch.
  CHECK(rows_by_id(sharded_table) == after_good);
  check_same_state(serial, serial_table, sharded, sharded_table, keys);
  // The flow goes on as the serial one (its index was not touched).
  std::vector<Row> next = gen.batch(threshold + 300);
  for (const Row& r : next) keys.insert(r.k);
  std::vector<Row> next_copy = next;
  const auto a = serial.apply_batch(serial_table, next, fl::NoExpectations{}, fl::batch_info{"flow", 3, nullptr});
  const auto c = sharded.apply_batch(sharded_table, next_copy, fl::NoExpectations{}, fl::batch_info{"flow", 3, &pool});
  CHECK(c == a);
  check_same_state(serial, serial_table, sharded, sharded_table, keys);
  // The journal takes the table back to before the good batch.
  sharded_table.store().rollback_journal();
  serial_table.store().rollback_journal();
  CHECK(rows_by_id(sharded_table) == before);
  CHECK(sharded_table.store().id_bound() == bound_before);
}

TEST_CASE("R-EXPECT-1 fail in a sharded batch: the serial error (first offending row), nothing "
          "changed") {
  generator gen{std::mt19937_64(31), 3000};
  gen.epoch = 100;
  std::vector<Row> bad = gen.batch(threshold + 4000);
  // Offending rows late in the batch and earlier (in another chunk): the
  // earlier one decides.
  bad[bad.size() - 10].payload = "FAIL";
  bad[bad.size() / 2 + 3].payload = "FAIL";
  bad[bad.size() / 2 + 3].k = 424242;
  const auto checks = fl::expectations(
      fl::expect_or_drop("dropped", [](const Row& r) { return r.uid % 9 != 0; }),
      fl::expect_or_fail("no_fail", [](const Row& r) { return r.payload != "FAIL"; }));
  check_failing_batch(std::move(bad), checks, 31);
}

TEST_CASE("R-USING-7 in a sharded batch: the first null sequence in batch order fails it, nothing "
          "changed") {
  for (std::uint64_t seed : {41u, 42u}) {
    CAPTURE(seed);
    generator gen{std::mt19937_64(seed), 3000};
    gen.epoch = 100;
    std::vector<Row> bad = gen.batch(threshold + 4000);
    // Nulls in the last chunk and in the first: the first decides.
    bad[bad.size() - 3].seq.reset();
    const std::size_t early = seed == 41 ? bad.size() / 3 : 5;
    bad[early].seq.reset();
    bad[early].k = 777777;
    check_failing_batch(std::move(bad), fl::NoExpectations{}, seed);
  }
}

TEST_CASE("journal: a rollback after a sharded commit restores the table exactly, ids of later "
          "inserts included") {
  fl::detail::task_pool pool(2);
  fl::StreamingTable<Row> t{"t"}, twin{"twin"};
  fl::ReplaceUsing<KeyInt, Seq> flow{"f"}, twin_flow{"g"};
  generator gen{std::mt19937_64(51), 2500};
  std::vector<Row> first = gen.batch(threshold + 2000);
  std::vector<Row> first_copy = first;
  flow.apply_batch(t, first, fl::NoExpectations{}, fl::batch_info{"f", 0, &pool});
  twin_flow.apply_batch(twin, first_copy, fl::NoExpectations{}, fl::batch_info{"g", 0, nullptr});
  const auto before = rows_by_id(t);
  REQUIRE(before == rows_by_id(twin));
  const std::size_t size_before = t.store().size();
  const std::size_t bound_before = t.store().id_bound();

  t.store().begin_journal();
  std::vector<Row> second = gen.batch(threshold + 3000);
  const fl::BatchStats s = flow.apply_batch(t, second, fl::NoExpectations{}, fl::batch_info{"f", 1, &pool});
  REQUIRE(s.replaced_rows > 0);
  REQUIRE(s.inserted_rows > 0);
  REQUIRE(rows_by_id(t) != before);
  t.store().rollback_journal();
  CHECK(rows_by_id(t) == before);
  CHECK(t.store().size() == size_before);
  CHECK(t.store().id_bound() == bound_before);
  // Later inserts take the ids they take in the twin, which never saw the
  // rolled-back batch.
  auto& a = t.store();
  auto& b = twin.store();
  a.reserve(50);
  b.reserve(50);
  for (int i = 0; i < 50; ++i) {
    Row r = gen.make(900000 + i);
    Row r2 = r;
    CHECK(a.insert(std::move(r)) == b.insert(std::move(r2)));
  }
}

}  // namespace flows_replace_using_sharded
