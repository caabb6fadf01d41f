// KafkaSource (source/kafka.hpp) on the mock cluster, without a pipeline:
// the source contract (support/source_contract.hpp) for every partition
// and for a chosen subset, start/latest being the watermarks and plan()
// dealing offsets round robin over the partitions with records to read
// (R-SOURCE-1, R-SOURCE-5); records into rows (the default JSON
// decoding, tombstones, a deserializer that sees key, value, headers and
// timestamp); a record that does not decode (R-SOURCE-2); the configuration
// errors.
#include <flowlib/source/kafka.hpp>

#include "source_support.hpp"
#include "support/errors.hpp"
#include "support/kafka_mock.hpp"
#include "support/source_contract.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace kafka_source {

namespace fl = flowlib;

struct Ev {
  std::int64_t id = 0;
  std::int64_t seq = 0;
  std::string v;
  friend bool operator==(const Ev&, const Ev&) = default;
};
FLOWLIB_SCHEMA(Ev, id, seq, v);

struct NoSchema {
  std::string text;
};

struct Rescued {
  std::int64_t id = 0;
  std::optional<std::int64_t> seq;
  std::string _rescued_data;
};
FLOWLIB_SCHEMA(Rescued, id, seq, _rescued_data);

static_assert(fl::source<fl::KafkaSource<Ev>>);
static_assert(fl::source<fl::KafkaSource<NoSchema>>);

namespace {

using kafka_source_support::source_options;
using flowtest::contains;

std::string json_of(const Ev& e) { return nlohmann::json{{"id", e.id}, {"seq", e.seq}, {"v", e.v}}.dump(); }

fl::KafkaSourceOptions<Ev> options(const flowtest::kafka_mock& mock, std::string topic,
                                   std::vector<std::int32_t> partitions = {}) {
  return source_options<Ev>(mock, std::move(topic), std::move(partitions));
}

// The offsets plan() should give: dealt out one at a time, round robin over
// the partitions with offsets left, in ascending partition order.
fl::source_position model_plan(const fl::source_position& from, const fl::source_position& latest,
                               std::size_t limit) {
  fl::source_position to = from;
  std::map<std::uint32_t, std::uint64_t> at, end;
  for (const auto& [p, o] : latest.partitions()) {
    at[p] = from.offset(p);
    end[p] = o;
  }
  if (limit == 0) {
    for (const auto& [p, o] : end) to.set(p, std::max(o, at[p]));
    return to;
  }
  std::size_t left = limit;
  bool any = true;
  while (left > 0 && any) {
    any = false;
    for (auto& [p, o] : at) {
      if (left == 0) break;
      if (o < end[p]) {
        ++o;
        --left;
        any = true;
      }
    }
  }
  for (const auto& [p, o] : at) to.set(p, o);
  return to;
}

// KafkaSource under the contract suite (support/source_contract.hpp): a
// topic of its own, records produced to any of its partitions, read by a
// source over all of them or over `subset`; start() and latest() are the
// watermarks, plan() deals offsets round robin.
struct kafka_harness {
  flowtest::kafka_mock& mock;
  std::string topic;
  int parts;
  std::vector<std::int32_t> subset;
  bool made = (mock.create_topic(topic, parts), true);
  fl::KafkaSource<Ev> s{"events", options(mock, topic, subset)};

  const fl::KafkaSource<Ev>& source() const { return s; }
  std::vector<std::uint32_t> partitions() const {
    std::vector<std::uint32_t> out;
    for (int p = 0; p < parts; ++p) out.push_back(static_cast<std::uint32_t>(p));
    return out;
  }
  bool reads(std::uint32_t p) const {
    return subset.empty() || std::find(subset.begin(), subset.end(), static_cast<std::int32_t>(p)) != subset.end();
  }
  Ev row(std::uint64_t n) const {
    const auto i = static_cast<std::int64_t>(n);
    return {i, i * 7, "e" + std::to_string(i)};
  }
  void append(std::uint32_t p, const std::vector<Ev>& rows) {
    std::vector<flowtest::mock_record> recs;
    for (const auto& e : rows) recs.push_back({static_cast<std::int32_t>(p), "k" + std::to_string(e.id), json_of(e), {}, 0});
    mock.produce(topic, recs);
  }
  fl::source_position plan_model(const fl::source_position& from, const fl::source_position& latest,
                                 std::size_t limit) const {
    return model_plan(from, latest, limit);
  }
};

}  // namespace

