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
// Whole-table reads and changes (R-WHERE-7). A REPLACE WHERE flow reads a
// source as a table rather than as a stream, and asks what changed since
// its last update:
//   - version(): a number that increases on every append and every
//     discard_before()/erase_where() that removes rows (and on nothing
//     else: an unchanged version means an unchanged set of rows);
//   - erase_where(pred): removes the rows matching pred (corrections,
//     retention by value). An erased row keeps its offset: positions do not
//     move, read() skips it, and plan(from, limit) still counts it towards
//     `limit`. A batch replayed after an erase reads the rows left;
//   - scan(f) / read_all(out): every row held, partition by partition, in
//     offset order; both return the version the read started from;
//   - changed_values(column, since): the distinct values of `column` among
//     the rows appended, discarded or erased after version `since`.
// The change history is a log of (version, partition, offset range) records
// for appends (the rows are still in the log) and, for removals, the removed
// rows themselves, moved out of the log. Consecutive appends to one
// partition share a record unless the version was read in between
// (version(), scan(), read_all(), changed_values()): so changed_values is
// exact for every `since` the source has reported, and for another `since`
// it may include a few appends at or before it (a superset, never fewer). It is
// bounded by options.change_history_rows (removed rows kept) and
// options.change_history_records; past the bound the oldest records are
// dropped, and forget_changes_before(v) drops the ones only needed for
// `since` < v. changed_values(column, since) returns std::nullopt when the
// records it needs were dropped (since < history_horizon()) or the column
// is not a readable FLOWLIB_SCHEMA column of Row: the caller then treats
// everything as changed.
//
// Reading by value (a REPLACE WHERE flow's slices). locate(column, values)
// gives the positions (row_location: partition, offset) of the held rows
// whose `column` holds one of `values`, and locate(range) those whose value
// lies in a where::window; read_located(locations, f) visits those rows.
// They are answered from an index of the column: its values, each with the
// offsets of the rows holding it, per partition, in offset order. So a
// look-up costs O(log distinct values + rows found), not a scan, and the
// locations come back in scan order (partition, then offset): the rows read
// through them are the ones a filtered scan yields, in the same order.
//   - An index is built by the first locate() on its column (by
//     FLOWLIB_SCHEMA name; build_value_index() builds it ahead), in one pass
//     over the rows held, under the lock. A source nobody locates in has
//     none and pays nothing for it.
//   - From then on every change keeps it exact: append/append_to add the
//     new rows' offsets, erase_where and discard_before remove theirs, and
//     a value whose last row goes is dropped. A look-up never misses a held
//     row and never returns an erased or discarded one. If keeping it up
//     fails (out of memory), every index is dropped and rebuilt by the next
//     locate().
//   - Memory: 8 bytes per held row (plus the vectors' spare capacity, at
//     most as much again), and per distinct value a map node, the value
//     and one vector per partition that holds it (about 150 bytes): small
//     for a day or a region, as large as the rows for a column whose every
//     row differs (a timestamp); drop_value_index() frees it.
//   - Values match by where::value's structural equality (the values
//     changed_values() reports for the same column): an int64 never matches
//     a double, a date never a timestamp; all NaNs are one value. A range
//     uses window::contains (SQL comparison).
//
// Threads. Every member may be called from any thread: appends from
// producer threads while the pipeline's thread plans and reads. A mutex
// guards the log; rows are stored in fixed-size chunks that are never
// reallocated (an append never copies earlier rows), and read() copies rows
// out one chunk at a time, taking the lock for each chunk, so a long read
// does not hold producers back for its whole length; read_located() does the
// same per chunk's worth of locations. The value indexes live under the same
// lock, so locate() may build one inside a const call and stay safe to call
// from any thread; that build holds the lock for a whole pass over the rows
// (appends wait for it), and so does each change's index upkeep for the rows
// it touches. The source is neither copyable nor movable (programs share it
// by reference).
#pragma once

