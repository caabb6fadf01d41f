// A downstream program that links flowlib::sqlite: a durable table and its
// checkpoint in one SQLite database (here an in-memory one).
#include <flowlib/checkpoint/sqlite.hpp>
#include <flowlib/flowlib.hpp>
#include <flowlib/storage/sqlite.hpp>

#include <cstdint>
#include <cstdio>
#include <string>

namespace shop {
struct Price {
  std::int64_t sku = 0;
  std::string currency;
  std::int64_t cents = 0;
  std::int64_t version = 0;
};
FLOWLIB_SCHEMA(Price, sku, currency, cents, version);
}  // namespace shop

int main() {
  namespace fl = flowlib;
  using shop::Price;
  fl::MemorySource<Price> feed{"feed"};
  fl::SqliteCheckpoint checkpoint{":memory:"};
  fl::StreamingTable<Price, fl::SqliteStorage> prices{"prices"};
  fl::Pipeline pipeline{"shop", checkpoint};
  pipeline.flow("prices")
      .from(feed)
      .into(prices, fl::ReplaceUsing<fl::Key<&Price::sku>, fl::Seq<&Price::version>>{"prices"});
  feed.append(Price{1, "EUR", 100, 1});
  feed.append(Price{1, "EUR", 120, 2});
  pipeline.update();
  const auto rows = prices.sorted_rows();
  const bool ok = rows.size() == 1 && rows[0].cents == 120;
  std::puts(ok ? "sqlite consumer ok" : "sqlite consumer FAILED");
  return ok ? 0 : 1;
}
