// The baseline of the compile-time table (scripts/compile_times): what a
// program would write by hand instead of a one-flow pipeline, using the
// standard library, Abseil and range-v3 as flowlib does. It keeps a table
// of prices current from partial snapshots (the highest version wins per
// key), and prints the table sorted by key.
#include <absl/container/flat_hash_map.h>
#include <range/v3/action/sort.hpp>
#include <range/v3/range/conversion.hpp>
#include <range/v3/view/filter.hpp>
#include <range/v3/view/map.hpp>
#include <range/v3/view/transform.hpp>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace {
struct Price {
  std::int64_t sku;
  std::string currency;
  std::int64_t cents;
  std::int64_t version;
};

class PriceTable {
 public:
  void apply(const std::vector<Price>& batch) {
    for (const Price& p : batch) {
      auto [it, inserted] = rows_.try_emplace(p.sku, p);
      if (!inserted && it->second.version < p.version) it->second = p;
    }
  }
  std::vector<Price> sorted() const {
    auto rows = rows_ | ranges::views::values | ranges::to<std::vector<Price>>();
    return std::move(rows) | ranges::actions::sort([](const Price& a, const Price& b) {
             return a.sku < b.sku;
           });
  }

 private:
  absl::flat_hash_map<std::int64_t, Price> rows_;
};
}  // namespace

int main() {
  PriceTable table;
  table.apply({{1, "EUR", 100, 1}, {2, "EUR", 250, 1}});
  table.apply({{1, "EUR", 120, 2}, {2, "EUR", 999, 0}});
  const auto rows = table.sorted();
  for (const Price& p : rows | ranges::views::filter([](const Price& p) { return p.cents > 0; }))
    std::printf("%lld %s %lld\n", static_cast<long long>(p.sku), p.currency.c_str(),
                static_cast<long long>(p.cents));
  return rows.size() == 2 && rows[0].cents == 120 && rows[1].cents == 250 ? 0 : 1;
}