#include <flowlib/error.hpp>
#include <flowlib/schema.hpp>
#include <flowlib/source/position.hpp>
#include <flowlib/where/column.hpp>
#include <flowlib/where/value.hpp>
#include <flowlib/where/window.hpp>

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <queue>
#include <ranges>
#include <span>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

namespace flowlib {

/// @brief Where a row is held in a MemorySource: its partition and offset.
/// Ordered as a scan visits rows (partition, then offset).
struct row_location {
  std::uint32_t partition = 0;
  std::uint64_t offset = 0;
  friend auto operator<=>(const row_location&, const row_location&) = default;
};

/// @brief Options of a MemorySource.
struct MemorySourceOptions {
  std::uint32_t partitions = 1;                 ///< at least 1
  delivery guarantee = delivery::exactly_once;  ///< a declaration (R-EXACT-3)
  /// Removed (discarded or erased) rows kept for changed_values(); older
  /// removal records are dropped past it.
  std::size_t change_history_rows = std::size_t{1} << 20;
  /// Change records (appends and removals) kept for changed_values().
  std::size_t change_history_records = std::size_t{1} << 16;
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
    note_append(0, parts_[0].end - 1);
  }

  /// @brief Appends every row of `rows` to partition 0, in order, under one
  /// lock (a reader sees all of them or none).
  template <std::ranges::input_range R>
    requires(!std::same_as<std::remove_cvref_t<R>, Row> &&
             std::constructible_from<Row, std::ranges::range_reference_t<R>>)
  void append(R&& rows) {
    std::lock_guard lock(mutex_);
    const std::uint64_t from = parts_[0].end;
    try {
      for (auto&& r : rows) parts_[0].push(Row(std::forward<decltype(r)>(r)));
    } catch (...) {
      // The rows appended before the failure stay: they are changes.
      if (parts_[0].end != from) note_append(0, from);
      throw;
    }
    if (parts_[0].end != from) note_append(0, from);
  }

  /// @brief Appends `row` to `partition`. Throws flowlib::error
  /// (errc::invalid_argument) when the source has no such partition.
  void append_to(std::uint32_t partition, Row row) {
    check_partition(partition, "append_to");
    std::lock_guard lock(mutex_);
    parts_[partition].push(std::move(row));
    note_append(partition, parts_[partition].end - 1);
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
    std::vector<Row> removed;
    std::vector<std::size_t> bounds{0};  // removed[bounds[i], bounds[i + 1]) left partition i
    bounds.reserve(parts_.size() + 1);
    for (std::uint32_t i = 0; i < parts_.size(); ++i) {
      parts_[i].discard_before(p.offset(i), removed);
      bounds.push_back(removed.size());
    }
    index_forget(removed, bounds, /*erased=*/false);
    note_removal(std::move(removed));
  }

  /// @brief Removes every held row for which `pred(row)` is true, and
  /// records them as changes (see the header comment: offsets do not move).
  /// `pred` runs under the source's lock and must not call into the source.
  /// Returns the number of rows removed. If `pred` throws, the rows it
  /// matched before the throw are removed and recorded, the others kept.
  template <class Pred>
    requires std::predicate<Pred&, const Row&>
  std::uint64_t erase_where(Pred pred) {
    std::lock_guard lock(mutex_);
    std::vector<Row> removed;
    std::vector<std::size_t> bounds{0};  // removed[bounds[i], bounds[i + 1]) left partition i
    bounds.reserve(parts_.size() + 1);
    try {
      for (auto& part : parts_) {
        part.erase_where(pred, removed);
        bounds.push_back(removed.size());
      }
    } catch (...) {
      while (bounds.size() <= parts_.size()) bounds.push_back(removed.size());
      index_forget(removed, bounds, /*erased=*/true);
      note_removal(std::move(removed));
      throw;
    }
    index_forget(removed, bounds, /*erased=*/true);
    const std::uint64_t n = removed.size();
    note_removal(std::move(removed));
    return n;
  }

  /// @brief The source's version: increases on every append and every
  /// removal (discard_before, erase_where) that removed rows.
  std::uint64_t version() const {
    std::lock_guard lock(mutex_);
    observed_ = true;
    return version_;
  }

