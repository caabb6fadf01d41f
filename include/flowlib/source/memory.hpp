// flowlib/source/memory.hpp
//
// flowlib::MemorySource<Row>: an append-only log in memory that a program
// writes into while a pipeline reads it. It meets the `flowlib::source`
// concept (source/position.hpp), whose contract it follows:
//
//   fl::MemorySource<Order> orders("orders", {.partitions = 2});
//   orders.append(order);                 // to partition 0
//   orders.append_to(1, other);           // to partition 1
//   orders.append(std::vector<Order>{...});
//
// Partitions. A position holds one offset per partition; append() writes
// to partition 0 (a single-partition source needs nothing else), and
// append_to() names the partition. Within a partition rows are read in the
// order they were appended; there is no order across partitions.
//
// Batches. plan(from, limit) with limit 0 takes everything up to latest();
// otherwise at most `limit` rows in all, taken partition by partition in
// ascending partition order: partition 0's new rows first, then partition
// 1's, and so on until the limit is reached. This is deterministic (the
// exactly-once protocol replays a batch from its recorded positions,
// R-EXACT-1); it is not fair: while partition 0 keeps more than `limit`
// rows ahead, the later partitions wait. read(from, to) appends the rows of
// partition 0 between the two positions, then those of partition 1, ...,
// each in offset order.
//
// Retention. discard_before(p) drops the rows before `p`; start() moves
// forward. Reading or planning from a position before start() then throws
// flowlib::error (errc::invalid_argument) saying which rows are no longer
// held: a pipeline whose checkpoint is older than the retention fails
// clearly rather than skipping rows. A position beyond latest(), or naming a
// partition the source does not have, also throws. When read() throws,
// `out` is as it was.
//
// Delivery. `options.guarantee` is a declaration about what the program
// appends (R-EXACT-3): at_least_once says the log may hold the same record
// twice (a redelivery the program appended again); the source never adds
// duplicates itself, and reads each stored row once per batch.
//
// Threads. Every member may be called from any thread: appends from
// producer threads while the pipeline's thread plans and reads. A mutex
// guards the log; rows are stored in fixed-size chunks that are never
// reallocated (an append never copies earlier rows), and read() copies rows
// out one chunk at a time, taking the lock for each chunk, so a long read
// does not hold producers back for its whole length. The source is neither
// copyable nor movable (programs share it by reference).
#pragma once

#include <flowlib/error.hpp>
#include <flowlib/source/position.hpp>

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <iterator>
#include <mutex>
#include <ranges>
#include <string>
#include <utility>
#include <vector>

namespace flowlib {

/// @brief Options of a MemorySource.
struct MemorySourceOptions {
  std::uint32_t partitions = 1;                 ///< at least 1
  delivery guarantee = delivery::exactly_once;  ///< a declaration (R-EXACT-3)
};

/// @brief An append-only in-memory log of rows; see the header comment.
template <class Row>
class MemorySource {
  static_assert(std::copy_constructible<Row> && std::move_constructible<Row>,
                "MemorySource<Row>: Row must be copy-constructible: read() copies rows out "
                "and the log keeps them for replays");

 public:
  using row_type = Row;

  /// @brief An empty log called `name` (for messages and the event log).
  /// Throws flowlib::error (errc::invalid_argument) when options.partitions
  /// is 0.
  explicit MemorySource(std::string name = "memory_source", MemorySourceOptions options = {})
      : name_(std::move(name)), options_(options) {
    if (options_.partitions == 0)
      throw error(errc::invalid_argument, name_, "", "",
                  "a memory source needs at least one partition (options.partitions is 0)");
    parts_.resize(options_.partitions);
  }

  MemorySource(const MemorySource&) = delete;
  MemorySource& operator=(const MemorySource&) = delete;

  /// @brief Appends `row` to partition 0.
  void append(Row row) {
    std::lock_guard lock(mutex_);
    parts_[0].push(std::move(row));
  }

