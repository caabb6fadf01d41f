// Compile-time table (scripts/compile_times): a Pipeline with one REPLACE
// USING flow from a MemorySource into a StreamingTable in memory: the same
// work as plain.cpp, through flowlib.
#include <flowlib/checkpoint/memory.hpp>
#include <flowlib/flows/replace_using.hpp>
#include <flowlib/pipeline.hpp>
#include <flowlib/source/memory.hpp>
#include <flowlib/table.hpp>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace shop {
struct Price {
  std::int64_t sku;
  std::string currency;
  std::int64_t cents;
  std::int64_t version;
};
FLOWLIB_SCHEMA(Price, sku, currency, cents, version);
}  // namespace shop

int main() {
  namespace fl = flowlib;
  using shop::Price;
  fl::MemorySource<Price> feed{"prices_feed"};
  fl::StreamingTable<Price> prices{"prices"};
  fl::MemoryCheckpoint checkpoint;
  fl::Pipeline pipeline{"shop", checkpoint};
  pipeline.flow("prices").from(feed).into(
      prices, fl::ReplaceUsing<fl::Key<&Price::sku>, fl::Seq<&Price::version>>{"prices"});
  feed.append(std::vector<Price>{{1, "EUR", 100, 1}, {2, "EUR", 250, 1}});
  pipeline.update();
  feed.append(std::vector<Price>{{1, "EUR", 120, 2}, {2, "EUR", 999, 0}});
  pipeline.update();
  const auto rows = prices.sorted_rows();
  for (const Price& p : rows)
    std::printf("%lld %s %lld\n", static_cast<long long>(p.sku), p.currency.c_str(),
                static_cast<long long>(p.cents));
  return rows.size() == 2 && rows[0].cents == 120 && rows[1].cents == 250 ? 0 : 1;
}
