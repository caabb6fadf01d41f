// kafka_cdc: a database's change events from Kafka into a durable history
// table, and the current rows back out to Kafka.
//
//   Debezium change events (JSON, as Kafka Connect's JsonConverter writes
//   them) in the topic "pg.public.users"
//     -> KafkaSource<UserChange>, each record decoded by DebeziumDecoder
//     -> AUTO CDC SCD type 2: the table users_history in SQLite
//        (SqliteStorage + SqliteCheckpoint, one database file)
//     -> the versions that became current, read from the history table's
//        changes, written to the topic "users.current" by KafkaSink.
//
// It needs no server: the Kafka cluster is librdkafka's in-process mock
// cluster, the database a file in a temporary directory removed at the
// end. Two updates run: the first reads the snapshot and the first
// changes, the second the changes produced after it. The program prints
// the history table and the records of the sink topic, checks them against
// what the change events say, and exits non-zero when they differ.
//
// Build with the CMake targets flowlib::kafka and flowlib::sqlite.
#include <flowlib/checkpoint/sqlite.hpp>
#include <flowlib/flowlib.hpp>
#include <flowlib/sink/kafka.hpp>
#include <flowlib/source/debezium.hpp>
#include <flowlib/source/kafka.hpp>
#include <flowlib/storage/sqlite.hpp>

#include "print.hpp"

#include <librdkafka/rdkafka.h>
#include <librdkafka/rdkafka_mock.h>

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace fl = flowlib;

// --- The rows --------------------------------------------------------------------

// One change of the source table public.users(id, name, city), as the
// decoder makes it: the row's columns, the op and the sequence (the
// change's position in the database's log, source.lsn).
struct UserChange {
  std::int64_t id = 0;
  std::optional<std::string> name;
  std::optional<std::string> city;
  char op = 'c';
  std::int64_t lsn = 0;
};
FLOWLIB_SCHEMA(UserChange, id, name, city, op, lsn);

// Every version of every user (SCD type 2), in SQLite.
struct UserVersion {
  std::int64_t id = 0;
  std::optional<std::string> name;
  std::optional<std::string> city;
  std::int64_t start_at = 0;
  std::optional<std::int64_t> end_at;
  friend bool operator==(const UserVersion&, const UserVersion&) = default;
};
FLOWLIB_SCHEMA(UserVersion, id, name, city, (start_at, "__START_AT"), (end_at, "__END_AT"));

// A user's current row, as written to the sink topic.
struct User {
  std::int64_t id = 0;
  std::optional<std::string> name;
  std::optional<std::string> city;
  std::int64_t since = 0;  // the lsn of the change that made this version
};
FLOWLIB_SCHEMA(User, id, name, city, since);

struct IsDelete {
  bool operator()(const UserChange& c) const { return c.op == 'd'; }
};
using UsersHistory = fl::AutoCdc<fl::Key<&UserChange::id>, fl::Seq<&UserChange::lsn>, fl::Scd2<>,
                                 fl::apply_as_deletes<IsDelete>, fl::except_column_list<"op", "lsn">>;

// --- The mock cluster and the change events -----------------------------------------

// librdkafka's in-process cluster, on a handle of its own; clients connect
// to bootstraps().
class MockCluster {
 public:
  MockCluster() {
    char err[512];
    rd_kafka_conf_t* conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "log_level", "0", nullptr, 0);
    handle_ = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (!handle_) throw std::runtime_error(std::string("rd_kafka_new: ") + err);
    cluster_ = rd_kafka_mock_cluster_new(handle_, 1);
    if (!cluster_) throw std::runtime_error("rd_kafka_mock_cluster_new failed");
    bootstraps_ = rd_kafka_mock_cluster_bootstraps(cluster_);
  }
  ~MockCluster() {
    rd_kafka_mock_cluster_destroy(cluster_);
    rd_kafka_destroy(handle_);
  }
  MockCluster(const MockCluster&) = delete;
  MockCluster& operator=(const MockCluster&) = delete;

  const std::string& bootstraps() const { return bootstraps_; }
  void create_topic(const char* topic, int partitions) {
    if (rd_kafka_mock_topic_create(cluster_, topic, partitions, 1) != RD_KAFKA_RESP_ERR_NO_ERROR)
      throw std::runtime_error(std::string("cannot create topic ") + topic);
  }

 private:
  rd_kafka_t* handle_ = nullptr;
  rd_kafka_mock_cluster_t* cluster_ = nullptr;
  std::string bootstraps_;
};

// What Debezium's PostgreSQL connector writes for one change of public.users.
struct Event {
  std::int64_t id;
  char op;                     // c, r, u, d; 0: the tombstone after a delete
  std::string before, after;   // JSON rows, or "null"
  std::int64_t lsn;
};

