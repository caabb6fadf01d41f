// Debezium change events through whole pipelines (R-SOURCE-6): a generated
// change history, written as Debezium envelopes (wrapped or not, fields in
// either order, with tombstones and redeliveries), shuffled and appended in
// random batches to a MemorySource of strings, flat_mapped by the decoder
// into AUTO CDC SCD type 1 and type 2 tables, must give the tables a simple
// model of the history gives; a malformed envelope fails its batch and
// commits nothing (R-SOURCE-2); and the decoder as a KafkaSource's
// deserializer on librdkafka's mock cluster.
#include <flowlib/flowlib.hpp>
#include <flowlib/source/debezium.hpp>
#include <flowlib/source/kafka.hpp>

#include <doctest/doctest.h>

#include "support/errors.hpp"
#include "support/kafka_mock.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace source_debezium_pipeline {

namespace fl = flowlib;
using namespace std::chrono;

struct UserChange {
  std::int64_t id = 0;
  std::optional<std::string> name;
  std::optional<std::int64_t> score;
  sys_days born{};
  char op = '?';
  std::int64_t lsn = 0;
};
FLOWLIB_SCHEMA(UserChange, id, name, score, born, op, lsn);

struct User {
  std::int64_t id = 0;
  std::optional<std::string> name;
  std::optional<std::int64_t> score;
  sys_days born{};
  friend auto operator<=>(const User&, const User&) = default;
};
FLOWLIB_SCHEMA(User, id, name, score, born);

struct UserHistory {
  std::int64_t id = 0;
  std::optional<std::string> name;
  std::optional<std::int64_t> score;
  sys_days born{};
  std::int64_t start_at = 0;
  std::optional<std::int64_t> end_at;
  friend auto operator<=>(const UserHistory&, const UserHistory&) = default;
};
FLOWLIB_SCHEMA(UserHistory, id, name, score, born, (start_at, "__START_AT"), (end_at, "__END_AT"));

struct IsDelete {
  bool operator()(const UserChange& c) const { return c.op == 'd'; }
};
using Scd1 = fl::AutoCdc<fl::Key<&UserChange::id>, fl::Seq<&UserChange::lsn>, fl::Scd1,
                         fl::apply_as_deletes<IsDelete>, fl::except_column_list<"op", "lsn">>;
using Scd2 = fl::AutoCdc<fl::Key<&UserChange::id>, fl::Seq<&UserChange::lsn>, fl::Scd2<>,
                         fl::apply_as_deletes<IsDelete>, fl::except_column_list<"op", "lsn">>;