  /// @brief Appends every row of `rows` to partition 0, in order, under one
  /// lock (a reader sees all of them or none).
  template <std::ranges::input_range R>
    requires(!std::same_as<std::remove_cvref_t<R>, Row> &&
             std::constructible_from<Row, std::ranges::range_reference_t<R>>)
  void append(R&& rows) {
    std::lock_guard lock(mutex_);
    for (auto&& r : rows) parts_[0].push(Row(std::forward<decltype(r)>(r)));
  }

  /// @brief Appends `row` to `partition`. Throws flowlib::error
  /// (errc::invalid_argument) when the source has no such partition.
  void append_to(std::uint32_t partition, Row row) {
    check_partition(partition, "append_to");
    std::lock_guard lock(mutex_);
    parts_[partition].push(std::move(row));
  }

  /// @brief The position before the first row still held.
  source_position start() const {
    std::lock_guard lock(mutex_);
    source_position p;
    for (std::uint32_t i = 0; i < parts_.size(); ++i) p.set(i, parts_[i].start);
    return p;
  }

  /// @brief The position after the last row appended so far.
  source_position latest() const {
    std::lock_guard lock(mutex_);
    return latest_locked();
  }

  /// @brief The end of the next batch from `from`: everything up to
  /// latest() when `limit` is 0, else at most `limit` rows, partition by
  /// partition in ascending order. Throws as the header comment says.
  source_position plan(const source_position& from, std::size_t limit) const {
    std::lock_guard lock(mutex_);
    check_position(from, "plan");
    for (std::uint32_t i = 0; i < parts_.size(); ++i)
      if (from.offset(i) < parts_[i].start)
        not_held(i, from.offset(i), "the next batch from " + from.to_string());
    source_position to;
    std::uint64_t left = limit;
    for (std::uint32_t i = 0; i < parts_.size(); ++i) {
      const std::uint64_t f = from.offset(i);
      std::uint64_t n = parts_[i].end - f;
      if (limit != 0) {
        n = std::min(n, left);
        left -= n;
      }
      to.set(i, f + n);
    }
    return to;
  }

  /// @brief Appends to `out` the rows between `from` and `to`: partition 0's
  /// first, each partition's in offset order. Throws as the header comment
  /// says, leaving `out` as it was.
  void read(const source_position& from, const source_position& to, std::vector<Row>& out) const {
    const std::size_t before = out.size();
    try {
      {
        std::lock_guard lock(mutex_);
        check_position(from, "read");
        check_position(to, "read");
        for (std::uint32_t i = 0; i < parts_.size(); ++i) {
          if (to.offset(i) < from.offset(i))
            fail("read: the end position " + to.to_string() + " is before the start position " +
                 from.to_string() + " in partition " + std::to_string(i));
          if (to.offset(i) > from.offset(i) && from.offset(i) < parts_[i].start)
            not_held(i, from.offset(i), batch(from, to));
        }
      }
      out.reserve(before + to.rows_after(from));
      for (std::uint32_t i = 0; i < parts_.size(); ++i) {
        std::uint64_t at = from.offset(i);
        const std::uint64_t end = to.offset(i);
        while (at < end) {
          // One chunk's worth under the lock; retention may have moved on
          // between two chunks.
          std::lock_guard lock(mutex_);
          if (at < parts_[i].start) not_held(i, at, batch(from, to));
          at = parts_[i].copy(at, end, out);
        }
      }
    } catch (...) {
      out.erase(out.begin() + static_cast<std::ptrdiff_t>(before), out.end());
      throw;
    }
  }

  /// @brief The declared delivery guarantee (R-EXACT-3).
  flowlib::delivery delivery() const noexcept { return options_.guarantee; }
  /// @brief The source's name, for messages and the event log.
  const std::string& name() const noexcept { return name_; }
  /// @brief The number of partitions.
  std::uint32_t partitions() const noexcept { return options_.partitions; }

  /// @brief Retention: the rows before `p` are no longer held, and start()
  /// moves forward to `p` (never back: a partition already past `p` stays).
  /// Throws flowlib::error (errc::invalid_argument) when `p` is beyond
  /// latest() or names a partition the source does not have.
  void discard_before(const source_position& p) {
    std::lock_guard lock(mutex_);
    check_position(p, "discard_before");
    for (std::uint32_t i = 0; i < parts_.size(); ++i) parts_[i].discard_before(p.offset(i));
  }

