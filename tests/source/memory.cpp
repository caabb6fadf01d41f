// MemorySource (source/memory.hpp): the source contract
// (support/source_contract.hpp) over random appends and limits with
// retention (discard_before), plan's partition order, the errors, and
// appends from two threads while a third plans and reads (R-EXACT-1's
// replay: the same positions read the same rows).
#include <flowlib/source/memory.hpp>

#include "support/errors.hpp"
#include "support/source_contract.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <list>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace source_memory {

namespace fl = flowlib;
using flowtest::contains;

namespace {

struct Ev {
  std::uint32_t partition = 0;
  std::uint32_t producer = 0;
  std::uint64_t seq = 0;
  std::string payload;
  friend bool operator==(const Ev&, const Ev&) = default;
};

static_assert(fl::source<fl::MemorySource<Ev>>);
static_assert(fl::source<fl::MemorySource<int>>);
static_assert(fl::source<fl::MemorySource<std::string>>);

// MemorySource under the contract suite (support/source_contract.hpp):
// appends of one row, of a range (to partition 0) and to a partition; plan
// takes partitions in ascending order; retention behind the rows read
// moves start() and frees what size() counts.
struct memory_harness {
  fl::MemorySource<Ev> s;
  std::mt19937 rng;
  std::vector<std::uint64_t> appended, start;

  memory_harness(std::uint32_t parts, std::uint32_t seed)
      : s("events", {.partitions = parts}), rng(seed), appended(parts), start(parts) {}
  const fl::MemorySource<Ev>& source() const { return s; }
  std::vector<std::uint32_t> partitions() const {
    std::vector<std::uint32_t> out(appended.size());
    for (std::uint32_t p = 0; p < out.size(); ++p) out[p] = p;
    return out;
  }
  Ev row(std::uint64_t n) const { return {0, 0, n, std::string(n % 40, 'x')}; }
  void append(std::uint32_t p, const std::vector<Ev>& rows) {
    if (p == 0 && rng() % 3 == 0) {
      s.append(rows);
    } else {
      for (const auto& e : rows) {
        if (p == 0 && rng() % 2) {
          s.append(e);
        } else {
          s.append_to(p, e);
        }
      }
    }
    appended[p] += rows.size();
  }
  // A later partition advances only once the earlier ones are caught up.
  fl::source_position plan_model(const fl::source_position& from, const fl::source_position& latest,
                                 std::size_t limit) const {
    fl::source_position to = from;
    std::uint64_t left = limit == 0 ? ~std::uint64_t{0} : limit;
    for (std::uint32_t p = 0; p < appended.size(); ++p) {
      const auto take = std::min(left, latest.offset(p) - from.offset(p));
      to.set(p, from.offset(p) + take);
      left -= take;
    }
    return to;
  }
  void after_batch(const fl::source_position& read_to, std::mt19937_64& r) {
    if (r() % 3 == 0) {
      fl::source_position d;
      for (std::uint32_t p = 0; p < appended.size(); ++p) {
        const auto c = read_to.offset(p);
        const auto keep = c == 0 ? 0 : r() % (c + 1);
        d.set(p, keep);
        start[p] = std::max(start[p], keep);
      }
      s.discard_before(d);
    }
    fl::source_position want;
    std::uint64_t held = 0;
    for (std::uint32_t p = 0; p < appended.size(); ++p) {
      want.set(p, start[p]);
      held += appended[p] - start[p];
    }
    CHECK(s.start() == want);
    CHECK(s.size() == held);
  }
};

std::string invalid(auto&& f) { return flowtest::message_of(fl::errc::invalid_argument, f); }

}  // namespace

TEST_CASE("memory source: an empty source, defaults and single-partition appends") {
  fl::MemorySource<int> s;
  CHECK(s.name() == "memory_source");
  CHECK(s.partitions() == 1);
  CHECK(s.delivery() == fl::delivery::exactly_once);
  CHECK(s.start() == fl::source_position{});
  CHECK(s.latest() == fl::source_position{});
  CHECK(s.plan(s.start(), 0) == s.start());
  CHECK(s.size() == 0);

  s.append(1);
  s.append(std::vector<int>{2, 3, 4});
  const std::list<int> more{5, 6};
  s.append(more);  // any input range, copied from an lvalue
  CHECK(s.latest() == fl::source_position::at(6));
  CHECK(s.size() == 6);
  CHECK(s.plan(fl::source_position::at(0), 4) == fl::source_position::at(4));
  CHECK(s.plan(fl::source_position::at(4), 4) == fl::source_position::at(6));
  CHECK(s.plan(fl::source_position::at(6), 4) == fl::source_position::at(6));
  std::vector<int> out{99};
  s.read(fl::source_position::at(1), fl::source_position::at(5), out);
  CHECK(out == std::vector<int>{99, 2, 3, 4, 5});

  fl::MemorySource<std::string> strings("names", {.partitions = 1,
                                                  .guarantee = fl::delivery::at_least_once});
  strings.append(std::string("a"));
  strings.append(std::vector<std::string>{"b", "c"});
  CHECK(strings.delivery() == fl::delivery::at_least_once);
  std::vector<std::string> names;
  strings.read(strings.start(), strings.latest(), names);
  CHECK(names == std::vector<std::string>{"a", "b", "c"});
}