namespace {

fl::DebeziumDecoder<UserChange> make_decoder() {
  return fl::DebeziumDecoder<UserChange>{{.op = &UserChange::op,
                                          .sequence = &UserChange::lsn,
                                          .delete_keys = {"id"},
                                          .name = "pg.public.users"}};
}

std::string json_row(const User& u) {
  std::string s = "{\"id\":" + std::to_string(u.id) + ",\"name\":";
  s += u.name ? "\"" + *u.name + "\"" : "null";
  s += ",\"score\":";
  s += u.score ? std::to_string(*u.score) : "null";
  s += ",\"born\":" + std::to_string(u.born.time_since_epoch().count()) + "}";
  return s;
}

// One Debezium envelope, in one of the forms connectors write.
std::string envelope(char op, const std::optional<std::string>& before,
                     const std::optional<std::string>& after, std::int64_t lsn, std::mt19937& rng) {
  const std::string b = before.value_or("null");
  const std::string a = after.value_or("null");
  const std::string source = R"({"connector":"postgresql","db":"app","table":"users","ts_ms":1700000000000,"lsn":)" +
                             std::to_string(lsn) + R"(,"txId":)" + std::to_string(lsn / 3) + "}";
  const std::string o = std::string("\"") + op + "\"";
  std::string env;
  if (rng() % 2) {
    env = "{\"before\":" + b + ",\"after\":" + a + ",\"source\":" + source + ",\"op\":" + o +
          ",\"ts_ms\":1700000000001,\"transaction\":null}";
  } else {
    env = "{\"op\":" + o + ", \"source\": " + source + ", \"after\": " + a + ", \"before\": " + b +
          "}";
  }
  if (rng() % 2) {
    env = R"({"schema":{"type":"struct","optional":false,"name":"pg.public.users.Envelope"},"payload":)" +
          env + "}";
  }
  return env;
}

struct history {
  std::vector<std::string> records;  // envelopes, tombstones ("") and redeliveries
  std::vector<User> current;         // the model's SCD1 table
  std::vector<UserHistory> versions; // the model's SCD2 table
};

// A random change history over a few keys, with the tables it must give.
history generate(std::uint32_t seed, int steps) {
  std::mt19937 rng(seed);
  history h;
  std::map<std::int64_t, User> live;
  std::map<std::int64_t, UserHistory*> open;
  std::vector<UserHistory> versions;
  versions.reserve(static_cast<std::size_t>(steps));
  int counter = 0;
  for (int step = 0; step < steps; ++step) {
    const std::int64_t lsn = 1000 + step * 7;
    const std::int64_t id = 1 + static_cast<std::int64_t>(rng() % 6);
    const auto it = live.find(id);
    if (it == live.end() || rng() % 4 != 0) {
      // An upsert: a create (or snapshot read) or an update that always
      // changes the name, so that SCD2 opens a version.
      User u;
      u.id = id;
      if (rng() % 5 != 0) u.name = "n" + std::to_string(++counter);
      else u.name = std::nullopt, ++counter;
      if (!u.name && it != live.end() && !it->second.name) u.name = "m" + std::to_string(counter);
      if (rng() % 3 != 0) u.score = static_cast<std::int64_t>(rng() % 1000) - 500;
      u.born = sys_days{days{static_cast<int>(rng() % 40000) - 10000}};
      const char op = it == live.end() ? (step < 8 ? 'r' : 'c') : 'u';
      std::optional<std::string> before;
      if (op == 'u' && rng() % 2) before = json_row(it->second);
      h.records.push_back(envelope(op, before, json_row(u), lsn, rng));
      if (auto o = open.find(id); o != open.end()) o->second->end_at = lsn;
      versions.push_back({u.id, u.name, u.score, u.born, lsn, std::nullopt});
      open[id] = &versions.back();
      live[id] = u;
    } else {
      // A delete: the whole row or only the key in "before", then a tombstone.
      const std::string before =
          rng() % 2 ? json_row(it->second)
                    : "{\"id\":" + std::to_string(id) + ",\"name\":null,\"score\":null,\"born\":null}";
      h.records.push_back(envelope('d', before, std::nullopt, lsn, rng));
      if (rng() % 2) h.records.push_back("");
      open[id]->end_at = lsn;
      open.erase(id);
      live.erase(it);
    }
    // Redeliveries (at least once): an earlier record again.
    if (rng() % 8 == 0) h.records.push_back(h.records[rng() % h.records.size()]);
  }
  for (const auto& [id, u] : live) h.current.push_back(u);
  h.versions = std::move(versions);
  std::sort(h.current.begin(), h.current.end());
  std::sort(h.versions.begin(), h.versions.end());
  return h;
}

template <class T>
std::vector<T> sorted(std::vector<T> v) {
  std::sort(v.begin(), v.end());
  return v;
}

}  // namespace

TEST_CASE("debezium pipeline: shuffled envelopes in random batches give the model's SCD1 and SCD2 tables (R-SOURCE-6)") {
  for (std::uint32_t seed : {1u, 2u, 3u, 4u, 5u, 6u}) {
    CAPTURE(seed);
    history h = generate(seed, 150);
    std::mt19937 rng(seed * 7919u);
    std::shuffle(h.records.begin(), h.records.end(), rng);

    fl::MemorySource<std::string> feed{"pg.public.users",
                                       {.partitions = 1, .guarantee = fl::delivery::at_least_once}};
    fl::StreamingTable<User> current{"users"};
    fl::StreamingTable<UserHistory> versions{"users_history"};
    fl::MemoryCheckpoint checkpoint;
    fl::Pipeline pipeline{"users_cdc", checkpoint};
    const std::size_t limit = 1 + rng() % 40;
    pipeline.flow("users").from(feed).flat_map(make_decoder()).max_rows_per_batch(limit).into(current, Scd1{"users"});
    pipeline.flow("users_history").from(feed).flat_map(make_decoder()).into(versions, Scd2{"users_history"});

    std::size_t next = 0;
    while (next < h.records.size()) {
      const std::size_t n = std::min(h.records.size() - next, std::size_t{1} + rng() % 60);
      for (std::size_t i = 0; i < n; ++i) feed.append(h.records[next + i]);
      next += n;
      if (rng() % 3 != 0) pipeline.update();
    }
    pipeline.update();
    CHECK(sorted(current.sorted_rows()) == h.current);
    CHECK(sorted(versions.sorted_rows()) == h.versions);
    CHECK(!h.current.empty());
    CHECK(h.versions.size() > h.current.size());
  }
}

