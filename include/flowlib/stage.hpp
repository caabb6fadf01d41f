// flowlib/stage.hpp
//
// What a program uses to write the transform stages of a pipeline flow
// (docs/stages.md): the exception a stage throws to reject one row, and the
// join kinds and key pair of lookup().
//
//   pipeline.flow("orders")
//       .from(raw_lines)                                    // std::string rows
//       .map(parse_order, rejected_lines)                   // row_rejected -> quarantine
//       .filter([](const Order& o) { return o.amount > 0; })
//       .lookup(customers, flowlib::join_on(&Order::customer_id, &Customer::id),
//               [](Order o, const Customer& c) { return Enriched{...}; })   // inner
//       .lookup(regions, [](const auto& r) { return r.region; },
//               [](Enriched e, const Region* r) { ...; return e; }, flowlib::left_join)
//       .into(silver, flowlib::Append{"orders"});
#pragma once

#include <functional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

namespace flowlib {

/// @brief Thrown by a map() or flat_map() function to reject one row as
/// invalid (R-STAGE-5). When the stage was given a quarantine table, the
/// input row goes there, with what() as its reason, and the batch goes on;
/// otherwise the batch fails as with any other exception.
class row_rejected : public std::runtime_error {
 public:
  explicit row_rejected(const std::string& reason) : std::runtime_error(reason) {}
  explicit row_rejected(const char* reason) : std::runtime_error(reason) {}
};

/// @brief How lookup() treats a row whose key the dimension does not hold
/// (R-STAGE-6).
enum class join {
  inner,  ///< the row is removed and counted (unmatched_rows)
  left,   ///< the row is passed on: combine(row, std::optional<Dim>{}) or combine(row, nullptr)
};
/// @brief lookup()'s last argument: `flowlib::inner_join` (the default) or
/// `flowlib::left_join`.
struct inner_join_t {
  static constexpr join kind = join::inner;
};
struct left_join_t {
  static constexpr join kind = join::left;
};
inline constexpr inner_join_t inner_join{};
inline constexpr left_join_t left_join{};

/// @brief The key of a lookup when the stream row and the dimension row
/// name it differently: `row_key(row)` is compared with `dim_key(dim_row)`.
/// Member pointers and callables are accepted.
template <class RowKey, class DimKey>
struct join_key {
  RowKey row_key;
  DimKey dim_key;
};

/// @brief join_on(&Order::customer_id, &Customer::id): see join_key.
template <class RowKey, class DimKey>
constexpr join_key<RowKey, DimKey> join_on(RowKey row_key, DimKey dim_key) {
  return {std::move(row_key), std::move(dim_key)};
}

}  // namespace flowlib
