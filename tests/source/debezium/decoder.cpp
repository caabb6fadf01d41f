// source/debezium.hpp: Debezium envelopes into AUTO CDC changes (R-SOURCE-6):
// each op, with and without the JsonConverter schema/payload wrapper,
// tombstones, the sequence sources, Debezium's date and time encodings,
// deletes with a key-only "before", truncates, the envelopes that cannot be
// mapped (exact codes and message parts) and the options that do not fit.
#include <flowlib/source/debezium.hpp>
#include <flowlib/source/kafka.hpp>

#include <doctest/doctest.h>

#include "support/errors.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <ranges>
#include <string>
#include <vector>

namespace source_debezium_decoder {

namespace fl = flowlib;
using flowtest::contains;
namespace fd = flowlib::detail;
using namespace std::chrono;

namespace {

using us_time = sys_time<microseconds>;

struct Change {
  std::int64_t id = 0;
  std::optional<std::string> name;
  sys_days born{};
  std::optional<us_time> seen;
  std::optional<std::string> zoned;
  char op = '?';
  std::int64_t lsn = -1;
  friend bool operator==(const Change&, const Change&) = default;
};
FLOWLIB_SCHEMA(Change, id, name, born, seen, zoned, op, lsn);

struct StrOp {
  std::int64_t id = 0;
  std::string op;
  std::optional<std::int64_t> seq;
};
FLOWLIB_SCHEMA(StrOp, id, op, seq);

struct BoolOp {
  std::int64_t id = 0;
  std::int32_t qty = 0;
  bool deleted = false;
  sys_time<milliseconds> at{};
};
FLOWLIB_SCHEMA(BoolOp, id, qty, deleted, at);

const fd::record_origin origin{"pg.public.users", "partition 2 offset 41"};

fl::DebeziumDecoder<Change> lsn_decoder() {
  return fl::DebeziumDecoder<Change>{{.op = &Change::op, .sequence = &Change::lsn}};
}

// The PostgreSQL connector's envelope: before, after, source, op, ts_ms,
// transaction.
std::string envelope(const std::string& op, const std::string& before, const std::string& after,
                     const std::string& lsn = "3000", const std::string& extra = "") {
  return R"({"before":)" + before + R"(,"after":)" + after +
         R"(,"source":{"version":"2.1.2.Final","connector":"postgresql","name":"pg","ts_ms":1700000000500,"snapshot":"false","db":"app","sequence":"[\"24023128\",\"24023184\"]","schema":"public","table":"users","txId":555,"lsn":)" +
         lsn + R"(,"xmin":null},"op":")" + op +
         R"(","ts_ms":1700000000999,"transaction":{"id":"555:24023184","total_order":1,"data_collection_order":1})" +
         extra + "}";
}

// JsonConverter with schemas.enable=true: {"schema":{...},"payload":<envelope>}.
std::string wrapped(const std::string& env) {
  return R"({"schema":{"type":"struct","fields":[{"type":"struct","fields":[{"type":"int64","optional":false,"field":"id"},{"type":"string","optional":true,"field":"name"}],"optional":true,"name":"pg.public.users.Value","field":"before"},{"type":"struct","fields":[],"optional":true,"field":"after"},{"type":"string","optional":false,"field":"op"}],"optional":false,"name":"pg.public.users.Envelope","version":1},"payload":)" +
         env + "}";
}

const std::string row1 =
    R"({"id":7,"name":"Ann","born":19000,"seen":1700000000123456,"zoned":"2023-11-14T22:13:20.123Z"})";
const std::string row1b =
    R"({"id":7,"name":"Bo","born":-1,"seen":null,"zoned":null})";

// A malformed record's error: MALFORMED_RECORD, naming the source and the
// record; returns the message.
std::string malformed(const std::string& value) {
  auto decode = lsn_decoder();
  const fl::error c = flowtest::error_of([&] { (void)decode(value, origin); });
  CHECK(c.code() == fl::errc::malformed_record);
  CHECK(contains(c.what(), "flow 'pg.public.users': MALFORMED_RECORD"));
  CHECK(contains(c.what(), "partition 2 offset 41: "));
  return c.what();
}

