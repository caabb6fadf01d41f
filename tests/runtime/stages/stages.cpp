// Transform stages of a pipeline flow (docs/semantics.md#transform-stages,
// R-STAGE-1 to R-STAGE-8): map, filter, flat_map, view, lookup, several
// sources in one flow, rows rejected into a quarantine table, stages
// composed with operators, quarantine stages and expectations, a changed
// stage list over an existing checkpoint, dimensions that change between
// batches and between attempts, and the event log's per-stage counts.
#include <doctest/doctest.h>

#include <flowlib/checkpoint/memory.hpp>
#include <flowlib/event_log.hpp>
#include <flowlib/flowlib.hpp>
#include <flowlib/pipeline.hpp>
#include <flowlib/source/memory.hpp>
#include <flowlib/source/union.hpp>
#include <flowlib/stage.hpp>

#include <nlohmann/json.hpp>

#include <support/batches.hpp>
#include <support/errors.hpp>
#include <support/event_json.hpp>
#include <support/rows.hpp>

#include <range/v3/view/filter.hpp>
#include <range/v3/view/iota.hpp>
#include <range/v3/view/repeat_n.hpp>
#include <range/v3/view/transform.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <ranges>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace runtime_stages {

namespace fl = flowlib;
using json = nlohmann::json;
using ms_time = std::chrono::sys_time<std::chrono::milliseconds>;

// A raw record: a text line, no schema (R-STAGE-1: a flow reads raw records
// and writes typed rows).
struct Line {
  std::string text;
  friend auto operator<=>(const Line&, const Line&) = default;
};

struct Order {
  std::int64_t id = 0;
  std::int64_t customer = 0;
  std::int64_t amount = 0;
  friend auto operator<=>(const Order&, const Order&) = default;
};
FLOWLIB_SCHEMA(Order, id, customer, amount);

struct Customer {
  std::int64_t id = 0;
  std::string name;
  std::int64_t version = 0;
  friend auto operator<=>(const Customer&, const Customer&) = default;
};
FLOWLIB_SCHEMA(Customer, id, name, version);

struct Enriched {
  std::int64_t id = 0;
  std::int64_t amount = 0;
  std::string customer;  // "?" when a left lookup found no row
  friend auto operator<=>(const Enriched&, const Enriched&) = default;
};
FLOWLIB_SCHEMA(Enriched, id, amount, customer);

struct Reading {
  std::int64_t id = 0;
  std::int64_t seq = 0;
  ms_time at{};
  std::int64_t value = 0;
  friend auto operator<=>(const Reading&, const Reading&) = default;
};
FLOWLIB_SCHEMA(Reading, id, seq, at, value);

using Dedup = fl::DedupWithinWatermark<fl::Key<&Reading::id, &Reading::seq>, fl::EventTime<&Reading::at>>;
using Customers = fl::ReplaceUsing<fl::Key<&Customer::id>, fl::Seq<&Customer::version>>;

const ms_time t0{std::chrono::milliseconds(1'700'000'000'000)};

