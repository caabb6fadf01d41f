// KafkaSink's records: the headers every record carries (R-SINK-1), the
// default JSON value by FLOWLIB_SCHEMA (read back with an independent
// parser, nlohmann-json), keys, and a plain consumer reading the topic
// seeing each row once and in batch order per partition.
#include <flowlib/sink/kafka.hpp>

#include "kafka/sink/sink_support.hpp"
#include "support/errors.hpp"
#include "support/kafka_mock.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace kafka_sink_headers_test {

namespace fl = flowlib;
using namespace std::chrono_literals;
using kafka_sink_support::expected_record;
using kafka_sink_support::expected_topic;
using kafka_sink_support::read_topic;
using kafka_sink_support::fresh_topic;
using kafka_sink_support::sink_options;

enum class Tier : std::uint8_t { bronze = 1, silver = 2, gold = 7 };

struct Order {
  std::int64_t id = 0;
  std::string customer;
  double amount = 0;
  friend bool operator==(const Order&, const Order&) = default;
};
FLOWLIB_SCHEMA(Order, id, customer, amount);

struct Every {
  bool flag = false;
  std::int8_t i8 = 0;
  std::uint16_t u16 = 0;
  std::int32_t i32 = 0;
  std::uint64_t u64 = 0;
  std::int64_t i64 = 0;
  Tier tier = Tier::bronze;
  float f = 0;
  double d = 0;
  std::string s;
  std::optional<std::int64_t> maybe;
  std::optional<std::string> maybe_text;
  std::chrono::sys_days day{};
  std::chrono::sys_seconds at_s{};
  std::chrono::sys_time<std::chrono::milliseconds> at_ms{};
  std::chrono::sys_time<std::chrono::microseconds> at_us{};
  std::chrono::sys_time<std::chrono::nanoseconds> at_ns{};
  std::chrono::sys_time<std::chrono::minutes> at_min{};
};
FLOWLIB_SCHEMA(Every, flag, i8, u16, i32, u64, i64, tier, f, d, s, maybe, maybe_text, day, at_s, at_ms, at_us,
               at_ns, (at_min, "at minute"));

struct NoSchema {
  int x = 0;
};

TEST_CASE("kafka_json_value: every column type, read back by an independent JSON parser") {
  using namespace std::chrono;
  Every e;
  e.flag = true;
  e.i8 = -128;
  e.u16 = 65535;
  e.i32 = -2147483647 - 1;
  e.u64 = std::numeric_limits<std::uint64_t>::max();
  e.i64 = std::numeric_limits<std::int64_t>::min();
  e.tier = Tier::gold;
  e.f = 0.1f;
  e.d = -2.5e-300;
  e.s = "quote \" backslash \\ newline \n tab \t bell \x07 é \xff end";
  e.maybe = std::nullopt;
  e.maybe_text = "x";
  e.day = 2026y / February / 28;
  e.at_s = sys_days{2026y / 1 / 2} + 3h + 4min + 5s;
  e.at_ms = sys_days{1969y / 12 / 31} + 23h + 59min + 59s + 1ms;  // before the epoch: -999 ms
  e.at_us = sys_days{2000y / 2 / 29} + 12h + 34min + 56s + 789012us;
  e.at_ns = sys_days{2026y / 12 / 31} + 23h + 59min + 59s + 999999999ns;
  e.at_min = sys_days{2026y / 3 / 4} + 5h + 6min;

  const std::string text = fl::kafka_json_value(e);
  const auto j = nlohmann::json::parse(text);  // valid JSON (the \xff became U+FFFD)
  REQUIRE(j.is_object());
  CHECK(j.size() == 18);
  // Members in schema order.
  CHECK(text.rfind("{\"flag\":true,\"i8\":-128,", 0) == 0);
  CHECK(j["flag"] == true);
  CHECK(j["i8"] == -128);
  CHECK(j["u16"] == 65535);
  CHECK(j["i32"] == -2147483648LL);
  CHECK(j["u64"].get<std::uint64_t>() == std::numeric_limits<std::uint64_t>::max());
  CHECK(j["i64"].get<std::int64_t>() == std::numeric_limits<std::int64_t>::min());
  CHECK(j["tier"] == 7);
  CHECK(static_cast<float>(j["f"].get<double>()) == 0.1f);
  CHECK(j["d"].get<double>() == -2.5e-300);
  CHECK(j["s"] == "quote \" backslash \\ newline \n tab \t bell \x07 é \xEF\xBF\xBD end");
  CHECK(j["maybe"].is_null());
  CHECK(j["maybe_text"] == "x");
  CHECK(j["day"] == "2026-02-28");
  CHECK(j["at_s"] == "2026-01-02T03:04:05Z");
  CHECK(j["at_ms"] == "1969-12-31T23:59:59.001Z");
  CHECK(j["at_us"] == "2000-02-29T12:34:56.789012Z");
  CHECK(j["at_ns"] == "2026-12-31T23:59:59.999999999Z");
  CHECK(j["at minute"] == "2026-03-04T05:06:00Z");

  // NaN and infinities: null.
  e.d = std::nan("");
  e.f = std::numeric_limits<float>::infinity();
  const auto k = nlohmann::json::parse(fl::kafka_json_value(e));
  CHECK(k["d"].is_null());
  CHECK(k["f"].is_null());
}