  /// @brief The smallest `since` changed_values() can still answer.
  std::uint64_t history_horizon() const {
    std::lock_guard lock(mutex_);
    return horizon_;
  }

  /// @brief Drops the change records only needed to answer changed_values()
  /// for `since` < `v` (the caller will not ask about older versions).
  void forget_changes_before(std::uint64_t v) {
    std::lock_guard lock(mutex_);
    while (!changes_.empty() && changes_.front().last_version <= v) pop_change();
    horizon_ = std::max(horizon_, std::min(v, version_));
  }

  /// @brief The distinct values (sorted, structurally) of `column` among the
  /// rows appended, discarded or erased after version `since`; std::nullopt
  /// when the history no longer reaches back to `since` or Row has no
  /// readable column `column`. Cost: O(changed rows), under the lock.
  std::optional<std::vector<where::value>> changed_values(std::string_view column,
                                                         std::uint64_t since) const
    requires has_schema<Row>
  {
    const auto* entry = where::detail::find_column<Row>(column);
    if (!entry || entry->k == where::kind::null) return std::nullopt;
    std::unordered_set<where::value> seen;
    {
      std::lock_guard lock(mutex_);
      observed_ = true;
      if (since < horizon_) return std::nullopt;
      // Rows come in runs of one value (a day's rows appended together): a
      // value equal to the previous row's is not looked up again.
      where::detail::cell last;
      bool have_last = false;
      const auto note = [&](const Row& r) {
        const where::detail::cell c = entry->get(r);
        if (have_last && same_cell(c, last)) return;
        seen.insert(where::detail::to_value(c));
        last = c;
        have_last = true;
      };
      for (const change& c : changes_) {
        if (c.last_version <= since) continue;
        if (c.appended) {
          const partition_log& part = parts_[c.partition];
          part.for_each_live(std::max(c.from, part.start), std::min(c.to, part.end), note);
        } else {
          for (const Row& r : c.removed) note(r);
        }
      }
    }
    std::vector<where::value> out(seen.begin(), seen.end());
    std::sort(out.begin(), out.end());
    return out;
  }

  /// @brief Calls f(const Row&) for every row held when the scan starts,
  /// partition 0's first, each partition's in offset order; returns the
  /// version the scan started from. Rows appended during the scan are not
  /// visited; a removal during the scan may or may not be seen (it has a
  /// later version, so changed_values reports it). f runs under the lock,
  /// one chunk of rows at a time, and must not call into the source.
  template <class F>
    requires std::invocable<F&, const Row&>
  std::uint64_t scan(F&& f) const {
    std::uint64_t v = 0;
    std::vector<std::uint64_t> ends;
    {
      std::lock_guard lock(mutex_);
      observed_ = true;
      v = version_;
      for (const auto& part : parts_) ends.push_back(part.end);
    }
    for (std::uint32_t i = 0; i < parts_.size(); ++i) {
      std::uint64_t at = 0;
      while (true) {
        std::lock_guard lock(mutex_);
        at = std::max(at, parts_[i].start);
        if (at >= ends[i]) break;
        at = parts_[i].visit_chunk(at, ends[i], f);
      }
    }
    return v;
  }

  /// @brief Appends every row held to `out` (scan's order); returns the
  /// version the read started from.
  std::uint64_t read_all(std::vector<Row>& out) const {
    out.reserve(out.size() + static_cast<std::size_t>(size()));
    return scan([&](const Row& r) { out.push_back(r); });
  }

  /// @brief The number of rows held (appended and not discarded).
  std::uint64_t size() const {
    std::lock_guard lock(mutex_);
    std::uint64_t n = 0;
    for (const auto& part : parts_) n += part.end - part.start - part.dead;
    return n;
  }

