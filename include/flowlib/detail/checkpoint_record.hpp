// flowlib/detail/checkpoint_record.hpp
//
// The framing of one checkpoint record, shared by every checkpoint policy
// (checkpoint/memory.hpp, checkpoint/file.hpp), and the rule for record
// paths. Internal.
//
// Layout (all integers little-endian):
//   offset  size  field
//        0     4  magic "FLCK"
//        4     2  format version (1)
//        6     2  flags (0; no flag is defined in version 1)
//        8     8  payload length N
//       16     N  payload (the runtime's bytes, opaque here)
//     16+N     4  CRC-32C (detail/crc32.hpp) of bytes [0, 16+N)
// so a record is 20 bytes longer than its payload.
//
// unframe() checks, in this order, and throws flowlib::error
// (errc::checkpoint_corrupt) at the first failure, naming `where`:
//   - the magic: "not a flowlib checkpoint record";
//   - the version, before anything else is trusted (a later format may lay
//     out the rest differently): "unknown format version N (this build reads
//     version 1)";
//   - the length: "truncated: N bytes of M" (M is "at least 20" while the
//     header itself is cut), or trailing bytes past the checksum;
//   - the checksum: "checksum mismatch (stored 0x..., computed 0x...)";
//   - the flags (covered by the checksum, so a set flag was written that
//     way by a newer build).
// It never changes anything: it returns a view into `bytes`.
//
// Record paths are '/'-separated components (store.hpp); check_record_path()
// refuses what could escape a file checkpoint's directory or collide with
// its temporary files and journals: an empty component, "." or "..", a
// component that starts with ".tmp-" or ".journal-", a NUL byte.
#pragma once

#include <flowlib/detail/config.hpp>
#include <flowlib/detail/crc32.hpp>
#include <flowlib/error.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace flowlib::detail {

inline constexpr std::string_view checkpoint_record_magic = "FLCK";
inline constexpr std::uint16_t checkpoint_record_version = 1;
/// Magic, version, flags and payload length.
inline constexpr std::size_t checkpoint_record_header = 16;
/// Header and checksum: a record's size is its payload's plus this.
inline constexpr std::size_t checkpoint_record_overhead = checkpoint_record_header + 4;
/// Prefix of a file checkpoint's temporary files; no record path component
/// may start with it.
inline constexpr std::string_view checkpoint_temp_prefix = ".tmp-";
/// Prefix of a file checkpoint's batch journals (checkpoint/file.hpp); no
/// record path component may start with it.
inline constexpr std::string_view checkpoint_journal_prefix = ".journal-";
/// The `flow` of the flowlib::error a checkpoint store throws (the error's
/// detail names the store and the record).
inline constexpr std::string_view checkpoint_error_owner = "checkpoint";

inline void checkpoint_put_le(std::string& out, std::uint64_t v, std::size_t width) {
  for (std::size_t i = 0; i < width; ++i) {
    out.push_back(static_cast<char>(static_cast<unsigned char>(v & 0xffu)));
    v >>= 8;
  }
}

inline std::uint64_t checkpoint_get_le(std::string_view in, std::size_t at, std::size_t width) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < width; ++i) {
    v |= static_cast<std::uint64_t>(static_cast<unsigned char>(in[at + i])) << (8 * i);
  }
  return v;
}

FLOWLIB_DECL std::string checkpoint_hex32(std::uint32_t v);

/// `name` in lowercase hex, "_" when empty: any name as a safe record path
/// component.
FLOWLIB_DECL std::string checkpoint_name_hex(std::string_view name);

/// "record 'flows/x/1' in memory checkpoint": how stores name a record.
FLOWLIB_DECL std::string checkpoint_where(std::string_view path, std::string_view store);

/// Overwrites `width` bytes of `out` at `at` with `v`, little-endian.
inline void checkpoint_put_le_at(std::string& out, std::size_t at, std::uint64_t v, std::size_t width) {
  for (std::size_t i = 0; i < width; ++i) out[at + i] = static_cast<char>((v >> (8 * i)) & 0xffu);
}

/// @brief Fills in the header of a record built in place: `out` holds
/// checkpoint_record_header bytes (any value), then the payload.
FLOWLIB_DECL void frame_header(std::string& out);

/// @brief Frames a record built in place: `out` holds checkpoint_record_header
/// bytes (any value), then the payload; fills in the header and appends the
/// checksum (a writer that builds its payload in the output saves a copy).
FLOWLIB_DECL void frame_close(std::string& out);

/// @brief Writes the checksum of a whole record whose last 4 bytes were
/// left for it (a header, the payload, 4 bytes of any value).
FLOWLIB_DECL void frame_seal(std::string& record);

/// @brief The record holding `payload` (see the header comment for the
/// layout).
FLOWLIB_DECL std::string frame(std::string_view payload);

[[noreturn]] FLOWLIB_DECL void checkpoint_corrupt(std::string_view where, const std::string& what);

/// @brief The payload of the record `bytes` (a view into it), verified;
/// throws errc::checkpoint_corrupt naming `where` (see the header comment).
FLOWLIB_DECL std::string_view unframe(std::string_view bytes, std::string_view where);

/// @brief What list() returns: `names` sorted, each once.
FLOWLIB_DECL std::vector<std::string> listed_names(std::vector<std::string> names);

/// @brief Throws errc::invalid_argument, naming `store`, unless `path` is a
/// valid record path (see the header comment); the empty path (the root) is
/// valid only where `root_ok` (list() and remove()).
FLOWLIB_DECL void check_record_path(std::string_view path, std::string_view store, bool root_ok);

}  // namespace flowlib::detail

#if !defined(FLOWLIB_SEPARATE_COMPILATION)
#include <flowlib/detail/impl/checkpoint_record.ipp>
#endif
