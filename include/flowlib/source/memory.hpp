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
//
// Its parts, in source/detail/: memory_log.hpp (a partition's rows, in
// chunks), memory_changes.hpp (the change history), memory_value_index.hpp
// (the value indexes).
#pragma once

#include <flowlib/error.hpp>
#include <flowlib/schema.hpp>
#include <flowlib/source/detail/memory_changes.hpp>
#include <flowlib/source/detail/memory_log.hpp>
#include <flowlib/source/detail/memory_value_index.hpp>
#include <flowlib/source/position.hpp>
#include <flowlib/where/column.hpp>
#include <flowlib/where/value.hpp>
#include <flowlib/where/window.hpp>

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
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
      : name_(std::move(name)),
        options_(options),
        history_(options.change_history_rows, options.change_history_records) {
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
    indexes_.on_remove(parts_, removed, bounds, /*erased=*/false);
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
      indexes_.on_remove(parts_, removed, bounds, /*erased=*/true);
      note_removal(std::move(removed));
      throw;
    }
    indexes_.on_remove(parts_, removed, bounds, /*erased=*/true);
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
    return history_.horizon();
  }

  /// @brief Drops the change records only needed to answer changed_values()
  /// for `since` < `v` (the caller will not ask about older versions).
  void forget_changes_before(std::uint64_t v) {
    std::lock_guard lock(mutex_);
    history_.forget_before(v, version_);
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
      if (since < history_.horizon()) return std::nullopt;
      // Rows come in runs of one value (a day's rows appended together): a
      // value equal to the previous row's is not looked up again.
      where::detail::cell last;
      bool have_last = false;
      const auto note = [&](const Row& r) {
        const where::detail::cell c = entry->get(r);
        if (have_last && detail::same_cell(c, last)) return;
        seen.insert(where::detail::to_value(c));
        last = c;
        have_last = true;
      };
      for (const change& c : history_.records()) {
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
    return indexes_.find(column) != nullptr;
  }

  /// @brief Frees the index of `column`, if any (the next locate() on it
  /// builds it again).
  void drop_value_index(std::string_view column) {
    std::lock_guard lock(mutex_);
    indexes_.drop(column);
  }

 private:
  using partition_log = detail::memory_partition_log<Row>;
  using history_type = detail::memory_change_history<Row>;
  using change = typename history_type::change;
  using index_set = detail::memory_value_indexes<Row>;
  using value_index = typename index_set::value_index;
  using value_entry = typename index_set::value_entry;
  using key_less = typename index_set::key_less;
  static constexpr std::size_t chunk_rows = partition_log::chunk_rows;

  // Under the lock: an append of [from, end) to `partition` just happened.
  void note_append(std::uint32_t partition, std::uint64_t from) {
    ++version_;
    const std::uint64_t to = parts_[partition].end;
    indexes_.on_append(parts_, partition, from, to);
    history_.note_append(partition, from, to, version_, /*extend=*/!std::exchange(observed_, false));
  }

  // Under the lock: rows were removed (none: nothing changed).
  void note_removal(std::vector<Row>&& removed) {
    if (removed.empty()) return;
    ++version_;
    history_.note_removal(std::move(removed), version_);
  }

  // Under the lock: the index of `column`, built if need be; null when Row
  // has no readable column of that name.
  const value_index* index_of(std::string_view column) const
    requires has_schema<Row>
  {
    return indexes_.get(column, parts_);
  }

  // Under the lock: the locations of the rows of `found` (distinct values),
  // partition by partition, each partition's in offset order.
  std::vector<row_location> gather(const std::vector<const value_entry*>& found) const {
    std::vector<row_location> out;
    out.reserve(index_set::rows_of(found));
    index_set::gather(found, static_cast<std::uint32_t>(parts_.size()),
                      [&](std::uint32_t partition, std::uint64_t at) { out.push_back(row_location{partition, at}); });
    return out;
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
  history_type history_;  // what changed_values() reads
  // The value indexes built by locate() (none until then).
  mutable index_set indexes_;
  // The current version was reported to a reader: the next append starts a
  // new change record (so changed_values is exact for reported versions).
  mutable bool observed_ = false;
};

}  // namespace flowlib