  /// @brief The locations of the held rows whose `column` holds one of
  /// `values` (structural equality, see the header comment), in scan order
  /// (partition, then offset). std::nullopt when Row has no readable
  /// FLOWLIB_SCHEMA column `column`. Builds the column's index on first use
  /// (a pass over the rows held, under the lock). Cost: O(values x log
  /// distinct values + rows found x log values).
  std::optional<std::vector<row_location>> locate(std::string_view column,
                                                  std::span<const where::value> values) const
    requires has_schema<Row>
  {
    std::lock_guard lock(mutex_);
    const value_index* ix = index_of(column);
    if (ix == nullptr) return std::nullopt;
    std::vector<const value_entry*> found;
    found.reserve(values.size());
    for (const where::value& v : values) {
      auto it = ix->values.find(v);
      if (it != ix->values.end()) found.push_back(&it->second);
    }
    std::sort(found.begin(), found.end(), std::less<const value_entry*>{});
    found.erase(std::unique(found.begin(), found.end()), found.end());
    return gather(found);
  }

  /// @brief The locations of the held rows whose value in `range.column()`
  /// lies in `range` (window::contains: SQL comparison; a null never does),
  /// in scan order. std::nullopt as for locate(column, values). Cost:
  /// O(log distinct values + values in the range + rows found x log values)
  /// when the bounds are of the column's kind, else O(distinct values + ...).
  std::optional<std::vector<row_location>> locate(const where::window& range) const
    requires has_schema<Row>
  {
    std::lock_guard lock(mutex_);
    const value_index* ix = index_of(range.column());
    if (ix == nullptr) return std::nullopt;
    const where::kind k = ix->get->k;
    auto it = ix->values.begin();
    if (range.lower() && range.lower()->at.type() == k) it = ix->values.lower_bound(range.lower()->at);
    const bool stop = range.upper() && range.upper()->at.type() == k;
    std::vector<const value_entry*> found;
    for (; it != ix->values.end(); ++it) {
      if (stop && key_less{}(range.upper()->at, it->first)) break;
      if (range.contains(it->first)) found.push_back(&it->second);
    }
    return gather(found);
  }

  /// @brief Calls f(const Row&) for the row at each location still held, in
  /// the order given (rows erased or discarded since they were located are
  /// skipped; rows appended since are not visited). Returns the number of
  /// rows visited. Like scan(), f runs under the lock, one chunk's worth of
  /// locations at a time, and must not call into the source. Throws
  /// flowlib::error (errc::invalid_argument), before calling f, when a
  /// location names a partition the source does not have or an offset not
  /// appended yet.
  template <class F>
    requires std::invocable<F&, const Row&>
  std::uint64_t read_located(std::span<const row_location> at, F&& f) const {
    {
      std::lock_guard lock(mutex_);
      for (const row_location& l : at) {
        check_partition(l.partition, "read_located");
        if (l.offset >= parts_[l.partition].end)
          fail("read_located: offset " + std::to_string(l.offset) + " of partition " +
               std::to_string(l.partition) + " has not been appended (the source holds " +
               std::to_string(parts_[l.partition].end) + " rows there)");
      }
    }
    std::uint64_t visited = 0;
    for (std::size_t i = 0; i < at.size();) {
      std::lock_guard lock(mutex_);
      const std::size_t stop = std::min(at.size(), i + chunk_rows);
      for (; i < stop; ++i) {
        if (const Row* r = parts_[at[i].partition].held_row(at[i].offset)) {
          f(*r);
          ++visited;
        }
      }
    }
    return visited;
  }

  /// @brief Builds the index of `column` now rather than at the first
  /// locate(); false when Row has no readable column `column`.
  bool build_value_index(std::string_view column)
    requires has_schema<Row>
  {
    std::lock_guard lock(mutex_);
    return index_of(column) != nullptr;
  }

  /// @brief Whether `column` has an index (built and not dropped).
  bool has_value_index(std::string_view column) const {
    std::lock_guard lock(mutex_);
    return find_index(column) != nullptr;
  }

  /// @brief Frees the index of `column`, if any (the next locate() on it
  /// builds it again).
  void drop_value_index(std::string_view column) {
    std::lock_guard lock(mutex_);
    std::erase_if(indexes_, [&](const auto& ix) { return ix->column == column; });
  }

