// flowlib/source/position.hpp
//
// Positions in a source, and the `source` concept the pipeline reads
// through.
//
// A position is a set of (partition, offset) pairs: for each partition, how
// many of its records come before the position. A single-partition source
// (MemorySource, TableSource) uses partition 0 only; a partitioned log such
// as a Kafka topic fits the same shape, so the checkpoint format does not
// change when one is added. Positions are compared per partition; a
// partition absent from a position is at offset 0.
//
// A source (`flowlib::source`) offers, for a row type Row:
//   - start(): the position before its first record;
//   - latest(): the position after the last record appended so far;
//   - plan(from, limit): the end of the next batch read from `from`: at most
//     `limit` records after `from` (all of them up to latest() when limit is
//     0), never beyond latest(); equal to `from` when there is nothing new.
//     Deterministic for a given `from` and latest();
//   - read(from, to, out): appends to `out` the records between `from` and
//     `to`, in the order a replay reads them again: the same rows, in the
//     same order, every time it is called with the same positions (the
//     exactly-once protocol records `from` and `to` before the batch runs,
//     R-EXACT-1);
//   - delivery(): whether each record appears once (exactly_once) or may
//     appear again later (at_least_once, R-EXACT-3): duplicates are then the
//     user's to remove, with DedupWithinWatermark or by AUTO CDC keys;
//   - name(): for messages and the event log.
// Threads: the const members above may be called from several threads at
// once. A pipeline runs flows over different source objects at the same
// time (PipelineOptions::threads), and two objects may share what they read
// (two adapters over one MemorySource), so a source's const members must
// be as safe to call concurrently as the standard library's const members
// are: no unsynchronised mutable state. flowlib's sources are.
// Optionally, a source that must remember something of its own across
// restarts to make its positions mean the same rows again (FileSource: the
// files it found, in the order it numbered them) offers
// `void attach(checkpoint_store&) const`: the pipeline calls it once when it
// opens, before any batch is planned, with its checkpoint. The source keeps
// its records under "sources/<hex of its name>/" (detail::checkpoint_name_hex),
// written before any position that depends on them is planned; a full
// refresh of a flow does not remove them (the flow reads the source again
// from start(), and the same positions name the same rows).
#pragma once

#include <flowlib/detail/byte_codec.hpp>
#include <flowlib/error.hpp>

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace flowlib {

/// @brief How often a source delivers each record (R-EXACT-3).
enum class delivery : std::uint8_t {
  exactly_once,   ///< every record once
  at_least_once,  ///< a record may appear again (redelivery)
};

/// @brief A source position: a set of (partition, offset) pairs, sorted by
/// partition, one pair per partition. See the header comment.
class source_position {
 public:
  using partition_type = std::uint32_t;
  using offset_type = std::uint64_t;
  using value_type = std::pair<partition_type, offset_type>;

  source_position() = default;
  /// A single-partition position: partition 0 at `offset`.
  static source_position at(offset_type offset) {
    source_position p;
    p.set(0, offset);
    return p;
  }

  /// The offset of `partition` (0 when absent).
  offset_type offset(partition_type partition = 0) const noexcept {
    auto it = find(partition);
    return it != parts_.end() && it->first == partition ? it->second : 0;
  }
  /// Sets the offset of `partition`.
  void set(partition_type partition, offset_type offset) {
    auto it = find(partition);
    if (it != parts_.end() && it->first == partition) {
      it->second = offset;
    } else {
      parts_.insert(it, {partition, offset});
    }
  }
  /// The (partition, offset) pairs, sorted by partition.
  const std::vector<value_type>& partitions() const noexcept { return parts_; }

  /// Records between `from` and this position, summed over partitions
  /// (0 for a partition where this position is not ahead).
  std::uint64_t rows_after(const source_position& from) const noexcept {
    std::uint64_t n = 0;
    for (const auto& [p, o] : parts_) {
      const auto f = from.offset(p);
      if (o > f) n += o - f;
    }
    return n;
  }

  /// Equal when every partition has the same offset (absent = 0).
  friend bool operator==(const source_position& a, const source_position& b) noexcept {
    for (const auto& [p, o] : a.parts_)
      if (b.offset(p) != o) return false;
    for (const auto& [p, o] : b.parts_)
      if (a.offset(p) != o) return false;
    return true;
  }

  /// "0:12" or "0:12,1:40", for messages and the event log.
  std::string to_string() const {
    std::string s;
    for (const auto& [p, o] : parts_) {
      if (!s.empty()) s += ',';
      s += std::to_string(p);
      s += ':';
      s += std::to_string(o);
    }
    return s.empty() ? "0:0" : s;
  }

  /// Byte encoding: u32 count, then (u32 partition, u64 offset) pairs.
  void write(byte_writer& w) const {
    w.integer<std::uint32_t>(static_cast<std::uint32_t>(parts_.size()));
    for (const auto& [p, o] : parts_) {
      w.integer<partition_type>(p);
      w.integer<offset_type>(o);
    }
  }
  static source_position read(byte_reader& r) {
    source_position out;
    const auto n = r.integer<std::uint32_t>();
    r.need(std::size_t{n} * (sizeof(partition_type) + sizeof(offset_type)));
    out.parts_.reserve(n);
    for (std::uint32_t i = 0; i < n; ++i) {
      const auto p = r.integer<partition_type>();
      const auto o = r.integer<offset_type>();
      if (!out.parts_.empty() && out.parts_.back().first >= p)
        r.fail("source position partitions are not in increasing order");
      out.parts_.emplace_back(p, o);
    }
    return out;
  }

 private:
  std::vector<value_type>::iterator find(partition_type p) {
    return std::lower_bound(parts_.begin(), parts_.end(), p,
                            [](const value_type& v, partition_type x) { return v.first < x; });
  }
  std::vector<value_type>::const_iterator find(partition_type p) const {
    return std::lower_bound(parts_.begin(), parts_.end(), p,
                            [](const value_type& v, partition_type x) { return v.first < x; });
  }
  std::vector<value_type> parts_;
};

/// @brief A source of rows with positions; see the header comment.
template <class S>
concept source = requires { typename S::row_type; } &&
    requires(S& s, const S& cs, const source_position& p, std::size_t limit,
             std::vector<typename S::row_type>& out) {
      { cs.start() } -> std::same_as<source_position>;
      { cs.latest() } -> std::same_as<source_position>;
      { cs.plan(p, limit) } -> std::same_as<source_position>;
      cs.read(p, p, out);
      { cs.delivery() } -> std::same_as<flowlib::delivery>;
      { cs.name() } -> std::convertible_to<std::string_view>;
    };

}  // namespace flowlib
