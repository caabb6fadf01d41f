// DedupWithinWatermark: hand-written vectors
// (docs/semantics.md#deduplication-within-a-watermark).
//
// Each multi-batch case checks, after every batch, the emitted rows, the
// watermark, the state (identities and their expiry) and the counters.
#include <flowlib/columns.hpp>
#include <flowlib/error.hpp>
#include <flowlib/flows/replace_using.hpp>
#include <flowlib/ops/dedup_within_watermark.hpp>
#include <flowlib/ops/watermark.hpp>
#include <flowlib/table.hpp>

#include <doctest/doctest.h>

#include "support/errors.hpp"

#include <algorithm>
#include <chrono>
#include <limits>
#include <cstdint>
#include <optional>
#include <ranges>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace ops_dedup_vectors {

namespace fl = flowlib;

struct Click {
  std::string session_id;
  std::int64_t click_seq_num;
  std::int64_t click_ts;  // integer event time (seconds)
  std::string ad;
  friend bool operator==(const Click&, const Click&) = default;
};
FLOWLIB_SCHEMA(Click, session_id, click_seq_num, click_ts, ad);

using Clock = std::chrono::system_clock;
using Millis = std::chrono::time_point<Clock, std::chrono::milliseconds>;

struct TimedClick {
  std::string session_id;
  std::int64_t click_seq_num;
  Millis click_ts;
  friend bool operator==(const TimedClick&, const TimedClick&) = default;
};
FLOWLIB_SCHEMA(TimedClick, session_id, click_seq_num, click_ts);

struct Event {
  std::int64_t id;
  std::optional<std::string> source;
  std::int32_t ts;
  friend bool operator==(const Event&, const Event&) = default;
};
FLOWLIB_SCHEMA(Event, id, source, ts);

using ClickDedup = fl::DedupWithinWatermark<fl::Key<&Click::session_id, &Click::click_seq_num>,
                                            fl::EventTime<&Click::click_ts>>;
using ClickKey = std::tuple<std::string, std::int64_t>;

namespace {

struct expected_batch {
  std::vector<Click> emitted;
  std::optional<std::int64_t> watermark;
  std::vector<std::pair<ClickKey, std::int64_t>> state;  // identity, expires_at (sorted)
  std::uint64_t late;
  std::uint64_t duplicates;
  std::uint64_t evicted;
};

void check_batch(ClickDedup& d, const std::vector<Click>& in, const expected_batch& e) {
  const std::vector<Click> out = d.process(in);
  CHECK(out == e.emitted);
  CHECK(d.watermark() == e.watermark);
  std::vector<ClickKey> keys;
  for (const auto& [k, exp] : e.state) {
    keys.push_back(k);
    CHECK(d.expires_at(k) == exp);
  }
  CHECK(d.state_keys() == keys);
  CHECK(d.state_size() == e.state.size());
  const fl::DedupStats& s = d.last_stats();
  CHECK(s.input_rows == in.size());
  CHECK(s.emitted_rows == e.emitted.size());
  CHECK(s.late_rows == e.late);
  CHECK(s.duplicate_rows == e.duplicates);
  CHECK(s.evicted_keys == e.evicted);
  CHECK(s.state_keys == e.state.size());
}

}  // namespace