TEST_CASE("R-SOURCE-1: memory source: the source contract over one to four partitions, with retention behind the reader") {
  for (std::uint32_t seed : {1u, 2u, 3u, 4u, 5u, 6u}) {
    CAPTURE(seed);
    memory_harness h(1 + seed % 4, seed);
    flowtest::check_source_contract(h, seed, {.steps = 150, .most_appended = 200, .most_limit = 300, .replays = 40});
  }
}

TEST_CASE("memory source: plan takes partitions in ascending order up to the limit") {
  fl::MemorySource<int> s("three", {.partitions = 3});
  for (int i = 0; i < 5; ++i) s.append_to(0, i);
  for (int i = 0; i < 3; ++i) s.append_to(1, 10 + i);
  for (int i = 0; i < 4; ++i) s.append_to(2, 20 + i);
  CHECK(s.latest().to_string() == "0:5,1:3,2:4");
  CHECK(s.plan(s.start(), 4).to_string() == "0:4,1:0,2:0");
  CHECK(s.plan(s.start(), 7).to_string() == "0:5,1:2,2:0");
  CHECK(s.plan(s.start(), 100).to_string() == "0:5,1:3,2:4");
  fl::source_position from;
  from.set(0, 5);
  from.set(2, 1);
  CHECK(s.plan(from, 4).to_string() == "0:5,1:3,2:2");
  std::vector<int> out;
  s.read(from, s.plan(from, 4), out);
  CHECK(out == std::vector<int>{10, 11, 12, 21});
}

TEST_CASE("memory source: discarded rows, positions beyond latest and unknown partitions are errors") {
  fl::MemorySource<int> s("clicks", {.partitions = 2});
  for (int i = 0; i < 1000; ++i) s.append_to(static_cast<std::uint32_t>(i % 2), i);
  fl::source_position d;
  d.set(1, 300);
  s.discard_before(d);
  CHECK(s.start().to_string() == "0:0,1:300");
  CHECK(s.size() == 700);
  s.discard_before(fl::source_position{});  // never moves back
  CHECK(s.start().to_string() == "0:0,1:300");

  fl::source_position from;
  from.set(1, 299);
  fl::source_position to;
  to.set(1, 310);
  std::vector<int> out{7};
  std::string what = invalid([&] { s.read(from, to, out); });
  CHECK(out == std::vector<int>{7});
  CHECK(contains(what, "'clicks'"));
  CHECK(contains(what, "rows before offset 300 of partition 1 are no longer held"));
  CHECK(contains(what, "from 1:299 to 1:310"));
  what = invalid([&] { (void)s.plan(from, 0); });
  CHECK(contains(what, "rows before offset 300 of partition 1 are no longer held"));

  // Partition 0 reads nothing from partition 1's discarded range: fine.
  fl::source_position p0;
  p0.set(0, 10);
  p0.set(1, 0);
  s.read(fl::source_position{}, p0, out);
  CHECK(out.size() == 11);
  // From the start it reads what is held.
  out.clear();
  s.read(s.start(), s.latest(), out);
  CHECK(out.size() == 700);
  CHECK(out[500] == 2 * 300 + 1);

  fl::source_position beyond;
  beyond.set(0, 501);
  what = invalid([&] { s.read(fl::source_position{}, beyond, out); });
  CHECK(contains(what, "beyond the latest position 0:500,1:500"));
  what = invalid([&] { (void)s.plan(beyond, 1); });
  CHECK(contains(what, "plan: position 0:501 is beyond"));
  what = invalid([&] { s.discard_before(beyond); });
  CHECK(contains(what, "discard_before"));
  CHECK(s.size() == 700);

  fl::source_position other;
  other.set(2, 0);
  what = invalid([&] { (void)s.plan(other, 0); });
  CHECK(contains(what, "partition 2 does not exist (the source has 2 partitions)"));
  what = invalid([&] { s.append_to(2, 1); });
  CHECK(contains(what, "append_to: partition 2 does not exist"));
  what = invalid([&] { s.read(s.latest(), s.start(), out); });
  CHECK(contains(what, "is before the start position"));
  what = invalid([] { fl::MemorySource<int> none("none", {.partitions = 0}); });
  CHECK(contains(what, "at least one partition"));
}

