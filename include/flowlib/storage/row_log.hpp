// flowlib/storage/row_log.hpp
//
// row_log<Row>: a table's append log, the rows appended to it in order,
// each at a 64-bit offset one above the previous. A pipeline reads it as the
// source of another flow (a table read as a stream: bronze -> silver ->
// gold), remembering the offset it read up to.
//
//   - Offsets never restart: discard_before() (retention) and clear() (a
//     full refresh) drop rows but keep counting, so a reader never takes a
//     new row for one it has already read.
//   - Rows live in chunks of a fixed number of rows, so an append never
//     moves a row, and discarding frees whole chunks (rows below
//     begin_offset() in a chunk still in use stay allocated until the whole
//     chunk is discarded). Chunks emptied by truncate_to() and discard are
//     kept for reuse (one at most; reserve() may keep more).
//   - truncate_to() undoes the appends of a batch that failed; it cannot fail.
//   - Not thread-safe: the pipeline's thread owns the log, as it owns the
//     table.
#pragma once

#include <flowlib/error.hpp>

#include <algorithm>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace flowlib {

/// @brief The rows appended to a table, at increasing offsets that never
/// restart (see the header comment). `owner` names the table in errors.
template <class Row>
class row_log {
 public:
  /// Rows per chunk: about 16 KiB of rows, at least 16.
  static constexpr std::size_t chunk_rows = std::max<std::size_t>(16, 16384 / sizeof(Row));

  row_log() = default;
  explicit row_log(std::string owner) : owner_(std::move(owner)) {}

  /// The table the log belongs to (named in errors).
  const std::string& owner() const noexcept { return owner_; }

  /// The offset the next appended row gets (one past the last row).
  std::uint64_t end_offset() const noexcept { return end_; }
  /// The first offset still held; rows below it were discarded.
  std::uint64_t begin_offset() const noexcept { return begin_; }
  /// Rows held: end_offset() - begin_offset().
  std::uint64_t size() const noexcept { return end_ - begin_; }
  bool empty() const noexcept { return end_ == begin_; }

  /// Makes room for `extra` appends: afterwards that many append() calls
  /// allocate nothing (they throw only if copying a row throws).
  void reserve(std::size_t extra) {
    const std::size_t room = chunks_.empty() ? 0 : chunk_rows - chunks_.back().size();
    if (extra <= room) return;
    const std::size_t need = (extra - room + chunk_rows - 1) / chunk_rows;  // new chunks
    if (chunks_.capacity() < chunks_.size() + need) {
      chunks_.reserve(std::max(chunks_.size() + need, 2 * chunks_.capacity()));
    }
    while (spare_.size() < need) spare_.push_back(new_chunk());
  }

  /// Appends a copy of `r` at offset end_offset(). If the copy (or an
  /// allocation) throws, the log is unchanged.
  void append(const Row& r) {
    if (!chunks_.empty() && chunks_.back().size() < chunk_rows) {
      chunks_.back().push_back(r);  // capacity is chunk_rows: no reallocation
    } else {
      if (chunks_.size() == chunks_.capacity()) {
        chunks_.reserve(std::max<std::size_t>(4, 2 * chunks_.capacity()));
      }
      if (spare_.empty()) spare_.push_back(new_chunk());
      spare_.back().push_back(r);  // may throw: the chunk stays spare
      chunks_.push_back(std::move(spare_.back()));
      spare_.pop_back();
    }
    ++end_;
  }

  /// Appends the rows at offsets [from, to) to `out`, in order. Throws
  /// flowlib::error (errc::invalid_argument), naming the table and reading
  /// nothing, when from < begin_offset() (those rows were discarded, or the
  /// table was refreshed), to > end_offset(), or from > to.
  void read(std::uint64_t from, std::uint64_t to, std::vector<Row>& out) const {
    if (from < begin_) {
      fail("the rows before offset " + std::to_string(begin_) +
           " were discarded; a read from offset " + std::to_string(from) +
           " cannot be served (the reader fell behind the log's retention, or the "
           "table was fully refreshed since it read)");
    }
    if (to > end_) {
      fail("a read up to offset " + std::to_string(to) + " is past the end of the log (offset " +
           std::to_string(end_) + ")");
    }
    if (from > to) {
      fail("a read from offset " + std::to_string(from) + " to offset " + std::to_string(to) +
           " is an empty range backwards");
    }
    out.reserve(out.size() + static_cast<std::size_t>(to - from));
    while (from < to) {
      const auto [c, i] = locate(from);
      const std::vector<Row>& chunk = chunks_[c];
      const std::size_t n = static_cast<std::size_t>(
          std::min<std::uint64_t>(to - from, chunk.size() - i));
      out.insert(out.end(), chunk.begin() + static_cast<std::ptrdiff_t>(i),
                 chunk.begin() + static_cast<std::ptrdiff_t>(i + n));
      from += n;
    }
  }