std::string envelope(const Event& e) {
  std::string s = "{\"before\":" + e.before + ",\"after\":" + e.after +
                  ",\"source\":{\"version\":\"2.1.2.Final\",\"connector\":\"postgresql\","
                  "\"name\":\"pg\",\"db\":\"app\",\"schema\":\"public\",\"table\":\"users\","
                  "\"ts_ms\":1767225600000,\"lsn\":" +
                  std::to_string(e.lsn) + "},\"op\":\"" + std::string(1, e.op) +
                  "\",\"ts_ms\":1767225600100,\"transaction\":null}";
  return s;
}

std::string row(std::int64_t id, const char* name, const char* city) {
  std::string s = "{\"id\":" + std::to_string(id) + ",\"name\":";
  s += name ? std::string("\"") + name + "\"" : "null";
  s += ",\"city\":";
  s += city ? std::string("\"") + city + "\"" : "null";
  return s + "}";
}

// Produces the events, keyed by the row's key as Debezium keys them (so a
// user's changes stay in one partition, in order), and waits for delivery.
void produce(const std::string& brokers, const std::vector<Event>& events) {
  char err[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  rd_kafka_conf_set(conf, "bootstrap.servers", brokers.c_str(), err, sizeof err);
  rd_kafka_conf_set(conf, "enable.idempotence", "true", err, sizeof err);
  rd_kafka_t* p = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
  if (!p) throw std::runtime_error(std::string("producer: ") + err);
  for (const Event& e : events) {
    const std::string key = "{\"id\":" + std::to_string(e.id) + "}";
    const std::string value = e.op ? envelope(e) : std::string();
    const rd_kafka_resp_err_t r = rd_kafka_producev(
        p, RD_KAFKA_V_TOPIC("pg.public.users"), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
        RD_KAFKA_V_KEY(key.data(), key.size()),
        RD_KAFKA_V_VALUE(e.op ? const_cast<char*>(value.data()) : nullptr, value.size()),
        RD_KAFKA_V_END);
    if (r != RD_KAFKA_RESP_ERR_NO_ERROR) throw std::runtime_error(rd_kafka_err2str(r));
  }
  if (rd_kafka_flush(p, 30000) != RD_KAFKA_RESP_ERR_NO_ERROR) throw std::runtime_error("flush timed out");
  rd_kafka_destroy(p);
}

// Every record of `topic` (partition, offset, key, value), read from the start.
struct Record {
  std::int32_t partition;
  std::int64_t offset;
  std::string key, value;
};
std::vector<Record> read_topic(const std::string& brokers, const char* topic, int partitions) {
  char err[512];
  rd_kafka_conf_t* conf = rd_kafka_conf_new();
  rd_kafka_conf_set(conf, "bootstrap.servers", brokers.c_str(), err, sizeof err);
  rd_kafka_conf_set(conf, "group.id", "kafka_cdc_reader", err, sizeof err);
  rd_kafka_conf_set(conf, "enable.partition.eof", "true", err, sizeof err);
  rd_kafka_conf_set(conf, "enable.auto.commit", "false", err, sizeof err);
  rd_kafka_t* c = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
  if (!c) throw std::runtime_error(std::string("consumer: ") + err);
  rd_kafka_topic_partition_list_t* parts = rd_kafka_topic_partition_list_new(partitions);
  for (int p = 0; p < partitions; ++p)
    rd_kafka_topic_partition_list_add(parts, topic, p)->offset = RD_KAFKA_OFFSET_BEGINNING;
  rd_kafka_assign(c, parts);
  rd_kafka_topic_partition_list_destroy(parts);
  std::vector<Record> out;
  int at_end = 0;
  for (int polls = 0; at_end < partitions && polls < 300; ++polls) {
    rd_kafka_message_t* m = rd_kafka_consumer_poll(c, 100);
    if (!m) continue;
    if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
      ++at_end;
    } else if (m->err == RD_KAFKA_RESP_ERR_NO_ERROR) {
      out.push_back({m->partition, m->offset,
                     std::string(static_cast<const char*>(m->key), m->key_len),
                     std::string(static_cast<const char*>(m->payload), m->len)});
    }
    rd_kafka_message_destroy(m);
  }
  rd_kafka_consumer_close(c);
  rd_kafka_destroy(c);
  if (at_end < partitions) throw std::runtime_error("the sink topic was not read to its end");
  std::sort(out.begin(), out.end(), [](const Record& a, const Record& b) {
    return std::pair(a.partition, a.offset) < std::pair(b.partition, b.offset);
  });
  return out;
}

// --- The pipeline ----------------------------------------------------------------------

