// A table's append log (storage/row_log.hpp, table_base::append_log()):
// offsets, reads, truncation (a failed batch), retention, full refresh
// (offsets never restart), errors and their messages. Random sequences are
// checked against a model: the vector of every row ever appended, indexed
// by offset.
#include <flowlib/storage/row_log.hpp>
#include <flowlib/table.hpp>

#include <support/failing_allocator.hpp>
#include <support/rows.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace storage_row_log {

namespace fl = flowlib;

// Large rows make small chunks (16 rows), so that random sequences cross
// chunk boundaries often; the string is on the heap (ASan sees leaks and
// double destructions).
struct Big {
  std::uint64_t offset = 0;
  std::string s;
  char pad[2000] = {};
  friend bool operator==(const Big& a, const Big& b) { return a.offset == b.offset && a.s == b.s; }
};
static_assert(fl::detail::row_log<Big>::chunk_rows == 16);

Big big(std::uint64_t o) { return {o, "row " + std::to_string(o) + std::string(30, 'x'), {}}; }

using flowtest::Event;

// Runs f and returns the flowlib::error it throws (fails the test if none).
template <class F>
std::optional<fl::error> thrown_by(F&& f) {
  try {
    f();
  } catch (const fl::error& e) {
    return e;
  }
  FAIL("no flowlib::error was thrown");
  return std::nullopt;
}

TEST_CASE("row_log: appends get increasing offsets; reads return ranges in order") {
  fl::detail::row_log<Big> log("t");
  CHECK(log.begin_offset() == 0);
  CHECK(log.end_offset() == 0);
  CHECK(log.empty());
  for (std::uint64_t o = 0; o < 100; ++o) log.append(big(o));
  CHECK(log.end_offset() == 100);
  CHECK(log.size() == 100);
  for (auto [from, to] : {std::pair<std::uint64_t, std::uint64_t>{0, 100}, {0, 0}, {15, 17},
                          {16, 32}, {31, 33}, {99, 100}, {100, 100}}) {
    CAPTURE(from);
    CAPTURE(to);
    std::vector<Big> out{big(12345)};  // read appends: what was there stays
    log.read(from, to, out);
    REQUIRE(out.size() == 1 + (to - from));
    CHECK(out[0] == big(12345));
    for (std::uint64_t o = from; o < to; ++o) CHECK(out[1 + (o - from)] == big(o));
  }
}

TEST_CASE("row_log: random appends, truncations, discards and clears against a model") {
  for (std::uint64_t seed = 1; seed <= 200; ++seed) {
    CAPTURE(seed);
    std::mt19937_64 rng(seed);
    fl::detail::row_log<Big> log("t");
    std::vector<Big> all;  // all[o]: the row at offset o (for o < end)
    std::uint64_t begin = 0, end = 0;
    std::uint64_t next_value = 0;  // distinct row contents
    for (int step = 0; step < 200; ++step) {
      const unsigned op = static_cast<unsigned>(rng() % 20);
      if (op < 8) {  // appends, sometimes after a reserve
        const std::size_t n = rng() % 40;
        if (rng() % 2) log.reserve(n);
        for (std::size_t i = 0; i < n; ++i) {
          Big r = big(next_value++);
          log.append(r);
          all.resize(end);
          all.push_back(r);
          ++end;
        }
      } else if (op < 11) {  // a failed batch: back to an earlier end
        const std::uint64_t to = begin + rng() % (end - begin + 1);
        log.truncate_to(to);
        end = to;
      } else if (op < 14) {  // retention; beyond the end stops at the end
        const std::uint64_t to = begin + rng() % (end - begin + 10);
        log.discard_before(to);
        begin = std::max(begin, std::min(to, end));
      } else if (op == 14) {  // full refresh
        log.clear();
        begin = end;
      } else {  // a valid read
        const std::uint64_t from = begin + rng() % (end - begin + 1);
        const std::uint64_t to = from + rng() % (end - from + 1);
        std::vector<Big> out;
        log.read(from, to, out);
        REQUIRE(out.size() == to - from);
        for (std::uint64_t o = from; o < to; ++o) CHECK(out[o - from] == all[o]);
      }
      REQUIRE(log.begin_offset() == begin);
      REQUIRE(log.end_offset() == end);
    }
    // Everything held reads back.
    std::vector<Big> out;
    log.read(begin, end, out);
    REQUIRE(out.size() == end - begin);
    for (std::uint64_t o = begin; o < end; ++o) CHECK(out[o - begin] == all[o]);
  }
}

TEST_CASE("row_log: truncation undoes a batch's appends; the next appends reuse its offsets") {
  fl::detail::row_log<std::string> log("t");
  log.append("a");
  log.append("b");
  const std::uint64_t mark = log.end_offset();
  log.reserve(3);
  log.append("c");
  log.append("d");
  log.truncate_to(mark);  // the batch failed
  CHECK(log.end_offset() == 2);
  log.append("c2");
  std::vector<std::string> out;
  log.read(0, 3, out);
  CHECK(out == std::vector<std::string>{"a", "b", "c2"});
}