 private:
  // Rows per chunk: about 64 KiB of rows, at least 16.
  static constexpr std::size_t chunk_rows = std::max<std::size_t>(16, (64 * 1024) / sizeof(Row));

  // One partition: rows [start, end) are held, except the erased ones.
  // chunks.front().rows[0] is the row at offset `base` (base <= start);
  // every chunk is reserved to chunk_rows and never grows beyond it, so its
  // rows never move. A chunk's `erased` flags are allocated on its first
  // erase (empty: none erased); an erased or discarded row has been moved
  // out into the change history and is never read again.
  struct chunk {
    std::vector<Row> rows;
    std::vector<bool> erased;
    bool live(std::size_t i) const { return erased.empty() || !erased[i]; }
  };

  struct partition_log {
    std::uint64_t base = 0;
    std::uint64_t start = 0;
    std::uint64_t end = 0;
    std::uint64_t dead = 0;  // erased rows in [start, end)
    std::deque<chunk> chunks;

    void push(Row&& row) {
      if (chunks.empty() || chunks.back().rows.size() == chunk_rows) {
        chunk c;
        c.rows.reserve(chunk_rows);
        chunks.push_back(std::move(c));
      }
      chunks.back().rows.push_back(std::move(row));
      ++end;
    }

    // The row at `at` if it is held (not discarded nor erased), else null.
    const Row* held_row(std::uint64_t at) const {
      if (at < start || at >= end) return nullptr;
      const chunk& c = chunk_at(at);
      const std::size_t i = static_cast<std::size_t>((at - base) % chunk_rows);
      return c.live(i) ? &c.rows[i] : nullptr;
    }

    chunk& chunk_at(std::uint64_t at) { return chunks[static_cast<std::size_t>((at - base) / chunk_rows)]; }
    const chunk& chunk_at(std::uint64_t at) const {
      return chunks[static_cast<std::size_t>((at - base) / chunk_rows)];
    }

    // Calls f on the live rows from `at` up to `end_at` or the end of at's
    // chunk, whichever is first; returns the offset after the last row
    // considered.
    template <class F>
    std::uint64_t visit_chunk(std::uint64_t at, std::uint64_t end_at, F& f) const {
      const chunk& c = chunk_at(at);
      const std::size_t first = static_cast<std::size_t>((at - base) % chunk_rows);
      const std::size_t n =
          static_cast<std::size_t>(std::min<std::uint64_t>(end_at - at, c.rows.size() - first));
      for (std::size_t i = first; i < first + n; ++i)
        if (c.live(i)) f(c.rows[i]);
      return at + n;
    }

    // Calls f on the live rows in [from, to) (both within [start, end]).
    template <class F>
    void for_each_live(std::uint64_t from, std::uint64_t to, F&& f) const {
      while (from < to) from = visit_chunk(from, to, f);
    }

    // Copies the live rows from `at` up to `end_at` or the end of at's
    // chunk; returns the offset after the last row considered.
    std::uint64_t copy(std::uint64_t at, std::uint64_t end_at, std::vector<Row>& out) const {
      const chunk& c = chunk_at(at);
      const std::size_t first = static_cast<std::size_t>((at - base) % chunk_rows);
      const std::size_t n =
          static_cast<std::size_t>(std::min<std::uint64_t>(end_at - at, c.rows.size() - first));
      if (c.erased.empty()) {
        out.insert(out.end(), c.rows.begin() + static_cast<std::ptrdiff_t>(first),
                   c.rows.begin() + static_cast<std::ptrdiff_t>(first + n));
      } else {
        for (std::size_t i = first; i < first + n; ++i)
          if (!c.erased[i]) out.push_back(c.rows[i]);
      }
      return at + n;
    }

    // Moves the live rows before `offset` into `removed` and drops them.
    void discard_before(std::uint64_t offset, std::vector<Row>& removed) {
      if (offset <= start) return;
      for (std::uint64_t at = start; at < offset; ++at) {
        chunk& c = chunk_at(at);
        const std::size_t i = static_cast<std::size_t>((at - base) % chunk_rows);
        if (c.live(i)) removed.push_back(std::move(c.rows[i]));
        else --dead;
      }
      start = offset;
      // Free the chunks that hold only discarded rows (a full chunk whose
      // last row is before `start`).
      while (!chunks.empty() && chunks.front().rows.size() == chunk_rows &&
             base + chunk_rows <= start) {
        chunks.pop_front();
        base += chunk_rows;
      }
    }

