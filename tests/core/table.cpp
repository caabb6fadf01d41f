// Tables: streaming vs managed (R-TABLE-1), the catalog, table options
// (R-TABLE-3) and the seed's CREATE TABLE ... FLOW examples.
#include <flowlib/flowlib.hpp>

#include <support/errors.hpp>
#include <support/rows.hpp>
#include <support/storage_policies.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

namespace core_table {

namespace fl = flowlib;

using flowtest::Event;

// samples.tpch.orders, as a stream's rows.
struct TpchOrder {
  std::int64_t o_orderkey;
  std::int64_t o_custkey;
  std::string o_orderdate;
  std::int64_t o_totalprice;  // cents
};
FLOWLIB_SCHEMA(TpchOrder, o_orderkey, o_custkey, o_orderdate, o_totalprice);

// SELECT o_orderkey AS order_id, o_custkey AS customer_id, ... : the query's rows.
struct OrderProjection {
  std::int64_t order_id;
  std::int64_t customer_id;
  std::string order_date;
  std::int64_t total_price;
};
FLOWLIB_SCHEMA(OrderProjection, order_id, customer_id, order_date, total_price);

// The table's schema, inferred from the query: the same columns.
struct OrderClustered {
  std::int64_t order_id;
  std::int64_t customer_id;
  std::string order_date;
  std::int64_t total_price;
  friend auto operator<=>(const OrderClustered&, const OrderClustered&) = default;
};
FLOWLIB_SCHEMA(OrderClustered, order_id, customer_id, order_date, total_price);

struct KeyedRow {
  std::int64_t k;
  std::int64_t seq;
  friend auto operator<=>(const KeyedRow&, const KeyedRow&) = default;
};
FLOWLIB_SCHEMA(KeyedRow, k, seq);

// is_managed_table_v tells the table kinds apart: a compile-time property,
// checked where this file compiles (nothing is left to check at run time).
static_assert(fl::is_managed_table_v<fl::ManagedTable<Event>>);
static_assert(fl::is_managed_table_v<fl::ManagedTable<Event, flowtest::DequeStorage>>);
static_assert(!fl::is_managed_table_v<fl::StreamingTable<Event>>);
static_assert(!fl::is_managed_table_v<Event>);

TEST_CASE_TEMPLATE("R-TABLE-1: a managed table refuses every flow but append flows at run time",
                   Storage, FLOWTEST_STORAGE_POLICIES) {
  fl::ManagedTable<Event, Storage> t{"output"};
  int cdc_flow = 0;
  for (const char* kind : {"AUTO CDC", "AUTO CDC FROM SNAPSHOT", "REPLACE WHERE", "REPLACE USING"}) {
    CAPTURE(kind);
    const fl::error e = flowtest::error_of([&] { t.claim(&cdc_flow, kind, "changes", /*exclusive=*/true); });
    CHECK(e.code() == fl::errc::invalid_target);
    CHECK(e.flow() == "changes");
    CHECK(flowtest::contains(e.what(), "MANAGED_TABLE_DOES_NOT_SUPPORT_CDC"));
  }
  CHECK(t.writers().empty());
  int append_flow = 0;
  t.claim(&append_flow, fl::append_flow_kind, "append", false);
  CHECK(t.writers().size() == 1);
}

TEST_CASE("R-TABLE-1: a streaming table accepts any flow type, within each flow's limits") {
  int cdc = 0;
  fl::StreamingTable<KeyedRow> t{"t"};
  t.claim(&cdc, "AUTO CDC", "cdc", /*exclusive=*/false);  // a managed table would refuse this
  CHECK(t.writers().size() == 1);

  // REPLACE USING on a streaming table works, and then the table is its alone (R-USING-9).
  fl::StreamingTable<KeyedRow> u{"u"};
  fl::ReplaceUsing<fl::Key<&KeyedRow::k>, fl::Seq<&KeyedRow::seq>> flow{"ru"};
  flow.apply(u, std::vector<KeyedRow>{{1, 1}, {1, 2}});
  CHECK(u.sorted_rows() == std::vector<KeyedRow>{{1, 2}});
  CHECK_THROWS_AS(u.claim(&cdc, "AUTO CDC", "cdc", false), fl::error);
}

TEST_CASE("R-TABLE-1: a managed table cannot take the name of an existing streaming table") {
  fl::Catalog catalog;
  fl::StreamingTable<Event> streaming{"events"};
  catalog.add(streaming);
  CHECK(catalog.kind_of("events") == fl::table_kind::streaming);
  fl::ManagedTable<Event> managed{"events"};
  const fl::error e = flowtest::error_of([&] { catalog.add(managed); });
  CHECK(e.code() == fl::errc::invalid_target);
  CHECK(std::string(e.what()).find("CANNOT_SWITCH_STREAMING_TABLE_TO_MANAGED_TABLE") !=
        std::string::npos);
  CHECK(catalog.kind_of("events") == fl::table_kind::streaming);  // unchanged
  // Drop the streaming table first: then the name is free.
  CHECK(catalog.drop("events"));
  CHECK_FALSE(catalog.drop("events"));
  catalog.add(managed);
  CHECK(catalog.kind_of("events") == fl::table_kind::managed);
  // Other clashes are plain duplicates.
  CHECK_THROWS_WITH_AS(catalog.declare_table("events", fl::table_kind::managed),
                       doctest::Contains("TABLE_ALREADY_EXISTS"), fl::error);
  CHECK_THROWS_WITH_AS(catalog.declare_table("events", fl::table_kind::streaming),
                       doctest::Contains("TABLE_ALREADY_EXISTS"), fl::error);
  CHECK(catalog.size() == 1);
}

TEST_CASE("R-TABLE-1: the catalog refuses non-append flows on managed tables at declaration") {
  fl::Catalog catalog;
  catalog.declare_table("output", fl::table_kind::managed);
  catalog.declare_table("changes", fl::table_kind::streaming);
  catalog.declare_flow("output", "APPEND", "a1", /*exclusive=*/false);
  catalog.declare_flow("output", "APPEND", "a2", false);  // fan-in
  for (const char* kind : {"AUTO CDC", "AUTO CDC FROM SNAPSHOT", "REPLACE WHERE"}) {
    CAPTURE(kind);
    CHECK_THROWS_WITH_AS(catalog.declare_flow("output", kind, "cdc", /*exclusive=*/true),
                         doctest::Contains("MANAGED_TABLE_DOES_NOT_SUPPORT_CDC"), fl::error);
  }
  catalog.declare_flow("changes", "AUTO CDC", "cdc", true);
  CHECK(catalog.flows_of("output").size() == 2);
  CHECK(catalog.flows_of("changes").size() == 1);
  CHECK_THROWS_AS(catalog.declare_flow("output", "APPEND", "a1", false), fl::error);   // same name
  CHECK_THROWS_AS(catalog.declare_flow("missing", "APPEND", "a3", false), fl::error);  // no table
}

TEST_CASE_TEMPLATE("R-TABLE-3: comment, properties, reset_allowed, partitioning, clustering",
                   Storage, FLOWTEST_STORAGE_POLICIES) {
  fl::StreamingTable<Event, Storage> plain{"plain"};
  CHECK(plain.comment().empty());
  CHECK(plain.properties().empty());
  CHECK(plain.reset_allowed());
  CHECK(plain.partition_columns().empty());
  CHECK(plain.cluster_columns().empty());
  CHECK_FALSE(plain.has_row_filter());
  CHECK(plain.expectation_count() == 0);

  // CREATE TABLE events PARTITIONED BY (bucket) COMMENT ... TBLPROPERTIES (...)
  fl::ManagedTable<Event, Storage> events{
      "events", fl::table_options<Event>()
                    .partitioned_by<"bucket">()
                    .comment("raw events")
                    .property("owner", "ingest")
                    .property("owner", "platform")  // the later value wins
                    .reset_allowed(false)};
  CHECK(events.name() == "events");
  CHECK(events.comment() == "raw events");
  CHECK(events.property("owner") == std::optional<std::string>("platform"));
  CHECK(events.property("reset_allowed") == std::optional<std::string>("false"));
  CHECK_FALSE(events.property("missing").has_value());
  CHECK_FALSE(events.reset_allowed());
  CHECK(events.partition_columns() == std::vector<std::string_view>{"bucket"});
  CHECK(events.cluster_columns().empty());

  fl::StreamingTable<OrderClustered, Storage> orders{
      "orders_clustered",
      fl::table_options<OrderClustered>().cluster_by<"order_date", "customer_id">()};
  CHECK(orders.cluster_columns() == std::vector<std::string_view>{"order_date", "customer_id"});
  CHECK(orders.partition_columns().empty());
  CHECK(orders.reset_allowed());
}

TEST_CASE_TEMPLATE("R-TABLE-3: the row filter restricts readers, not flows", Storage,
                   FLOWTEST_STORAGE_POLICIES) {
  fl::ManagedTable<Event, Storage> t{
      "events", fl::table_options<Event>().row_filter(
                    [](const Event& e) { return e.bucket != "internal"; })};
  CHECK(t.has_row_filter());
  fl::Append<> flow{"f"};
  const auto s = flow.apply(t, std::vector<Event>{{1, "public"}, {2, "internal"}, {3, "public"}});
  CHECK(s.applied_rows == 3);  // the flow writes every row
  CHECK(t.size() == 3);        // stored rows
  CHECK(std::ranges::distance(t.rows()) == 2);
  CHECK(t.sorted_rows() == std::vector<Event>{{1, "public"}, {3, "public"}});
  CHECK(std::ranges::distance(t.all_rows()) == 3);
  CHECK(t.sorted_all_rows() ==
        std::vector<Event>{{1, "public"}, {2, "internal"}, {3, "public"}});
  for (const Event& e : t.rows()) CHECK(e.bucket == "public");
}

TEST_CASE("R-TABLE-3: a REPLACE USING flow sees rows a row filter hides") {
  fl::StreamingTable<KeyedRow> t{
      "t", fl::table_options<KeyedRow>().row_filter([](const KeyedRow& r) { return r.k != 2; })};
  fl::ReplaceUsing<fl::Key<&KeyedRow::k>, fl::Seq<&KeyedRow::seq>> flow{"ru"};
  flow.apply(t, std::vector<KeyedRow>{{1, 1}, {2, 1}});
  flow.apply(t, std::vector<KeyedRow>{{2, 5}});  // replaces the hidden row
  CHECK(t.sorted_rows() == std::vector<KeyedRow>{{1, 1}});
  CHECK(t.sorted_all_rows() == std::vector<KeyedRow>{{1, 1}, {2, 5}});
}

TEST_CASE_TEMPLATE("R-EXACT-5 R-WHERE-6: full refresh empties a table unless reset_allowed is false",
                   Storage, FLOWTEST_STORAGE_POLICIES) {
  fl::StreamingTable<Event, Storage> t{"t"};
  fl::Append<> f{"f"};
  f.apply(t, std::vector<Event>{{1, "a"}});
  t.full_refresh();
  CHECK(t.size() == 0);
  CHECK(std::ranges::distance(t.rows()) == 0);
  f.apply(t, std::vector<Event>{{2, "b"}});
  CHECK(t.sorted_rows() == std::vector<Event>{{2, "b"}});

  fl::StreamingTable<Event, Storage> kept{"kept", fl::table_options<Event>().reset_allowed(false)};
  fl::Append<> g{"g"};
  g.apply(kept, std::vector<Event>{{1, "a"}});
  CHECK_THROWS_WITH_AS(kept.full_refresh(), doctest::Contains("reset_allowed"), fl::error);
  CHECK(kept.sorted_rows() == std::vector<Event>{{1, "a"}});
}

TEST_CASE("R-TABLE-3: the declared schema is the table's row type; a query maps onto it") {
  // CREATE TABLE orders_clustered CLUSTER BY (order_date, customer_id)
  // FLOW INSERT BY NAME SELECT o_orderkey AS order_id, ... FROM STREAM(samples.tpch.orders);
  fl::ManagedTable<OrderClustered> orders{
      "orders_clustered",
      fl::table_options<OrderClustered>().cluster_by<"order_date", "customer_id">()};
  fl::Append<> flow{"orders_clustered"};
  const std::vector<TpchOrder> stream{{1, 10, "2024-01-02", 1500}, {2, 11, "2024-01-03", 250}};
  std::vector<OrderProjection> projected;
  std::ranges::transform(stream, std::back_inserter(projected), [](const TpchOrder& o) {
    return OrderProjection{o.o_orderkey, o.o_custkey, o.o_orderdate, o.o_totalprice};
  });
  flow.apply(orders, projected);
  CHECK(orders.sorted_rows() == std::vector<OrderClustered>{{1, 10, "2024-01-02", 1500},
                                                            {2, 11, "2024-01-03", 250}});
}

TEST_CASE("R-TABLE-3: the seed's partitioned managed table (PARTITIONED BY (bucket))") {
  // CREATE TABLE events PARTITIONED BY (bucket)
  // FLOW INSERT BY NAME SELECT id, bucket FROM STREAM read_files(...);
  fl::ManagedTable<Event> events{"events", fl::table_options<Event>().partitioned_by<"bucket">()};
  fl::Append<> flow{"events"};
  flow.apply(events, std::vector<Event>{{1, "a"}, {2, "b"}});
  CHECK(events.size() == 2);
  CHECK(events.partition_columns().front() == "bucket");
}

TEST_CASE("StreamingTable keeps its API: name, size, rows, sorted_rows, store, claim, writers") {
  fl::StreamingTable<Event> t;
  CHECK(t.name().empty());
  CHECK(t.empty());
  auto& store = t.store();
  store.reserve(1);
  store.insert(Event{1, "x"});
  CHECK(t.size() == 1);
  CHECK(std::ranges::distance(t.rows()) == 1);
  CHECK(t.sorted_rows() == std::vector<Event>{{1, "x"}});
  static_assert(std::is_same_v<fl::StreamingTable<Event>::row_type, Event>);
  static_assert(std::is_same_v<fl::StreamingTable<Event>::storage_policy, fl::MemoryStorage>);
  static_assert(std::is_same_v<fl::StreamingTable<Event>::store_type,
                               fl::MemoryStorage::store<Event>>);
  int a = 0;
  t.claim(&a, "REPLACE USING", "ru", true);
  t.claim(&a, "REPLACE USING", "ru", true);  // the same flow again: no-op
  CHECK(t.writers().size() == 1);
}

}  // namespace core_table