TEST_CASE("kafka_json_value: time points of random instants read back to the same instant") {
  using namespace std::chrono;
  for (const std::uint64_t seed : {1u, 2u, 3u}) {
    std::mt19937_64 rng(seed);
    for (int i = 0; i < 2000; ++i) {
      // Within years 1900..2100, to the nanosecond.
      const std::int64_t ns = static_cast<std::int64_t>(rng() % 6'311'433'600'000'000'000ULL) - 2'208'988'800'000'000'000LL;
      const sys_time<nanoseconds> t{nanoseconds(ns)};
      const std::string s = fl::detail::kafka_json_time_text(t);
      CAPTURE(s);
      // An independent reading: the civil date and time, then the fraction.
      int y = 0, mo = 0, d = 0, h = 0, mi = 0, se = 0;
      long long frac = 0;
      REQUIRE(std::sscanf(s.c_str(), "%d-%d-%dT%d:%d:%d.%9lldZ", &y, &mo, &d, &h, &mi, &se, &frac) == 7);
      REQUIRE(s.size() == 30);
      const sys_days day{year{y} / month{static_cast<unsigned>(mo)} / static_cast<unsigned>(d)};
      const auto back = day + hours{h} + minutes{mi} + seconds{se} + nanoseconds{frac};
      CHECK(back == t);
    }
  }
}

TEST_CASE("R-SINK-1: every record carries the writer, flow, batch id, index and count headers") {
  auto& mock = flowtest::shared_kafka_mock();
  const std::string topic = fresh_topic(mock, 3, "orders_out");
  auto o = sink_options<Order>(mock, topic, "shop");
  o.key = [](const Order& r) -> std::optional<std::string> {
    if (r.id % 4 == 0) return std::nullopt;  // some rows without a key
    return "c-" + r.customer;
  };
  fl::KafkaSink<Order> sink{std::move(o)};
  CHECK(sink.kind == fl::kafka_sink_kind);

  expected_topic want{"shop", "export", {}};
  std::int64_t next_id = 0;
  for (std::uint64_t batch = 0; batch < 4; ++batch) {
    std::vector<Order> rows;
    for (int i = 0; i < 5 + static_cast<int>(batch) * 3; ++i, ++next_id)
      rows.push_back({next_id, "cust" + std::to_string(next_id % 5), static_cast<double>(next_id) * 1.5});
    sink.deliver("export", batch, rows);
    CHECK(sink.last_delivery().written == rows.size());
    CHECK(sink.last_delivery().already_there == 0);
    CHECK(sink.last_delivery().read_tails == (batch == 0));
    auto& b = want.batches[batch];
    for (std::size_t i = 0; i < rows.size(); ++i) {
      expected_record e;
      if (rows[i].id % 4 != 0) e.key = "c-" + rows[i].customer;
      e.partition = e.key ? fl::kafka_key_partition(*e.key, 3) : static_cast<std::int32_t>((batch + i) % 3);
      e.value = fl::kafka_json_value(rows[i]);
      b.push_back(e);
    }
  }
  const auto got = read_topic(mock, topic);
  REQUIRE(got.size() == want.size());
  want.check(got);
  for (const auto& r : got) {
    INFO("partition " << r.partition << " offset " << r.offset);
    // Exactly the five headers, once each, in this order.
    REQUIRE(r.headers.size() == 5);
    CHECK(r.headers[0].first == "flowlib.writer");
    CHECK(r.headers[0].second == "shop");
    CHECK(r.headers[1].first == "flowlib.flow");
    CHECK(r.headers[1].second == "export");
    CHECK(r.headers[2].first == "flowlib.batch");
    CHECK(r.headers[3].first == "flowlib.index");
    CHECK(r.headers[4].first == "flowlib.count");
    // The value is the row: its id tells its batch and index.
    const auto j = nlohmann::json::parse(r.value);
    const auto id = j["id"].get<std::int64_t>();
    std::uint64_t batch = 0;
    std::int64_t first = 0;
    while (id >= first + 5 + static_cast<std::int64_t>(batch) * 3) first += 5 + static_cast<std::int64_t>(batch++) * 3;
    CHECK(r.number("flowlib.batch") == batch);
    CHECK(r.number("flowlib.index") == static_cast<std::uint64_t>(id - first));
    CHECK(r.number("flowlib.count") == 5 + batch * 3);
    CHECK(j["customer"] == "cust" + std::to_string(id % 5));
    CHECK(j["amount"].get<double>() == static_cast<double>(id) * 1.5);
  }
}