  /// Drops the rows at offsets [end, end_offset()): the undo of a failed
  /// batch's appends. end_offset() becomes `end`. Requires begin_offset() <=
  /// end <= end_offset() (asserted in debug builds; a larger `end` changes
  /// nothing, a smaller one stops at begin_offset()).
  void truncate_to(std::uint64_t end) noexcept {
    assert(end >= begin_ && end <= end_ && "flowlib row_log: truncate_to() out of range");
    end = std::max(end, begin_);
    while (end_ > end) {
      std::vector<Row>& back = chunks_.back();
      const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(end_ - end, back.size()));
      back.erase(back.end() - static_cast<std::ptrdiff_t>(n), back.end());
      end_ -= n;
      if (back.empty()) drop_back_chunk();
    }
  }

  /// Retention: drops the rows below `offset` (at most up to end_offset());
  /// frees the chunks wholly below it. Offsets keep counting.
  void discard_before(std::uint64_t offset) noexcept {
    offset = std::min(offset, end_);
    if (offset <= begin_) return;
    begin_ = offset;
    // The front chunk starts at first_; every chunk but the last is full.
    // (A last chunk wholly discarded goes too: the next append starts a
    // chunk at end_.)
    while (!chunks_.empty() && first_ + chunks_.front().size() <= begin_) {
      first_ += chunks_.front().size();
      keep_spare(std::move(chunks_.front()));
      chunks_.erase(chunks_.begin());
    }
    if (chunks_.empty()) first_ = end_;
  }

  /// Empties the log and makes both begin_offset() and end_offset()
  /// `offset`: the next append() lands at `offset`. A durable table reloads
  /// its saved log with it, then appends the saved rows in order.
  void restart_at(std::uint64_t offset) noexcept {
    clear();
    begin_ = first_ = end_ = offset;
  }

  /// A full refresh of the table: every row is dropped and begin_offset()
  /// becomes end_offset(). Offsets do not restart, so readers downstream
  /// never take new rows for old ones.
  void clear() noexcept {
    std::vector<std::vector<Row>>().swap(chunks_);  // the memory goes too
    std::vector<std::vector<Row>>().swap(spare_);
    begin_ = first_ = end_;
  }

 private:
  struct position {
    std::size_t chunk;
    std::size_t index;
  };
  position locate(std::uint64_t offset) const noexcept {
    const std::uint64_t d = offset - first_;
    return {static_cast<std::size_t>(d / chunk_rows), static_cast<std::size_t>(d % chunk_rows)};
  }
  static std::vector<Row> new_chunk() {
    std::vector<Row> c;
    c.reserve(chunk_rows);
    return c;
  }
  void keep_spare(std::vector<Row>&& c) noexcept {
    c.clear();
    // One spare at most: keeping it costs nothing (no allocation), and a
    // second would hold memory retention is meant to free.
    if (spare_.size() < spare_.capacity() && spare_.empty()) spare_.push_back(std::move(c));
  }
  void drop_back_chunk() noexcept {
    std::vector<Row> c = std::move(chunks_.back());
    chunks_.pop_back();
    c.clear();
    // truncate_to() undoes appends that reserve() may have made room for:
    // the chunk goes back to the spares when their capacity allows.
    if (spare_.size() < spare_.capacity()) spare_.push_back(std::move(c));
    if (chunks_.empty()) first_ = end_;
  }
  [[noreturn]] void fail(std::string detail) const {
    throw error(errc::invalid_argument, owner_, "", "", "append log: " + std::move(detail));
  }

  std::string owner_;
  std::vector<std::vector<Row>> chunks_;  // each with capacity chunk_rows
  std::vector<std::vector<Row>> spare_;   // empty chunks, capacity chunk_rows
  std::uint64_t first_ = 0;  // offset of chunks_.front()[0] (or of the next append)
  std::uint64_t begin_ = 0;
  std::uint64_t end_ = 0;
};

namespace detail {
using flowlib::row_log;
}  // namespace detail

}  // namespace flowlib