TEST_CASE("R-DEDUP-1 R-DEDUP-2 R-DEDUP-3 R-DEDUP-4: a walk through five batches (integer event time)") {
  ClickDedup d{10, "clicks_deduped"};
  CHECK(d.watermark() == std::nullopt);  // none before any data (R-DEDUP-2)
  CHECK(d.state_size() == 0);

  // Batch 1: no watermark yet, nothing is late. (a,1) arrives twice: the
  // second copy is a duplicate. The identity excludes the event time.
  check_batch(d,
              {{"a", 1, 5, "x"}, {"a", 2, 7, "x"}, {"a", 1, 6, "x-again"}, {"b", 1, 12, "y"}},
              {{{"a", 1, 5, "x"}, {"a", 2, 7, "x"}, {"b", 1, 12, "y"}},
               2,  // 12 - 10
               {{{"a", 1}, 15}, {{"a", 2}, 17}, {{"b", 1}, 22}},
               0, 1, 0});

  // Batch 2: (c,1) at t=2 is exactly at the watermark: late (inclusive).
  // (a,1) again at t=20 is a duplicate and does not extend its expiry (15).
  // Watermark 25 - 10 = 15 evicts (a,1) (expires 15, inclusive) and (c,2).
  check_batch(d,
              {{"c", 1, 2, "late"}, {"c", 2, 3, "z"}, {"a", 1, 20, "x-third"}, {"d", 1, 25, "w"}},
              {{{"c", 2, 3, "z"}, {"d", 1, 25, "w"}},
               15,
               {{{"a", 2}, 17}, {{"b", 1}, 22}, {{"d", 1}, 35}},
               1, 1, 2});

  // Batch 3: (a,1) was evicted: accepted again, with a new expiry. (a,2) is
  // still held (17 > 15): duplicate. (e,1) at t=15 equals the watermark: late.
  check_batch(d,
              {{"a", 1, 16, "x-back"}, {"a", 2, 16, "dup"}, {"b", 1, 30, "dup"}, {"e", 1, 15, "late"}},
              {{{"a", 1, 16, "x-back"}},
               20,
               {{{"a", 1}, 26}, {{"b", 1}, 22}, {{"d", 1}, 35}},
               1, 2, 1});

  // Batch 4: empty. The watermark stays; nothing changes.
  check_batch(d, {}, {{}, 20, {{{"a", 1}, 26}, {{"b", 1}, 22}, {{"d", 1}, 35}}, 0, 0, 0});

  // Batch 5: an older event time does not lower the watermark (R-DEDUP-2);
  // a later one moves it to 30 and evicts (a,1) and (b,1).
  check_batch(d, {{"f", 1, 21, "f"}, {"x", 1, 40, "x"}},
              {{{"f", 1, 21, "f"}, {"x", 1, 40, "x"}},
               30,
               {{{"d", 1}, 35}, {{"f", 1}, 31}, {{"x", 1}, 50}},
               0, 0, 2});

  const fl::DedupStats& t = d.total_stats();
  CHECK(t.batches == 5);
  CHECK(t.input_rows == 14);
  CHECK(t.emitted_rows == 8);
  CHECK(t.late_rows == 2);
  CHECK(t.duplicate_rows == 4);
  CHECK(t.evicted_keys == 5);
  CHECK(t.state_keys == 3);
  CHECK(t.input_rows == t.emitted_rows + t.late_rows + t.duplicate_rows);
}

TEST_CASE("R-DEDUP-2: a batch with an old maximum leaves the watermark; the first batch sets it") {
  ClickDedup d{100};
  d.process(std::vector<Click>{{"a", 1, 1000, ""}});
  CHECK(d.watermark() == 900);
  d.process(std::vector<Click>{{"b", 1, 950, ""}});
  CHECK(d.watermark() == 900);
  CHECK(d.last_stats().late_rows == 0);
  d.process(std::vector<Click>{{"c", 1, 900, ""}, {"d", 1, 901, ""}});
  CHECK(d.last_stats().late_rows == 1);
  CHECK(d.last_stats().emitted_rows == 1);
}

TEST_CASE("R-DEDUP-2: every row of the batch, duplicates included, moves the watermark") {
  // As in Spark, the watermark sees every row, even rows dropped as duplicates.
  ClickDedup d{5};
  d.process(std::vector<Click>{{"a", 1, 10, ""}});
  CHECK(d.watermark() == 5);
  d.process(std::vector<Click>{{"a", 1, 14, ""}});  // a duplicate: dropped, but moves the watermark
  CHECK(d.last_stats().duplicate_rows == 1);
  CHECK(d.watermark() == 9);
}

TEST_CASE("R-DEDUP-1: a zero delay remembers an identity only within its batch") {
  ClickDedup d{0};
  auto out = d.process(std::vector<Click>{{"a", 1, 3, ""}, {"a", 1, 3, "dup"}, {"b", 1, 2, ""}});
  CHECK(out.size() == 2);
  CHECK(d.watermark() == 3);
  CHECK(d.state_size() == 0);  // expires_at = event time <= 3: evicted at the batch's end
  CHECK(d.last_stats().evicted_keys == 2);
  out = d.process(std::vector<Click>{{"a", 1, 4, ""}});
  CHECK(out.size() == 1);
}

