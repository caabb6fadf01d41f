// detail::flat_index, the AUTO CDC flow's key index: randomised against
// std::unordered_map, growth and erase policy, pointer stability between
// rehashes (generation()), and the strong guarantee when growing fails.
//
// This program replaces the global allocation functions
// (support/failing_allocator.hpp): after arm(n), the n+1-th allocation
// throws std::bad_alloc.
//
// detail_flat_index_portable_test compiles this file again with
// FLOWLIB_FLAT_INDEX_PORTABLE: the portable group matching (64-bit words)
// instead of SSE2, so that both are run on x86-64.
#include <flowlib/detail/flat_index.hpp>

#include <doctest/doctest.h>
#include <support/failing_allocator.hpp>

#include <cstdint>
#include <functional>
#include <new>
#include <random>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace detail_flat_index {

using failing_allocator::arm;
using failing_allocator::disarm;

namespace {

using flowlib::detail::flat_index;

/// A lookup by a row and its precomputed hash, as the flows probe.
struct probe {
  const std::int64_t* key;
  std::size_t hash;
};
struct int_hash {
  std::size_t operator()(std::int64_t k) const noexcept {
    return std::hash<std::int64_t>{}(k) * 0x9e3779b97f4a7c15ULL;
  }
  std::size_t operator()(const probe& p) const noexcept { return p.hash; }
};
struct int_eq {
  bool operator()(std::int64_t a, std::int64_t b) const noexcept { return a == b; }
  bool operator()(std::int64_t a, const probe& p) const noexcept { return a == *p.key; }
};
/// Every key in one probe sequence: the longest chains there are.
struct same_hash {
  std::size_t operator()(std::int64_t) const noexcept { return 0x1234; }
};
struct str_hash {
  std::size_t operator()(const std::string& s) const noexcept {
    return std::hash<std::string>{}(s) * 0x9e3779b97f4a7c15ULL;
  }
};

using int_map = flat_index<std::int64_t, std::int64_t, int_hash, int_eq>;

template <class M, class Ref>
void check_same(const M& m, const Ref& ref) {
  REQUIRE(m.size() == ref.size());
  CHECK(m.capacity() - m.capacity() / 8 >= m.size());
  std::size_t seen = 0;
  for (const auto& [k, v] : m) {
    ++seen;
    auto it = ref.find(k);
    REQUIRE(it != ref.end());
    CHECK(it->second == v);
  }
  CHECK(seen == ref.size());
  for (const auto& [k, v] : ref) {
    auto it = m.find(k);
    REQUIRE(it != m.end());
    CHECK(it->second == v);
  }
}

}  // namespace

TEST_CASE("flat_index, the key index: random operations agree with std::unordered_map") {
  for (unsigned seed = 1; seed <= 60; ++seed) {
    CAPTURE(seed);
    std::mt19937_64 rng(seed);
    const std::int64_t key_space = std::int64_t{8} << (seed % 9);  // 8 .. 2048 keys
    int_map m;
    std::unordered_map<std::int64_t, std::int64_t> ref;
    const std::int64_t* pinned = nullptr;  // an element, valid while generation() holds
    std::int64_t pinned_key = 0;
    std::uint64_t gen = m.generation();
    for (int step = 0; step < 4000; ++step) {
      const std::int64_t k = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(key_space));
      const std::size_t cap = m.capacity();
      switch (rng() % 8) {
        case 0:
        case 1:
        case 2: {
          const auto [it, fresh] = m.emplace(std::int64_t{k}, std::int64_t{step});
          const bool ref_fresh = ref.emplace(k, step).second;
          CHECK(fresh == ref_fresh);
          CHECK(it->first == k);
          break;
        }
        case 3: {
          auto [it, fresh] = m.try_emplace(std::int64_t{k});
          if (fresh) it->second = -step;
          auto [rit, rfresh] = ref.try_emplace(k, -step);
          CHECK(fresh == rfresh);
          CHECK(it->second == rit->second);
          break;
        }
        case 4:
        case 5: {
          auto it = m.find(k);
          CHECK((it != m.end()) == (ref.count(k) == 1));
          if (it != m.end()) {
            if (&it->second == pinned) pinned = nullptr;
            m.erase(it);
            ref.erase(k);
          }
          break;
        }
        case 6: {
          const probe p{&k, int_hash{}(k)};
          auto it = m.find(p);
          CHECK((it != m.end()) == (ref.count(k) == 1));
          m.prefetch(p);
          m.prefetch_match(p);
          break;
        }
        default:
          if (rng() % 16 == 0) m.reserve(m.size() + rng() % 64);
          break;
      }
      if (m.generation() != gen) {
        gen = m.generation();
        pinned = nullptr;
      } else {
        CHECK(m.capacity() == cap);  // no rehash, no new array
        if (pinned != nullptr) CHECK(*pinned == ref.at(pinned_key));
      }
      if (pinned == nullptr && !ref.empty()) {
        auto it = m.find(ref.begin()->first);
        pinned = &it->second;
        pinned_key = it->first;
      }
      if (step % 500 == 0) check_same(m, ref);
    }
    check_same(m, ref);

    int_map copy(m);
    check_same(copy, ref);
    int_map moved(std::move(copy));
    check_same(moved, ref);
    CHECK(copy.empty());  // NOLINT: a moved-from index is empty and usable
    copy.emplace(std::int64_t{1}, std::int64_t{2});
    CHECK(copy.size() == 1);
    copy = moved;
    check_same(copy, ref);
  }
}

