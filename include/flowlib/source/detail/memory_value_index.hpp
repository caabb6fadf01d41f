// flowlib/source/detail/memory_value_index.hpp
//
// A MemorySource's value indexes (source/memory.hpp, "Reading by value"):
// per indexed column, its values, each with the offsets of the held rows
// holding it, per partition, in offset order. An index is built from the
// partition logs by its first use, and every change keeps it exact
// (on_append, on_remove); if that upkeep fails (out of memory), every index
// is dropped, to be built again by the next use. gather() gives the rows
// of the values a look-up found, in scan order. Values match by
// where::value's structural equality, with NaNs equivalent (key_less). Not
// synchronised: the source's lock guards it. Internal.
#pragma once

#include <flowlib/schema.hpp>
#include <flowlib/source/detail/memory_log.hpp>
#include <flowlib/where/column.hpp>
#include <flowlib/where/value.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <queue>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace flowlib::detail {

/// Two cells hold the same value (NaN never does: it is looked up).
inline bool same_cell(const where::detail::cell& a, const where::detail::cell& b) noexcept {
  return a.k == b.k && a.i == b.i && a.j == b.j && a.d == b.d && a.s == b.s;
}

/// The value indexes of a MemorySource<Row>; see the header comment.
template <class Row>
class memory_value_indexes {
 public:
  using partition_log = memory_partition_log<Row>;

  /// where::value's structural order, made a strict weak order for doubles:
  /// NaNs after every number and equivalent to each other.
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

  /// The offsets of one value's rows in one partition: offsets[head..] are
  /// held, ascending (the ones before head were discarded; compacted away
  /// once they are half of the vector).
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

  /// The index of `column`, or null.
  const value_index* find(std::string_view column) const {
    for (const auto& ix : indexes_)
      if (ix->column == column) return ix.get();
    return nullptr;
  }

  /// The index of `column`, built from `parts` if need be; null when Row
  /// has no readable column of that name.
  const value_index* get(std::string_view column, const std::vector<partition_log>& parts)
    requires has_schema<Row>
  {
    if (const value_index* ix = find(column)) return ix;
    const auto* entry = where::detail::find_column<Row>(column);
    if (!entry || entry->k == where::kind::null) return nullptr;
    auto ix = std::make_unique<value_index>();
    ix->column = std::string(column);
    ix->get = entry;
    for (std::uint32_t p = 0; p < parts.size(); ++p) add_rows(*ix, parts, p, parts[p].start, parts[p].end);
    indexes_.reserve(indexes_.size() + 1);
    indexes_.push_back(std::move(ix));
    return indexes_.back().get();
  }

  /// Frees the index of `column`, if any.
  void drop(std::string_view column) {
    std::erase_if(indexes_, [&](const auto& ix) { return ix->column == column; });
  }

  /// Rows [from, to) were appended to `partition`.
  void on_append(const std::vector<partition_log>& parts, std::uint32_t partition, std::uint64_t from,
                 std::uint64_t to) noexcept {
    if (indexes_.empty()) return;
    try {
      for (auto& ix : indexes_) add_rows(*ix, parts, partition, from, to);
    } catch (...) {
      indexes_.clear();  // out of memory: rebuilt by the next use
    }
  }

  /// `removed` (removed[bounds[p], bounds[p + 1]) from partition p) were
  /// erased or discarded. Each slot of a value they held drops its offsets
  /// of rows no longer held: a discard moves `head` past the partition's
  /// start; an erase filters the slot.
  void on_remove(const std::vector<partition_log>& parts, const std::vector<Row>& removed,
                 const std::vector<std::size_t>& bounds, bool erased) noexcept {
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
            if (it->second.parts.size() > p) purge(it->second.parts[p], parts[p], erased);
          }
          if (it->second.empty()) ix->values.erase(it);  // its last row went
        }
      }
    } catch (...) {
      indexes_.clear();  // out of memory: rebuilt by the next use
    }
  }

  /// The held rows of the entries `found`: how many gather() reports.
  static std::size_t rows_of(const std::vector<const value_entry*>& found) noexcept {
    std::size_t n = 0;
    for (const value_entry* e : found)
      for (const value_slot& s : e->parts) n += s.offsets.size() - s.head;
    return n;
  }

  /// Calls emit(partition, offset) for every held row of the entries
  /// `found` (distinct values), partition by partition (partitions 0 to
  /// `partitions` - 1), each partition's in offset order: the order of a
  /// scan.
  template <class Emit>
  static void gather(const std::vector<const value_entry*>& found, std::uint32_t partitions, Emit&& emit) {
    std::vector<std::span<const std::uint64_t>> runs;
    for (std::uint32_t p = 0; p < partitions; ++p) {
      runs.clear();
      for (const value_entry* e : found) {
        if (e->parts.size() <= p || e->parts[p].empty()) continue;
        const value_slot& s = e->parts[p];
        runs.emplace_back(s.offsets.data() + s.head, s.offsets.size() - s.head);
      }
      merge(p, runs, emit);
    }
  }

 private:
  // Emits the union of the ascending, disjoint `runs`, in order: a heap of
  // the runs by their next offset, each run emitted from while it stays
  // below the next one's (rows of one value tend to be consecutive).
  template <class Emit>
  static void merge(std::uint32_t partition, std::vector<std::span<const std::uint64_t>>& runs, Emit& emit) {
    if (runs.size() == 1) {
      for (std::uint64_t at : runs[0]) emit(partition, at);
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
      while (k < r.size() && r[k] < bound) emit(partition, r[k++]);
      r = r.subspan(k);
      if (!r.empty()) heap.emplace(r.front(), i);
    }
  }

  // Adds the held rows of `partition` in [from, to) (after every offset the
  // index holds for that partition).
  static void add_rows(value_index& ix, const std::vector<partition_log>& parts, std::uint32_t partition,
                       std::uint64_t from, std::uint64_t to) {
    const partition_log& part = parts[partition];
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

  std::vector<std::unique_ptr<value_index>> indexes_;  // none until a first use
};

}  // namespace flowlib::detail