TEST_CASE("row_log: discard_before keeps counting; clear keeps offsets (no restart)") {
  fl::detail::row_log<Big> log("t");
  for (std::uint64_t o = 0; o < 50; ++o) log.append(big(o));
  log.discard_before(40);
  CHECK(log.begin_offset() == 40);
  CHECK(log.end_offset() == 50);
  log.discard_before(10);  // below begin: nothing
  CHECK(log.begin_offset() == 40);
  std::vector<Big> out;
  log.read(40, 50, out);
  CHECK(out.front() == big(40));
  log.append(big(50));
  CHECK(log.end_offset() == 51);

  log.clear();
  CHECK(log.begin_offset() == 51);
  CHECK(log.end_offset() == 51);
  CHECK(log.empty());
  log.append(big(1000));
  CHECK(log.end_offset() == 52);  // a new row gets a new offset
  out.clear();
  log.read(51, 52, out);
  CHECK(out == std::vector<Big>{big(1000)});
  log.discard_before(1000);  // past the end: up to the end
  CHECK(log.begin_offset() == 52);
  log.append(big(2000));
  out.clear();
  log.read(52, 53, out);
  CHECK(out == std::vector<Big>{big(2000)});
}

TEST_CASE("row_log: reads outside the held rows throw errors naming the table") {
  fl::detail::row_log<std::string> log("orders");
  for (int i = 0; i < 10; ++i) log.append(std::to_string(i));
  log.discard_before(4);
  std::vector<std::string> out{"kept"};

  auto e = thrown_by([&] { log.read(3, 5, out); });
  REQUIRE(e);
  CHECK(e->code() == fl::errc::invalid_argument);
  CHECK(e->flow() == "orders");
  CHECK(std::string(e->what()).find("flow 'orders'") != std::string::npos);
  CHECK(std::string(e->what()).find("the rows before offset 4 were discarded") != std::string::npos);
  CHECK(std::string(e->what()).find("from offset 3") != std::string::npos);

  e = thrown_by([&] { log.read(5, 11, out); });
  REQUIRE(e);
  CHECK(e->code() == fl::errc::invalid_argument);
  CHECK(std::string(e->what()).find("up to offset 11 is past the end of the log (offset 10)") !=
        std::string::npos);

  e = thrown_by([&] { log.read(7, 6, out); });
  REQUIRE(e);
  CHECK(e->code() == fl::errc::invalid_argument);
  CHECK(std::string(e->what()).find("from offset 7 to offset 6") != std::string::npos);
  CHECK(out == std::vector<std::string>{"kept"});  // nothing was read

  log.clear();  // a full refresh: a reader at an old offset learns it
  e = thrown_by([&] { log.read(9, 10, out); });
  REQUIRE(e);
  CHECK(std::string(e->what()).find("the rows before offset 10 were discarded") != std::string::npos);
}

TEST_CASE("row_log: after reserve(n), n appends allocate nothing") {
  struct Plain {
    std::uint64_t v = 0;
  };
  constexpr std::size_t chunk = fl::detail::row_log<Plain>::chunk_rows;
  const std::pair<std::size_t, std::size_t> cases[] = {
      {0, 3000}, {1, 3000}, {1000, 3000}, {chunk, 3000}, {5000, 3000},
      {0, 5},    {chunk - 8, 100}, {chunk, 1}, {chunk - 1, 1}, {chunk - 1, 2}};
  for (const auto& [held, extra] : cases) {
    CAPTURE(held);
    CAPTURE(extra);
    fl::detail::row_log<Plain> log("t");
    for (std::size_t i = 0; i < held; ++i) log.append({i});
    log.reserve(extra);
    constexpr long budget = 1'000'000;
    failing_allocator::arm(budget);
    for (std::size_t i = 0; i < extra; ++i) log.append({i});
    const long used = budget - failing_allocator::allocations_left;
    failing_allocator::disarm();
    CHECK(used == 0);
    CHECK(log.end_offset() == held + extra);
  }
}

TEST_CASE("row_log: an append that throws (an allocation, the row's copy) changes nothing") {
  fl::detail::row_log<std::string> log("t");
  const std::string long_row(100, 'r');  // its copy allocates
  const auto chunk = fl::detail::row_log<std::string>::chunk_rows;
  for (std::size_t i = 0; i < chunk - 1; ++i) log.append(long_row);
  for (int round = 0; round < 3; ++round) {  // inside a chunk, at its end, in a new one
    CAPTURE(round);
    const std::uint64_t end = log.end_offset();
    failing_allocator::arm(0);
    bool threw = false;
    try {
      log.append(long_row);
    } catch (const std::bad_alloc&) {
      threw = true;
    }
    failing_allocator::disarm();
    CHECK(threw);
    CHECK(log.end_offset() == end);
    log.append("ok");
    std::vector<std::string> out;
    log.read(end, end + 1, out);
    CHECK(out == std::vector<std::string>{"ok"});
  }
}

TEST_CASE("table: append_log() is empty until used; full_refresh clears it, offsets go on") {
  fl::StreamingTable<Event> t{"events"};
  CHECK(t.append_log().empty());
  CHECK(t.append_log().owner() == "events");
  t.append_log().append({1, "a"});
  t.append_log().append({2, "b"});
  CHECK(std::as_const(t).append_log().end_offset() == 2);
  t.full_refresh();
  CHECK(t.append_log().begin_offset() == 2);
  CHECK(t.append_log().end_offset() == 2);
  std::vector<Event> out;
  auto e = thrown_by([&] { t.append_log().read(0, 2, out); });
  REQUIRE(e);
  CHECK(e->flow() == "events");

  // A refused full refresh (R-WHERE-6) keeps the log as it is.
  fl::ManagedTable<Event> kept{"kept", fl::table_options<Event>().reset_allowed(false)};
  kept.append_log().append({1, "a"});
  CHECK_THROWS_AS(kept.full_refresh(), fl::error);
  CHECK(kept.append_log().end_offset() == 1);
  kept.append_log().read(0, 1, out);
  CHECK(out == std::vector<Event>{{1, "a"}});
}

}  // namespace storage_row_log