static_assert(std::ranges::input_range<fl::optional_row<Change>>);
static_assert(std::is_invocable_r_v<std::optional<Change>, fl::DebeziumDecoder<Change>&,
                                    const fl::KafkaRecord&>);
static_assert(std::is_constructible_v<
              std::function<std::optional<Change>(const fl::KafkaRecord&)>,
              fl::DebeziumDecoder<Change>>);

}  // namespace

TEST_CASE("debezium: op c, r and u map the after row to an upsert (R-SOURCE-6)") {
  auto decode = lsn_decoder();
  for (const char* op : {"c", "r", "u"}) {
    CAPTURE(op);
    const std::string before = std::string(op) == "u" ? row1b : "null";
    const std::optional<Change> c = decode(envelope(op, before, row1), origin);
    REQUIRE(c.has_value());
    CHECK(c->id == 7);
    CHECK(c->name == std::optional<std::string>("Ann"));
    // Debezium's Date: days since 1970-01-01; MicroTimestamp: microseconds;
    // ZonedTimestamp: an ISO 8601 string (here into a string column).
    CHECK(c->born == sys_days{days{19000}});
    CHECK(c->seen == us_time{microseconds{1700000000123456}});
    CHECK(c->zoned == std::optional<std::string>("2023-11-14T22:13:20.123Z"));
    CHECK(c->op == op[0]);
    CHECK(c->lsn == 3000);
  }
}

TEST_CASE("debezium: op d maps the before row to a delete (R-SOURCE-6)") {
  auto decode = lsn_decoder();
  const std::optional<Change> c = decode(envelope("d", row1b, "null", "3100"), origin);
  REQUIRE(c.has_value());
  CHECK(c->op == 'd');
  CHECK(c->id == 7);
  CHECK(c->name == std::optional<std::string>("Bo"));
  CHECK(c->born == sys_days{days{-1}});
  CHECK(c->seen == std::nullopt);
  CHECK(c->lsn == 3100);

  // Replica identity DEFAULT: only the key in "before", the rest null or
  // missing. Strict without delete_keys; value-initialised with them.
  const std::string key_only = R"({"id":8,"name":null,"born":null})";
  const fl::error strict = flowtest::error_of([&] { (void)decode(envelope("d", key_only, "null"), origin); });
  CHECK(strict.code() == fl::errc::malformed_record);
  CHECK(strict.column() == "born");
  CHECK(contains(strict.what(), "null in a column that is not std::optional"));

  fl::DebeziumDecoder<Change> keyed{
      {.op = &Change::op, .sequence = &Change::lsn, .delete_keys = {"id"}}};
  std::optional<Change> k = keyed(envelope("d", key_only, "null"), origin);
  REQUIRE(k.has_value());
  CHECK(k->id == 8);
  CHECK(k->born == sys_days{});
  CHECK(k->name == std::nullopt);
  k = keyed(envelope("d", R"({"id":9})", "null"), origin);
  REQUIRE(k.has_value());
  CHECK(k->id == 9);
  // The key itself is still required, and values present still checked.
  const fl::error no_key = flowtest::error_of([&] { (void)keyed(envelope("d", R"({"name":"x"})", "null"), origin); });
  CHECK(no_key.code() == fl::errc::malformed_record);
  CHECK(no_key.column() == "id");
  CHECK(contains(no_key.what(), "the column is missing from the record"));
  const fl::error bad = flowtest::error_of([&] { (void)keyed(envelope("d", R"({"id":9,"born":"x"})", "null"), origin); });
  CHECK(bad.column() == "born");
  // Upserts stay strict with delete_keys.
  const fl::error up = flowtest::error_of([&] { (void)keyed(envelope("u", "null", key_only), origin); });
  CHECK(up.column() == "born");
}

TEST_CASE("debezium: the schema/payload wrapper gives the same changes (R-SOURCE-6)") {
  auto decode = lsn_decoder();
  for (const char* op : {"c", "r", "u", "d"}) {
    CAPTURE(op);
    const bool del = std::string(op) == "d";
    const std::string env = envelope(op, del ? row1 : "null", del ? "null" : row1);
    const auto plain = decode(env, origin);
    const auto with_schema = decode(wrapped(env), origin);
    REQUIRE(plain.has_value());
    REQUIRE(with_schema.has_value());
    CHECK(*plain == *with_schema);
  }
  // Fields in another order (op first, source last), spaces and newlines.
  const auto reordered = decode(
      "{ \"op\" : \"u\",\n \"ts_ms\" : 1, \"after\" : " + row1 +
          ", \"before\": null, \"source\": {\"lsn\": 3000, \"ts_ms\": 5} }",
      origin);
  REQUIRE(reordered.has_value());
  CHECK(*reordered == *decode(envelope("u", "null", row1), origin));
}