    // Marks the live rows matching pred as erased, moving them to `removed`.
    template <class Pred>
    void erase_where(Pred& pred, std::vector<Row>& removed) {
      for (std::uint64_t at = start; at < end; ++at) {
        chunk& c = chunk_at(at);
        const std::size_t i = static_cast<std::size_t>((at - base) % chunk_rows);
        if (!c.live(i) || !pred(std::as_const(c.rows[i]))) continue;
        if (c.erased.empty()) c.erased.assign(chunk_rows, false);
        c.erased[i] = true;
        ++dead;
        removed.push_back(std::move(c.rows[i]));
      }
    }
  };

  // One change record: rows appended to `partition` at offsets [from, to)
  // by the appends of versions first_version..last_version, or removed rows
  // (one discard_before or erase_where, of version last_version).
  struct change {
    std::uint64_t first_version = 0;
    std::uint64_t last_version = 0;
    bool appended = true;
    std::uint32_t partition = 0;
    std::uint64_t from = 0, to = 0;
    std::vector<Row> removed;
  };

  // Under the lock: an append of [from, end) to `partition` just happened.
  void note_append(std::uint32_t partition, std::uint64_t from) {
    ++version_;
    const std::uint64_t to = parts_[partition].end;
    index_append(partition, from, to);
    const bool observed = std::exchange(observed_, false);
    if (!changes_.empty() && !observed) {
      change& last = changes_.back();
      if (last.appended && last.partition == partition && last.to == from) {
        last.to = to;
        last.last_version = version_;
        return;
      }
    }
    change c;
    c.first_version = c.last_version = version_;
    c.partition = partition;
    c.from = from;
    c.to = to;
    changes_.push_back(std::move(c));
    trim_changes();
  }

  // Under the lock: rows were removed (none: nothing changed).
  void note_removal(std::vector<Row>&& removed) {
    if (removed.empty()) return;
    ++version_;
    change c;
    c.first_version = c.last_version = version_;
    c.appended = false;
    removed_rows_ += removed.size();
    c.removed = std::move(removed);
    changes_.push_back(std::move(c));
    trim_changes();
  }

  void pop_change() {
    change& c = changes_.front();
    removed_rows_ -= c.removed.size();
    horizon_ = std::max(horizon_, c.last_version);
    changes_.pop_front();
  }

  void trim_changes() {
    while (!changes_.empty() && (changes_.size() > options_.change_history_records ||
                                 removed_rows_ > options_.change_history_rows))
      pop_change();
  }

  // ---- Value indexes (see "Reading by value" in the header comment) ----

  // Two cells hold the same value (NaN never does: it is looked up).
  static bool same_cell(const where::detail::cell& a, const where::detail::cell& b) noexcept {
    return a.k == b.k && a.i == b.i && a.j == b.j && a.d == b.d && a.s == b.s;
  }

  // where::value's structural order, made a strict weak order for doubles:
  // NaNs after every number and equivalent to each other.
  struct key_less {
    bool operator()(const where::value& a, const where::value& b) const noexcept {
      if (a.type() == where::kind::float64 && b.type() == where::kind::float64) {
        const double x = a.as_double(), y = b.as_double();
        const bool nx = x != x, ny = y != y;
        if (nx || ny) return !nx && ny;
        return x < y;
      }
      return a < b;
    }
  };