int run(const std::filesystem::path& dir) {
  MockCluster kafka;
  kafka.create_topic("pg.public.users", 2);
  kafka.create_topic("users.current", 2);

  // The initial snapshot (op r) and the first changes.
  produce(kafka.bootstraps(),
          {{1, 'r', "null", row(1, "Isabel", "Monterrey"), 100},
           {2, 'r', "null", row(2, "Raul", "Oaxaca"), 100},
           {3, 'r', "null", row(3, "Mercedes", "Tijuana"), 100},
           {3, 'u', row(3, "Mercedes", "Tijuana"), row(3, "Mercedes", "Mexicali"), 210},
           {4, 'c', "null", row(4, "Lily", nullptr), 220}});

  fl::SqliteCheckpoint checkpoint{(dir / "users.db").string()};
  fl::StreamingTable<UserVersion, fl::SqliteStorage> history{"users_history"};
  fl::Pipeline pipeline{"kafka_cdc", checkpoint};

  // Source: each Kafka record through the Debezium decoder. A delete's
  // "before" holds only the key when the table's replica identity is the
  // default: delete_keys says which columns must be there.
  fl::KafkaSourceOptions<UserChange> source_options;
  source_options.brokers = kafka.bootstraps();
  source_options.topic = "pg.public.users";
  source_options.deserialize = fl::DebeziumDecoder<UserChange>{{.op = &UserChange::op,
                                                                .sequence = &UserChange::lsn,
                                                                .delete_keys = {"id"},
                                                                .name = "pg.public.users"}};
  source_options.guarantee = fl::delivery::at_least_once;  // Debezium redelivers after a restart
  fl::KafkaSource<UserChange> changes{"pg.public.users", source_options};

  // Sink: the current versions, keyed by id.
  fl::KafkaSinkOptions<User> sink_options;
  sink_options.brokers = kafka.bootstraps();
  sink_options.topic = "users.current";
  sink_options.writer = "kafka_cdc";
  sink_options.key = [](const User& u) -> std::optional<std::string> { return std::to_string(u.id); };

  pipeline.flow("users_history").from(changes).into(history, UsersHistory{"users_history"});
  pipeline.flow("users_current_out")
      .from(fl::TableSource{history})
      .filter([](const UserVersion& v) { return !v.end_at.has_value(); })
      .map([](const UserVersion& v) { return User{v.id, v.name, v.city, v.start_at}; })
      .into(fl::KafkaSink<User>{std::move(sink_options), "users.current"});

  pipeline.update();

  // More changes: a move, a user deleted (Debezium follows a delete with a
  // tombstone, for log compaction), a late name.
  produce(kafka.bootstraps(),
          {{1, 'u', "null", row(1, "Isabel", "Chihuahua"), 300},
           {2, 'd', "{\"id\":2,\"name\":null,\"city\":null}", "null", 310},
           {2, 0, "", "", 0},
           {4, 'u', "null", row(4, "Lily", "Cancun"), 320}});
  pipeline.update();

  std::vector<UserVersion> versions = history.sorted_rows();
  std::sort(versions.begin(), versions.end(), [](const UserVersion& a, const UserVersion& b) {
    return std::pair(a.id, a.start_at) < std::pair(b.id, b.start_at);
  });
  print::table("users_history (SQLite, AUTO CDC SCD type 2; by id, then __START_AT)", versions);
  const std::vector<Record> out = read_topic(kafka.bootstraps(), "users.current", 2);
  std::cout << "\nusers.current (the sink topic): partition offset key value\n";
  for (const Record& r : out)
    std::cout << "  " << r.partition << " " << r.offset << " " << r.key << " " << r.value << "\n";

  // The checks: the history the events describe, and one record per
  // version that became current.
  const std::vector<UserVersion> expected = {
      {1, "Isabel", "Monterrey", 100, 300}, {1, "Isabel", "Chihuahua", 300, std::nullopt},
      {2, "Raul", "Oaxaca", 100, 310},      {3, "Mercedes", "Tijuana", 100, 210},
      {3, "Mercedes", "Mexicali", 210, std::nullopt}, {4, "Lily", std::nullopt, 220, 320},
      {4, "Lily", "Cancun", 320, std::nullopt}};
  bool ok = versions == expected;
  std::vector<std::string> got_values;
  for (const Record& r : out) got_values.push_back(r.key + " " + r.value);
  std::sort(got_values.begin(), got_values.end());
  const std::vector<std::string> want_values = {
      R"(1 {"id":1,"name":"Isabel","city":"Chihuahua","since":300})",
      R"(1 {"id":1,"name":"Isabel","city":"Monterrey","since":100})",
      R"(2 {"id":2,"name":"Raul","city":"Oaxaca","since":100})",
      R"(3 {"id":3,"name":"Mercedes","city":"Mexicali","since":210})",
      R"(4 {"id":4,"name":"Lily","city":"Cancun","since":320})",
      R"(4 {"id":4,"name":"Lily","city":null,"since":220})"};
  ok = ok && got_values == want_values;
  std::cout << (ok ? "\nkafka_cdc: the history and the sink topic are as the change events say\n"
                   : "\nkafka_cdc: MISMATCH against the expected tables\n");
  return ok ? 0 : 1;
}

int main() {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("flowlib_kafka_cdc_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  int rc = 1;
  try {
    rc = run(dir);
  } catch (const std::exception& e) {
    std::cerr << "kafka_cdc: " << e.what() << "\n";
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  return rc;
}
