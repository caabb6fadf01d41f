// flowlib/source/detail/memory_log.hpp
//
// The rows of one partition of a MemorySource (source/memory.hpp): an
// append-only log in fixed-size chunks that are never reallocated (an
// append never copies earlier rows), with retention (discard_before) and
// erased rows (erase_where), whose rows are moved out to the caller, for
// the change history. Not synchronised: the source's lock guards it.
// Internal.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <utility>
#include <vector>

namespace flowlib::detail {

/// One partition: rows [start, end) are held, except the erased ones.
/// chunks.front().rows[0] is the row at offset `base` (base <= start);
/// every chunk is reserved to chunk_rows and never grows beyond it, so its
/// rows never move. A chunk's `erased` flags are allocated on its first
/// erase (empty: none erased); an erased or discarded row has been moved
/// out into the change history and is never read again.
template <class Row>
struct memory_partition_log {
  /// Rows per chunk: about 64 KiB of rows, at least 16.
  static constexpr std::size_t chunk_rows = std::max<std::size_t>(16, (64 * 1024) / sizeof(Row));

  struct chunk {
    std::vector<Row> rows;
    std::vector<bool> erased;
    bool live(std::size_t i) const { return erased.empty() || !erased[i]; }
  };

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

}  // namespace flowlib::detail