TEST_CASE("debezium: tombstones map to no change (R-SOURCE-6)") {
  auto decode = lsn_decoder();
  CHECK_FALSE(decode("", origin).has_value());
  CHECK_FALSE(decode("null", origin).has_value());
  CHECK_FALSE(decode(" null \n", origin).has_value());
  CHECK_FALSE(decode(R"({"schema":null,"payload":null})", origin).has_value());
  // As a flat_map range: no row.
  CHECK(decode(std::string_view{}).size() == 0);
  CHECK(std::ranges::distance(decode(std::string_view{})) == 0);
  // A Kafka record without a value.
  fl::KafkaRecord r;
  r.topic = "t";
  CHECK_FALSE(decode(r).has_value());
}

TEST_CASE("debezium: the sequence from source.lsn, source.ts_ms or ts_ms (R-SOURCE-6)") {
  auto decode = lsn_decoder();
  const std::string no_lsn =
      R"({"before":null,"after":{"id":1,"born":0},"source":{"connector":"mysql","ts_ms":1700000000500,"file":"binlog.000003","pos":154},"op":"c","ts_ms":1700000000999})";
  const std::string what = malformed(no_lsn);
  CHECK(contains(what, "column 'lsn'"));
  CHECK(contains(what, "the envelope has no source.lsn"));
  CHECK(contains(what, "sequence_from = debezium_sequence::ts_ms"));
  CHECK(contains(malformed(envelope("c", "null", row1, "null")), "the envelope has no source.lsn"));
  CHECK(contains(malformed(R"({"op":"c","after":{"id":1,"born":0}})"), "no source.lsn"));
  CHECK(contains(malformed(envelope("c", "null", row1, "\"0/16B3748\"")),
                 "source.lsn: not an integer, value \"0/16B3748\""));

  fl::DebeziumDecoder<Change> by_source_ts{{.op = &Change::op, .sequence = &Change::lsn,
                                            .sequence_from = fl::debezium_sequence::source_ts_ms}};
  CHECK(by_source_ts(no_lsn, origin)->lsn == 1700000000500);
  fl::DebeziumDecoder<Change> by_ts{{.op = &Change::op, .sequence = &Change::lsn,
                                     .sequence_from = fl::debezium_sequence::ts_ms}};
  CHECK(by_ts(no_lsn, origin)->lsn == 1700000000999);
  const fl::error none = flowtest::error_of([&] { (void)by_ts(R"({"op":"c","after":{"id":1,"born":0}})", origin); });
  CHECK(none.code() == fl::errc::malformed_record);
  CHECK(contains(none.what(), "the envelope has no ts_ms"));

  // A string op column and an optional sequence; a bool op column and a
  // time point sequence (milliseconds converted to the column's unit).
  fl::DebeziumDecoder<StrOp> s{{.op = &StrOp::op, .sequence = &StrOp::seq}};
  const auto so = s(envelope("d", R"({"id":4})", "null", "18"), origin);
  REQUIRE(so.has_value());
  CHECK(so->op == "d");
  CHECK(so->seq == std::optional<std::int64_t>(18));
  fl::DebeziumDecoder<BoolOp> b{{.op = &BoolOp::deleted, .sequence = &BoolOp::at,
                                 .sequence_from = fl::debezium_sequence::source_ts_ms}};
  const auto del = b(envelope("d", R"({"id":4,"qty":2})", "null"), origin);
  REQUIRE(del.has_value());
  CHECK(del->deleted == true);
  CHECK(del->at == sys_time<milliseconds>{milliseconds{1700000000500}});
  const auto up = b(envelope("u", "null", R"({"id":4,"qty":3})"), origin);
  CHECK(up->deleted == false);
  CHECK(up->qty == 3);
}