TEST_CASE("R-DEDUP-1 R-DEDUP-3: the seed example, chrono time points and a 5-minute delay") {
  using namespace std::chrono_literals;
  fl::DedupWithinWatermark<fl::Key<&TimedClick::session_id, &TimedClick::click_seq_num>,
                           fl::EventTime<&TimedClick::click_ts>>
      d{5min};
  CHECK(d.delay() == std::chrono::milliseconds(300000));
  const Millis t0{std::chrono::milliseconds(1'700'000'000'000)};
  auto out = d.process(std::vector<TimedClick>{
      {"s1", 1, t0}, {"s1", 2, t0 + 1s}, {"s1", 1, t0 + 2s}, {"s2", 1, t0 + 3s}});
  CHECK(out == std::vector<TimedClick>{{"s1", 1, t0}, {"s1", 2, t0 + 1s}, {"s2", 1, t0 + 3s}});
  CHECK(d.watermark() == t0 + 3s - 5min);
  CHECK(d.expires_at({"s1", 1}) == t0 + 5min);
  CHECK(d.last_stats().duplicate_rows == 1);

  // Four minutes later: still a duplicate (within the delay); the watermark
  // moves to t0 - 1min.
  out = d.process(std::vector<TimedClick>{{"s1", 1, t0 + 4min}});
  CHECK(out.empty());
  CHECK(d.watermark() == t0 - 1min);
  // Twelve minutes later: the watermark (t0 + 7min) passes s1/1's expiry.
  out = d.process(std::vector<TimedClick>{{"s3", 1, t0 + 12min}});
  CHECK(out.size() == 1);
  CHECK(d.watermark() == t0 + 7min);
  CHECK(d.state_keys() == std::vector<std::tuple<std::string, std::int64_t>>{{"s3", 1}});
  CHECK(d.last_stats().evicted_keys == 3);
  // The redelivered click now is late (t0 + 4min <= t0 + 7min).
  out = d.process(std::vector<TimedClick>{{"s1", 1, t0 + 4min}});
  CHECK(out.empty());
  CHECK(d.last_stats().late_rows == 1);
}

TEST_CASE("R-DEDUP-5: single-column identities, optional key columns, narrow integer event times") {
  fl::DedupWithinWatermark<fl::Key<&Event::id>, fl::EventTime<&Event::ts>> by_id{std::int32_t{3}};
  auto out = by_id.process(std::vector<Event>{{1, "a", 10}, {1, "b", 11}, {2, std::nullopt, 12}});
  CHECK(out.size() == 2);
  CHECK(by_id.watermark() == 9);
  CHECK(by_id.state_keys() == std::vector<std::int64_t>{1, 2});

  // A composite identity with a nullable column: null matches null.
  fl::DedupWithinWatermark<fl::Key<&Event::id, &Event::source>, fl::EventTime<&Event::ts>> d{
      std::int32_t{3}};
  out = d.process(std::vector<Event>{
      {1, std::nullopt, 10}, {1, std::nullopt, 10}, {1, "a", 10}, {2, std::nullopt, 11}});
  CHECK(out == std::vector<Event>{{1, std::nullopt, 10}, {1, "a", 10}, {2, std::nullopt, 11}});
  CHECK(d.last_stats().duplicate_rows == 1);
  CHECK(d.contains({1, std::nullopt}));
  CHECK(!d.contains({3, std::nullopt}));
}

TEST_CASE("R-DEDUP-1 R-DEDUP-2: event times near the limits saturate instead of overflowing") {
  constexpr std::int32_t lo = std::numeric_limits<std::int32_t>::min();
  constexpr std::int32_t hi = std::numeric_limits<std::int32_t>::max();
  fl::DedupWithinWatermark<fl::Key<&Event::id>, fl::EventTime<&Event::ts>> d{std::int32_t{100}};
  d.process(std::vector<Event>{{1, {}, lo + 5}});
  CHECK(d.watermark() == lo);  // lo + 5 - 100 saturates
  d.process(std::vector<Event>{{2, {}, hi - 5}});
  CHECK(d.expires_at(2) == hi);  // hi - 5 + 100 saturates
  CHECK(d.watermark() == hi - 105);
}

