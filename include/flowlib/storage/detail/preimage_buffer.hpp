// flowlib/storage/detail/preimage_buffer.hpp
//
// The records of the memory store's prepared assigns (storage/memory.hpp):
// the old values of rows assigned from several threads at once, each built
// in a record set aside for it beforehand, so that the assigns themselves
// neither allocate nor touch anything shared. Internal.
#pragma once

#include <algorithm>
#include <cstddef>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

namespace flowlib::detail {

/// The records of prepared assigns: rows built in place at the index a
/// ticket names, in a buffer reserved ahead (reserve() may throw; take()
/// and construct() cannot). Every index below size() holds a row once its
/// assign ran; clear() destroys them.
template <class Row>
class preimage_buffer {
 public:
  preimage_buffer() = default;
  preimage_buffer(const preimage_buffer&) = delete;
  preimage_buffer& operator=(const preimage_buffer&) = delete;
  /// A moved-from buffer is empty and holds no memory.
  preimage_buffer(preimage_buffer&& o) noexcept { swap(o); }
  preimage_buffer& operator=(preimage_buffer&& o) noexcept {
    preimage_buffer(std::move(o)).swap(*this);  // this one's records are freed with the temporary
    return *this;
  }
  ~preimage_buffer() { release(); }

  void swap(preimage_buffer& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(cap_, o.cap_);
    std::swap(used_, o.used_);
  }

  std::size_t size() const noexcept { return used_; }
  /// Room for n records in all (the rows held are moved to a new buffer).
  void reserve(std::size_t n) {
    if (n <= cap_) return;
    std::allocator<Row> a;
    const std::size_t cap = std::max(n, 2 * cap_);
    Row* d = a.allocate(cap);
    for (std::size_t i = 0; i < used_; ++i) {
      ::new (static_cast<void*>(d + i)) Row(std::move(data_[i]));
      data_[i].~Row();
    }
    if (data_ != nullptr) a.deallocate(data_, cap_);
    data_ = d;
    cap_ = cap;
  }
  /// The next record's index (room reserved).
  std::size_t take() noexcept { return used_++; }
  void construct(std::size_t i, Row&& r) noexcept { ::new (static_cast<void*>(data_ + i)) Row(std::move(r)); }
  Row& operator[](std::size_t i) noexcept { return data_[i]; }
  void clear() noexcept {
    if constexpr (!std::is_trivially_destructible_v<Row>) {
      for (std::size_t i = 0; i < used_; ++i) data_[i].~Row();
    }
    used_ = 0;
  }

 private:
  void release() noexcept {
    clear();
    if (data_ != nullptr) std::allocator<Row>{}.deallocate(data_, cap_);
    data_ = nullptr;
    cap_ = 0;
  }
  Row* data_ = nullptr;
  std::size_t cap_ = 0;
  std::size_t used_ = 0;
};

}  // namespace flowlib::detail
