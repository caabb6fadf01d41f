// detail/kafka.hpp on the mock cluster (support/kafka_mock.hpp): offset
// queries, exact offset ranges (each record once, in offset order per
// partition, none outside the range, no wait at a partition's end), the
// consumer reused across reads, and the errors (a position retention
// removed, a timeout, a bad property).
#include <flowlib/detail/kafka.hpp>

#include "support/errors.hpp"
#include "support/kafka_mock.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace kafka_reader {

namespace fl = flowlib;
namespace fd = flowlib::detail;
using namespace std::chrono_literals;
using flowtest::contains;

namespace {

const fd::kafka_context ctx{"reader_test", fl::errc::source_io};

fd::kafka_handle consumer(const flowtest::kafka_mock& mock) {
  fd::kafka_properties props = fd::kafka_consumer_settings("flowlib.test");
  props.emplace_back("bootstrap.servers", mock.bootstraps());
  props.emplace_back("log_level", "0");
  return fd::make_kafka_handle(RD_KAFKA_CONSUMER, fd::make_kafka_conf(props, ctx), ctx);
}

// (partition, offset) -> value of every record read.
using Read = std::vector<std::tuple<std::int32_t, std::int64_t, std::string>>;

Read read(rd_kafka_t* rk, const std::string& topic, const std::vector<fd::kafka_offset_range>& ranges,
          std::chrono::milliseconds timeout = 10s) {
  Read out;
  fd::read_offset_ranges(rk, topic, ranges, timeout, ctx, [&](fd::kafka_message&& m) {
    out.emplace_back(m->partition, m->offset,
                     std::string(static_cast<const char*>(m->payload), m->len));
  });
  return out;
}

}  // namespace

TEST_CASE("R-SOURCE-5, kafka reader: partitions, watermarks and exact offset ranges against a model") {
  auto& mock = flowtest::shared_kafka_mock();
  mock.create_topic("reader.empty", 3);
  auto c = consumer(mock);

  CHECK(fd::topic_partition_ids(c.get(), "reader.empty", 5s, ctx) == std::vector<std::int32_t>{0, 1, 2});
  const std::vector<std::int32_t> parts{0, 1, 2};
  CHECK(fd::query_offsets(c.get(), "reader.empty", parts, true, 5s, ctx) == std::vector<std::int64_t>{0, 0, 0});

  for (std::uint32_t seed : {1u, 2u, 3u}) {
    CAPTURE(seed);
    std::mt19937 rng(seed);
    const std::string topic = "reader.model" + std::to_string(seed);
    mock.create_topic(topic, 3);
    std::map<std::int32_t, std::vector<std::string>> model;
    std::vector<flowtest::mock_record> recs;
    for (int i = 0; i < 300; ++i) {
      const std::int32_t p = static_cast<std::int32_t>(rng() % 3);
      recs.push_back({p, std::nullopt, "v" + std::to_string(i), {}, 0});
      model[p].push_back("v" + std::to_string(i));
    }
    const auto delivered = mock.produce(topic, recs);
    for (std::size_t i = 0; i < recs.size(); ++i) CHECK(delivered[i].partition == recs[i].partition);

    const auto high = fd::query_offsets(c.get(), topic, parts, true, 5s, ctx);
    const auto low = fd::query_offsets(c.get(), topic, parts, false, 5s, ctx);
    for (std::int32_t p : parts) {
      CHECK(high[static_cast<std::size_t>(p)] == static_cast<std::int64_t>(model[p].size()));
      CHECK(low[static_cast<std::size_t>(p)] == 0);
      const auto w = fd::query_watermarks(c.get(), topic, p, 5s, ctx);
      CHECK(w.low == 0);
      CHECK(w.high == high[static_cast<std::size_t>(p)]);
    }

    // Random ranges, read twice each with the same handle: the same records.
    for (int round = 0; round < 6; ++round) {
      std::vector<fd::kafka_offset_range> ranges;
      for (std::int32_t p : parts) {
        if (rng() % 4 == 0) continue;
        const auto n = static_cast<std::int64_t>(model[p].size());
        const std::int64_t a = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(n + 1));
        const std::int64_t b = a + static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(n - a + 1));
        ranges.push_back({p, a, b});
      }
      const Read first = read(c.get(), topic, ranges);
      const Read again = read(c.get(), topic, ranges);
      // Per partition: exactly the model's records of the range, in order.
      std::map<std::int32_t, std::vector<std::pair<std::int64_t, std::string>>> got;
      for (const auto& [p, o, v] : first) got[p].emplace_back(o, v);
      for (const auto& r : ranges) {
        std::vector<std::pair<std::int64_t, std::string>> want;
        for (auto o = r.from; o < r.to; ++o) want.emplace_back(o, model[r.partition][static_cast<std::size_t>(o)]);
        CHECK(got[r.partition] == want);
        got.erase(r.partition);
      }
      for (const auto& [p, rows] : got) CHECK(rows.empty());
      std::map<std::int32_t, std::vector<std::int64_t>> a1, a2;
      for (const auto& [p, o, v] : first) a1[p].push_back(o);
      for (const auto& [p, o, v] : again) a2[p].push_back(o);
      CHECK(a1 == a2);
    }
  }
}