struct Reading16 {
  std::uint16_t sensor;
  std::uint32_t tick;  // an unsigned event time
};

TEST_CASE("R-DEDUP-2: unsigned event times saturate at zero") {
  fl::DedupWithinWatermark<fl::Key<&Reading16::sensor>, fl::EventTime<&Reading16::tick>> d{100u};
  d.process(std::vector<Reading16>{{1, 5}, {2, 7}});
  CHECK(d.watermark() == 0u);  // 7 - 100 saturates at 0
  CHECK(d.last_stats().emitted_rows == 2);
  d.process(std::vector<Reading16>{{3, 0}, {4, 250}});
  CHECK(d.last_stats().late_rows == 1);  // 0 <= 0
  CHECK(d.watermark() == 150u);
  CHECK(d.state_keys() == std::vector<std::uint16_t>{4});
  fl::DedupWithinWatermark<fl::Key<&Reading16::sensor>, fl::EventTime<&Reading16::tick>> r{100u};
  r.read_checkpoint(fl::checkpoint_blobs::of_snapshot(fl::checkpoint_snapshot(d)));
  CHECK(r.expires_at(4) == 350u);
}

TEST_CASE("R-DEDUP-6: a snapshot and its restore give identical subsequent behaviour") {
  ClickDedup a{10};
  a.process(std::vector<Click>{{"a", 1, 5, ""}, {"b", 1, 12, ""}, {"long-session-id-beyond-sso", 7, 13, ""}});
  a.process(std::vector<Click>{{"c", 1, 25, ""}, {"a", 1, 20, ""}});
  const std::string saved = fl::checkpoint_snapshot(a);
  CHECK(saved.substr(0, 4) == "FLDD");
  CHECK(saved.find("FLDW") == 15);  // header (4 + 2 + 1), then the state's length (8)

  ClickDedup b{10, "restored"};
  b.read_checkpoint(fl::checkpoint_blobs::of_snapshot(saved));
  CHECK(b.delay() == a.delay());
  CHECK(b.watermark() == a.watermark());
  CHECK(b.state_keys() == a.state_keys());
  for (const auto& k : a.state_keys()) CHECK(b.expires_at(k) == a.expires_at(k));
  CHECK(fl::checkpoint_snapshot(b) == saved);

  const std::vector<std::vector<Click>> later{
      {{"b", 1, 26, ""}, {"long-session-id-beyond-sso", 7, 27, ""}, {"d", 1, 27, ""}},
      {{"a", 1, 30, ""}, {"c", 1, 31, ""}, {"e", 1, 20, ""}},
      {{"f", 1, 60, ""}, {"c", 1, 60, ""}}};
  for (const auto& batch : later) {
    CHECK(b.process(batch) == a.process(batch));
    CHECK(b.last_stats() == a.last_stats());
    CHECK(b.watermark() == a.watermark());
    CHECK(b.state_keys() == a.state_keys());
  }
  CHECK(fl::checkpoint_snapshot(b) == fl::checkpoint_snapshot(a));
}

TEST_CASE("R-DEDUP-6: chrono state and multi-input watermarks survive a round trip") {
  using namespace std::chrono_literals;
  using D = fl::DedupWithinWatermark<fl::Key<&TimedClick::session_id, &TimedClick::click_seq_num>,
                                     fl::EventTime<&TimedClick::click_ts>>;
  const Millis t0{std::chrono::milliseconds(1'000'000)};
  D a{1min, "a", fl::DedupOptions{.inputs = 3, .policy = fl::watermark_policy::max}};
  a.process(0, std::vector<TimedClick>{{"s", 1, t0}});
  a.process(2, std::vector<TimedClick>{{"s", 2, t0 + 10s}});
  D b{1min, "b", fl::DedupOptions{.inputs = 3, .policy = fl::watermark_policy::max}};
  b.read_checkpoint(fl::checkpoint_blobs::of_snapshot(fl::checkpoint_snapshot(a)));
  CHECK(b.policy() == fl::watermark_policy::max);
  CHECK(b.input_watermark(0) == t0 - 1min);
  CHECK(b.input_watermark(1) == std::nullopt);
  CHECK(b.input_watermark(2) == t0 + 10s - 1min);
  CHECK(b.watermark() == a.watermark());
  CHECK(b.expires_at({"s", 2}) == t0 + 10s + 1min);
}

