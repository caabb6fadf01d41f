// tests/support/storage_policies.hpp
//
// The storage policies every semantics suite runs against. Write semantic
// test cases as
//
//   TEST_CASE_TEMPLATE("R-USING-2: ...", Storage, FLOWTEST_STORAGE_POLICIES) {
//     flowlib::StreamingTable<Row, Storage> t{"t"};
//     ...
//   }
//
// Besides flowlib::MemoryStorage (slots in a vector, freed ids reused) the
// list holds flowtest::DequeStorage, a test-only policy that is deliberately
// different in every way the row_store contract leaves open:
//   - rows live in a std::deque, never in a contiguous array;
//   - ids start at a non-zero base and are never reused: erase() only sets a
//     tombstone flag (the row's value stays in its slot), and clear() moves
//     the base past every id handed out so far;
//   - rows() yields the live rows in reverse id order;
//   - reserve(n) appends n empty slots up front, so the noexcept insert()
//     only fills a slot that is already there (the reserve()-then-noexcept
//     contract of flowlib::row_store);
//   - it has none of the memory store's optional hooks (no prefetch()).
// A suite that passes on both proves the flows rely on the row_store
// contract only, not on the memory store's internals.
//
// The durable policies (flowlib::SqliteStorage, flowlib::FileStorage) are
// not in the list: a flow sees only the row_store contract, and
// tests/storage/row_store_contract.cpp checks that every policy, both of
// them unattached included, meets it (unattached, each is the memory store:
// the same ids on every sequence). tests/storage/durable/ runs every flow
// type on them attached, reopened between batches.
#pragma once

#include <flowlib/error.hpp>
#include <flowlib/storage/memory.hpp>

#include <doctest/doctest.h>

#include <cstddef>
#include <deque>
#include <limits>
#include <optional>
#include <ranges>
#include <tuple>
#include <type_traits>
#include <utility>

namespace flowtest {

template <class Row>
class deque_row_store {
 public:
  using row_type = Row;
  static constexpr bool durable = false;
  /// The first id this store hands out: ids are not dense from zero.
  static constexpr flowlib::row_id first_id = 3;

  /// Appends empty slots so that the next `extra` inserts fill existing
  /// slots: insert(), assign() and erase() never allocate afterwards.
  void reserve(std::size_t extra) {
    if (end_ + extra > std::numeric_limits<flowlib::row_id>::max()) {
      throw flowlib::error(flowlib::errc::invalid_argument, "deque storage", "", "",
                           "out of row ids");
    }
    const std::size_t need = end_ - base_ + extra;
    while (slots_.size() < need) slots_.emplace_back();
  }

  flowlib::row_id insert(Row&& r) noexcept {
    static_assert(std::is_nothrow_move_constructible_v<Row>);
    slot& s = slots_[end_ - base_];  // a slot appended by reserve()
    s.value.emplace(std::move(r));
    s.tombstone = false;
    ++live_;
    return static_cast<flowlib::row_id>(end_++);
  }
  void assign(flowlib::row_id id, Row&& r) noexcept { *at(id).value = std::move(r); }
  /// Marks the row dead; its id is never handed out again.
  void erase(flowlib::row_id id) noexcept {
    at(id).tombstone = true;
    --live_;
  }
  /// Forgets every row; ids keep growing from where they were.
  void clear() noexcept {
    slots_.clear();
    base_ = end_;
    live_ = 0;
  }

  const Row& get(flowlib::row_id id) const noexcept { return *at(id).value; }
  Row& get(flowlib::row_id id) noexcept { return *at(id).value; }
  std::size_t size() const noexcept { return live_; }
  /// One past the largest id ever handed out.
  std::size_t id_bound() const noexcept { return end_; }

  /// Live rows, newest id first.
  auto rows() const {
    return slots_ | std::views::reverse |
           std::views::filter([](const slot& s) { return !s.tombstone; }) |
           std::views::transform([](const slot& s) -> const Row& { return *s.value; });
  }

  /// Test helpers: every slot ever appended, tombstones included.
  std::size_t slot_count() const noexcept { return slots_.size(); }
  std::size_t tombstones() const noexcept { return end_ - base_ - live_; }

 private:
  struct slot {
    std::optional<Row> value;
    bool tombstone = true;  // also true for reserved slots not filled yet
  };
  slot& at(flowlib::row_id id) noexcept { return slots_[id - base_]; }
  const slot& at(flowlib::row_id id) const noexcept { return slots_[id - base_]; }

  std::deque<slot> slots_;
  std::size_t base_ = first_id;  // id of slots_[0]
  std::size_t end_ = first_id;   // next id to hand out
  std::size_t live_ = 0;
};

/// @brief Test-only storage policy: see the header comment.
struct DequeStorage {
  template <class Row>
  using store = deque_row_store<Row>;
};

/// Every storage policy the semantics suites are instantiated for.
using storage_policies = std::tuple<flowlib::MemoryStorage, DequeStorage>;

}  // namespace flowtest

/// The type list for TEST_CASE_TEMPLATE (doctest takes the types inline).
/// FLOWTEST_MEMORY_STORAGE_ONLY (CMake: FLOWLIB_TEST_MEMORY_STORAGE_ONLY)
/// leaves flowlib::MemoryStorage alone in it: the sanitizer build of the
/// quick start uses it, since that DequeStorage gives the same results is a
/// semantic property, which the optimised build checks, and the memory
/// errors to find are those of the default policy.
#if defined(FLOWTEST_MEMORY_STORAGE_ONLY)
#define FLOWTEST_STORAGE_POLICIES flowlib::MemoryStorage
#else
#define FLOWTEST_STORAGE_POLICIES flowlib::MemoryStorage, flowtest::DequeStorage
#endif

TYPE_TO_STRING(flowlib::MemoryStorage);
TYPE_TO_STRING(flowtest::DequeStorage);