TEST_CASE("R-SOURCE-1, R-SOURCE-5: the source contract over all of a topic's partitions and over a subset; start and latest are the watermarks, plan deals offsets round robin") {
  auto& mock = flowtest::shared_kafka_mock();
  for (std::uint32_t seed : {1u, 2u, 3u, 4u}) {
    CAPTURE(seed);
    std::mt19937 rng(seed);
    const int parts = 1 + static_cast<int>(rng() % 4);
    std::vector<std::int32_t> subset;  // a random non-empty subset
    for (int p = 0; p < parts; ++p)
      if (rng() % 2) subset.push_back(p);
    if (subset.empty()) subset.push_back(parts - 1);
    const flowtest::contract_sizes sizes{.steps = 12, .most_appended = 60, .most_limit = 40, .replays = 6};

    kafka_harness all{mock, "source0.all." + std::to_string(seed), parts, {}};
    flowtest::check_source_contract(all, seed, sizes);
    CHECK(all.s.partitions().size() == static_cast<std::size_t>(parts));
    kafka_harness some{mock, "source0.some." + std::to_string(seed), parts, subset};
    flowtest::check_source_contract(some, seed, sizes);
    CHECK(some.s.partitions() == subset);
  }
}

TEST_CASE("R-SOURCE-5: plan shares a row limit evenly over the partitions with records to read") {
  auto& mock = flowtest::shared_kafka_mock();
  mock.create_topic("source1", 3);
  std::vector<flowtest::mock_record> recs;
  for (int i = 0; i < 10; ++i) recs.push_back({0, std::nullopt, json_of({i, 0, "a"}), {}, 0});
  for (int i = 0; i < 2; ++i) recs.push_back({1, std::nullopt, json_of({i, 0, "b"}), {}, 0});
  for (int i = 0; i < 5; ++i) recs.push_back({2, std::nullopt, json_of({i, 0, "c"}), {}, 0});
  mock.produce("source1", recs);
  fl::KafkaSource<Ev> src{"source1", options(mock, "source1")};
  const auto latest = src.latest();
  fl::source_position from;
  // 7 offsets: partition 1 needs 2, the other 5 go 3 to partition 0 and 2 to 2.
  auto to = src.plan(from, 7);
  CHECK(to.to_string() == "0:3,1:2,2:2");
  to = src.plan(to, 7);
  CHECK(to.to_string() == "0:7,1:2,2:5");
  to = src.plan(to, 7);
  CHECK(to.to_string() == "0:10,1:2,2:5");
  CHECK(to == latest);
  CHECK(src.plan(to, 7) == to);  // nothing new
  // Partitions of a position that the source does not read are carried.
  fl::source_position foreign = fl::source_position::at(0);
  foreign.set(9, 42);
  CHECK(src.plan(foreign, 0).offset(9) == 42);
}