TEST_CASE("R-DEDUP-6: malformed state is rejected and leaves the operator unchanged") {
  ClickDedup a{10};
  a.process(std::vector<Click>{{"a", 1, 5, ""}, {"b", 1, 12, ""}});
  const std::string good = fl::checkpoint_snapshot(a);
  ClickDedup b{10};
  b.process(std::vector<Click>{{"z", 9, 100, ""}});
  const std::string before = fl::checkpoint_snapshot(b);

  const auto rejects = [&](const std::string& data) {
    CHECK_THROWS_AS(b.read_checkpoint(fl::checkpoint_blobs::of_snapshot(data)), fl::error);
    CHECK(fl::checkpoint_snapshot(b) == before);
  };
  const std::size_t state_at = good.find("FLDW");
  REQUIRE(state_at != std::string::npos);
  rejects("");
  rejects("XXXX" + good.substr(4));
  rejects(good.substr(0, good.size() - 1));  // truncated
  rejects(good + "x");                       // trailing bytes
  std::string wrong_version = good;
  wrong_version[4] = 9;  // the header's format version
  rejects(wrong_version);
  std::string wrong_state = good;
  wrong_state[state_at] = 'X';  // the state's own magic
  rejects(wrong_state);
  wrong_state = good;
  wrong_state[state_at + 4] = 9;  // the state's own version
  rejects(wrong_state);
  ClickDedup two_inputs{10, "two", fl::DedupOptions{.inputs = 2}};
  const auto good_blobs = fl::checkpoint_blobs::of_snapshot(good);
  CHECK_THROWS_AS(two_inputs.read_checkpoint(good_blobs), fl::error);
  fl::DedupWithinWatermark<fl::Key<&Event::id>, fl::EventTime<&Event::ts>> narrow{std::int32_t{1}};
  CHECK_THROWS_AS(narrow.read_checkpoint(good_blobs), fl::error);  // another event-time type
  CHECK(flowtest::contains(flowtest::message_of(fl::errc::checkpoint_corrupt, [&] {
                             b.read_checkpoint(fl::checkpoint_blobs::of_snapshot(good.substr(0, 10)));
                           }),
                           "truncated"));
}

TEST_CASE("R-DEDUP-5: several inputs, the global watermark is the min of the inputs' by default") {
  ClickDedup d{10, "union", fl::DedupOptions{.inputs = 2}};
  CHECK(d.policy() == fl::watermark_policy::min);
  // Input 0 alone: an input without data does not hold the watermark back.
  d.process(0, std::vector<Click>{{"a", 1, 100, ""}});
  CHECK(d.input_watermark(0) == 90);
  CHECK(d.input_watermark(1) == std::nullopt);
  CHECK(d.watermark() == 90);
  // Input 1 is behind: its watermark (40) is the min, but the global one
  // never decreases.
  d.process(1, std::vector<Click>{{"b", 1, 50, ""}});
  CHECK(d.input_watermark(1) == 40);
  CHECK(d.watermark() == 90);
  CHECK(d.last_stats().late_rows == 1);  // 50 <= 90
  // Input 0 advances: the slower input 1 (40) holds the global watermark.
  d.process(0, std::vector<Click>{{"c", 1, 200, ""}});
  CHECK(d.input_watermark(0) == 190);
  CHECK(d.watermark() == 90);
  CHECK(d.contains({"a", 1}));  // expires 110 > 90
  // Input 1 catches up to 150: the global watermark becomes min(190, 140).
  d.process(1, std::vector<Click>{{"d", 1, 150, ""}, {"a", 1, 95, ""}});
  CHECK(d.last_stats().duplicate_rows == 1);  // a/1 still held: a duplicate across inputs
  CHECK(d.watermark() == 140);
  CHECK(!d.contains({"a", 1}));
  CHECK(d.last_stats().evicted_keys == 1);
  CHECK_THROWS_AS(d.process(2, std::vector<Click>{}), fl::error);
}