TEST_CASE("debezium: the op and sequence columns are not read from the row (R-SOURCE-6)") {
  auto decode = lsn_decoder();
  const auto c = decode(
      envelope("c", "null", R"({"id":1,"born":0,"op":"x","lsn":"not a number"})", "77"), origin);
  REQUIRE(c.has_value());
  CHECK(c->op == 'c');
  CHECK(c->lsn == 77);
}

TEST_CASE("debezium: truncates fail, or pass as changes with truncate = emit (R-SOURCE-6)") {
  const std::string t =
      R"({"before":null,"after":null,"source":{"lsn":5000,"ts_ms":1},"op":"t","ts_ms":2})";
  const std::string what = malformed(t);
  CHECK(contains(what, "op \"t\" (a truncate) maps to no row"));
  CHECK(contains(what, "debezium_truncate::emit"));
  fl::DebeziumDecoder<Change> emit{
      {.op = &Change::op, .sequence = &Change::lsn, .truncate = fl::debezium_truncate::emit}};
  const auto c = emit(t, origin);
  REQUIRE(c.has_value());
  Change expected;
  expected.op = 't';
  expected.lsn = 5000;
  CHECK(*c == expected);
}

TEST_CASE("debezium: envelopes that cannot be mapped are MALFORMED_RECORD naming the record (R-SOURCE-6)") {
  CHECK(contains(malformed(R"({"before":null,"after":{"id":1,"born":0},"source":{"lsn":1}})"),
                 "the envelope has no \"op\""));
  CHECK(contains(malformed(wrapped(R"({"after":{"id":1,"born":0},"source":{"lsn":1}})")),
                 "the envelope has no \"op\""));
  CHECK(contains(malformed(envelope("x", "null", row1)),
                 "unknown op \"x\" (a Debezium change has op c, r, u, d or t)"));
  CHECK(contains(malformed(envelope("m", "null", "null")), "unknown op \"m\""));
  CHECK(contains(malformed(envelope("cc", "null", row1)), "unknown op \"cc\""));
  CHECK(contains(malformed(R"({"op":1,"after":{"id":1,"born":0},"source":{"lsn":1}})"),
                 "\"op\" is not a string, value 1"));
  CHECK(contains(malformed(envelope("c", "null", "null")), "op \"c\" without an \"after\" row"));
  CHECK(contains(malformed(R"({"op":"c","source":{"lsn":1}})"), "op \"c\" without an \"after\" row"));
  CHECK(contains(malformed(envelope("u", row1, "null")), "op \"u\" without an \"after\" row"));
  CHECK(contains(malformed(envelope("r", "null", "[1]")), "\"after\" is not a JSON object, value [1]"));
  CHECK(contains(malformed(envelope("d", "null", row1)),
                 "op \"d\" (a delete) without a \"before\" row"));
  CHECK(contains(malformed(R"({"op":"c","after":{"id":1,"born":0},"source":7})"),
                 "\"source\" is not a JSON object, value 7"));
  CHECK(contains(malformed(R"({"schema":{},"payload":"text"})"),
                 "\"payload\" is not a JSON object, value \"text\""));
  // Not JSON, not an object.
  CHECK(contains(malformed("{\"op\":\"c\","), "not valid JSON"));
  CHECK(contains(malformed("not json"), "not valid JSON"));
  CHECK(contains(malformed("[1,2]"), "not a JSON object, value [1,2]"));
  CHECK(contains(malformed("42"), "not a JSON object"));
  // A row value that does not fit its column names the column.
  auto decode = lsn_decoder();
  const fl::error c = flowtest::error_of([&] {
    (void)decode(envelope("c", "null", R"({"id":"seven","born":0})"), origin);
  });
  CHECK(c.code() == fl::errc::malformed_record);
  CHECK(c.column() == "id");
  CHECK(contains(c.what(), "partition 2 offset 41: not an integer, value \"seven\""));
  const fl::error d = flowtest::error_of([&] {
    (void)decode(envelope("c", "null", R"({"id":1,"born":"2023-02-30"})"), origin);
  });
  CHECK(d.column() == "born");
  CHECK(contains(d.what(), "not an ISO 8601 date, value \"2023-02-30\""));
  const fl::error m = flowtest::error_of([&] { (void)decode(envelope("c", "null", R"({"id":1})"), origin); });
  CHECK(m.column() == "born");
  CHECK(contains(m.what(), "the column is missing from the record"));
}

