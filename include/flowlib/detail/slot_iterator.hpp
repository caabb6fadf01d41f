// flowlib/detail/slot_iterator.hpp
//
// slot_iterator: the forward iterator of a container whose elements lie in
// an array of slots, some of them unoccupied (flat_index's slots, the memory
// store's rows), visiting the occupied ones in slot order. The container
// (Owner) provides, to this class (a friend):
//   - slot_value(i): the element in occupied slot i (a reference);
//   - next_occupied(i): the first occupied slot at or after i, or the end
//     of the array;
// and makes its begin() {this, next_occupied(0)} and its end() {this,
// <slots in the array>}. Iterators compare by slot, and stay valid while
// no element moves. Internal.
#pragma once

#include <cstddef>
#include <iterator>
#include <type_traits>

namespace flowlib::detail {

template <class Owner, class Value, bool Const>
class slot_iterator {
  using owner_ptr = std::conditional_t<Const, const Owner*, Owner*>;

 public:
  using iterator_concept = std::forward_iterator_tag;
  using iterator_category = std::forward_iterator_tag;
  using value_type = Value;
  using difference_type = std::ptrdiff_t;
  using reference = std::conditional_t<Const, const Value&, Value&>;
  using pointer = std::conditional_t<Const, const Value*, Value*>;

  slot_iterator() = default;
  slot_iterator(owner_ptr owner, std::size_t slot) noexcept : owner_(owner), slot_(slot) {}
  template <bool C = Const>
    requires(!C)
  operator slot_iterator<Owner, Value, true>() const noexcept {  // NOLINT: implicit, as in std
    return {owner_, slot_};
  }

  reference operator*() const noexcept { return owner_->slot_value(slot_); }
  pointer operator->() const noexcept { return &owner_->slot_value(slot_); }
  slot_iterator& operator++() noexcept {
    slot_ = owner_->next_occupied(slot_ + 1);
    return *this;
  }
  slot_iterator operator++(int) noexcept {
    slot_iterator t = *this;
    ++*this;
    return t;
  }
  friend bool operator==(const slot_iterator& a, const slot_iterator& b) noexcept {
    return a.slot_ == b.slot_;
  }

  /// The slot the iterator is at.
  std::size_t slot() const noexcept { return slot_; }

 private:
  owner_ptr owner_ = nullptr;
  std::size_t slot_ = 0;
};

}  // namespace flowlib::detail