  // The offsets of one value's rows in one partition: offsets[head..] are
  // held, ascending (the ones before head were discarded; compacted away
  // once they are half of the vector).
  struct value_slot {
    std::vector<std::uint64_t> offsets;
    std::size_t head = 0;
    bool empty() const noexcept { return head == offsets.size(); }
  };
  struct value_entry {
    std::vector<value_slot> parts;  // by partition (as far as one holds the value)
    bool empty() const noexcept {
      return std::all_of(parts.begin(), parts.end(), [](const value_slot& s) { return s.empty(); });
    }
  };
  struct value_index {
    std::string column;
    const where::detail::column_entry<Row>* get = nullptr;
    std::map<where::value, value_entry, key_less> values;
  };

  // Under the lock: the index of `column`, or null.
  value_index* find_index(std::string_view column) const {
    for (const auto& ix : indexes_)
      if (ix->column == column) return ix.get();
    return nullptr;
  }

  // Under the lock: the index of `column`, built if need be; null when Row
  // has no readable column of that name.
  const value_index* index_of(std::string_view column) const
    requires has_schema<Row>
  {
    if (value_index* ix = find_index(column)) return ix;
    const auto* entry = where::detail::find_column<Row>(column);
    if (!entry || entry->k == where::kind::null) return nullptr;
    auto ix = std::make_unique<value_index>();
    ix->column = std::string(column);
    ix->get = entry;
    for (std::uint32_t p = 0; p < parts_.size(); ++p) add_rows(*ix, p, parts_[p].start, parts_[p].end);
    indexes_.reserve(indexes_.size() + 1);
    indexes_.push_back(std::move(ix));
    return indexes_.back().get();
  }

  // Adds the held rows of `partition` in [from, to) (after every offset the
  // index holds for that partition).
  void add_rows(value_index& ix, std::uint32_t partition, std::uint64_t from, std::uint64_t to) const {
    const partition_log& part = parts_[partition];
    value_slot* slot = nullptr;
    where::detail::cell last;
    for (std::uint64_t at = from; at < to; ++at) {
      const Row* r = part.held_row(at);
      if (r == nullptr) continue;
      const where::detail::cell c = ix.get->get(*r);
      if (slot == nullptr || !same_cell(c, last)) {
        value_entry& e = ix.values[where::detail::to_value(c)];
        if (e.parts.size() <= partition) e.parts.resize(partition + 1);
        slot = &e.parts[partition];
        last = c;
      }
      slot->offsets.push_back(at);
    }
  }

  // Under the lock: rows [from, to) were appended to `partition`.
  void index_append(std::uint32_t partition, std::uint64_t from, std::uint64_t to) noexcept {
    if (indexes_.empty()) return;
    try {
      for (auto& ix : indexes_) add_rows(*ix, partition, from, to);
    } catch (...) {
      indexes_.clear();  // out of memory: rebuilt by the next locate()
    }
  }

  // Under the lock: `removed` (removed[bounds[p], bounds[p + 1]) from
  // partition p) were erased or discarded. Each slot of a value they held
  // drops its offsets of rows no longer held: a discard moves `head` past
  // the partition's start; an erase filters the slot.
  void index_forget(const std::vector<Row>& removed, const std::vector<std::size_t>& bounds,
                    bool erased) noexcept {
    if (indexes_.empty() || removed.empty()) return;
    try {
      for (auto& ix : indexes_) {
        using iterator = typename decltype(ix->values)::iterator;
        std::vector<std::pair<iterator, std::uint32_t>> touched;
        for (std::uint32_t p = 0; p + 1 < bounds.size(); ++p) {
          where::detail::cell last;
          bool have_last = false;
          for (std::size_t i = bounds[p]; i < bounds[p + 1]; ++i) {
            const where::detail::cell c = ix->get->get(removed[i]);
            if (have_last && same_cell(c, last)) continue;
            last = c;
            have_last = true;
            auto it = ix->values.find(where::detail::to_value(c));
            if (it != ix->values.end()) touched.emplace_back(it, p);
          }
        }
        const auto order = [](const auto& a, const auto& b) {
          if (a.first != b.first) return std::less<const value_entry*>{}(&a.first->second, &b.first->second);
          return a.second < b.second;
        };
        const auto same = [](const auto& a, const auto& b) { return a.first == b.first && a.second == b.second; };
        std::sort(touched.begin(), touched.end(), order);
        touched.erase(std::unique(touched.begin(), touched.end(), same), touched.end());
        for (std::size_t i = 0; i < touched.size();) {
          const iterator it = touched[i].first;
          for (; i < touched.size() && touched[i].first == it; ++i) {
            const std::uint32_t p = touched[i].second;
            if (it->second.parts.size() > p) purge(it->second.parts[p], parts_[p], erased);
          }
          if (it->second.empty()) ix->values.erase(it);  // its last row went
        }
      }
    } catch (...) {
      indexes_.clear();  // out of memory: rebuilt by the next locate()
    }
  }