TEST_CASE("R-DEDUP-5: several inputs with the max policy") {
  ClickDedup d{10, "union", fl::DedupOptions{.inputs = 2, .policy = fl::watermark_policy::max}};
  d.process(0, std::vector<Click>{{"a", 1, 100, ""}});
  d.process(1, std::vector<Click>{{"b", 1, 50, ""}});
  CHECK(d.watermark() == 90);
  d.process(1, std::vector<Click>{{"c", 1, 150, ""}});
  CHECK(d.watermark() == 140);  // the fastest input decides
  d.process(0, std::vector<Click>{{"d", 1, 120, ""}, {"e", 1, 141, ""}});
  CHECK(d.last_stats().late_rows == 1);
  CHECK(d.watermark() == 140);
  CHECK(d.input_watermark(0) == 131);
}

struct Reading {
  std::int64_t sensor;
  std::int64_t seq;
  std::int64_t ts;
  std::int64_t value;
  friend bool operator==(const Reading&, const Reading&) = default;
  friend bool operator<(const Reading& a, const Reading& b) {
    return std::tie(a.sensor, a.seq) < std::tie(b.sensor, b.seq);
  }
};
FLOWLIB_SCHEMA(Reading, sensor, seq, ts, value);

// A row whose copy constructor throws for a chosen payload.
struct Fragile {
  std::int64_t id;
  std::int64_t ts;
  bool poison = false;
  Fragile(std::int64_t i, std::int64_t t, bool p = false) : id(i), ts(t), poison(p) {}
  Fragile(const Fragile& o) : id(o.id), ts(o.ts), poison(o.poison) {
    if (poison) throw std::runtime_error("copy failed");
  }
  Fragile(Fragile&&) noexcept = default;
  Fragile& operator=(const Fragile&) = default;
  Fragile& operator=(Fragile&&) noexcept = default;
  friend bool operator==(const Fragile&, const Fragile&) = default;
};

TEST_CASE("processing a batch is all-or-nothing") {
  fl::DedupWithinWatermark<fl::Key<&Fragile::id>, fl::EventTime<&Fragile::ts>> d{10};
  std::vector<Fragile> first;
  for (std::int64_t i = 0; i < 200; ++i) first.emplace_back(i, 100 + i);
  CHECK(d.process(first).size() == 200);
  CHECK(d.watermark() == 289);
  const std::string before = fl::checkpoint_snapshot(d);
  const fl::DedupStats stats_before = d.total_stats();

  // New identities (reusing evicted slots and growing the slab), duplicates,
  // late rows, then a row whose copy throws: nothing may change.
  std::vector<Fragile> bad;
  for (std::int64_t i = 0; i < 300; ++i) bad.emplace_back(1000 + i, 400 + i);
  bad.emplace_back(190, 295);  // held (expires 300): a duplicate
  bad.emplace_back(5, 10);
  bad.emplace_back(5000, 1000, true);
  std::vector<Fragile> out;
  out.emplace_back(-1, -1);
  CHECK_THROWS_AS(d.process_into(bad, out), std::runtime_error);
  CHECK(out.size() == 1);
  CHECK(fl::checkpoint_snapshot(d) == before);
  CHECK(d.total_stats() == stats_before);
  CHECK(d.watermark() == 289);

  bad.back().poison = false;  // the same batch, without the failure
  out.clear();
  d.process_into(bad, out);
  CHECK(out.size() == 301);
  CHECK(d.last_stats().late_rows == 1);
  CHECK(d.last_stats().duplicate_rows == 1);
  CHECK(d.watermark() == 990);
  CHECK(d.state_size() == 1);  // only 5000 (expires 1010) outlives watermark 990
}