TEST_CASE("flat_index: string keys, and keys that all hash alike") {
  // Short and long strings (past the small buffer). (Built with +=: an
  // operator+ on strings trips a false -Wrestrict in GCC 12.)
  const auto name = [](int i) {
    std::string v(static_cast<std::size_t>(i % 40), 'x');
    v += std::to_string(i);
    return v;
  };
  flat_index<std::string, int, str_hash, std::equal_to<>> s;
  for (int i = 0; i < 3000; ++i) s.emplace(name(i), int{i});
  CHECK(s.size() == 3000);
  for (int i = 0; i < 3000; i += 3) s.erase(s.find(name(i)));
  CHECK(s.size() == 2000);
  for (int i = 0; i < 3000; ++i) {
    auto it = s.find(name(i));
    CHECK((it != s.end()) == (i % 3 != 0));
    if (it != s.end()) CHECK(it->second == i);
  }

  flat_index<std::int64_t, int, same_hash, std::equal_to<>> one;
  for (int i = 0; i < 300; ++i) CHECK(one.emplace(std::int64_t{i}, int{i}).second);
  for (int i = 0; i < 300; i += 2) one.erase(one.find(std::int64_t{i}));
  for (int i = 0; i < 300; ++i) CHECK((one.find(std::int64_t{i}) != one.end()) == (i % 2 == 1));
  for (int i = 300; i < 400; ++i) CHECK(one.emplace(std::int64_t{i}, int{i}).second);
  CHECK(one.size() == 250);
}

TEST_CASE("flat_index: churn reuses erased slots; the array does not keep growing") {
  int_map m;
  std::mt19937_64 rng(7);
  std::vector<std::int64_t> live;
  for (std::int64_t k = 0; k < 1000; ++k) {
    m.emplace(std::int64_t{k}, std::int64_t{k});
    live.push_back(k);
  }
  const std::size_t cap = m.capacity();
  std::int64_t next = 1000;
  int same_size_rehashes = 0;
  for (int i = 0; i < 200000; ++i) {
    const std::size_t at = static_cast<std::size_t>(rng() % live.size());
    m.erase(m.find(live[at]));
    const std::uint64_t gen = m.generation();
    const std::size_t before = m.capacity();
    m.emplace(std::int64_t{next}, std::int64_t{next});
    if (m.generation() != gen && m.capacity() == before) ++same_size_rehashes;
    live[at] = next++;
  }
  CHECK(m.size() == 1000);
  CHECK(m.capacity() <= 2 * cap);
  for (std::int64_t k : live) CHECK(m.find(k) != m.end());

  MESSAGE("rehashes that only dropped erased slots: " << same_size_rehashes);

  // Keys that all hash alike fill whole groups; erasing from a full group
  // marks the slot deleted (a probe may have to go on past it). An index
  // left mostly deleted rehashes at the same size when it next runs out of
  // empty slots, and its elements move: generation() changes.
  flat_index<std::int64_t, std::int64_t, same_hash, std::equal_to<>> f;
  for (std::int64_t k = 0; k < 224; ++k) f.emplace(std::int64_t{k}, std::int64_t{k});
  REQUIRE(f.capacity() == 256);  // 224 is 7/8 of it: no empty slot may be taken
  for (std::int64_t k = 0; k < 224; ++k) {
    if (k % 8 != 0) f.erase(f.find(k));
  }
  const std::uint64_t gen = f.generation();
  f.emplace(std::int64_t{1000}, std::int64_t{1000});
  CHECK(f.generation() != gen);
  CHECK(f.capacity() == 256);
  CHECK(f.size() == 29);
  for (std::int64_t k = 0; k < 224; ++k) CHECK((f.find(k) != f.end()) == (k % 8 == 0));
  CHECK(f.find(std::int64_t{1000}) != f.end());
}