TEST_CASE("memory source: retention frees whole chunks and keeps reading across chunk edges") {
  // Large rows: the chunk holds only 16 of them.
  struct Big {
    std::uint64_t id;
    char pad[8192];
  };
  fl::MemorySource<Big> s("big");
  for (std::uint64_t i = 0; i < 100; ++i) s.append(Big{i, {}});
  for (std::uint64_t cut : {0u, 5u, 16u, 17u, 40u, 64u, 99u, 100u}) {
    s.discard_before(fl::source_position::at(cut));
    CHECK(s.size() == 100 - cut);
    std::vector<Big> out;
    s.read(s.start(), s.latest(), out);
    REQUIRE(out.size() == 100 - cut);
    for (std::size_t k = 0; k < out.size(); ++k) CHECK(out[k].id == cut + k);
  }
  s.append(Big{100, {}});
  std::vector<Big> out;
  s.read(fl::source_position::at(100), s.latest(), out);
  REQUIRE(out.size() == 1);
  CHECK(out[0].id == 100);
}

TEST_CASE("memory source: two producer threads append while a reader plans and reads") {
  for (std::uint32_t seed : {11u, 12u, 13u}) {
    fl::MemorySource<Ev> s("live", {.partitions = 2});
    constexpr std::uint64_t per_producer = 20000;
    std::atomic<int> done{0};
    auto produce = [&](std::uint32_t producer) {
      std::mt19937 rng(seed * 10 + producer);
      for (std::uint64_t i = 0; i < per_producer;) {
        const std::uint32_t p = rng() % 2;
        if (rng() % 8 == 0) {
          // A range to partition 0.
          std::vector<Ev> rows;
          for (int k = 0; k < 5 && i < per_producer; ++k) rows.push_back({0, producer, i++, {}});
          s.append(std::move(rows));
        } else {
          s.append_to(p, {p, producer, i++, {}});
        }
      }
      done.fetch_add(1);
    };
    std::thread a(produce, 0u), b(produce, 1u);

    std::mt19937 rng(seed);
    fl::source_position cursor = s.start();
    std::vector<std::vector<Ev>> consumed(2);
    std::uint64_t batches = 0;
    auto drain_once = [&] {
      const std::size_t limit = rng() % 4 == 0 ? 0 : 1 + rng() % 3000;
      const auto to = s.plan(cursor, limit);
      std::vector<Ev> rows;
      s.read(cursor, to, rows);
      CHECK(rows.size() == to.rows_after(cursor));
      for (const auto& e : rows) consumed[e.partition].push_back(e);
      if (batches++ % 16 == 0) s.discard_before(cursor);  // retention behind the reader
      cursor = to;
    };
    while (done.load() < 2) drain_once();
    a.join();
    b.join();
    while (cursor != s.latest()) drain_once();

    // Every row once; within a partition each producer's rows in the order
    // it appended them.
    std::uint64_t total = 0;
    for (std::uint32_t p = 0; p < 2; ++p) {
      std::uint64_t last[2] = {0, 0};
      bool seen[2] = {false, false};
      for (const auto& e : consumed[p]) {
        CHECK(e.partition == p);
        if (seen[e.producer]) CHECK(e.seq > last[e.producer]);
        seen[e.producer] = true;
        last[e.producer] = e.seq;
      }
      total += consumed[p].size();
      CHECK(consumed[p].size() == s.latest().offset(p));
    }
    CHECK(total == 2 * per_producer);
    std::vector<std::uint64_t> seqs[2];
    for (const auto& c : consumed)
      for (const auto& e : c) seqs[e.producer].push_back(e.seq);
    for (auto& v : seqs) {
      std::sort(v.begin(), v.end());
      REQUIRE(v.size() == per_producer);
      for (std::uint64_t i = 0; i < per_producer; ++i) CHECK(v[i] == i);
    }
  }
}

}  // namespace source_memory
