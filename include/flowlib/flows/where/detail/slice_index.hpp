// flowlib/flows/where/detail/slice_index.hpp
//
// slice_index<Row>: the side index a REPLACE WHERE flow keeps on its target
// when the predicate selects one column's range (where::expr::window): the
// column's value -> the ids of the target rows holding it (a "slice"). It
// makes deleting a slice O(rows of the slice) instead of a scan of the
// table, and finding the slices a window selects O(distinct values).
//
// It also remembers which row ids it knows (`known`), so that rows put into
// the target behind the flow's back (direct inserts, R-WHERE-5) are found
// by a pass over the ids only when the table's size says there are some.
//
// The index is never persisted: it is the table's rows grouped by the
// column, rebuilt from the table on restore (rebuild()). Keys are
// where::value, ordered structurally (one column: one kind, plus null).
// Internal.
#pragma once

#include <flowlib/storage/row_store.hpp>
#include <flowlib/where/value.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <utility>
#include <vector>

namespace flowlib::detail {

/// Value -> row ids of the target rows holding it. See the header comment.
class slice_index {
 public:
  using map_type = std::map<where::value, std::vector<row_id>>;

  /// Forgets everything (no column: the flow's predicate has no window).
  void clear() noexcept {
    slices_.clear();
    known_.clear();
  }

  /// The slices, by value.
  const map_type& slices() const noexcept { return slices_; }
  map_type& slices() noexcept { return slices_; }

  /// The ids of slice `v` (nullptr when none).
  const std::vector<row_id>* find(const where::value& v) const {
    auto it = slices_.find(v);
    return it == slices_.end() ? nullptr : &it->second;
  }

  /// Whether row `id` was added (by the flow or found by rebuild/adopt).
  bool knows(row_id id) const noexcept { return id < known_.size() && known_[id] != 0; }

  /// Makes room so that ids below `bound` can be marked without allocating
  /// (the commit that follows cannot fail).
  void reserve_ids(std::size_t bound) {
    if (known_.size() < bound) known_.resize(bound, 0);
  }

  /// Makes sure slice `v` exists and can take `extra` more ids without
  /// allocating; returns it.
  std::vector<row_id>& prepare(const where::value& v, std::size_t extra) {
    auto& ids = slices_[v];
    ids.reserve(ids.size() + extra);
    return ids;
  }

  /// Adds row `id` to `slice` (prepared: does not allocate).
  void add(std::vector<row_id>& slice, row_id id) noexcept {
    slice.push_back(id);
    known_[id] = 1;
  }

  /// Adds row `id` of value `v` (may allocate).
  void add(const where::value& v, row_id id) {
    reserve_ids(static_cast<std::size_t>(id) + 1);
    slices_[v].push_back(id);
    known_[id] = 1;
  }

  /// Marks the ids of `slice` unknown and empties it (the rows were erased).
  void forget(std::vector<row_id>& slice) noexcept {
    for (row_id id : slice) known_[id] = 0;
    slice.clear();
  }

  /// Removes the empty slices.
  void prune() noexcept {
    for (auto it = slices_.begin(); it != slices_.end();) {
      if (it->second.empty()) it = slices_.erase(it); else ++it;
    }
  }

  /// Rebuilds from `ids` and `value_of(i)` by position (may throw; the
  /// index is replaced only on success).
  template <class ValueOf>
  void rebuild(const std::vector<row_id>& ids, std::size_t id_bound, ValueOf&& value_of) {
    map_type slices;
    std::vector<unsigned char> known(id_bound, 0);
    for (std::size_t i = 0; i < ids.size(); ++i) {
      slices[value_of(i)].push_back(ids[i]);
      known[ids[i]] = 1;
    }
    slices_ = std::move(slices);
    known_ = std::move(known);
  }

 private:
  map_type slices_;
  std::vector<unsigned char> known_;  // by row id: 1 when the row is in slices_
};

}  // namespace flowlib::detail
