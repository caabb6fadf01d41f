// flowlib/quarantine.hpp
//
// Quarantined<Row>: a row that a `quarantine` expectation moved out of a
// flow (flowlib::expect_or_quarantine), kept in a quarantine table of the
// pipeline with the flow's name, the expectation's name and the batch id,
// instead of failing the update or dropping the row silently.
//
//   flowlib::StreamingTable<flowlib::Quarantined<Booking>> rejected{"bookings_rejected"};
//   pipeline.flow("bookings")
//       .from(feed)
//       .quarantine(rejected, flowlib::expectations(flowlib::expect_or_quarantine(
//           "positive_amount", [](const Booking& b) { return b.amount > 0; })))
//       .into(current, Flow{"bookings"});
//
// The quarantined rows are written in the same micro-batch as the flow's
// target (all or nothing, R-EXACT-1). A row violating several quarantine
// expectations is kept once, under the first one it violates; every
// expectation's counts are complete (R-EXPECT-2).
#pragma once

#include <flowlib/table.hpp>

#include <compare>
#include <cstdint>
#include <string>
#include <tuple>

namespace flowlib {

/// @brief A quarantined row with where it came from. See the header.
template <class Row>
struct Quarantined {
  std::string flow;         ///< the flow whose expectation rejected the row
  std::string expectation;  ///< the first quarantine expectation it violated
  std::uint64_t batch_id = 0;
  Row row;

  friend bool operator==(const Quarantined& a, const Quarantined& b) {
    return std::tie(a.flow, a.expectation, a.batch_id) ==
               std::tie(b.flow, b.expectation, b.batch_id) &&
           !detail::canonical_less(a.row, b.row) && !detail::canonical_less(b.row, a.row);
  }
  /// Ordered by flow, batch, expectation, then the row's canonical order
  /// (so that sorted_rows() of a quarantine table is deterministic).
  friend std::weak_ordering operator<=>(const Quarantined& a, const Quarantined& b) {
    if (auto c = std::tie(a.flow, a.batch_id, a.expectation) <=>
                 std::tie(b.flow, b.batch_id, b.expectation);
        c != 0)
      return c;
    if (detail::canonical_less(a.row, b.row)) return std::weak_ordering::less;
    if (detail::canonical_less(b.row, a.row)) return std::weak_ordering::greater;
    return std::weak_ordering::equivalent;
  }
};

}  // namespace flowlib
