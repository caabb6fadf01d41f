// flowlib/state.hpp
//
// The vocabulary of flow and operator state in checkpoints: what a component
// writes for a committed batch (checkpoint_scope), what a restore hands it
// back (checkpoint_blobs), and the byte writer and reader it encodes with.
// Every flow's write_checkpoint(byte_writer&, checkpoint_scope) and
// read_checkpoint(table, const checkpoint_blobs&) use them (the flow
// contract, flows/contract.hpp); the encoding of values is
// detail/byte_codec.hpp's.
#pragma once

#include <flowlib/error.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace flowlib {

/// @brief What a flow or operator writes for one committed batch.
enum class checkpoint_scope : std::uint8_t {
  /// The whole state: written every PipelineOptions::snapshot_interval
  /// batches, and read first by a restore.
  snapshot,
  /// What the last apply changed since the previous write_checkpoint() (a
  /// delta): O(the batch), never O(the state).
  delta,
};

/// @brief The records a restore reads for one flow or operator: the last
/// snapshot at or before the last commit (none when no snapshot was written
/// yet), then every delta after it, oldest first.
struct checkpoint_blobs {
  std::optional<std::string_view> snapshot;
  std::vector<std::string_view> deltas;
  bool empty() const noexcept { return !snapshot && deltas.empty(); }
  /// The records of a snapshot alone (checkpoint_snapshot()'s bytes).
  static checkpoint_blobs of_snapshot(std::string_view bytes) { return {bytes, {}}; }
};

/// @brief Appends fixed-width little-endian integers and length-prefixed bytes.
struct byte_writer {
  std::string& out;
  template <class I>
  void integer(I v) {
    using U = std::make_unsigned_t<I>;
    auto u = static_cast<U>(v);
    for (std::size_t i = 0; i < sizeof(I); ++i) {
      out.push_back(static_cast<char>(static_cast<unsigned char>(u & 0xffu)));
      if constexpr (sizeof(I) > 1) u = static_cast<U>(u >> 8);
    }
  }
  void bytes(std::string_view s) {
    integer<std::uint64_t>(s.size());
    out.append(s);
  }
};

/// @brief Reads what byte_writer wrote, bounds-checked: every read past the end
/// throws flowlib::error (`code`: errc::invalid_argument unless the caller
/// says otherwise; checkpoint readers say errc::checkpoint_corrupt) naming
/// `owner` (the flow or operator whose state is read), what was wrong and
/// the byte offset, with `suffix` appended (say, what the caller leaves
/// unchanged).
struct byte_reader {
  std::string_view in;
  std::size_t pos = 0;
  std::string_view owner;
  std::string_view suffix;
  errc code = errc::invalid_argument;

  [[noreturn]] void fail(const std::string& what) const {
    throw error(code, std::string(owner), "", "",
                "cannot restore the state: " + what + " at byte " + std::to_string(pos) +
                    std::string(suffix));
  }
  /// Bytes not read yet.
  std::size_t remaining() const noexcept { return in.size() - pos; }
  void need(std::size_t n) const {
    if (in.size() - pos < n) fail("the data is truncated");
  }
  template <class I>
  I integer() {
    using U = std::make_unsigned_t<I>;
    need(sizeof(I));
    U u = 0;
    for (std::size_t i = 0; i < sizeof(I); ++i) {
      u = static_cast<U>(u | (static_cast<U>(static_cast<unsigned char>(in[pos + i])) << (8 * i)));
    }
    pos += sizeof(I);
    return static_cast<I>(u);
  }
  std::string_view bytes() {
    const auto n = integer<std::uint64_t>();
    if (n > in.size() - pos) fail("a string's length runs past the end of the data");
    std::string_view s = in.substr(pos, static_cast<std::size_t>(n));
    pos += static_cast<std::size_t>(n);
    return s;
  }
};

/// @brief The whole state of a flow or an operator as bytes: what its
/// write_checkpoint(out, checkpoint_scope::snapshot) writes. For a program
/// that keeps its checkpoints itself (a pipeline does this for its flows),
/// together with whatever records how far the program has read. The bytes
/// are read back with `read_checkpoint(checkpoint_blobs::of_snapshot(b))`
/// (an operator) or `read_checkpoint(table, checkpoint_blobs::of_snapshot(b))`
/// (a flow).
template <class Component>
  requires requires(const Component& c, byte_writer& out) {
    c.write_checkpoint(out, checkpoint_scope::snapshot);
  }
std::string checkpoint_snapshot(const Component& c) {
  std::string bytes;
  byte_writer out{bytes};
  c.write_checkpoint(out, checkpoint_scope::snapshot);
  return bytes;
}

}  // namespace flowlib