  /// @brief The number of rows held (appended and not discarded).
  std::uint64_t size() const {
    std::lock_guard lock(mutex_);
    std::uint64_t n = 0;
    for (const auto& part : parts_) n += part.end - part.start;
    return n;
  }

 private:
  // Rows per chunk: about 64 KiB of rows, at least 16.
  static constexpr std::size_t chunk_rows = std::max<std::size_t>(16, (64 * 1024) / sizeof(Row));

  // One partition: rows [start, end) are held. chunks.front()[0] is the row
  // at offset `base` (base <= start); every chunk is reserved to chunk_rows
  // and never grows beyond it, so its rows never move.
  struct partition_log {
    std::uint64_t base = 0;
    std::uint64_t start = 0;
    std::uint64_t end = 0;
    std::deque<std::vector<Row>> chunks;

    void push(Row&& row) {
      if (chunks.empty() || chunks.back().size() == chunk_rows) {
        std::vector<Row> c;
        c.reserve(chunk_rows);
        chunks.push_back(std::move(c));
      }
      chunks.back().push_back(std::move(row));
      ++end;
    }

    // Copies rows from `at` up to `end_at` or the end of at's chunk,
    // whichever is first; returns the offset after the last row copied.
    std::uint64_t copy(std::uint64_t at, std::uint64_t end_at, std::vector<Row>& out) const {
      const std::uint64_t idx = at - base;
      const auto& c = chunks[static_cast<std::size_t>(idx / chunk_rows)];
      const std::size_t first = static_cast<std::size_t>(idx % chunk_rows);
      const std::size_t n =
          static_cast<std::size_t>(std::min<std::uint64_t>(end_at - at, c.size() - first));
      out.insert(out.end(), c.begin() + static_cast<std::ptrdiff_t>(first),
                 c.begin() + static_cast<std::ptrdiff_t>(first + n));
      return at + n;
    }

    void discard_before(std::uint64_t offset) {
      if (offset <= start) return;
      start = offset;
      // Free the chunks that hold only discarded rows (a full chunk whose
      // last row is before `start`).
      while (!chunks.empty() && chunks.front().size() == chunk_rows &&
             base + chunk_rows <= start) {
        chunks.pop_front();
        base += chunk_rows;
      }
    }
  };

  [[noreturn]] void fail(const std::string& detail) const {
    throw error(errc::invalid_argument, name_, "", "", detail);
  }

  void check_partition(std::uint32_t partition, const char* what) const {
    if (partition >= options_.partitions)
      fail(std::string(what) + ": partition " + std::to_string(partition) +
           " does not exist (the source has " + std::to_string(options_.partitions) +
           " partition" + (options_.partitions == 1 ? "" : "s") + ")");
  }

  source_position latest_locked() const {
    source_position p;
    for (std::uint32_t i = 0; i < parts_.size(); ++i) p.set(i, parts_[i].end);
    return p;
  }

  // Under the lock: `p` names only existing partitions and is not beyond
  // latest().
  void check_position(const source_position& p, const char* what) const {
    for (const auto& [part, offset] : p.partitions()) {
      check_partition(part, what);
      if (offset > parts_[part].end)
        fail(std::string(what) + ": position " + p.to_string() + " is beyond the latest position " +
             latest_locked().to_string() + " (offset " + std::to_string(offset) + " of partition " +
             std::to_string(part) + "; the source holds " + std::to_string(parts_[part].end) +
             " rows there)");
    }
  }

  // Under the lock, for an offset before the partition's start.
  [[noreturn]] void not_held(std::uint32_t partition, std::uint64_t offset,
                             const std::string& batch) const {
    fail("the rows before offset " + std::to_string(parts_[partition].start) + " of partition " +
         std::to_string(partition) + " are no longer held (discard_before); " + batch +
         " needs them from offset " + std::to_string(offset));
  }

  static std::string batch(const source_position& from, const source_position& to) {
    return "the batch from " + from.to_string() + " to " + to.to_string();
  }

  std::string name_;
  MemorySourceOptions options_;
  mutable std::mutex mutex_;
  std::vector<partition_log> parts_;
};

}  // namespace flowlib