  static void purge(value_slot& s, const partition_log& part, bool erased) {
    auto& o = s.offsets;
    s.head = static_cast<std::size_t>(
        std::lower_bound(o.begin() + static_cast<std::ptrdiff_t>(s.head), o.end(), part.start) - o.begin());
    if (erased) {
      o.erase(std::remove_if(o.begin() + static_cast<std::ptrdiff_t>(s.head), o.end(),
                             [&](std::uint64_t at) { return part.held_row(at) == nullptr; }),
              o.end());
    }
    if (s.head > 0 && s.head * 2 >= o.size()) {
      o.erase(o.begin(), o.begin() + static_cast<std::ptrdiff_t>(s.head));
      s.head = 0;
    }
    if (o.capacity() > 64 && o.size() * 4 < o.capacity()) o.shrink_to_fit();
  }

  // Under the lock: the locations of the rows of `found` (distinct values),
  // partition by partition, each partition's merged into offset order.
  std::vector<row_location> gather(const std::vector<const value_entry*>& found) const {
    std::size_t n = 0;
    for (const value_entry* e : found)
      for (const value_slot& s : e->parts) n += s.offsets.size() - s.head;
    std::vector<row_location> out;
    out.reserve(n);
    std::vector<std::span<const std::uint64_t>> runs;
    for (std::uint32_t p = 0; p < parts_.size(); ++p) {
      runs.clear();
      for (const value_entry* e : found) {
        if (e->parts.size() <= p || e->parts[p].empty()) continue;
        const value_slot& s = e->parts[p];
        runs.emplace_back(s.offsets.data() + s.head, s.offsets.size() - s.head);
      }
      merge(p, runs, out);
    }
    return out;
  }

  // Appends the union of the ascending, disjoint `runs` to `out`, in order:
  // a heap of the runs by their next offset, each run copied from while it
  // stays below the next one's (rows of one value tend to be consecutive).
  static void merge(std::uint32_t partition, std::vector<std::span<const std::uint64_t>>& runs,
                    std::vector<row_location>& out) {
    if (runs.size() == 1) {
      for (std::uint64_t at : runs[0]) out.push_back(row_location{partition, at});
      return;
    }
    using item = std::pair<std::uint64_t, std::size_t>;  // next offset, run
    std::priority_queue<item, std::vector<item>, std::greater<item>> heap;
    for (std::size_t i = 0; i < runs.size(); ++i) heap.emplace(runs[i].front(), i);
    while (!heap.empty()) {
      const std::size_t i = heap.top().second;
      heap.pop();
      const std::uint64_t bound = heap.empty() ? std::numeric_limits<std::uint64_t>::max() : heap.top().first;
      auto& r = runs[i];
      std::size_t k = 0;
      while (k < r.size() && r[k] < bound) out.push_back(row_location{partition, r[k++]});
      r = r.subspan(k);
      if (!r.empty()) heap.emplace(r.front(), i);
    }
  }

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
  std::uint64_t version_ = 0;
  std::uint64_t horizon_ = 0;        // smallest `since` changed_values() answers
  std::uint64_t removed_rows_ = 0;   // rows held by the removal records
  std::deque<change> changes_;
  // The value indexes built by locate() (none until then).
  mutable std::vector<std::unique_ptr<value_index>> indexes_;
  // The current version was reported to a reader: the next append starts a
  // new change record (so changed_values is exact for reported versions).
  mutable bool observed_ = false;
};

}  // namespace flowlib