TEST_CASE("flat_index: a failed allocation while growing changes nothing "
          "(all-or-nothing batches rely on it)") {
  int_map m;
  std::unordered_map<std::int64_t, std::int64_t> ref;
  std::int64_t k = 0;
  int failures = 0;
  while (ref.size() < 5000) {
    // An insert that grows the index fails at its allocation first.
    const std::uint64_t gen = m.generation();
    const std::size_t cap = m.capacity();
    bool threw = false;
    arm(0);
    try {
      m.emplace(std::int64_t{k}, std::int64_t{-k});
    } catch (const std::bad_alloc&) {
      threw = true;
    }
    disarm();
    CHECK(m.generation() == gen);  // grown: only if the allocation went through
    if (threw) {
      ++failures;
      CHECK(m.capacity() == cap);
      check_same(m, ref);
      m.emplace(std::int64_t{k}, std::int64_t{-k});  // and it goes through now
    }
    ref.emplace(k, -k);
    ++k;
  }
  check_same(m, ref);
  CHECK(failures >= 10);  // 8 -> 16 -> ... -> 8192 slots

  // (No doctest macro while armed: they may allocate themselves.)
  const std::uint64_t gen = m.generation();
  bool reserve_threw = false, copy_threw = false;
  arm(0);
  try {
    m.reserve(100000);
  } catch (const std::bad_alloc&) {
    reserve_threw = true;
  }
  try {
    int_map copy(m);
  } catch (const std::bad_alloc&) {
    copy_threw = true;
  }
  disarm();
  CHECK(reserve_threw);
  CHECK(copy_threw);
  CHECK(m.generation() == gen);
  check_same(m, ref);
}

namespace {
/// A value whose move may throw and whose copy throws on demand: growing
/// copies it (std::move_if_noexcept), and a failed copy leaves the index
/// as it was.
int g_copies_left = -1;
struct fragile {
  std::int64_t v = 0;
  fragile() = default;
  explicit fragile(std::int64_t x) : v(x) {}
  fragile(const fragile& o) : v(o.v) {
    if (g_copies_left == 0) throw std::runtime_error("copy failed");
    if (g_copies_left > 0) --g_copies_left;
  }
  fragile(fragile&& o) noexcept(false) : v(o.v) {}
  fragile& operator=(const fragile&) = default;
};
}  // namespace

TEST_CASE("flat_index: an element copy failing while it grows changes nothing") {
  flat_index<std::int64_t, fragile, int_hash, int_eq> m;
  std::int64_t k = 0;
  int failures = 0;
  bool retry = false;
  while (m.size() < 2000) {
    const std::uint64_t gen = m.generation();
    const std::size_t size = m.size();
    // Fails halfway through a rehash, unless this is the retry.
    g_copies_left = retry ? -1 : static_cast<int>(m.size() / 2);
    retry = false;
    try {
      m.emplace(std::int64_t{k}, fragile{k});
    } catch (const std::runtime_error&) {
      retry = true;
    }
    g_copies_left = -1;
    if (retry) {
      ++failures;
      CHECK(m.generation() == gen);
      CHECK(m.size() == size);
      CHECK(m.find(k) == m.end());
      continue;  // the same key again, without the failure
    }
    ++k;
  }
  for (std::int64_t i = 0; i < 2000; ++i) {
    auto it = m.find(i);
    REQUIRE(it != m.end());
    CHECK(it->second.v == i);
  }
  CHECK(failures >= 5);
}

}  // namespace detail_flat_index