TEST_CASE("KafkaSource: JSON values into rows, tombstones skipped; a deserializer sees key, value, headers and timestamp") {
  auto& mock = flowtest::shared_kafka_mock();
  mock.create_topic("source2", 2);
  const std::int64_t ts = 1'700'000'000'123;
  mock.produce("source2", {{0, "a", json_of({1, 10, "x"}), {{"h1", "v1"}}, ts},
                     {0, "a", std::nullopt, {}, ts},  // a tombstone
                     {1, std::nullopt, json_of({2, 20, "y"}), {}, ts},
                     {0, "b", json_of({3, 30, "z"}), {}, ts}});
  fl::KafkaSource<Ev> src{"source2", options(mock, "source2")};
  std::vector<Ev> rows;
  src.read(src.start(), src.latest(), rows);
  CHECK(rows == std::vector<Ev>{{1, 10, "x"}, {3, 30, "z"}, {2, 20, "y"}});

  struct Seen {
    std::int32_t partition;
    std::int64_t offset;
    std::optional<std::string> key, value;
    std::vector<std::pair<std::string, std::optional<std::string>>> headers;
    std::optional<std::int64_t> ts;
  };
  std::vector<Seen> seen;
  auto o = options(mock, "source2");
  o.deserialize = [&](const fl::KafkaRecord& r) -> std::optional<Ev> {
    CHECK(r.topic == "source2");
    Seen s{r.partition, r.offset, std::nullopt, std::nullopt, {}, std::nullopt};
    if (r.key) s.key = std::string(*r.key);
    if (r.value) s.value = std::string(*r.value);
    for (const auto& h : r.headers)
      s.headers.emplace_back(std::string(h.name), h.value ? std::optional<std::string>(*h.value) : std::nullopt);
    if (r.timestamp) s.ts = r.timestamp->time_since_epoch().count();
    seen.push_back(s);
    if (!r.value) return std::nullopt;
    return Ev{r.offset, r.partition, std::string(r.key.value_or("-"))};
  };
  fl::KafkaSource<Ev> custom{"custom", o};
  rows.clear();
  custom.read(custom.start(), custom.latest(), rows);
  CHECK(rows == std::vector<Ev>{{0, 0, "a"}, {2, 0, "b"}, {0, 1, "-"}});
  REQUIRE(seen.size() == 4);
  CHECK(seen[0].headers == std::vector<std::pair<std::string, std::optional<std::string>>>{{"h1", "v1"}});
  CHECK(seen[0].ts == ts);
  CHECK(seen[1].offset == 1);
  CHECK(!seen[1].value);
  CHECK(seen[1].key == "a");
  CHECK(seen[3].partition == 1);
  CHECK(!seen[3].key);
  CHECK(seen[3].headers.empty());

  // A row type without a schema needs a deserializer.
  fl::KafkaSourceOptions<NoSchema> ns;
  ns.brokers = mock.bootstraps();
  ns.topic = "source2";
  ns.config = {{"log_level", "0"}};
  CHECK(contains(flowtest::message_of(fl::errc::invalid_argument, [&] { fl::KafkaSource<NoSchema> s{"ns", ns}; }),
                 "options.deserialize"));
  ns.deserialize = [](const fl::KafkaRecord& r) -> std::optional<NoSchema> {
    return NoSchema{std::string(r.value.value_or("(tombstone)"))};
  };
  fl::KafkaSource<NoSchema> texts{"ns", ns};
  std::vector<NoSchema> t;
  texts.read(texts.start(), texts.latest(), t);
  REQUIRE(t.size() == 4);
  CHECK(t[1].text == "(tombstone)");
}

