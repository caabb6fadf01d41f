// The core vocabulary: schemas, keys and sequences, their concepts and
// traits, value rendering, errors, stats, and the memory store's hooks
// (the row_store contract of every policy: tests/storage/row_store_contract.cpp).
// fwd.hpp first, then every header: its declarations must agree with them.
#include <flowlib/fwd.hpp>
#include <flowlib/flowlib.hpp>
#include <flowlib/columns.hpp>
#include <flowlib/detail/format.hpp>
#include <flowlib/error.hpp>
#include <flowlib/flows/replace_using.hpp>
#include <flowlib/schema.hpp>
#include <flowlib/stats.hpp>
#include <flowlib/storage/memory.hpp>
#include <flowlib/table.hpp>

#include <doctest/doctest.h>

#include <absl/hash/hash.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <new>
#include <optional>
#include <ranges>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <variant>
#include <vector>

namespace fl = flowlib;

// ---------------------------------------------------------------------------
// Allocation counting, for the memory store's reserve_fresh and emplace_each.
// ---------------------------------------------------------------------------

namespace {
std::size_t g_allocations = 0;
}  // namespace

// Out of line, so the compiler does not pair an inlined free() with a
// built-in operator new (-Wmismatched-new-delete).
[[gnu::noinline]] void* operator new(std::size_t n) {
  ++g_allocations;
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
[[gnu::noinline]] void* operator new[](std::size_t n) {
  ++g_allocations;
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
[[gnu::noinline]] void operator delete(void* p) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete[](void* p) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete(void* p, std::size_t) noexcept { std::free(p); }
[[gnu::noinline]] void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

namespace core_vocabulary {

enum class Tier : std::uint8_t { bronze = 1, gold = 3 };

/// A user key type: ordered and hashable through AbslHashValue.
struct Sku {
  std::string vendor;
  int code = 0;
  friend auto operator<=>(const Sku&, const Sku&) = default;
  template <class H>
  friend H AbslHashValue(H h, const Sku& s) {
    return H::combine(std::move(h), s.vendor, s.code);
  }
};

struct Order {
  std::int64_t order_id = 0;
  std::optional<std::int64_t> shop_id;
  std::string customer;
  std::optional<std::string> coupon;
  Tier tier = Tier::bronze;
  Sku sku;
  std::int64_t ts = 0;
  std::optional<std::int64_t> rev;
  double price = 0;  // not a key: floating point is fine elsewhere
};
FLOWLIB_SCHEMA(Order, order_id, shop_id, customer, coupon, tier, sku, ts, rev, price);

/// No FLOWLIB_SCHEMA: columns are named column#i.
struct Bare {
  int id = 0;
  int seq = 0;
};

/// A schema that lists only some members.
struct Partial {
  int listed = 0;
  int unlisted = 0;
  int seq = 0;
};
FLOWLIB_SCHEMA(Partial, listed, seq);

/// No operator<: sorted_rows() orders it by its schema columns.
struct Unordered {
  std::string name;
  int n = 0;
  friend bool operator==(const Unordered&, const Unordered&) = default;
};
FLOWLIB_SCHEMA(Unordered, name, n);

// ---------------------------------------------------------------------------
// Schema
// ---------------------------------------------------------------------------

TEST_CASE("FLOWLIB_SCHEMA: names, order, index_of, contains, for_each") {
  using S = fl::schema_of<Order>;
  static_assert(fl::has_schema<Order>);
  static_assert(!fl::has_schema<Bare>);
  static_assert(std::is_same_v<S::row_type, Order>);
  static_assert(S::size == 9);
  static_assert(S::name == "Order");
  static_assert(S::names[0] == "order_id");
  static_assert(S::index_of("coupon") == 3);
  static_assert(S::index_of("no_such_column") == S::size);
  static_assert(S::contains("price") && !S::contains("Price"));
  CHECK(std::vector<std::string_view>(S::names.begin(), S::names.end()) ==
        std::vector<std::string_view>{"order_id", "shop_id", "customer", "coupon", "tier", "sku", "ts",
                                      "rev", "price"});
  std::vector<std::string_view> seen;
  S::for_each([&](auto col) { seen.push_back(decltype(col)::name); });
  CHECK(seen == std::vector<std::string_view>(S::names.begin(), S::names.end()));

  Order o;
  o.customer = "ann";
  using Customer = fl::column_named_t<Order, "customer">;
  static_assert(std::is_same_v<Customer, fl::column<&Order::customer, "customer">>);
  static_assert(std::is_same_v<Customer::value_type, std::string>);
  static_assert(std::is_same_v<Customer::row_type, Order>);
  CHECK(Customer::get(o) == "ann");
  Customer::get(o) = "bob";
  CHECK(o.customer == "bob");
  static_assert(std::is_void_v<fl::column_named_t<Order, "missing">>);

  using P = fl::schema_of<Partial>;
  static_assert(P::size == 2);
  static_assert(!P::contains("unlisted"));
}

TEST_CASE("detail::member_name: the schema's name for a member, empty otherwise") {
  static_assert(fl::detail::member_name<&Order::order_id>() == "order_id");
  static_assert(fl::detail::member_name<&Order::price>() == "price");
  static_assert(fl::detail::member_name<&Order::coupon>() == "coupon");
  static_assert(fl::detail::member_name<&Partial::seq>() == "seq");
  static_assert(fl::detail::member_name<&Partial::unlisted>().empty());
  static_assert(fl::detail::member_name<&Bare::id>().empty());
  CHECK(fl::detail::member_name<&Order::sku>() == "sku");
}

// ---------------------------------------------------------------------------
// Key and Seq
// ---------------------------------------------------------------------------

TEST_CASE("Key: value types, extraction, names and describe()") {
  using K1 = fl::Key<&Order::order_id>;
  using K2 = fl::Key<&Order::shop_id, &Order::customer>;
  using K3 = fl::Key<&Order::coupon, &Order::tier, &Order::sku>;
  static_assert(std::is_same_v<K1::value_type, std::int64_t>);
  static_assert(std::is_same_v<K1::row_type, Order>);
  static_assert(std::is_same_v<K2::value_type, std::tuple<std::optional<std::int64_t>, std::string>>);
  static_assert(K2::size == 2 && K3::size == 3);
  static_assert(fl::key_extractor<K1> && fl::key_extractor<K2> && fl::key_extractor<K3>);

  Order o;
  o.order_id = 42;
  o.customer = "ann";
  o.sku = {"acme", 7};
  o.tier = Tier::gold;
  CHECK(K1{}(o) == 42);
  CHECK(K2{}(o) == K2::value_type{std::nullopt, "ann"});
  CHECK(K1{}.describe(o) == "order_id=42");
  CHECK(K2{}.describe(o) == "shop_id=null, customer=\"ann\"");
  o.shop_id = 9;
  o.coupon = "SPRING";
  CHECK(K2{}.describe(o) == "shop_id=9, customer=\"ann\"");
  CHECK(K3{}.describe(o) == "coupon=\"SPRING\", tier=3, sku=<value>");
  CHECK(K2::names() == std::array<std::string, 2>{"shop_id", "customer"});
  CHECK(fl::Key<&Bare::id>{}.describe(Bare{5, 1}) == "column#0=5");
  CHECK(fl::Key<&Partial::listed, &Partial::unlisted>{}.describe(Partial{1, 2, 3}) ==
        "listed=1, column#1=2");
}

TEST_CASE("Key: the hash hook equals absl::Hash of the key value; equal() hooks agree with ==") {
  Order a;
  a.order_id = 1;
  a.customer = std::string(40, 'c');  // a heap-allocated string
  a.coupon = "X";
  a.sku = {"v", 3};
  Order b = a;
  b.shop_id = 0;  // 0 is not null

  const auto check = [&](auto key) {
    using K = decltype(key);
    using V = typename K::value_type;
    for (const Order* o : {&a, &b}) {
      CHECK(key.hash(*o) == absl::Hash<V>{}(key(*o)));
      CHECK(fl::detail::key_traits<K>::hash(key, *o) == absl::Hash<V>{}(key(*o)));
      CHECK(key.equal(*o, key(*o)));
      CHECK(key.equal(*o, *o));
    }
    CHECK(key.equal(a, key(b)) == (key(a) == key(b)));
    CHECK(key.equal(a, b) == (key(a) == key(b)));
  };
  check(fl::Key<&Order::order_id>{});
  check(fl::Key<&Order::customer>{});
  check(fl::Key<&Order::shop_id>{});
  check(fl::Key<&Order::coupon>{});
  check(fl::Key<&Order::tier>{});
  check(fl::Key<&Order::sku>{});
  check(fl::Key<&Order::order_id, &Order::customer>{});
  check(fl::Key<&Order::shop_id, &Order::coupon>{});
  check(fl::Key<&Order::shop_id, &Order::coupon, &Order::sku, &Order::tier>{});
}

TEST_CASE("Seq: value type, null components, lexicographic order, name()") {
  using S1 = fl::Seq<&Order::ts>;
  using S2 = fl::Seq<&Order::rev>;
  using S3 = fl::Seq<&Order::ts, &Order::rev, &Order::order_id>;
  static_assert(std::is_same_v<S1::value_type, std::int64_t>);
  static_assert(std::is_same_v<S2::value_type, std::int64_t>);  // optional unwrapped
  static_assert(std::is_same_v<S3::value_type, std::tuple<std::int64_t, std::int64_t, std::int64_t>>);
  static_assert(fl::sequence_extractor<S1> && fl::sequence_extractor<S2> && fl::sequence_extractor<S3>);
  CHECK(S1{}.name() == "ts");
  CHECK(S2{}.name() == "rev");
  CHECK(S3{}.name() == "(ts, rev, order_id)");
  CHECK(fl::Seq<&Bare::seq>{}.name() == "column#0");

  Order o;
  o.ts = 10;
  o.order_id = 2;
  CHECK(S1{}(o) == 10);
  CHECK(S2{}(o) == std::nullopt);
  CHECK(S3{}(o) == std::nullopt);  // any null component makes the sequence null
  o.rev = 1;
  CHECK(S3{}(o) == std::tuple<std::int64_t, std::int64_t, std::int64_t>{10, 1, 2});
  Order p = o;
  p.rev = 0;
  p.order_id = 99;
  CHECK(*S3{}(p) < *S3{}(o));  // ts ties, rev breaks it
  p.ts = 11;
  CHECK(*S3{}(o) < *S3{}(p));
}

struct NoDescribe {
  using row_type = Bare;
  using value_type = int;
  int operator()(const Bare& b) const { return b.id; }
};
struct NotOptionalSeq {
  using row_type = Bare;
  using value_type = int;
  int operator()(const Bare& b) const { return b.seq; }
  std::string_view name() const { return "seq"; }
};
struct Unhashable {
  int v = 0;
  friend auto operator<=>(const Unhashable&, const Unhashable&) = default;
};
struct UnhashableKey {
  using row_type = Bare;
  using value_type = Unhashable;
  Unhashable operator()(const Bare& b) const { return {b.id}; }
  std::string describe(const Bare&) const { return ""; }
};
/// A key extractor without the optional hooks.
struct ModKey {
  using row_type = Bare;
  using value_type = int;
  int mod = 10;
  int operator()(const Bare& b) const { return b.id % mod; }
  std::string describe(const Bare& b) const { return "id%" + std::to_string(mod) + "=" + std::to_string((*this)(b)); }
};

TEST_CASE("key_extractor / sequence_extractor: what satisfies them; key_traits fills in the hooks") {
  static_assert(!fl::key_extractor<NoDescribe>);
  static_assert(!fl::sequence_extractor<NotOptionalSeq>);
  static_assert(!fl::key_extractor<UnhashableKey>);
  static_assert(fl::key_extractor<ModKey>);
  static_assert(!fl::detail::absl_hashable<Unhashable>);
  static_assert(fl::detail::absl_hashable<Sku>);
  static_assert(fl::detail::absl_hashable<std::optional<std::string>>);
  static_assert(fl::detail::map_like<std::map<int, int>> && !fl::detail::map_like<std::set<int>>);
  static_assert(fl::detail::is_variant_v<std::variant<int, long>>);
  static_assert(std::is_same_v<fl::detail::unwrap_optional_t<const std::optional<int>&>, int>);

  const ModKey k{7};
  using T = fl::detail::key_traits<ModKey>;
  const Bare a{15, 0};
  const Bare b{8, 0};
  CHECK(T::hash(k, a) == absl::Hash<int>{}(1));
  CHECK(T::hash(k, 1) == T::hash(k, a));
  CHECK(T::equal(k, a, 1));
  CHECK(T::equal(k, a, b));
  CHECK_FALSE(T::equal(k, a, Bare{16, 0}));
}

struct Line {
  Sku sku;
  std::int64_t seq;
  int qty;
  friend auto operator<=>(const Line&, const Line&) = default;
};

TEST_CASE("A user key type with AbslHashValue works as a key column") {
  fl::StreamingTable<Line> t{"lines"};
  fl::ReplaceUsing<fl::Key<&Line::sku>, fl::Seq<&Line::seq>> flow{"lines_flow"};
  flow.apply(t, std::vector<Line>{{{"a", 1}, 1, 5}, {{"a", 2}, 1, 6}, {{"a", 1}, 2, 7}});
  CHECK(flow.key_count() == 2);
  CHECK(flow.sequence_of(Sku{"a", 1}) == 2);
  CHECK(t.sorted_rows() == std::vector<Line>{{{"a", 1}, 2, 7}, {{"a", 2}, 1, 6}});
}

// ---------------------------------------------------------------------------
// Rendering values, errors, stats
// ---------------------------------------------------------------------------

TEST_CASE("detail::to_text renders nulls, strings, tuples and scalars") {
  using fl::detail::to_text;
  CHECK(to_text(std::optional<int>{}) == "null");
  CHECK(to_text(std::nullopt) == "null");
  CHECK(to_text(std::optional<int>{3}) == "3");
  CHECK(to_text(std::string("ab")) == "\"ab\"");
  CHECK(to_text(std::string_view("x y")) == "\"x y\"");
  CHECK(to_text("lit") == "\"lit\"");
  CHECK(to_text(std::optional<std::string>{"s"}) == "\"s\"");
  CHECK(to_text(std::optional<std::string>{}) == "null");
  CHECK(to_text(std::tuple<int, std::string, std::optional<int>>{1, "a", std::nullopt}) ==
        "(1, \"a\", null)");
  CHECK(to_text(std::tuple<>{}) == "()");
  CHECK(to_text(true) == "true");
  CHECK(to_text(false) == "false");
  CHECK(to_text('A') == "65");
  CHECK(to_text(std::int64_t{-7}) == "-7");
  CHECK(to_text(Tier::gold) == "3");
  CHECK(to_text(std::chrono::seconds(90)) == "90");
  CHECK(to_text(std::chrono::sys_days(std::chrono::days(3))) == "3");
  CHECK(to_text(Sku{}) == "<value>");
}

TEST_CASE("flowlib::error: code, parts, and a message naming them") {
  const fl::error e(fl::errc::null_sequence, "my_flow", "seq", "id=3", "nothing applied");
  CHECK(e.code() == fl::errc::null_sequence);
  CHECK(e.flow() == "my_flow");
  CHECK(e.column() == "seq");
  CHECK(e.key() == "id=3");
  CHECK(std::string(e.what()) == "flowlib: flow 'my_flow': NULL_SEQUENCE: column 'seq' (row key id=3): nothing applied");
  const fl::error bare(fl::errc::invalid_argument, "f", "", "", "");
  CHECK(std::string(bare.what()) == "flowlib: flow 'f': INVALID_ARGUMENT");
  CHECK(fl::to_string(fl::errc::expectation_failed) == "EXPECTATION_VIOLATION");
  CHECK(fl::to_string(fl::errc::invalid_target) == "INVALID_FLOW_TARGET");
  CHECK(fl::to_string(fl::errc::tied_sequence) == "DUPLICATE_KEY_AND_SEQUENCE");
  CHECK(fl::to_string(fl::errc::version_not_increasing) == "SNAPSHOT_VERSION_NOT_INCREASING");
  static_assert(std::is_base_of_v<std::runtime_error, fl::error>);
}

TEST_CASE("BatchStats: expectation() lookup and equality") {
  fl::BatchStats s;
  s.expectations.push_back({"a", fl::on_violation::warn, 1, 2});
  s.expectations.push_back({"b", fl::on_violation::drop, 3, 4});
  REQUIRE(s.expectation("b") != nullptr);
  CHECK(s.expectation("b")->failed == 4);
  CHECK(s.expectation("c") == nullptr);
  fl::BatchStats t = s;
  CHECK(t == s);
  t.expectations[0].passed = 9;
  CHECK_FALSE(t == s);
}

TEST_CASE("StreamingTable::sorted_rows orders rows without operator< by their schema columns") {
  // Unordered has no operator<: canonical_less falls back to the schema.
  static_assert(!std::totally_ordered<Unordered>);
  CHECK(fl::detail::canonical_less(Unordered{"a", 2}, Unordered{"b", 1}));
  CHECK(fl::detail::canonical_less(Unordered{"a", 1}, Unordered{"a", 2}));
  CHECK_FALSE(fl::detail::canonical_less(Unordered{"a", 1}, Unordered{"a", 1}));
  fl::StreamingTable<Unordered> t{"t"};
  fl::ReplaceUsing<fl::Key<&Unordered::name>, fl::Seq<&Unordered::n>> flow{"f"};
  flow.apply(t, std::vector<Unordered>{{"b", 1}, {"a", 2}, {"c", 0}, {"a", 2}});
  CHECK(t.sorted_rows() == std::vector<Unordered>{{"a", 2}, {"a", 2}, {"b", 1}, {"c", 0}});
}

// ---------------------------------------------------------------------------
// The memory store's hooks beyond the row_store contract (the contract
// itself, for every policy: tests/storage/row_store_contract.cpp)
// ---------------------------------------------------------------------------

struct Payload {
  int id = 0;
  std::string text;
  friend auto operator<=>(const Payload&, const Payload&) = default;
};

// A payload whose construction from an int throws on demand.
inline int builds_until_throw = -1;
struct Built {
  std::string text;
  explicit Built(int i) : text(std::string(40, static_cast<char>('a' + i % 26))) {
    if (builds_until_throw == 0) throw std::runtime_error("build failed");
    if (builds_until_throw > 0) --builds_until_throw;
  }
  friend auto operator<=>(const Built&, const Built&) = default;
};

template <class Store>
std::multiset<typename Store::row_type> contents(const Store& s) {
  return {s.rows().begin(), s.rows().end()};
}

TEST_CASE("MemoryStorage: emplace_with builds in place; a throwing build leaves the store as it was") {
  fl::detail::memory_row_store<Built> s;
  s.reserve(4);
  const fl::row_id a = s.emplace_with([] { return Built(0); });
  const fl::row_id b = s.emplace_with([] { return Built(1); });
  s.erase(a);  // a dead slot, reused next
  const auto before = contents(s);
  builds_until_throw = 0;
  CHECK_THROWS_AS(s.emplace_with([] { return Built(2); }), std::runtime_error);
  builds_until_throw = -1;
  CHECK(contents(s) == before);
  CHECK(s.size() == 1);
  // The free list survived the failed build: the dead slot is reused.
  CHECK(s.emplace_with([] { return Built(3); }) == a);
  CHECK(s.get(b).text == std::string(40, 'b'));
  CHECK(s.size() == 2);
}

TEST_CASE("MemoryStorage: reserve_fresh makes room as reserve does, across segments, over "
          "dead slots, and leaves stored rows as they were") {
  fl::detail::memory_row_store<Payload> s;
  s.reserve(100);
  std::vector<fl::row_id> ids;
  for (int i = 0; i < 100; ++i) ids.push_back(s.insert(Payload{i, "kept"}));
  for (int i = 0; i < 3; ++i) s.erase(ids[static_cast<std::size_t>(10 * i)]);
  s.reserve_fresh(2);  // fewer than the dead slots: nothing fresh is needed
  s.reserve_fresh(0);
  CHECK(s.size() == 97);

  // Spans several segments (64, 128, 256, ... slots), three dead slots first.
  const std::size_t n = 20000;
  s.reserve_fresh(n);
  CHECK(s.capacity() >= s.id_bound() + n - 3);
  const std::size_t before = g_allocations;
  std::vector<fl::row_id> fresh;
  fresh.reserve(n);
  CHECK(g_allocations == before + 1);  // the vector above, nothing in the store
  const std::size_t counted = g_allocations;
  for (std::size_t i = 0; i < n; ++i) fresh.push_back(s.insert(Payload{static_cast<int>(i), "new"}));
  CHECK(g_allocations == counted);  // short strings: the inserts allocate nothing
  CHECK(s.size() == 97 + n);
  for (int i = 0; i < 100; ++i) {
    if (i % 10 == 0 && i < 30) continue;
    CHECK(s.get(ids[static_cast<std::size_t>(i)]).id == i);
    CHECK(s.get(ids[static_cast<std::size_t>(i)]).text == "kept");
  }
  for (std::size_t i = 0; i < n; ++i) {
    REQUIRE(s.get(fresh[i]).id == static_cast<int>(i));
    REQUIRE(s.get(fresh[i]).text == "new");
  }
}

TEST_CASE("MemoryStorage: emplace_each is all or nothing, over dead slots and the tail") {
  fl::detail::memory_row_store<Built> s;
  s.reserve(10);
  std::vector<fl::row_id> ids;
  for (int i = 0; i < 10; ++i) ids.push_back(s.insert(Built(i)));
  s.erase(ids[2]);
  s.erase(ids[7]);
  const auto before = contents(s);
  const std::vector<int> batch{10, 11, 12, 13, 14, 15};
  const auto make = [](int i) { return Built(i); };

  for (int fail_at = 0; fail_at < 6; ++fail_at) {  // in the dead slots (0, 1) and the tail (2..5)
    CAPTURE(fail_at);
    s.reserve(batch.size());
    const std::size_t bound = s.id_bound();
    builds_until_throw = fail_at;
    CHECK_THROWS_AS(s.emplace_each(batch, make), std::runtime_error);
    builds_until_throw = -1;
    CHECK(contents(s) == before);
    CHECK(s.size() == 8);
    CHECK(s.id_bound() == bound);
  }
  // Then it works, reusing both dead slots first.
  s.reserve(batch.size());
  const std::size_t allocations = g_allocations;
  CHECK(s.emplace_each(batch, make) == 6);
  CHECK(g_allocations == allocations + 6);  // each row's own string only
  CHECK(s.size() == 14);
  CHECK(s.id_bound() == 14);
  CHECK(s.get(ids[7]).text == std::string(40, 'k'));  // the last dead slot freed is reused first
  CHECK(s.get(ids[2]).text == std::string(40, 'l'));
  auto want = before;
  for (int i : batch) want.insert(Built(i));
  CHECK(contents(s) == want);
}

TEST_CASE("MemoryStorage: emplace_each refuses a batch larger than its reservation") {
  fl::detail::memory_row_store<int> s;
  s.reserve(2);
  const std::size_t cap = s.capacity();
  std::vector<int> big(cap + 1, 7);
  CHECK_THROWS_AS(s.emplace_each(big, [](int i) { return i; }), fl::error);
  CHECK(s.size() == 0);
  CHECK(s.id_bound() == 0);
}

TEST_CASE("MemoryStorage: growth is geometric and keeps rows, ids and the free list") {
  fl::detail::memory_row_store<Payload> s;
  std::vector<fl::row_id> ids;
  std::size_t regrowths = 0;
  std::size_t cap = s.capacity();
  for (int i = 0; i < 1000; ++i) {
    s.reserve(1);
    if (s.capacity() != cap) {
      CHECK(s.capacity() >= 2 * cap);
      cap = s.capacity();
      ++regrowths;
    }
    ids.push_back(s.insert(Payload{i, std::to_string(i)}));
    if (i % 10 == 3) s.erase(ids[static_cast<std::size_t>(i - 1)]);  // dead slots move with the rows
  }
  CHECK(regrowths <= 11);
  CHECK(reinterpret_cast<std::uintptr_t>(&s.get(ids[0])) % 64 == 0);  // cache-line aligned slab
  // Every dead slot is reused before the slab grows again.
  const std::size_t bound = s.id_bound();
  const std::size_t dead = bound - s.size();
  s.reserve(dead);
  for (std::size_t k = 0; k < dead; ++k) s.insert(Payload{-1, "reuse"});
  CHECK(s.id_bound() == bound);
  CHECK(s.size() == bound);
  // Moving the store moves its rows.
  fl::detail::memory_row_store<Payload> t = std::move(s);
  CHECK(t.size() == bound);
  CHECK(t.get(ids[0]) == Payload{0, "0"});
}

TEST_CASE("MemoryStorage: rows smaller than a row id") {
  fl::detail::memory_row_store<char> s;
  s.reserve(3);
  const fl::row_id a = s.insert('a');
  s.insert('b');
  s.erase(a);
  s.reserve(1);
  CHECK(s.insert('c') == a);
  CHECK(std::string(s.rows().begin(), s.rows().end()) == "cb");
}

// fwd.hpp declares the public templates the headers define: compiling this
// file at all checks that the declarations agree (fwd.hpp is included before
// every header); these name the defaults they omit. Compile-time only.
static_assert(std::is_same_v<fl::ManagedTable<Payload>,
                             fl::ManagedTable<Payload, fl::MemoryStorage>>);
static_assert(std::is_same_v<fl::StreamingTable<Payload>,
                             fl::StreamingTable<Payload, fl::MemoryStorage>>);
static_assert(std::is_class_v<fl::Append<fl::Once>>);
static_assert(std::is_class_v<fl::Scd2<>> && std::is_class_v<fl::Scd1>);
static_assert(std::is_class_v<fl::Catalog> && std::is_class_v<fl::DedupOptions>);

// R-USING-6: dates are key types (the seed keys tables by date).
struct Dated {
  std::chrono::sys_days day;
  std::optional<std::chrono::year_month_day> booked;
  std::int64_t region = 0;
  std::int64_t seq = 0;
};
FLOWLIB_SCHEMA(Dated, day, booked, region, seq);

TEST_CASE("R-USING-6: std::chrono dates and time points are key types; the hash hooks agree") {
  using namespace std::chrono;
  using Single = fl::Key<&Dated::day>;
  using Composite = fl::Key<&Dated::booked, &Dated::region>;
  static_assert(fl::key_extractor<Single> && fl::key_extractor<Composite>);
  static_assert(fl::detail::key_hashable<sys_seconds> && fl::detail::key_hashable<seconds> &&
                fl::detail::key_hashable<year_month_day> &&
                fl::detail::key_hashable<std::tuple<std::optional<year_month_day>, int>>);
  static_assert(!fl::detail::key_hashable<std::tuple<int, Dated>>);
  // Where absl hashes the type, the hash is absl's.
  CHECK(fl::detail::key_hash<std::int64_t>{}(42) == absl::Hash<std::int64_t>{}(42));
  CHECK(fl::detail::key_hash<std::string>{}("x") == absl::Hash<std::string>{}("x"));

  const Single single;
  const Composite composite;
  std::set<std::size_t> hashes;
  for (int d = 0; d < 100; ++d) {
    const sys_days day = sys_days{2026y / January / 1} + days{d};
    const Dated row{day, d % 3 == 0 ? std::nullopt : std::optional(year_month_day{day}), d % 4, 1};
    using ST = fl::detail::key_traits<Single>;
    using CT = fl::detail::key_traits<Composite>;
    // The row hook (no key built) equals the hash of the built key.
    CHECK(ST::hash(single, row) == ST::hash(single, single(row)));
    CHECK(CT::hash(composite, row) == CT::hash(composite, composite(row)));
    hashes.insert(ST::hash(single, row));
  }
  CHECK(hashes.size() == 100);  // distinct days, distinct hashes
}

}  // namespace core_vocabulary
