// TableSource (source/table.hpp) and UnionSource (source/union.hpp) under
// the source contract (support/source_contract.hpp): a table's append log
// read as a stream, and a union of a two-partition and a one-partition
// MemorySource (source i's partition p is the union's i * 2^24 + p).
#include <flowlib/source/memory.hpp>
#include <flowlib/source/table.hpp>
#include <flowlib/source/union.hpp>
#include <flowlib/table.hpp>

#include "support/rows.hpp"
#include "support/source_contract.hpp"

#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace source_table_union {

namespace fl = flowlib;
using flowtest::Item;

namespace {

Item item(std::uint64_t n) { return {static_cast<std::int64_t>(n), "v" + std::to_string(n)}; }

struct table_harness {
  fl::StreamingTable<Item> bronze{"bronze"};
  fl::TableSource<fl::StreamingTable<Item>> s{bronze};

  const auto& source() const { return s; }
  std::vector<std::uint32_t> partitions() const { return {0}; }
  Item row(std::uint64_t n) const { return item(n); }
  void append(std::uint32_t, const std::vector<Item>& rows) {
    for (const auto& r : rows) bronze.append_log().append(r);
  }
};

struct union_harness {
  static constexpr std::uint32_t second = std::uint32_t{1} << 24;  // source 1's partition 0
  fl::MemorySource<Item> a{"a", {.partitions = 2}};
  fl::MemorySource<Item> b{"b"};
  fl::UnionSource<fl::MemorySource<Item>, fl::MemorySource<Item>> s{a, b};

  const auto& source() const { return s; }
  std::vector<std::uint32_t> partitions() const { return {0, 1, second}; }
  Item row(std::uint64_t n) const { return item(n); }
  void append(std::uint32_t p, const std::vector<Item>& rows) {
    for (const auto& r : rows) {
      if (p == second) {
        b.append(r);
      } else {
        a.append_to(p, r);
      }
    }
  }
};

}  // namespace

TEST_CASE("R-SOURCE-1: TableSource: the source contract over a table's append log") {
  for (std::uint64_t seed : {1u, 2u, 3u}) {
    CAPTURE(seed);
    table_harness h;
    flowtest::check_source_contract(h, seed);
  }
}

TEST_CASE("R-SOURCE-1, R-STAGE-4: UnionSource: the source contract over two memory sources") {
  for (std::uint64_t seed : {1u, 2u, 3u}) {
    CAPTURE(seed);
    union_harness h;
    flowtest::check_source_contract(h, seed);
  }
}

}  // namespace source_table_union