TEST_CASE("R-SOURCE-2: a record that does not decode fails the read naming partition and offset; out is as it was") {
  auto& mock = flowtest::shared_kafka_mock();
  mock.create_topic("source3", 2);
  mock.produce("source3", {{0, std::nullopt, json_of({1, 1, "a"}), {}, 0},
                     {1, std::nullopt, json_of({2, 2, "b"}), {}, 0},
                     {1, std::nullopt, R"({"id":3,"seq":"three","v":"c"})", {}, 0},
                     {1, std::nullopt, "not json", {}, 0}});
  fl::KafkaSource<Ev> src{"events", options(mock, "source3")};
  std::vector<Ev> out{{9, 9, "before"}};
  const auto latest = src.latest();
  auto msg = flowtest::message_of(fl::errc::malformed_record, [&] { src.read(src.start(), latest, out); });
  CHECK(contains(msg, "'events'"));
  CHECK(contains(msg, "partition 1 offset 1"));
  CHECK(contains(msg, "seq"));
  CHECK(out == std::vector<Ev>{{9, 9, "before"}});
  fl::source_position upto = latest;
  upto.set(1, 1);
  src.read(src.start(), upto, out);  // the records before are fine
  CHECK(out.size() == 3);

  // A rescued column keeps what does not decode; the batch goes through.
  fl::KafkaSourceOptions<Rescued> ro;
  ro.brokers = mock.bootstraps();
  ro.topic = "source3";
  ro.config = {{"log_level", "0"}};
  ro.rescued_column = "_rescued_data";
  fl::KafkaSource<Rescued> rescuing{"rescuing", ro};
  fl::source_position upto_bad = latest;
  upto_bad.set(1, 2);
  std::vector<Rescued> kept;
  rescuing.read(rescuing.start(), upto_bad, kept);
  REQUIRE(kept.size() == 3);
  CHECK(kept[2].id == 3);
  CHECK(kept[2].seq == std::nullopt);
  CHECK(kept[2]._rescued_data == R"({"seq":"three"})");
  CHECK(kept[0]._rescued_data.empty());
  // Not JSON at all cannot be rescued.
  kept.clear();
  CHECK(contains(flowtest::message_of(fl::errc::malformed_record, [&] { rescuing.read(rescuing.start(), latest, kept); }),
                 "partition 1 offset 2"));
  CHECK(kept.empty());

  // The deserializer: a flowlib::error passes through, anything else is
  // wrapped as malformed_record naming the record.
  auto o = options(mock, "source3");
  o.deserialize = [](const fl::KafkaRecord& r) -> std::optional<Ev> {
    if (r.partition == 1 && r.offset == 0) throw std::runtime_error("bad record");
    if (r.partition == 1 && r.offset == 2)
      throw fl::error(fl::errc::malformed_record, "mine", "v", "", "own message");
    return Ev{};
  };
  fl::KafkaSource<Ev> custom{"custom", o};
  out.clear();
  msg = flowtest::message_of(fl::errc::malformed_record, [&] { custom.read(custom.start(), latest, out); });
  CHECK(contains(msg, "'custom'"));
  CHECK(contains(msg, "partition 1 offset 0: options.deserialize threw: bad record"));
  CHECK(out.empty());
  fl::source_position from = custom.start();
  from.set(1, 1);
  msg = flowtest::message_of(fl::errc::malformed_record, [&] { custom.read(from, latest, out); });
  CHECK(contains(msg, "'mine'"));
  CHECK(contains(msg, "own message"));
  CHECK(out.empty());
}

TEST_CASE("KafkaSource: configuration errors are invalid_argument naming what to fix") {
  auto& mock = flowtest::shared_kafka_mock();
  mock.create_topic("source4", 2);
  // One mistake each.
  const std::pair<void (*)(fl::KafkaSourceOptions<Ev>&), const char*> mistakes[] = {
      {[](auto& o) { o.topic.clear(); }, "options.topic"},
      {[](auto& o) { o.brokers.clear(); }, "options.brokers"},
      {[](auto& o) { o.config.emplace_back("auto.offset.reset", "earliest"); }, "'auto.offset.reset' = 'earliest'"},
      {[](auto& o) { o.config.emplace_back("enable.auto.commit", "true"); }, "enable.auto.commit"},
      {[](auto& o) { o.config.emplace_back("no.such.property", "1"); }, "no.such.property"},
      {[](auto& o) { o.commit_offsets_for_monitoring = true; }, "group.id"},
      {[](auto& o) { o.partitions = {1, 1}; }, "twice"},
  };
  for (const auto& [mistake, named] : mistakes) {
    CAPTURE(named);
    auto o = options(mock, "source4");
    mistake(o);
    CHECK(contains(flowtest::message_of(fl::errc::invalid_argument, [&] { fl::KafkaSource<Ev> s{"s", o}; }), named));
  }
  auto o = options(mock, "source4", {0, 5});
  fl::KafkaSource<Ev> s{"s", o};  // the partitions are checked against the topic at first use
  const auto msg = flowtest::message_of(fl::errc::invalid_argument, [&] { (void)s.latest(); });
  CHECK(contains(msg, "partition 5"));
  CHECK(contains(msg, "has 2 partitions"));
  // A batch that ends before it starts.
  fl::KafkaSource<Ev> ok{"ok", options(mock, "source4")};
  std::vector<Ev> out;
  CHECK(contains(flowtest::message_of(fl::errc::invalid_argument,
                          [&] { ok.read(fl::source_position::at(2), fl::source_position::at(1), out); }),
                 "ends before it starts"));
}

}  // namespace kafka_source