TEST_CASE("debezium pipeline: a malformed envelope fails its batch and commits nothing (R-SOURCE-2, R-SOURCE-6)") {
  std::mt19937 rng(5);
  fl::MemorySource<std::string> feed{"pg.public.users"};
  fl::StreamingTable<User> current{"users"};
  fl::MemoryCheckpoint checkpoint;
  fl::Pipeline pipeline{"users_cdc", checkpoint};
  pipeline.flow("users").from(feed).flat_map(make_decoder()).into(current, Scd1{"users"});

  const User a{1, "a", 10, sys_days{days{1}}};
  const User b{2, "b", std::nullopt, sys_days{days{2}}};
  feed.append(envelope('c', std::nullopt, json_row(a), 10, rng));
  pipeline.update();
  CHECK(current.sorted_rows() == std::vector<User>{a});

  const std::string bad = R"({"before":null,"after":{"id":2},"source":{"lsn":30},"op":"c"})";
  feed.append(envelope('c', std::nullopt, json_row(b), 20, rng));
  feed.append(bad);  // "born" is missing
  const fl::error e = flowtest::error_of([&] { pipeline.update(); });
  CHECK(e.code() == fl::errc::malformed_record);
  CHECK(e.column() == "born");
  CHECK(flowtest::contains(e.what(), "record {\"before\":null,\"after\":{\"id\":2}"));
  CHECK(current.sorted_rows() == std::vector<User>{a});  // b's batch was not committed
  CHECK(feed.erase_where([&](const std::string& s) { return s == bad; }) == 1);
  pipeline.update();  // the same positions, read again
  CHECK(current.sorted_rows() == std::vector<User>{a, b});
}

TEST_CASE("debezium pipeline: the decoder as a KafkaSource deserializer on the mock cluster (R-SOURCE-6)") {
  flowtest::kafka_mock mock;
  mock.create_topic("pg.public.users", 2);
  std::mt19937 rng(3);
  const User a{1, "a", 10, sys_days{days{1}}};
  const User a2{1, "a2", 11, sys_days{days{1}}};
  const User b{2, "b", std::nullopt, sys_days{days{2}}};
  // Keyed by id, as Debezium partitions: one key's changes in one partition.
  const auto record = [](std::int32_t partition, std::int64_t id, std::optional<std::string> value) {
    flowtest::mock_record r;
    r.partition = partition;
    r.key = "{\"id\":" + std::to_string(id) + "}";
    r.value = std::move(value);
    return r;
  };
  mock.produce("pg.public.users",
               {record(1, 1, envelope('c', std::nullopt, json_row(a), 10, rng)),
                record(0, 2, envelope('c', std::nullopt, json_row(b), 11, rng)),
                record(1, 1, envelope('u', json_row(a), json_row(a2), 12, rng)),
                record(0, 2, envelope('d', json_row(b), std::nullopt, 13, rng)),
                record(0, 2, std::nullopt)});  // the tombstone

  fl::KafkaSourceOptions<UserChange> options;
  options.brokers = mock.bootstraps();
  options.topic = "pg.public.users";
  options.deserialize = make_decoder();
  options.guarantee = fl::delivery::at_least_once;
  fl::KafkaSource<UserChange> changes{"users_changes", options};
  fl::StreamingTable<User> current{"users"};
  fl::StreamingTable<UserHistory> versions{"users_history"};
  fl::MemoryCheckpoint checkpoint;
  fl::Pipeline pipeline{"users_cdc", checkpoint};
  pipeline.flow("users").from(changes).into(current, Scd1{"users"});
  pipeline.flow("users_history").from(changes).into(versions, Scd2{"users_history"});
  pipeline.update();
  CHECK(current.sorted_rows() == std::vector<User>{a2});
  CHECK(sorted(versions.sorted_rows()) ==
        std::vector<UserHistory>{{1, "a", 10, sys_days{days{1}}, 10, 12},
                                 {1, "a2", 11, sys_days{days{1}}, 12, std::nullopt},
                                 {2, "b", std::nullopt, sys_days{days{2}}, 11, 13}});

  // A record that is not a change event names its partition and offset.
  const std::int64_t offset = mock.produce_one("pg.public.users", 1, std::nullopt, "{\"op\":\"c\"}");
  const auto what = flowtest::message_of(fl::errc::malformed_record, [&] { pipeline.update(); });
  CHECK(flowtest::contains(what, "topic 'pg.public.users' partition 1 offset " + std::to_string(offset)));
  CHECK(flowtest::contains(what, "op \"c\" without an \"after\" row"));
  CHECK(current.sorted_rows() == std::vector<User>{a2});
}

}  // namespace source_debezium_pipeline
