// A downstream program: keeps a table current with REPLACE USING.
#include <flowlib/flowlib.hpp>

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
  fl::StreamingTable<Price> prices{"prices"};
  fl::ReplaceUsing<fl::Key<&Price::sku>, fl::Seq<&Price::version>> flow{"prices_flow"};
  flow.apply(prices, std::vector<Price>{{1, "EUR", 100, 1}, {2, "EUR", 250, 1}});
  flow.apply(prices, std::vector<Price>{{1, "EUR", 120, 2}, {2, "EUR", 999, 0}});
  const auto rows = prices.sorted_rows();
  const bool ok = rows.size() == 2 && rows[0].cents == 120 && rows[1].cents == 250;
  std::puts(ok ? "consumer ok" : "consumer FAILED");
  return ok ? 0 : 1;
}