// "id,customer,amount" -> Order; anything else is rejected (R-STAGE-5).
Order parse(const Line& l) {
  Order o;
  int fields = 0;
  std::size_t at = 0;
  for (std::int64_t* f : {&o.id, &o.customer, &o.amount}) {
    const std::size_t comma = l.text.find(',', at);
    const std::string part = l.text.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    std::size_t used = 0;
    try {
      *f = std::stoll(part, &used);
    } catch (const std::exception&) {
      throw fl::row_rejected("not a number: '" + part + "'");
    }
    if (used != part.size() || part.empty()) throw fl::row_rejected("not a number: '" + part + "'");
    ++fields;
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  if (fields != 3) throw fl::row_rejected("expected 3 fields");
  return o;
}

Line line(std::int64_t id, std::int64_t customer, std::int64_t amount) {
  return Line{std::to_string(id) + "," + std::to_string(customer) + "," + std::to_string(amount)};
}

// What a foreach-batch sink received, by batch id (a redelivery must carry
// the same rows, R-EXACT-4).
template <class Row>
struct collected {
  std::map<std::uint64_t, std::vector<Row>> batches;
  std::size_t deliveries = 0;
  fl::ForeachBatch<Row> sink() {
    return fl::ForeachBatch<Row>{[this](std::uint64_t id, std::span<const Row> rows) {
      ++deliveries;
      flowtest::record_batch(batches, id, rows);
    }};
  }
  std::vector<Row> all() const {
    std::vector<Row> out;
    for (const auto& [id, rows] : batches) out.insert(out.end(), rows.begin(), rows.end());
    return out;
  }
};

struct injected {};

// The flow "enrich" up to its lookup: each order with its customer's name
// (an inner lookup, join_on with member pointers); the caller adds into().
template <class Source>
auto enrich(fl::Pipeline& p, Source& orders, fl::StreamingTable<Customer>& customers) {
  return p.flow("enrich").from(orders).lookup(customers, fl::join_on(&Order::customer, &Customer::id),
                                              [](Order o, const Customer& c) { return Enriched{o.id, o.amount, c.name}; });
}

void fill(fl::StreamingTable<Customer>& t, const std::vector<Customer>& rows) {
  auto& s = t.store();
  s.clear();
  s.reserve(rows.size());
  for (const auto& r : rows) s.insert(Customer(r));
}

// --- map ------------------------------------------------------------------------------

TEST_CASE("R-STAGE-1: map changes the row type: raw text records become typed rows") {
  fl::MemorySource<Line> raw{"raw"};
  fl::StreamingTable<Order> orders{"orders"};
  collected<std::int64_t> amounts;
  fl::MemoryCheckpoint ckpt;
  fl::Pipeline p{"shop", ckpt};
  p.flow("orders").from(raw).map([](Line&& l) { return parse(l); }).into(orders, fl::Append{"orders"});
  // Two maps in a row, the second changing the type again (into a sink).
  p.flow("amounts")
      .from(raw)
      .map([](const Line& l) { return parse(l); })
      .map([](Order o) { return o.amount * 2; })
      .max_rows_per_batch(2)
      .into(amounts.sink());
  raw.append(line(1, 10, 5));
  raw.append(line(2, 11, 7));
  raw.append(line(3, 10, 9));
  const auto s = p.update();
  CHECK(orders.sorted_rows() == std::vector<Order>{{1, 10, 5}, {2, 11, 7}, {3, 10, 9}});
  CHECK(amounts.all() == std::vector<std::int64_t>{10, 14, 18});
  CHECK(amounts.batches.size() == 2);
  REQUIRE(s.flow("orders") != nullptr);
  CHECK(s.flow("orders")->input_rows == 3);
  CHECK(s.flow("orders")->output_rows == 3);
}

TEST_CASE("R-STAGE-1, R-CDC-8: map builds the snapshots of an AUTO CDC FROM SNAPSHOT flow from raw exports") {
  // One raw record per export: its version and "id,customer,amount;..."
  struct Export {
    std::int64_t version = 0;
    std::string text;
  };
  using Snap = fl::Snapshot<Order, std::int64_t>;
  const auto to_snapshot = [](const Export& e) {
    Snap s;
    s.version = e.version;
    std::size_t at = 0;
    while (at < e.text.size()) {
      const std::size_t end = std::min(e.text.find(';', at), e.text.size());
      s.rows.push_back(parse(Line{e.text.substr(at, end - at)}));
      at = end + 1;
    }
    return s;
  };
  fl::MemorySource<Export> exports{"exports"};
  fl::StreamingTable<Order> current{"current"};
  fl::MemoryCheckpoint ckpt;
  fl::Pipeline p{"snap", ckpt};
  p.flow("current")
      .from(exports)
      .map(to_snapshot)
      .into(current, fl::AutoCdcFromSnapshot<fl::Key<&Order::id>, fl::Scd1>{"current"});
  exports.append(Export{1, "1,10,5;2,11,7;3,12,9"});
  p.update();
  CHECK(current.sorted_rows() == std::vector<Order>{{1, 10, 5}, {2, 11, 7}, {3, 12, 9}});
  exports.append(Export{2, "1,10,6;3,12,9"});  // 1 changed, 2 gone
  const auto s = p.update();
  CHECK(current.sorted_rows() == std::vector<Order>{{1, 10, 6}, {3, 12, 9}});
  REQUIRE(s.flow("current") != nullptr);
  CHECK(s.flow("current")->deleted_rows == 1);
}

TEST_CASE("R-STAGE-1: an exception from map fails the batch: nothing committed, positions kept, the next update runs it again") {
  fl::MemorySource<Line> raw{"raw"};
  fl::StreamingTable<Order> orders{"orders"};
  fl::MemoryCheckpoint ckpt;
  bool broken = true;
  fl::Pipeline p{"shop", ckpt};
  p.flow("orders")
      .from(raw)
      .map([&](const Line& l) {
        Order o = parse(l);
        if (broken && o.id == 3) throw std::runtime_error("map failed");
        return o;
      })
      .max_rows_per_batch(2)
      .into(orders, fl::Append{"orders"});
  for (int i = 1; i <= 5; ++i) raw.append(line(i, 1, i * 10));
  CHECK_THROWS_AS(p.update(), std::runtime_error);
  CHECK(orders.size() == 2);  // batch 0 committed; batch 1 (rows 3, 4) nothing
  CHECK_THROWS_AS(p.update(), std::runtime_error);  // the same rows again
  CHECK(orders.size() == 2);
  broken = false;
  const auto s = p.update();
  CHECK(s.flow("orders")->input_rows == 3);  // from the failed batch's positions
  CHECK(orders.size() == 5);
  CHECK(orders.sorted_rows() ==
        std::vector<Order>{{1, 1, 10}, {2, 1, 20}, {3, 1, 30}, {4, 1, 40}, {5, 1, 50}});
}

// --- filter ---------------------------------------------------------------------------

TEST_CASE("R-STAGE-2: filter keeps the rows its predicate accepts; the others are filtered, not dropped") {
  fl::MemorySource<Order> feed{"feed"};
  fl::StreamingTable<Order> big{"big"};
  fl::MemoryCheckpoint ckpt;
  fl::Pipeline p{"shop", ckpt};
  p.flow("big")
      .from(feed)
      .filter([](const Order& o) { return o.amount >= 100; })
      .expect(fl::expectations(fl::expect_or_drop("known_customer", [](const Order& o) { return o.customer != 0; })))
      .into(big, fl::Append{"big"});
  feed.append(Order{1, 1, 50});   // filtered
  feed.append(Order{2, 1, 150});  // kept
  feed.append(Order{3, 0, 500});  // dropped by the expectation
  feed.append(Order{4, 2, 99});   // filtered
  feed.append(Order{5, 0, 10});   // filtered (the filter comes first)
  feed.append(Order{6, 3, 100});  // kept
  const auto s = p.update();
  CHECK(big.sorted_rows() == std::vector<Order>{{2, 1, 150}, {6, 3, 100}});
  const auto* f = s.flow("big");
  REQUIRE(f != nullptr);
  CHECK(f->input_rows == 6);
  CHECK(f->filtered_rows == 3);
  CHECK(f->dropped_rows == 1);
  CHECK(f->output_rows == 2);
  CHECK(f->unmatched_rows == 0);
}

// --- flat_map and view ----------------------------------------------------------------

TEST_CASE("R-STAGE-3: flat_map emits each row's outputs in order, all of them before the next row's") {
  fl::MemorySource<Order> feed{"feed"};
  fl::MemoryCheckpoint ckpt;
  collected<Order> vec, std_view, rv3_view, repeated;
  fl::Pipeline p{"shop", ckpt};
  const auto declare = [&](const char* name, auto fn, collected<Order>& out) {
    p.flow(name).from(feed).flat_map(fn).into(out.sink());
  };
  const auto nth = [](Order o) {  // o's i-th output
    return [o](std::int64_t i) { return Order{o.id * 10 + i, o.customer, i}; };
  };
  // A view: iota | transform, of the std or range-v3 adaptors.
  const auto view_of = [&](auto iota, auto transform) {
    return [&, iota, transform](Order o) { return iota(std::int64_t{0}, o.amount) | transform(nth(o)); };
  };
  declare("vector", [&](const Order& o) {  // a container
    std::vector<Order> out;
    for (std::int64_t i = 0; i < o.amount; ++i) out.push_back(nth(o)(i));
    return out;
  }, vec);
  declare("std_view", view_of(std::views::iota, std::views::transform), std_view);
  declare("rv3_view", view_of(ranges::views::iota, ranges::views::transform), rv3_view);
  declare("repeat_n", [](const Order& o) { return ranges::views::repeat_n(o, static_cast<std::ptrdiff_t>(o.amount)); },
          repeated);
  feed.append(Order{1, 7, 3});
  feed.append(Order{2, 8, 0});  // no rows out
  feed.append(Order{3, 9, 2});
  p.update();
  const std::vector<Order> want{{10, 7, 0}, {11, 7, 1}, {12, 7, 2}, {30, 9, 0}, {31, 9, 1}};
  CHECK(vec.all() == want);
  CHECK(std_view.all() == want);
  CHECK(rv3_view.all() == want);
  CHECK(repeated.all() ==
        std::vector<Order>{{1, 7, 3}, {1, 7, 3}, {1, 7, 3}, {3, 9, 2}, {3, 9, 2}});
}

TEST_CASE("R-STAGE-3: view(adaptor) pipes the batch through std::views and range-v3 views") {
  fl::MemorySource<Order> feed{"feed"};
  fl::MemoryCheckpoint ckpt;
  collected<Order> std_out, rv3_out, reversed;
  collected<std::int64_t> ids;
  fl::Pipeline p{"shop", ckpt};
  const auto even = [](const Order& o) { return o.id % 2 == 0; };
  const auto doubled = [](const Order& o) { return Order{o.id, o.customer, o.amount * 2}; };
  p.flow("std").from(feed).view(std::views::filter(even) | std::views::transform(doubled)).into(std_out.sink());
  p.flow("rv3").from(feed).view(ranges::views::filter(even) | ranges::views::transform(doubled)).into(rv3_out.sink());
  p.flow("reverse").from(feed).view(std::views::reverse).max_rows_per_batch(3).into(reversed.sink());
  // A view that changes the row type.
  p.flow("ids").from(feed).view(std::views::transform([](const Order& o) { return o.id; })).into(ids.sink());
  for (std::int64_t i = 1; i <= 6; ++i) feed.append(Order{i, 0, i});
  p.update();
  const std::vector<Order> want{{2, 0, 4}, {4, 0, 8}, {6, 0, 12}};
  CHECK(std_out.all() == want);
  CHECK(rv3_out.all() == want);
  // Per batch: each batch of 3 reversed.
  CHECK(reversed.all() == std::vector<Order>{{3, 0, 3}, {2, 0, 2}, {1, 0, 1}, {6, 0, 6}, {5, 0, 5}, {4, 0, 4}});
  CHECK(ids.all() == std::vector<std::int64_t>{1, 2, 3, 4, 5, 6});
}

// --- Several sources --------------------------------------------------------------------

TEST_CASE("R-STAGE-4: a union's positions: source i's partition p is partition i*2^24+p") {
  fl::MemorySource<Order> a{"a", {.partitions = 2}};
  fl::MemorySource<Order> b{"b"};
  fl::UnionSource u{a, b};
  CHECK(u.name() == "a + b");
  a.append_to(0, Order{1, 0, 0});
  a.append_to(1, Order{2, 0, 0});
  a.append_to(1, Order{3, 0, 0});
  b.append(Order{4, 0, 0});
  const auto latest = u.latest();
  CHECK(latest.offset(0) == 1);
  CHECK(latest.offset(1) == 2);
  CHECK(latest.offset(std::uint64_t{1} << 24) == 1);
  CHECK(latest.to_string() == "0:1,1:2,16777216:1");
  CHECK(fl::UnionSource<fl::MemorySource<Order>, fl::MemorySource<Order>>::slice(latest, 1).to_string() == "0:1");
  CHECK(fl::UnionSource<fl::MemorySource<Order>, fl::MemorySource<Order>>::slice(latest, 0).to_string() == "0:1,1:2");

  // In a pipeline the batch's positions are the union's.
  fl::StreamingTable<Order> t{"t"};
  fl::MemoryCheckpoint ckpt;
  flowtest::json_events events{"flow_progress"};
  fl::Pipeline p{"u", ckpt};
  p.event_log(events.log);
  p.flow("f").from(a).from(b).into(t, fl::Append{"f"});
  p.update();
  REQUIRE(events.events.size() == 1);
  CHECK(events.events[0]["end_position"] == "0:1,1:2,16777216:1");
  CHECK(t.size() == 4);
}

TEST_CASE("R-STAGE-4: a batch holds source 0's rows, then source 1's; with a row limit each source gets its share first") {
  fl::MemorySource<Order> a{"a"};
  fl::MemorySource<Order> b{"b"};
  fl::MemorySource<Order> c{"c"};
  for (std::int64_t i = 0; i < 10; ++i) a.append(Order{100 + i, 0, 0});
  for (std::int64_t i = 0; i < 3; ++i) b.append(Order{200 + i, 0, 0});
  fl::MemoryCheckpoint ckpt;
  collected<Order> two, three, all;
  fl::Pipeline p{"u", ckpt};
  p.flow("two").from(a).from(b).max_rows_per_batch(4).into(two.sink());
  p.flow("three").from(fl::UnionSource{a, b, c}).max_rows_per_batch(4).into(three.sink());
  p.flow("all").from(b).from(a).into(all.sink());  // no limit: one batch, b's rows first
  for (std::int64_t i = 0; i < 5; ++i) c.append(Order{300 + i, 0, 0});
  p.update();
  const auto ids = [](const std::vector<Order>& rows) {
    std::vector<std::int64_t> out;
    for (const auto& r : rows) out.push_back(r.id);
    return out;
  };
  using V = std::vector<std::int64_t>;
  // Shares 2 + 2; then b has 1 left and a takes what it left; then a alone.
  REQUIRE(two.batches.size() == 4);
  CHECK(ids(two.batches[0]) == V{100, 101, 200, 201});
  CHECK(ids(two.batches[1]) == V{102, 103, 104, 202});
  CHECK(ids(two.batches[2]) == V{105, 106, 107, 108});
  CHECK(ids(two.batches[3]) == V{109});
  // Three sources, limit 4: shares 1 + 1 + 1 and one row more, which turns
  // with the batches: the source numbered (sum of the start offsets) mod 3
  // gets it, and is first offered what the others leave.
  REQUIRE(three.batches.size() == 5);
  CHECK(ids(three.batches[0]) == V{100, 101, 200, 300});  // offsets 0: a
  CHECK(ids(three.batches[1]) == V{102, 201, 202, 301});  // 2+1+1 = 4: b
  CHECK(ids(three.batches[2]) == V{103, 302, 303, 304});  // 3+3+2 = 8: c, and b's unused row
  CHECK(ids(three.batches[3]) == V{104, 105, 106, 107});  // 4+3+5 = 12: a
  CHECK(ids(three.batches[4]) == V{108, 109});
  CHECK(three.all().size() == 18);
  REQUIRE(all.batches.size() == 1);
  CHECK(ids(all.batches[0]) ==
        V{200, 201, 202, 100, 101, 102, 103, 104, 105, 106, 107, 108, 109});
}

TEST_CASE("R-STAGE-4: with fewer rows per batch than sources, a busy source does not starve the others") {
  std::vector<std::unique_ptr<fl::MemorySource<Order>>> sources;
  for (int i = 0; i < 4; ++i) sources.push_back(std::make_unique<fl::MemorySource<Order>>("s" + std::to_string(i)));
  for (std::int64_t k = 0; k < 4; ++k)
    for (std::int64_t i = 0; i < 50; ++i) sources[static_cast<std::size_t>(k)]->append(Order{i, k, 0});
  for (std::size_t limit : {1u, 2u, 3u}) {
    CAPTURE(limit);
    fl::MemoryCheckpoint ckpt;
    collected<Order> sink;
    fl::Pipeline p{"u", ckpt};
    p.flow("f")
        .from(*sources[0]).from(*sources[1]).from(*sources[2]).from(*sources[3])
        .max_rows_per_batch(limit)
        .into(sink.sink());
    p.update();
    REQUIRE(sink.batches.size() == 200 / limit + (200 % limit != 0 ? 1 : 0));
    // Every source is read within the first few batches, and every batch
    // is full while all four have rows.
    std::vector<std::int64_t> seen(4, 0);
    for (std::size_t b = 0; b < 8 && b < sink.batches.size(); ++b) {
      CHECK(sink.batches[b].size() == limit);
      for (const auto& r : sink.batches[b]) seen[static_cast<std::size_t>(r.customer)] += 1;
    }
    for (std::size_t i = 0; i < 4; ++i) {
      CAPTURE(i);
      CHECK(seen[i] > 0);
    }
  }
}

TEST_CASE("R-STAGE-4: a new Pipeline over the same checkpoint resumes each source of a union exactly") {
  fl::MemorySource<Order> a{"a"};
  fl::MemorySource<Order> b{"b", {.partitions = 2}};
  fl::StreamingTable<Order> t{"t"};
  fl::MemoryCheckpoint ckpt;
  collected<Order> sink;
  flowtest::json_events events{"flow_progress"};
  int armed = 1;
  const auto declare = [&](fl::Pipeline& p) {
    p.event_log(events.log);
    p.flow("t").from(a).from(b).max_rows_per_batch(3).into(t, fl::Append{"t"});
    p.flow("s").from(fl::UnionSource{a, b}).max_rows_per_batch(3).into(sink.sink());
  };
  std::vector<Order> sent;
  const auto send_a = [&](std::int64_t id) { a.append(Order{id, 0, 0}); sent.push_back(Order{id, 0, 0}); };
  const auto send_b = [&](std::uint32_t part, std::int64_t id) {
    b.append_to(part, Order{id, 1, 0});
    sent.push_back(Order{id, 1, 0});
  };
  for (std::int64_t i = 0; i < 5; ++i) send_a(i);
  for (std::int64_t i = 0; i < 4; ++i) send_b(static_cast<std::uint32_t>(i % 2), 100 + i);
  {
    fl::PipelineOptions po;
    po.fault_hook = [&](fl::fault_point at, std::string_view, std::uint64_t batch) {
      if (batch == 1 && at == fl::fault_point::before_commit && armed > 0) {
        --armed;
        throw injected{};
      }
    };
    fl::Pipeline p{"u", ckpt, po};
    declare(p);
    CHECK_THROWS_AS(p.update(), injected);
    CHECK(t.size() == 3);  // batch 0 only
  }
  send_a(5);
  send_b(1, 104);
  fl::Pipeline p{"u", ckpt};
  declare(p);
  p.update();
  CHECK(t.sorted_rows() == flowtest::sorted(sent));
  CHECK(flowtest::sorted(sink.all()) == flowtest::sorted(sent));
  // The batch that failed was replayed from its recorded positions.
  std::map<std::uint64_t, std::string> end_of;  // flow t: batch -> end position of its committed event
  for (const auto& e : events.events) {
    if (e["flow"] == "t" && e["status"] == "COMPLETED") {
      CHECK(end_of.count(e["batch_id"].get<std::uint64_t>()) == 0);  // each batch committed once
      end_of[e["batch_id"].get<std::uint64_t>()] = e["end_position"].get<std::string>();
    }
  }
  REQUIRE(!end_of.empty());
  CHECK(end_of.rbegin()->second == "0:6,16777216:2,16777217:3");
}

// --- Rows rejected into a quarantine table --------------------------------------------

TEST_CASE("R-STAGE-5: map(fn, quarantine) keeps a rejected row whole, with the flow, the reason and the batch id; the batch goes on") {
  fl::MemorySource<Line> raw{"raw"};
  fl::StreamingTable<Order> orders{"orders"};
  fl::StreamingTable<fl::Quarantined<Line>> bad{"bad_lines"};
  fl::MemoryCheckpoint ckpt;
  fl::Pipeline p{"shop", ckpt};
  p.flow("orders").from(raw).map(parse, bad).max_rows_per_batch(3).into(orders, fl::Append{"orders"});
  raw.append(line(1, 1, 10));
  raw.append(Line{"2,x,20"});
  raw.append(line(3, 1, 30));
  raw.append(line(4, 1, 40));
  raw.append(Line{"5,1"});
  const auto s = p.update();
  CHECK(orders.sorted_rows() == std::vector<Order>{{1, 1, 10}, {3, 1, 30}, {4, 1, 40}});
  const auto q = bad.sorted_rows();
  REQUIRE(q.size() == 2);
  CHECK(q[0].flow == "orders");
  CHECK(q[0].expectation == "not a number: 'x'");
  CHECK(q[0].batch_id == 0);
  CHECK(q[0].row.text == "2,x,20");
  CHECK(q[1].flow == "orders");
  CHECK(q[1].expectation == "expected 3 fields");
  CHECK(q[1].batch_id == 1);
  CHECK(q[1].row.text == "5,1");
  CHECK(s.flow("orders")->quarantined_rows == 2);
  CHECK(s.flow("orders")->input_rows == 5);
  CHECK(s.flow("orders")->output_rows == 3);
}

TEST_CASE("R-STAGE-5: flat_map(fn, quarantine): a rejected row adds none of its outputs, even those its range yielded before the rejection") {
  fl::MemorySource<Order> feed{"feed"};
  fl::StreamingTable<fl::Quarantined<Order>> bad{"bad"};
  fl::MemoryCheckpoint ckpt;
  collected<Order> out;
  fl::Pipeline p{"shop", ckpt};
  p.flow("split")
      .from(feed)
      .flat_map(
          [](const Order& o) {
            // Lazily: a row with a negative amount is rejected at its 3rd output.
            return std::views::iota(std::int64_t{0}, o.amount < 0 ? std::int64_t{5} : o.amount) |
                   std::views::transform([o](std::int64_t i) {
                     if (o.amount < 0 && i == 2) throw fl::row_rejected("negative amount");
                     return Order{o.id * 10 + i, o.customer, 1};
                   });
          },
          bad)
      .into(out.sink());
  feed.append(Order{1, 1, 2});
  feed.append(Order{2, 1, -1});
  feed.append(Order{3, 1, 1});
  p.update();
  CHECK(out.all() == std::vector<Order>{{10, 1, 1}, {11, 1, 1}, {30, 1, 1}});
  const auto q = bad.sorted_rows();
  REQUIRE(q.size() == 1);
  CHECK(q[0].row == Order{2, 1, -1});
  CHECK(q[0].expectation == "negative amount");
  CHECK(q[0].flow == "split");
}

TEST_CASE("R-STAGE-5: without a quarantine table a rejection fails the batch and its positions do not advance") {
  fl::MemorySource<Line> raw{"raw"};
  fl::MemoryCheckpoint ckpt;
  collected<Order> out;
  bool fixed = false;
  fl::Pipeline p{"shop", ckpt};
  p.flow("orders")
      .from(raw)
      .map([&](const Line& l) { return fixed && l.text == "bad" ? Order{9, 9, 9} : parse(l); })
      .max_rows_per_batch(2)
      .into(out.sink());
  raw.append(line(1, 1, 1));
  raw.append(line(2, 1, 1));
  raw.append(line(3, 1, 1));
  raw.append(Line{"bad"});
  CHECK_THROWS_AS(p.update(), fl::row_rejected);
  CHECK(out.batches.size() == 1);  // batch 0 delivered and committed; batch 1 failed
  raw.append(line(4, 1, 1));
  CHECK_THROWS_AS(p.update(), fl::row_rejected);  // the same batch again, not past it
  CHECK(out.batches.size() == 1);
  fixed = true;
  p.update();
  REQUIRE(out.batches.size() == 3);
  CHECK(out.batches[1] == std::vector<Order>{{3, 1, 1}, {9, 9, 9}});  // batch 1: the same positions
  CHECK(out.batches[2] == std::vector<Order>{{4, 1, 1}});
}

TEST_CASE("R-STAGE-5: another exception type always fails the batch, even with a quarantine table") {
  fl::MemorySource<Line> raw{"raw"};
  fl::StreamingTable<Order> orders{"orders"};
  fl::StreamingTable<fl::Quarantined<Line>> bad{"bad"};
  fl::MemoryCheckpoint ckpt;
  bool broken = true;
  fl::Pipeline p{"shop", ckpt};
  p.flow("orders")
      .from(raw)
      .map(
          [&](const Line& l) {
            Order o = parse(l);
            if (broken && o.id == 2) throw std::logic_error("bug");
            return o;
          },
          bad)
      .into(orders, fl::Append{"orders"});
  raw.append(Line{"junk"});  // rejected into `bad`, but its batch fails
  raw.append(line(1, 1, 1));
  raw.append(line(2, 1, 1));
  CHECK_THROWS_AS(p.update(), std::logic_error);
  CHECK(orders.size() == 0);
  CHECK(bad.size() == 0);  // the quarantined row of the failed batch is not kept
  broken = false;
  p.update();
  CHECK(orders.sorted_rows() == std::vector<Order>{{1, 1, 1}, {2, 1, 1}});
  REQUIRE(bad.size() == 1);  // once
  CHECK(bad.sorted_rows()[0].row.text == "junk");
}

// --- lookup ---------------------------------------------------------------------------

TEST_CASE("R-STAGE-6: an inner lookup enriches matched rows and removes and counts unmatched ones (join_on with member pointers)") {
  fl::MemorySource<Order> feed{"feed"};
  fl::StreamingTable<Customer> customers{"customers"};
  fl::StreamingTable<Enriched> out{"out"};
  fill(customers, {{1, "ana", 1}, {2, "raul", 1}});
  fl::MemoryCheckpoint ckpt;
  fl::Pipeline p{"shop", ckpt};
  enrich(p, feed, customers).into(out, fl::Append{"enrich"});
  feed.append(Order{10, 1, 5});
  feed.append(Order{11, 3, 6});  // no customer 3
  feed.append(Order{12, 2, 7});
  feed.append(Order{13, 4, 8});  // no customer 4
  const auto s = p.update();
  CHECK(out.sorted_rows() == std::vector<Enriched>{{10, 5, "ana"}, {12, 7, "raul"}});
  CHECK(s.flow("enrich")->unmatched_rows == 2);
  CHECK(s.flow("enrich")->filtered_rows == 0);
  CHECK(s.flow("enrich")->input_rows == 4);
  CHECK(s.flow("enrich")->output_rows == 2);
}

TEST_CASE("R-STAGE-6: a left lookup passes every row on: combine(row, const Dim*) and combine(row, std::optional<Dim>); a generic-lambda key") {
  fl::MemorySource<Order> feed{"feed"};
  fl::StreamingTable<Customer> customers{"customers"};
  fill(customers, {{1, "ana", 1}, {2, "raul", 1}});
  fl::MemoryCheckpoint ckpt;
  collected<Enriched> by_ptr, by_opt, inner;
  fl::Pipeline p{"shop", ckpt};
  // The dimension's key is id and the order's is customer: a key function
  // taking both rows.
  struct key_of {
    std::int64_t operator()(const Order& o) const { return o.customer; }
    std::int64_t operator()(const Customer& c) const { return c.id; }
  };
  p.flow("ptr")
      .from(feed)
      .lookup(
          customers, key_of{},
          [](Order o, const Customer* c) { return Enriched{o.id, o.amount, c != nullptr ? c->name : "?"}; },
          fl::left_join)
      .into(by_ptr.sink());
  p.flow("opt")
      .from(feed)
      .lookup(
          customers, key_of{},
          [](Order&& o, std::optional<Customer> c) { return Enriched{o.id, o.amount, c ? c->name : "?"}; },
          fl::left_join)
      .into(by_opt.sink());
  // A generic lambda on rows that name the key alike.
  p.flow("generic")
      .from(feed)
      .map([](const Order& o) { return Customer{o.customer, "order " + std::to_string(o.id), o.amount}; })
      .lookup(
          customers, [](const auto& r) { return r.id; },
          [](Customer o, const Customer& c) { return Enriched{o.version, 0, o.name + " of " + c.name}; },
          fl::inner_join)
      .into(inner.sink());
  feed.append(Order{10, 1, 5});
  feed.append(Order{11, 3, 6});
  feed.append(Order{12, 2, 7});
  const auto s = p.update();
  const std::vector<Enriched> want{{10, 5, "ana"}, {11, 6, "?"}, {12, 7, "raul"}};
  CHECK(by_ptr.all() == want);
  CHECK(by_opt.all() == want);
  CHECK(s.flow("ptr")->unmatched_rows == 0);  // a left lookup removes nothing
  CHECK(s.flow("opt")->unmatched_rows == 0);
  CHECK(inner.all() == std::vector<Enriched>{{5, 0, "order 10 of ana"}, {7, 0, "order 12 of raul"}});
  CHECK(s.flow("generic")->unmatched_rows == 1);
}

TEST_CASE("R-STAGE-6: a dimension holding two rows of one key fails the batch with INVALID_ARGUMENT naming the key; nothing is committed") {
  fl::MemorySource<Order> feed{"feed"};
  fl::StreamingTable<Customer> customers{"customers"};
  fl::StreamingTable<Enriched> out{"out"};
  fill(customers, {{1, "ana", 1}, {7, "raul", 1}, {7, "maria", 2}});
  fl::MemoryCheckpoint ckpt;
  fl::Pipeline p{"shop", ckpt};
  enrich(p, feed, customers).into(out, fl::Append{"enrich"});
  feed.append(Order{10, 1, 5});
  feed.append(Order{11, 7, 6});
  const fl::error e = flowtest::error_of([&] { p.update(); });
  CHECK(e.code() == fl::errc::invalid_argument);
  CHECK(e.flow() == "enrich");
  CHECK(e.key() == "7");
  CHECK(flowtest::contains(e.what(), "INVALID_ARGUMENT"));
  CHECK(flowtest::contains(e.what(), "customers"));
  CHECK(flowtest::contains(e.what(), "7"));
  CHECK(out.size() == 0);
  fill(customers, {{1, "ana", 1}, {7, "maria", 2}});
  const auto s = p.update();
  CHECK(s.flow("enrich")->input_rows == 2);
  CHECK(out.sorted_rows() == std::vector<Enriched>{{10, 5, "ana"}, {11, 6, "maria"}});
}

TEST_CASE("R-STAGE-6: a lookup of a table another flow writes runs after that flow, even when declared before it") {
  fl::MemorySource<Order> orders{"orders"};
  fl::MemorySource<Customer> changes{"customer_changes"};
  fl::StreamingTable<Customer> customers{"customers"};
  fl::StreamingTable<Enriched> out{"out"};
  fl::MemoryCheckpoint ckpt;
  fl::Pipeline p{"shop", ckpt};
  enrich(p, orders, customers).into(out, fl::Append{"enrich"});  // the reader first
  p.flow("customers").from(changes).into(customers, Customers{"customers"});
  changes.append(Customer{1, "ana", 1});
  changes.append(Customer{2, "raul", 1});
  orders.append(Order{10, 1, 5});
  orders.append(Order{11, 2, 6});
  const auto s = p.update();
  REQUIRE(s.flows.size() == 2);
  CHECK(s.flows[0].flow == "customers");
  CHECK(s.flows[1].flow == "enrich");
  CHECK(out.sorted_rows() == std::vector<Enriched>{{10, 5, "ana"}, {11, 6, "raul"}});
  CHECK(s.flow("enrich")->unmatched_rows == 0);
  // The next update: the writer's new rows are there for the reader's batch.
  changes.append(Customer{1, "ana maria", 2});
  changes.append(Customer{3, "lupe", 1});
  orders.append(Order{12, 1, 7});
  orders.append(Order{13, 3, 8});
  p.update();
  CHECK(out.sorted_rows() ==
        std::vector<Enriched>{{10, 5, "ana"}, {11, 6, "raul"}, {12, 7, "ana maria"}, {13, 8, "lupe"}});
}

TEST_CASE("R-STAGE-6: each batch reads the dimension as it is when it runs: between updates, and between a failed attempt and its retry") {
  fl::MemorySource<Order> feed{"feed"};
  fl::StreamingTable<Customer> customers{"customers"};
  fl::StreamingTable<Enriched> out{"out"};
  fl::MemoryCheckpoint ckpt;
  int fail_next = 0;
  fl::PipelineOptions po;
  po.fault_hook = [&](fl::fault_point at, std::string_view, std::uint64_t) {
    if (at == fl::fault_point::after_table_write && fail_next > 0) {
      --fail_next;
      throw injected{};
    }
  };
  const auto declare = [&](fl::Pipeline& p) {
    enrich(p, feed, customers).max_rows_per_batch(2).into(out, fl::Append{"enrich"});
  };
  auto p = std::make_unique<fl::Pipeline>("shop", ckpt, po);
  declare(*p);
  // Between updates.
  fill(customers, {{1, "v1", 1}});
  feed.append(Order{10, 1, 0});
  feed.append(Order{11, 1, 0});
  p->update();
  fill(customers, {{5, "other", 2}, {1, "v2", 2}});
  feed.append(Order{12, 1, 0});
  p->update();
  CHECK(out.sorted_rows() == std::vector<Enriched>{{10, 0, "v1"}, {11, 0, "v1"}, {12, 0, "v2"}});

  // Between a failed attempt and its retry, by the same pipeline.
  feed.append(Order{13, 1, 0});
  feed.append(Order{14, 1, 0});
  fail_next = 1;
  CHECK_THROWS_AS(p->update(), injected);
  CHECK(out.size() == 3);
  fill(customers, {{5, "other", 3}, {6, "other", 3}, {1, "v3", 3}});
  p->update();
  CHECK(out.sorted_rows() ==
        std::vector<Enriched>{{10, 0, "v1"}, {11, 0, "v1"}, {12, 0, "v2"}, {13, 0, "v3"}, {14, 0, "v3"}});

  // And by a new pipeline over the same checkpoint; a second batch of the
  // update failed, after the first committed.
  for (std::int64_t i = 15; i <= 18; ++i) feed.append(Order{i, 1, 0});
  fill(customers, {{1, "v4", 4}, {5, "other", 4}});
  fail_next = 0;
  int seen = 0;
  po.fault_hook = [&](fl::fault_point at, std::string_view, std::uint64_t) {
    if (at == fl::fault_point::before_commit && ++seen == 2) throw injected{};
  };
  p = std::make_unique<fl::Pipeline>("shop", ckpt, po);
  declare(*p);
  CHECK_THROWS_AS(p->update(), injected);
  CHECK(out.size() == 7);  // 15, 16 committed
  fill(customers, {{7, "other", 5}, {1, "v5", 5}});
  p = std::make_unique<fl::Pipeline>("shop", ckpt);
  declare(*p);
  p->update();
  CHECK(out.sorted_rows() == std::vector<Enriched>{{10, 0, "v1"},
                                                   {11, 0, "v1"},
                                                   {12, 0, "v2"},
                                                   {13, 0, "v3"},
                                                   {14, 0, "v3"},
                                                   {15, 0, "v4"},
                                                   {16, 0, "v4"},
                                                   {17, 0, "v5"},
                                                   {18, 0, "v5"}});
  // Enrichment already committed is not revisited.
  fill(customers, {{1, "v6", 6}});
  CHECK(p->update().batches() == 0);
  CHECK(out.size() == 9);
}

// --- Stages in declared order, with operators, quarantine stages, expectations -----------

TEST_CASE("R-STAGE-7: stages run in declared order with operators and quarantine stages, before the expectations") {
  fl::MemorySource<Reading> feed{"feed"};
  fl::StreamingTable<Reading> out{"out"};
  fl::StreamingTable<fl::Quarantined<Reading>> rejected{"rejected"};
  fl::MemoryCheckpoint ckpt;
  flowtest::json_events events{"flow_progress"};
  fl::Pipeline p{"r", ckpt};
  p.event_log(events.log);
  p.flow("readings")
      .from(feed)
      // 1. The map makes seq 11 and 12 one sequence (1): duplicates for the dedup.
      .map([](Reading r) {
        r.seq /= 10;
        return r;
      })
      .through(Dedup{std::chrono::minutes(10), "dedup"})
      // 3. The filter sees the deduplicated rows; removes multiples of 7
      // (-7 among them: filtered, never quarantined).
      .filter([](const Reading& r) { return r.value % 7 != 0; })
      .quarantine(rejected, fl::expectations(fl::expect_or_quarantine(
                                "non_negative", [](const Reading& r) { return r.value >= 0; })))
      // 5. A map after the quarantine stage: negative values never reach it.
      .map([](Reading r) {
        REQUIRE(r.value >= 0);
        r.value += 1000;
        return r;
      })
      // The expectations run on the last stage's rows.
      .expect(fl::expectations(fl::expect_or_drop("small", [](const Reading& r) { return r.value < 1050; })))
      .into(out, fl::Append{"readings"});
  const auto at = [](int s) { return t0 + std::chrono::seconds(s); };
  feed.append(Reading{1, 11, at(1), 10});
  feed.append(Reading{1, 12, at(2), 20});   // id 1 seq 1 again: deduplicated
  feed.append(Reading{2, 20, at(3), -7});   // filtered
  feed.append(Reading{3, 30, at(4), -5});   // quarantined
  feed.append(Reading{4, 40, at(5), 60});   // 1060: dropped by "small"
  feed.append(Reading{5, 50, at(6), 14});   // filtered
  feed.append(Reading{6, 60, at(7), 3});
  const auto s = p.update();
  CHECK(out.sorted_rows() == std::vector<Reading>{{1, 1, at(1), 1010}, {6, 6, at(7), 1003}});
  const auto q = rejected.sorted_rows();
  REQUIRE(q.size() == 1);
  CHECK(q[0].row == Reading{3, 3, at(4), -5});  // the map's output, before the last map
  CHECK(q[0].expectation == "non_negative");
  const auto* f = s.flow("readings");
  REQUIRE(f != nullptr);
  CHECK(f->input_rows == 7);
  CHECK(f->deduplicated_rows == 1);
  CHECK(f->filtered_rows == 2);
  CHECK(f->quarantined_rows == 1);
  CHECK(f->dropped_rows == 1);
  CHECK(f->output_rows == 2);
  REQUIRE(events.events.size() == 1);
  const json& st = events.events[0]["stages"];
  REQUIRE(st.size() == 5);
  const std::vector<std::string> kinds{"MAP", "DEDUP", "FILTER", "QUARANTINE", "MAP"};
  const std::vector<std::pair<int, int>> counts{{7, 7}, {7, 6}, {6, 4}, {4, 3}, {3, 3}};
  for (std::size_t i = 0; i < kinds.size(); ++i) {
    CAPTURE(i);
    CHECK(st[i]["stage"] == kinds[i]);
    CHECK(st[i]["num_input_rows"] == counts[i].first);
    CHECK(st[i]["num_output_rows"] == counts[i].second);
  }
}

TEST_CASE("R-STAGE-7: a changed stage list over an existing checkpoint is refused with CHECKPOINT_MISMATCH; a changed function is not") {
  fl::MemorySource<Order> feed{"feed"};
  fl::StreamingTable<Order> out{"out"};
  fl::StreamingTable<Customer> customers{"customers"};
  fl::StreamingTable<Customer> regions{"regions"};
  fl::StreamingTable<fl::Quarantined<Order>> bad{"bad"};
  fl::MemoryCheckpoint ckpt;
  const auto plus = [](std::int64_t n) {
    return [n](Order o) {
      o.amount += n;
      return o;
    };
  };
  const auto positive = [](const Order& o) { return o.amount > 0; };
  const auto same = [](Order o, const Customer&) { return o; };
  const auto keep = [](Order o, const Customer*) { return o; };
  const auto key = fl::join_on(&Order::customer, &Customer::id);
  fill(customers, {{1, "ana", 1}});
  fill(regions, {{1, "north", 1}});
  {
    fl::Pipeline p{"shop", ckpt};
    p.flow("f").from(feed).map(plus(1)).filter(positive).lookup(customers, key, same).into(out, fl::Append{"f"});
    feed.append(Order{1, 1, 1});
    p.update();
    CHECK(out.sorted_rows() == std::vector<Order>{{1, 1, 2}});
  }
  const auto records = ckpt.record_count();
  const auto refused = [&](auto&& declare) {
    fl::Pipeline p{"shop", ckpt};
    declare(p);
    try {
      p.update();
    } catch (const fl::error& e) {
      CHECK(e.code() == fl::errc::checkpoint_mismatch);
      CHECK(e.flow() == "f");
      CHECK(ckpt.record_count() == records);
      return true;
    }
    return false;
  };
  feed.append(Order{2, 1, 1});
  CHECK(refused([&](fl::Pipeline& p) {  // a stage removed
    p.flow("f").from(feed).map(plus(1)).lookup(customers, key, same).into(out, fl::Append{"f"});
  }));
  CHECK(refused([&](fl::Pipeline& p) {  // a stage added
    p.flow("f").from(feed).map(plus(1)).filter(positive).filter(positive).lookup(customers, key, same).into(out, fl::Append{"f"});
  }));
  CHECK(refused([&](fl::Pipeline& p) {  // two stages swapped
    p.flow("f").from(feed).filter(positive).map(plus(1)).lookup(customers, key, same).into(out, fl::Append{"f"});
  }));
  CHECK(refused([&](fl::Pipeline& p) {  // a map given a quarantine table
    p.flow("f").from(feed).map(plus(1), bad).filter(positive).lookup(customers, key, same).into(out, fl::Append{"f"});
  }));
  CHECK(refused([&](fl::Pipeline& p) {  // another dimension
    p.flow("f").from(feed).map(plus(1)).filter(positive).lookup(regions, key, same).into(out, fl::Append{"f"});
  }));
  CHECK(refused([&](fl::Pipeline& p) {  // a left lookup instead of an inner one
    p.flow("f").from(feed).map(plus(1)).filter(positive).lookup(customers, key, keep, fl::left_join).into(out, fl::Append{"f"});
  }));
  CHECK(refused([&](fl::Pipeline& p) {  // view instead of filter
    p.flow("f").from(feed).map(plus(1)).view(std::views::filter(positive)).lookup(customers, key, same).into(out, fl::Append{"f"});
  }));
  CHECK(out.size() == 1);
  // The same stages with other functions: accepted (functions are not compared).
  fl::Pipeline p{"shop", ckpt};
  p.flow("f").from(feed).map(plus(100)).filter(positive).lookup(customers, key, same).into(out, fl::Append{"f"});
  CHECK(p.update().batches() == 1);
  CHECK(out.sorted_rows() == std::vector<Order>{{1, 1, 2}, {2, 1, 101}});
}

// --- The event log ----------------------------------------------------------------------

TEST_CASE("R-STAGE-8: each flow_progress event counts the rows into and out of every stage, consistent with the metrics and the tables") {
  fl::MemorySource<Line> raw{"raw"};
  fl::StreamingTable<Customer> customers{"customers"};
  fill(customers, {{1, "ana", 1}, {2, "raul", 1}});
  fl::StreamingTable<Enriched> out{"out"};
  fl::StreamingTable<fl::Quarantined<Line>> bad{"bad"};
  fl::MemoryCheckpoint ckpt;
  flowtest::json_events events{"flow_progress"};
  fl::Pipeline p{"shop", ckpt};
  p.event_log(events.log);
  p.flow("orders")
      .from(raw)
      .map(parse, bad)
      .filter([](const Order& o) { return o.amount > 0; })
      .flat_map([](const Order& o) { return std::vector<Order>(static_cast<std::size_t>(o.amount % 3), o); })
      .lookup(customers, fl::join_on(&Order::customer, &Customer::id),
              [](Order o, const Customer& c) { return Enriched{o.id, o.amount, c.name}; })
      .expect(fl::expectations(fl::expect_or_drop("not_huge", [](const Enriched& e) { return e.amount < 40; })))
      .max_rows_per_batch(4)
      .into(out, fl::Append{"orders"});
  // Independent expectations over the input.
  std::uint64_t want_q = 0, want_filtered = 0, want_unmatched = 0, want_dropped = 0, want_out = 0;
  std::uint64_t input = 0;
  for (std::int64_t i = 0; i < 23; ++i) {
    ++input;
    if (i % 6 == 5) {
      raw.append(Line{"bad " + std::to_string(i)});
      ++want_q;
      continue;
    }
    const std::int64_t amount = (i * 7) % 60 - 5;  // some <= 0, some >= 50
    const std::int64_t customer = i % 4 + 1;       // customers 3 and 4 unknown
    raw.append(line(i, customer, amount));
    if (amount <= 0) {
      ++want_filtered;
      continue;
    }
    const std::uint64_t copies = static_cast<std::uint64_t>(amount % 3);
    if (customer >= 3) {
      want_unmatched += copies;
      continue;
    }
    (amount >= 40 ? want_dropped : want_out) += copies;
  }
  REQUIRE(want_q > 0);
  REQUIRE(want_filtered > 0);
  REQUIRE(want_unmatched > 0);
  REQUIRE(want_dropped > 0);
  const auto s = p.update();
  REQUIRE(events.events.size() == 6);  // 23 rows, 4 a batch
  std::uint64_t sum_in = 0, sum_out = 0, sum_q = 0, sum_filtered = 0, sum_unmatched = 0, sum_dropped = 0;
  for (const json& e : events.events) {
    CAPTURE(e.dump());
    CHECK(e["status"] == "COMPLETED");
    const json& m = e["metrics"];
    const json& st = e["stages"];
    REQUIRE(st.size() == 4);
    CHECK(st[0]["stage"] == "MAP");
    CHECK(st[1]["stage"] == "FILTER");
    CHECK(st[2]["stage"] == "FLAT_MAP");
    CHECK(st[3]["stage"] == "LOOKUP");
    CHECK(st[0]["num_input_rows"] == m["num_input_rows"]);
    for (std::size_t i = 0; i + 1 < st.size(); ++i) CHECK(st[i]["num_output_rows"] == st[i + 1]["num_input_rows"]);
    const auto n = [](const json& j) { return j.get<std::uint64_t>(); };
    CHECK(n(st[0]["num_input_rows"]) - n(st[0]["num_output_rows"]) == n(m["num_quarantined_rows"]));
    CHECK(n(st[1]["num_input_rows"]) - n(st[1]["num_output_rows"]) == n(m["num_filtered_rows"]));
    CHECK(n(st[3]["num_input_rows"]) - n(st[3]["num_output_rows"]) == n(m["num_unmatched_rows"]));
    CHECK(n(st[3]["num_output_rows"]) - n(m["num_dropped_rows"]) == n(m["num_output_rows"]));
    // The batch's quarantined rows are in the table under its id.
    std::uint64_t in_table = 0;
    for (const auto& r : bad.rows()) in_table += r.batch_id == n(e["batch_id"]) ? 1 : 0;
    CHECK(in_table == n(m["num_quarantined_rows"]));
    sum_in += n(m["num_input_rows"]);
    sum_out += n(m["num_output_rows"]);
    sum_q += n(m["num_quarantined_rows"]);
    sum_filtered += n(m["num_filtered_rows"]);
    sum_unmatched += n(m["num_unmatched_rows"]);
    sum_dropped += n(m["num_dropped_rows"]);
  }
  CHECK(sum_in == input);
  CHECK(sum_q == want_q);
  CHECK(sum_q == bad.size());
  CHECK(sum_filtered == want_filtered);
  CHECK(sum_unmatched == want_unmatched);
  CHECK(sum_dropped == want_dropped);
  CHECK(sum_out == want_out);
  CHECK(sum_out == out.size());
  // The update's summary is the events summed.
  const auto* f = s.flow("orders");
  REQUIRE(f != nullptr);
  CHECK(f->input_rows == sum_in);
  CHECK(f->output_rows == sum_out);
  CHECK(f->quarantined_rows == sum_q);
  CHECK(f->filtered_rows == sum_filtered);
  CHECK(f->unmatched_rows == sum_unmatched);
  CHECK(f->dropped_rows == sum_dropped);
}

}  // namespace runtime_stages