TEST_CASE("R-SOURCE-5, kafka reader: a range ending at the high watermark completes without waiting for more") {
  auto& mock = flowtest::shared_kafka_mock();
  const std::string t = "reader.end";
  mock.create_topic(t, 1);
  auto c = consumer(mock);
  mock.produce(t, {{0, "k", "a", {}, 0}, {0, "k", "b", {}, 0}});
  // A reader that waited for offset 2 would time out.
  const Read r = read(c.get(), t, {{0, 0, 2}}, 5s);
  REQUIRE(r.size() == 2);
  CHECK(std::get<2>(r[1]) == "b");
  // An empty range reads nothing and does not touch the cluster.
  CHECK(read(c.get(), t, {{0, 2, 2}}, 1ms).empty());
  // A range beyond the end times out, naming the partition and its end.
  const auto msg = flowtest::message_of(fl::errc::source_io, [&] { read(c.get(), t, {{0, 1, 5}}, 500ms); });
  CHECK(contains(msg, "timed out"));
  CHECK(contains(msg, "partition 0 at offset 2 of [1, 5)"));
  CHECK(contains(msg, "its end is offset 2"));
}

TEST_CASE("R-SOURCE-1, kafka reader: errors") {
  auto& mock = flowtest::shared_kafka_mock();
  mock.create_topic("reader.errors", 1);
  auto msg = flowtest::message_of(fl::errc::invalid_argument,
                      [&] { fd::make_kafka_conf({{"no.such.property", "1"}}, ctx); });
  CHECK(contains(msg, "no.such.property"));
  CHECK(contains(msg, "reader_test"));
  auto c = consumer(mock);
  // The mock creates any topic a client asks about; an error set on the
  // topic stands in for one that does not exist.
  mock.set_topic_error("reader.missing", RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART);
  msg = flowtest::message_of(fl::errc::source_io, [&] { fd::topic_partition_ids(c.get(), "reader.missing", 3s, ctx); });
  CHECK(contains(msg, "reader.missing"));
  msg = flowtest::message_of(fl::errc::invalid_argument, [&] { read(c.get(), "reader.errors", {{0, 0, 1}, {0, 1, 2}}); });
  CHECK(contains(msg, "twice"));
}

TEST_CASE("R-SOURCE-1, kafka reader: a query that fails says what the client saw (kafka_error_note)") {
  // Nothing listens on port 1: every connection is refused.
  fd::kafka_error_note note;
  const fd::kafka_context noted{"reader_test", fl::errc::source_io, &note, true};
  fd::kafka_properties props = fd::kafka_consumer_settings("flowlib.test");
  props.emplace_back("bootstrap.servers", "127.0.0.1:1");
  props.emplace_back("log_level", "0");
  fd::kafka_conf conf = fd::make_kafka_conf(props, noted);
  note.install(conf.get());
  auto c = fd::make_kafka_handle(RD_KAFKA_CONSUMER, std::move(conf), noted);
  const auto msg = flowtest::message_of(fl::errc::source_io, [&] { fd::topic_partition_ids(c.get(), "x", 500ms, noted); });
  CHECK(contains(msg, "reading the partitions of topic 'x'"));
  CHECK(contains(msg, "last client error"));
  // Which of the client's errors came last depends on timing: the refused
  // connection, or the report that followed it.
  CHECK((contains(msg, "1/1 brokers are down") || contains(msg, "Connection refused")));
  CHECK(!note.last().empty());
  note.clear();
  CHECK(note.last().empty());
}

}  // namespace kafka_reader
