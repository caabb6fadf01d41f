// tests/support/batches.hpp
//
// What a foreach-batch sink received, by batch id. A batch delivered again
// (its commit did not happen) must carry the same rows (R-EXACT-4):
//
//   .into(fl::ForeachBatch<Row>{[&](std::uint64_t id, std::span<const Row> rows) {
//     if (flowtest::record_batch(received, id, rows)) ++redelivered;
//   }});
#pragma once

#include <doctest/doctest.h>

#include <cstdint>
#include <map>
#include <span>
#include <vector>

namespace flowtest {

/// Records batch `id`; true when it was delivered before, with the same rows.
template <class Row>
bool record_batch(std::map<std::uint64_t, std::vector<Row>>& batches, std::uint64_t id, std::span<const Row> rows) {
  std::vector<Row> v(rows.begin(), rows.end());
  auto [it, fresh] = batches.try_emplace(id, v);
  if (!fresh) REQUIRE(it->second == v);  // R-EXACT-4: the same id carries the same rows
  return !fresh;
}

}  // namespace flowtest