TEST_CASE("debezium: calls without an origin or with a Kafka record name the record") {
  fl::DebeziumDecoder<Change> decode{
      {.op = &Change::op, .sequence = &Change::lsn, .name = "users_feed"}};
  const fl::error c = flowtest::error_of([&] { (void)decode(std::string_view(R"({"op":"q"})")); });
  CHECK(c.code() == fl::errc::malformed_record);
  CHECK(contains(c.what(), "flow 'users_feed': MALFORMED_RECORD: record {\"op\":\"q\"}: unknown op"));
  const auto rows = decode(std::string_view(envelope("c", "null", row1)));
  REQUIRE(rows.size() == 1);
  CHECK(rows.begin()->id == 7);

  const std::string value = envelope("x", "null", row1);
  fl::KafkaRecord r;
  r.topic = "pg.public.users";
  r.partition = 3;
  r.offset = 1234;
  r.value = value;
  const fl::error k = flowtest::error_of([&] { (void)decode(r); });
  CHECK(k.code() == fl::errc::malformed_record);
  CHECK(contains(k.what(), "flow 'users_feed': MALFORMED_RECORD: topic 'pg.public.users' partition 3 offset 1234: unknown op \"x\""));
  // Without a name: the record's topic, or "debezium" without an origin.
  auto unnamed = lsn_decoder();
  const fl::error t = flowtest::error_of([&] { (void)unnamed(r); });
  CHECK(contains(t.what(), "flow 'pg.public.users': MALFORMED_RECORD: topic 'pg.public.users' partition 3"));
  const fl::error n = flowtest::error_of([&] { (void)unnamed(std::string_view("[]")); });
  CHECK(contains(n.what(), "flow 'debezium': MALFORMED_RECORD: record []: not a JSON object"));

  const std::string ok = envelope("r", "null", row1);
  r.value = ok;
  const auto c2 = decode(r);
  REQUIRE(c2.has_value());
  CHECK(c2->op == 'r');
}

TEST_CASE("debezium: copies decode independently; options that do not fit are refused") {
  auto a = lsn_decoder();
  auto b = a;  // a parser of its own
  const std::string e1 = envelope("c", "null", row1, "1");
  const std::string e2 = envelope("u", "null", row1b, "2");
  const auto x = a(e1, origin);
  const auto y = b(e2, origin);
  const auto z = a(e2, origin);
  CHECK(x->lsn == 1);
  CHECK(y->lsn == 2);
  CHECK(*z == *y);

  const auto invalid = [](auto make) {
    const fl::error c = flowtest::error_of(make);
    CHECK(c.code() == fl::errc::invalid_argument);
    CHECK(contains(c.what(), "DebeziumDecoder: "));
    return std::string(c.what());  // (what() dies with c)
  };
  CHECK(contains(invalid([] { fl::DebeziumDecoder<Change>{{.sequence = &Change::lsn}}; }),
                 "no op column"));
  CHECK(contains(invalid([] { fl::DebeziumDecoder<Change>{{.op = &Change::op}}; }),
                 "no sequence column"));
  CHECK(contains(invalid([] {
                   fl::DebeziumDecoder<Change>{
                       {.op = &Change::op, .sequence = &Change::lsn, .delete_keys = {"idd"}}};
                 }),
                 "delete_keys names 'idd', which is not a column of FLOWLIB_SCHEMA(Change, ...)"));
  CHECK(contains(invalid([] {
                   fl::DebeziumDecoder<BoolOp>{{.op = &BoolOp::deleted,
                                                .sequence = &BoolOp::at,
                                                .sequence_from = fl::debezium_sequence::ts_ms,
                                                .truncate = fl::debezium_truncate::emit}};
                 }),
                 "truncate = emit needs an op column of type char or std::string"));
  CHECK(contains(invalid([] {
                   fl::DebeziumDecoder<BoolOp>{{.op = &BoolOp::deleted, .sequence = &BoolOp::at}};
                 }),
                 "an LSN is a log position, not a time"));
}

}  // namespace source_debezium_decoder
