// flowlib/source/detail/memory_changes.hpp
//
// A MemorySource's change history (source/memory.hpp, "Whole-table reads
// and changes"): records of (versions, partition, offset range) for
// appends, whose rows are still in the partition logs, and records holding
// the removed rows themselves for removals; bounded by a count of removed
// rows and a count of records, past which the oldest records are dropped
// and the horizon (the smallest `since` the history still answers) moves
// on. Not synchronised: the source's lock guards it. Internal.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <utility>
#include <vector>

namespace flowlib::detail {

template <class Row>
class memory_change_history {
 public:
  /// One change record: rows appended to `partition` at offsets [from, to)
  /// by the appends of versions first_version..last_version, or removed rows
  /// (one discard_before or erase_where, of version last_version).
  struct change {
    std::uint64_t first_version = 0;
    std::uint64_t last_version = 0;
    bool appended = true;
    std::uint32_t partition = 0;
    std::uint64_t from = 0, to = 0;
    std::vector<Row> removed;
  };

  /// At most `max_rows` removed rows and `max_records` records are kept.
  memory_change_history(std::size_t max_rows, std::size_t max_records)
      : max_rows_(max_rows), max_records_(max_records) {}

  /// The append of version `version` wrote [from, to) to `partition`. It
  /// extends the last record when that one is an append to `partition`
  /// ending at `from` and `extend` holds (the version before was not
  /// reported to a reader).
  void note_append(std::uint32_t partition, std::uint64_t from, std::uint64_t to, std::uint64_t version,
                   bool extend) {
    if (!changes_.empty() && extend) {
      change& last = changes_.back();
      if (last.appended && last.partition == partition && last.to == from) {
        last.to = to;
        last.last_version = version;
        return;
      }
    }
    change c;
    c.first_version = c.last_version = version;
    c.partition = partition;
    c.from = from;
    c.to = to;
    changes_.push_back(std::move(c));
    trim();
  }

  /// The removal of version `version` removed `removed` (not empty).
  void note_removal(std::vector<Row>&& removed, std::uint64_t version) {
    change c;
    c.first_version = c.last_version = version;
    c.appended = false;
    removed_rows_ += removed.size();
    c.removed = std::move(removed);
    changes_.push_back(std::move(c));
    trim();
  }

  /// Drops the records only needed for `since` < `v`; `version` is the
  /// current version (the horizon never passes it).
  void forget_before(std::uint64_t v, std::uint64_t version) {
    while (!changes_.empty() && changes_.front().last_version <= v) pop();
    horizon_ = std::max(horizon_, std::min(v, version));
  }

  /// The smallest `since` the records still answer.
  std::uint64_t horizon() const noexcept { return horizon_; }
  /// The records, oldest first.
  const std::deque<change>& records() const noexcept { return changes_; }

 private:
  void pop() {
    change& c = changes_.front();
    removed_rows_ -= c.removed.size();
    horizon_ = std::max(horizon_, c.last_version);
    changes_.pop_front();
  }

  void trim() {
    while (!changes_.empty() && (changes_.size() > max_records_ || removed_rows_ > max_rows_)) pop();
  }

  std::size_t max_rows_;
  std::size_t max_records_;
  std::uint64_t horizon_ = 0;       // smallest `since` the records answer
  std::uint64_t removed_rows_ = 0;  // rows held by the removal records
  std::deque<change> changes_;
};

}  // namespace flowlib::detail