TEST_CASE("R-SINK-1: a consumer reading the topic sees each row once, in batch order per partition") {
  // Random batches, random keys (some rows without), 4 partitions; the
  // order within each partition is the batches' order.
  for (const std::uint64_t seed : {11u, 12u, 13u}) {
    CAPTURE(seed);
    auto& mock = flowtest::shared_kafka_mock();
    const std::string topic = fresh_topic(mock, 4);
    std::mt19937_64 rng(seed);
    auto o = sink_options<Order>(mock, topic);
    o.key = [](const Order& r) -> std::optional<std::string> {
      if (r.customer.empty()) return std::nullopt;
      return r.customer;
    };
    fl::KafkaSink<Order> sink{std::move(o)};
    expected_topic want{"pipeline", "flow", {}};
    std::vector<std::vector<Order>> sent;
    std::int64_t id = 0;
    for (std::uint64_t batch = 0; batch < 8; ++batch) {
      std::vector<Order> rows(rng() % 40);
      for (auto& r : rows) {
        r.id = id++;
        r.customer = rng() % 5 == 0 ? std::string() : "k" + std::to_string(rng() % 9);
        r.amount = static_cast<double>(rng() % 1000);
      }
      sink.deliver("flow", batch, rows);
      auto& b = want.batches[batch];
      for (std::size_t i = 0; i < rows.size(); ++i) {
        const auto& r = rows[i];
        b.push_back({r.customer.empty() ? static_cast<std::int32_t>((batch + i) % 4) : fl::kafka_key_partition(r.customer, 4),
                     r.customer.empty() ? std::nullopt : std::optional<std::string>(r.customer), fl::kafka_json_value(r)});
      }
      sent.push_back(rows);
    }
    const auto got = read_topic(mock, topic);
    want.check(got);
    // A consumer needs nothing of the headers: per key, the rows come in
    // the order they were produced (ids ascending).
    std::map<std::string, std::int64_t> last;
    for (const auto& r : got) {
      if (!r.key) continue;
      const auto v = nlohmann::json::parse(r.value)["id"].get<std::int64_t>();
      if (last.count(*r.key)) CHECK(last[*r.key] < v);
      last[*r.key] = v;
    }
  }
}

TEST_CASE("KafkaSink: the options are checked when it is made") {
  auto& mock = flowtest::shared_kafka_mock();
  const auto refused = [](auto make, const std::string& part) {
    INFO("expected an error mentioning " << part);
    const auto what = flowtest::message_of(fl::errc::invalid_argument, make);
    CHECK_MESSAGE(flowtest::contains(what, part), what);
  };
  refused([&] { auto o = sink_options<Order>(mock, "t"); o.brokers.clear(); fl::KafkaSink<Order> s{o}; }, "brokers");
  refused([&] { auto o = sink_options<Order>(mock, ""); fl::KafkaSink<Order> s{o}; }, "topic");
  refused([&] { auto o = sink_options<Order>(mock, "t", ""); fl::KafkaSink<Order> s{o}; }, "writer");
  refused([&] { auto o = sink_options<Order>(mock, "t"); o.config.push_back({"enable.idempotence", "false"}); fl::KafkaSink<Order> s{o}; },
          "enable.idempotence");
  refused([&] { auto o = sink_options<Order>(mock, "t"); o.producer_config.push_back({"acks", "1"}); fl::KafkaSink<Order> s{o}; },
          "acks");
  refused([&] { auto o = sink_options<Order>(mock, "t"); o.producer_config.push_back({"transactional.id", "x"}); fl::KafkaSink<Order> s{o}; },
          "transactional.id");
  refused([&] { auto o = sink_options<Order>(mock, "t"); o.max_tail_scan = 0; fl::KafkaSink<Order> s{o}; }, "max_tail_scan");
  refused([&] { auto o = sink_options<NoSchema>(mock, "t"); fl::KafkaSink<NoSchema> s{o}; }, "serialize");
  // A row type without a schema works with a serializer of its own.
  const std::string topic = fresh_topic(mock, 1);
  auto o = sink_options<NoSchema>(mock, topic);
  o.serialize = [](const NoSchema& r) { return std::to_string(r.x); };
  fl::KafkaSink<NoSchema> s{o};
  const std::vector<NoSchema> rows{{7}, {8}};
  s.deliver("f", 0, rows);
  const auto got = read_topic(mock, topic);
  REQUIRE(got.size() == 2);
  CHECK(got[0].value == "7");
  CHECK(got[1].value == "8");
  // A property librdkafka rejects: INVALID_ARGUMENT at the first batch,
  // nothing written.
  auto bad = sink_options<NoSchema>(mock, topic);
  bad.serialize = o.serialize;
  bad.producer_config.push_back({"no.such.property", "1"});
  fl::KafkaSink<NoSchema> b{bad};
  CHECK(flowtest::contains(flowtest::message_of(fl::errc::invalid_argument, [&] { b.deliver("f", 1, rows); }),
                           "no.such.property"));
  CHECK(read_topic(mock, topic).size() == 2);
}

}  // namespace kafka_sink_headers_test
