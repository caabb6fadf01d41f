// flowlib/source/union.hpp
//
// UnionSource<S...>: several sources of one row type read as one
// (R-STAGE-4). A pipeline flow builds one from `.from(a).from(b)`; a program
// may also write `flowlib::UnionSource{a, b}`. The sources are referenced,
// not copied: keep them alive as long as the pipeline.
//
// Positions. Source i's partition p is the union's partition
// i * 2^24 + p, so every source's offsets are recorded in the checkpoint
// and replayed exactly; a source with a partition number of 2^24 or more
// is refused (errc::invalid_argument).
//
// Batches. plan(from, limit) with limit 0 takes everything each source has
// up to its latest(); otherwise each source is first offered an equal share
// of the limit, then what the others left unused. When the limit does not
// divide, the sources offered one row more, and the order in which unused
// rows are offered, start at source (sum of `from`'s offsets) mod the
// number of sources: a function of `from`, so a replay plans the same
// batch, and one that moves on as batches are read, so a source that keeps
// receiving rows cannot starve the others, even with fewer rows per batch
// than sources. read() returns source 0's rows of the batch, then source
// 1's, ...: the order within a batch is deterministic. delivery() is
// at_least_once when any source's is.
#pragma once

#include <flowlib/error.hpp>
#include <flowlib/source/position.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace flowlib {

/// @brief Several sources of one row type as one source. See the header.
template <class First, class... Rest>
class UnionSource {
 public:
  using row_type = typename First::row_type;
  static constexpr std::size_t size = 1 + sizeof...(Rest);
  static constexpr source_position::partition_type source_shift = 24;

  static_assert((std::is_same_v<typename Rest::row_type, row_type> && ...),
                "flowlib::UnionSource: every source of a union must have the same row type; "
                "map() each flow's rows to one type, or write the sources into one table first.");

  UnionSource(const First& first, const Rest&... rest) : sources_(&first, &rest...) {}
  /// The union of this one's sources and `more`.
  explicit UnionSource(std::tuple<const First*, const Rest*...> sources) : sources_(sources) {}

  source_position start() const {
    return merge([](const auto& s) { return s.start(); });
  }
  source_position latest() const {
    return merge([](const auto& s) { return s.latest(); });
  }
  source_position plan(const source_position& from, std::size_t limit) const {
    std::array<source_position, size> parts;
    std::array<std::uint64_t, size> taken{};
    if (limit == 0) {
      each([&](std::size_t i, const auto& s) { parts[i] = s.plan(slice(from, i), 0); });
      return join(parts);
    }
    // An equal share first, then what the others left, both starting at
    // the source `first` (see the header comment).
    std::uint64_t sum = 0;
    for (const auto& [part, off] : from.partitions()) sum += off;
    const std::size_t first = static_cast<std::size_t>(sum % size);
    const auto turn = [&](std::size_t i) { return (i + size - first) % size; };  // 0 for `first`
    std::uint64_t used = 0;
    each([&](std::size_t i, const auto& s) {
      const std::size_t share = limit / size + (turn(i) < limit % size ? 1 : 0);
      const auto f = slice(from, i);
      parts[i] = share == 0 ? f : s.plan(f, share);
      taken[i] = parts[i].rows_after(f);
      used += taken[i];
    });
    for (std::size_t k = 0; k < size && used < limit; ++k) {
      each([&](std::size_t i, const auto& s) {
        if (turn(i) != k) return;
        const auto f = slice(from, i);
        parts[i] = s.plan(f, static_cast<std::size_t>(taken[i] + (limit - used)));
        const auto now = parts[i].rows_after(f);
        used += now - taken[i];
        taken[i] = now;
      });
    }
    return join(parts);
  }
  template <class Row>
  void read(const source_position& from, const source_position& to, std::vector<Row>& out) const {
    const std::size_t before = out.size();
    try {
      each([&](std::size_t i, const auto& s) { s.read(slice(from, i), slice(to, i), out); });
    } catch (...) {
      out.resize(before);  // as it was: the sources' own promise, kept for the union
      throw;
    }
  }
  flowlib::delivery delivery() const noexcept {
    bool again = false;
    each([&](std::size_t, const auto& s) { again = again || s.delivery() == flowlib::delivery::at_least_once; });
    return again ? flowlib::delivery::at_least_once : flowlib::delivery::exactly_once;
  }
  const std::string& name() const noexcept { return name_; }

  /// The sources, in order.
  const std::tuple<const First*, const Rest*...>& sources() const noexcept { return sources_; }

  /// Source i's part of a union position, as that source's own position.
  static source_position slice(const source_position& p, std::size_t i) {
    source_position out;
    const auto lo = static_cast<source_position::partition_type>(i) << source_shift;
    const auto hi = static_cast<source_position::partition_type>(i + 1) << source_shift;
    for (const auto& [part, off] : p.partitions())
      if (part >= lo && part < hi) out.set(part - lo, off);
    return out;
  }

 private:
  template <class F>
  void each(F&& f) const {
    std::size_t i = 0;
    std::apply([&](const auto*... s) { (f(i++, *s), ...); }, sources_);
  }
  template <class F>
  source_position merge(F&& f) const {
    std::array<source_position, size> parts;
    each([&](std::size_t i, const auto& s) { parts[i] = f(s); });
    return join(parts);
  }
  source_position join(const std::array<source_position, size>& parts) const {
    source_position out;
    for (std::size_t i = 0; i < size; ++i) {
      for (const auto& [part, off] : parts[i].partitions()) {
        if (part >= (source_position::partition_type{1} << source_shift)) {
          throw error(errc::invalid_argument, "", "", "",
                      "UnionSource '" + name_ + "': source " + std::to_string(i) + " has partition " +
                          std::to_string(part) + "; a source in a union may have at most 2^24 partitions");
        }
        out.set((static_cast<source_position::partition_type>(i) << source_shift) | part, off);
      }
    }
    return out;
  }
  static std::string names(const std::tuple<const First*, const Rest*...>& sources) {
    std::string s;
    std::apply([&](const auto*... src) { ((s += (s.empty() ? "" : " + ") + std::string(src->name())), ...); },
               sources);
    return s;
  }

  std::tuple<const First*, const Rest*...> sources_;
  std::string name_ = names(sources_);
};

}  // namespace flowlib