// A key policy written by hand (no hash or equal hooks), which throws for
// one identity, as user code may.
struct PickyKey {
  using row_type = Event;
  using value_type = std::int64_t;
  std::int64_t operator()(const Event& e) const {
    if (e.id == 666) throw std::runtime_error("no such identity");
    return e.id;
  }
  std::string describe(const Event& e) const { return "id=" + std::to_string(e.id); }
  friend bool operator==(const PickyKey&, const PickyKey&) = default;
};

TEST_CASE("a throwing key policy leaves the state as it was") {
  fl::DedupWithinWatermark<PickyKey, fl::EventTime<&Event::ts>> d{std::int32_t{5}};
  d.process(std::vector<Event>{{1, {}, 10}, {2, {}, 11}});
  const std::string before = fl::checkpoint_snapshot(d);
  std::vector<Event> batch;
  for (std::int64_t i = 0; i < 40; ++i) batch.push_back({100 + i, {}, static_cast<std::int32_t>(12 + i)});
  batch.push_back({1, {}, 12});
  batch.push_back({666, {}, 60});
  CHECK_THROWS_AS(d.process(batch), std::runtime_error);
  CHECK(fl::checkpoint_snapshot(d) == before);
  CHECK(d.last_stats().input_rows == 2);
  batch.pop_back();
  CHECK(d.process(batch).size() == 40);
  CHECK(d.last_stats().duplicate_rows == 1);
}

TEST_CASE("R-DEDUP-3: rows of rvalue ranges are moved, lvalue batches are copied") {
  ClickDedup d{10};
  std::vector<Click> batch{{"a", 1, 5, std::string(64, 'x')}, {"a", 1, 6, "dup"}};
  auto out = d.process(batch | std::views::transform([](Click& c) -> Click&& { return std::move(c); }));
  CHECK(out.size() == 1);
  CHECK(out[0].ad == std::string(64, 'x'));
  CHECK(batch[0].ad.empty());  // moved from
  CHECK(batch[1].ad == "dup");  // a duplicate is never moved
  std::vector<Click> kept{{"b", 1, 7, std::string(64, 'y')}};
  d.process(kept);
  CHECK(kept[0].ad == std::string(64, 'y'));
  // Single-pass and non-sized ranges are accepted too.
  auto filtered = std::vector<Click>{{"c", 1, 8, ""}, {"d", 1, 9, ""}} |
                  std::views::filter([](const Click& c) { return c.session_id != "d"; });
  CHECK(d.process(filtered).size() == 1);
}

TEST_CASE("R-DEDUP-3: dedup composes before a flow (dedup, then REPLACE USING)") {
  fl::DedupWithinWatermark<fl::Key<&Reading::sensor, &Reading::seq>, fl::EventTime<&Reading::ts>> dedup{
      60};
  fl::StreamingTable<Reading> table{"readings"};
  fl::ReplaceUsing<fl::Key<&Reading::sensor>, fl::Seq<&Reading::seq>> flow{"latest"};
  // An at-least-once source redelivers (1,2): without dedup the target would
  // hold it twice (equal sequences append, R-USING-2).
  const std::vector<std::vector<Reading>> source{{{1, 1, 10, 5}, {1, 2, 20, 6}},
                                                 {{1, 2, 20, 6}, {2, 1, 25, 7}}};
  for (const auto& b : source) flow.apply(table, dedup.process(b));
  std::vector<Reading> rows;
  for (const Reading& r : table.rows()) rows.push_back(r);
  std::sort(rows.begin(), rows.end());
  CHECK(rows == std::vector<Reading>{{1, 2, 20, 6}, {2, 1, 25, 7}});
  CHECK(dedup.total_stats().duplicate_rows == 1);
}

TEST_CASE("configuration errors") {
  CHECK_THROWS_AS(ClickDedup(-1), fl::error);
  CHECK_THROWS_AS(ClickDedup(1, "x", fl::DedupOptions{.inputs = 0}), fl::error);
  ClickDedup moved{10};
  moved.process(std::vector<Click>{{"a", 1, 1, ""}});
  ClickDedup other = std::move(moved);
  CHECK(other.contains({"a", 1}));
  CHECK(other.process(std::vector<Click>{{"a", 1, 2, ""}}).empty());
}

}  // namespace ops_dedup_vectors
