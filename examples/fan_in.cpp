// Fan-in: several append flows feed one managed table (CREATE TABLE ...
// FLOW INSERT BY NAME, plus CREATE FLOW ... AS INSERT INTO ... BY NAME).
//
//   - two live sources with different row types, mapped onto the table's
//     columns by name (one of them drops a debug column, the other lacks the
//     nullable `channel` column, which is written as null);
//   - a ONCE backfill that runs a single time, and again after a full refresh;
//   - a table expectation that drops rows with a non-positive id, and a row
//     filter that hides test orders from readers.
//
// The program checks its own results and exits non-zero when they are wrong.
#include <flowlib/flowlib.hpp>

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

namespace fl = flowlib;

// The table's declared schema.
struct Order {
  std::int64_t id = 0;
  std::string customer;
  std::int64_t total_cents = 0;
  std::optional<std::string> channel;  // added later: older sources leave it null
  friend auto operator<=>(const Order&, const Order&) = default;
};
FLOWLIB_SCHEMA(Order, id, customer, total_cents, channel);

// Rows of the web shop's stream: no channel column, columns in another order.
struct WebOrder {
  std::string customer;
  std::int64_t id = 0;
  std::int64_t total_cents = 0;
};
FLOWLIB_SCHEMA(WebOrder, customer, id, total_cents);

// Rows of the mobile app's stream: a channel, and a debug column the table
// does not keep.
struct AppOrder {
  std::int64_t id = 0;
  std::string customer;
  std::int64_t total_cents = 0;
  std::string channel;
  std::string debug;
};
FLOWLIB_SCHEMA(AppOrder, id, customer, total_cents, channel, debug);

namespace {

int failures = 0;

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "fan_in: check failed: %s\n", what);
    ++failures;
  }
}

void print(const fl::ManagedTable<Order>& orders) {
  for (const Order& o : orders.sorted_rows()) {
    std::printf("  %lld %-6s %6lld %s\n", static_cast<long long>(o.id), o.customer.c_str(),
                static_cast<long long>(o.total_cents), o.channel ? o.channel->c_str() : "null");
  }
}

}  // namespace

int main() {
  // CREATE TABLE orders
  //   (CONSTRAINT positive_id EXPECT (id > 0) ON VIOLATION DROP ROW)
  //   COMMENT 'all orders' WITH ROW FILTER (customer <> 'test')
  fl::ManagedTable<Order> orders{
      "orders",
      fl::table_options<Order>()
          .cluster_by<"customer">()
          .comment("all orders")
          .row_filter([](const Order& o) { return o.customer != "test"; })
          .expect(fl::expect_or_drop("positive_id", [](const Order& o) { return o.id > 0; }))};

  fl::Append<> web{"web_orders"};                            // INSERT INTO orders BY NAME
  fl::Append<fl::DropColumns<"debug">> app{"app_orders"};    // ... SELECT * EXCEPT (debug)
  fl::AppendOnce<> backfill{"orders_backfill"};              // INSERT ONCE BY NAME

  const std::vector<WebOrder> history{{"ada", 1, 1200}, {"bob", 2, 300}};
  backfill.apply(orders, history);

  // Micro-batch 1 of each live source.
  auto s1 = web.apply(orders, std::vector<WebOrder>{{"cy", 3, 999}, {"test", 4, 1}});
  auto s2 = app.apply(orders, std::vector<AppOrder>{{5, "dee", 4500, "ios", "trace-17"},
                                                    {-1, "eve", 10, "android", "bad id"}});
  check(s1.applied_rows == 2, "web: both rows appended");
  check(s2.applied_rows == 1 && s2.dropped_rows == 1, "app: the row with id -1 dropped");
  const auto* m = s2.expectation("positive_id");
  check(m != nullptr && m->passed == 1 && m->failed == 1, "app: positive_id metrics");

  // The backfill already ran: a second call is a no-op that says so.
  check(backfill.apply(orders, history).skipped, "backfill runs once");

  std::printf("orders (readers' view, %zu of %zu stored rows):\n",
              orders.sorted_rows().size(), orders.size());
  print(orders);
  check(orders.size() == 5, "five stored rows");
  check(orders.sorted_rows() == std::vector<Order>{{1, "ada", 1200, std::nullopt},
                                                   {2, "bob", 300, std::nullopt},
                                                   {3, "cy", 999, std::nullopt},
                                                   {5, "dee", 4500, std::string("ios")}},
        "readers see every order but the test order");
  check(orders.writers().size() == 3, "three flows write the table");

  // A full refresh empties the table; the ONCE backfill runs again.
  orders.full_refresh();
  backfill.reset();
  check(backfill.apply(orders, history).applied_rows == 2, "backfill runs after a full refresh");
  check(orders.size() == 2, "after the full refresh only the backfill's rows");

  if (failures != 0) return 1;
  std::printf("fan_in: ok\n");
  return 0;
}
