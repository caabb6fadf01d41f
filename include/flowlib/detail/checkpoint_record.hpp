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

inline std::string checkpoint_hex32(std::uint32_t v) {
  constexpr char digits[] = "0123456789abcdef";
  std::string s = "0x";
  for (int shift = 28; shift >= 0; shift -= 4) s.push_back(digits[(v >> shift) & 0xfu]);
  return s;
}

/// `name` in lowercase hex, "_" when empty: any name as a safe record path
/// component.
inline std::string checkpoint_name_hex(std::string_view name) {
  constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(name.size() * 2);
  for (unsigned char c : name) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out.empty() ? std::string("_") : out;
}

/// "record 'flows/x/1' in memory checkpoint": how stores name a record.
inline std::string checkpoint_where(std::string_view path, std::string_view store) {
  std::string w = "record '";
  w.append(path);
  w += "' in ";
  w.append(store);
  return w;
}

/// Overwrites `width` bytes of `out` at `at` with `v`, little-endian.
inline void checkpoint_put_le_at(std::string& out, std::size_t at, std::uint64_t v, std::size_t width) {
  for (std::size_t i = 0; i < width; ++i) out[at + i] = static_cast<char>((v >> (8 * i)) & 0xffu);
}

/// @brief Fills in the header of a record built in place: `out` holds
/// checkpoint_record_header bytes (any value), then the payload.
inline void frame_header(std::string& out) {
  const std::size_t payload = out.size() - checkpoint_record_header;
  out.replace(0, checkpoint_record_magic.size(), checkpoint_record_magic);
  checkpoint_put_le_at(out, 4, checkpoint_record_version, 2);
  checkpoint_put_le_at(out, 6, 0, 2);
  checkpoint_put_le_at(out, 8, payload, 8);
}

/// @brief Frames a record built in place: `out` holds checkpoint_record_header
/// bytes (any value), then the payload; fills in the header and appends the
/// checksum (a writer that builds its payload in the output saves a copy).
inline void frame_close(std::string& out) {
  frame_header(out);
  checkpoint_put_le(out, crc32c(out), 4);
}

/// @brief Writes the checksum of a whole record whose last 4 bytes were
/// left for it (a header, the payload, 4 bytes of any value).
inline void frame_seal(std::string& record) {
  const std::size_t body = record.size() - 4;
  checkpoint_put_le_at(record, body, crc32c(std::string_view(record).substr(0, body)), 4);
}

/// @brief The record holding `payload` (see the header comment for the
/// layout).
inline std::string frame(std::string_view payload) {
  std::string out;
  out.reserve(payload.size() + checkpoint_record_overhead);
  out.assign(checkpoint_record_header, '\0');
  out.append(payload);
  frame_close(out);
  return out;
}

[[noreturn]] inline void checkpoint_corrupt(std::string_view where, const std::string& what) {
  throw error(errc::checkpoint_corrupt, std::string(checkpoint_error_owner), "", "",
              std::string(where) + ": " + what + "; the record is left as it is");
}

/// @brief The payload of the record `bytes` (a view into it), verified;
/// throws errc::checkpoint_corrupt naming `where` (see the header comment).
inline std::string_view unframe(std::string_view bytes, std::string_view where) {
  const std::size_t n = bytes.size();
  const std::string_view magic = checkpoint_record_magic;
  const auto truncated_header = [&] {
    checkpoint_corrupt(where, "truncated: " + std::to_string(n) + " bytes of at least " +
                                  std::to_string(checkpoint_record_overhead));
  };
  if (n < magic.size()) {
    // A prefix of the magic is a cut record; anything else is not ours.
    if (bytes == magic.substr(0, n)) truncated_header();
    checkpoint_corrupt(where, "not a flowlib checkpoint record");
  }
  if (bytes.substr(0, magic.size()) != magic) {
    checkpoint_corrupt(where, "not a flowlib checkpoint record");
  }
  if (n < 6) truncated_header();
  const auto version = checkpoint_get_le(bytes, 4, 2);
  if (version != checkpoint_record_version) {
    checkpoint_corrupt(where, "unknown format version " + std::to_string(version) +
                                  " (this build reads version " +
                                  std::to_string(checkpoint_record_version) + ")");
  }
  if (n < checkpoint_record_header) truncated_header();
  const std::uint64_t length = checkpoint_get_le(bytes, 8, 8);
  // `n - overhead` cannot wrap: n >= header, and a record shorter than the
  // overhead is truncated whatever its length field says.
  if (n < checkpoint_record_overhead || length > n - checkpoint_record_overhead) {
    std::string expected = length > UINT64_MAX - checkpoint_record_overhead
                               ? "more than 2^64"
                               : std::to_string(length + checkpoint_record_overhead);
    checkpoint_corrupt(where, "truncated: " + std::to_string(n) + " bytes of " + expected);
  }
  const auto payload_size = static_cast<std::size_t>(length);
  if (n != payload_size + checkpoint_record_overhead) {
    checkpoint_corrupt(where, std::to_string(n) + " bytes where the header says " +
                                  std::to_string(payload_size + checkpoint_record_overhead) +
                                  ": trailing bytes after the checksum");
  }
  const std::size_t body = checkpoint_record_header + payload_size;
  const auto stored = static_cast<std::uint32_t>(checkpoint_get_le(bytes, body, 4));
  const std::uint32_t computed = crc32c(bytes.substr(0, body));
  if (stored != computed) {
    checkpoint_corrupt(where, "checksum mismatch (stored " + checkpoint_hex32(stored) +
                                  ", computed " + checkpoint_hex32(computed) + ")");
  }
  const auto flags = checkpoint_get_le(bytes, 6, 2);
  if (flags != 0) {
    checkpoint_corrupt(where, "unknown flags " + checkpoint_hex32(static_cast<std::uint32_t>(flags)) +
                                  " (this build reads version 1 records without flags)");
  }
  return bytes.substr(checkpoint_record_header, payload_size);
}

/// @brief What list() returns: `names` sorted, each once.
inline std::vector<std::string> listed_names(std::vector<std::string> names) {
  if (!std::is_sorted(names.begin(), names.end())) std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

/// @brief Throws errc::invalid_argument, naming `store`, unless `path` is a
/// valid record path (see the header comment); the empty path (the root) is
/// valid only where `root_ok` (list() and remove()).
inline void check_record_path(std::string_view path, std::string_view store, bool root_ok) {
  const auto bad = [&](const std::string& why) {
    throw error(errc::invalid_argument, std::string(checkpoint_error_owner), "", "",
                std::string(store) + ": invalid record path '" + std::string(path) + "': " + why);
  };
  if (path.empty()) {
    if (!root_ok) bad("a record needs a name");
    return;
  }
  std::size_t start = 0;
  while (true) {
    const std::size_t slash = path.find('/', start);
    const std::string_view part =
        path.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    if (part.empty()) bad("empty component (a leading, trailing or doubled '/')");
    if (part == "." || part == "..") bad("'.' and '..' are not allowed");
    if (part.starts_with(checkpoint_temp_prefix)) {
      bad("a component must not start with '" + std::string(checkpoint_temp_prefix) +
          "' (reserved for temporary files)");
    }
    if (part.starts_with(checkpoint_journal_prefix)) {
      bad("a component must not start with '" + std::string(checkpoint_journal_prefix) +
          "' (reserved for batch journals)");
    }
    if (part.find('\0') != std::string_view::npos) bad("NUL byte");
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
}

}  // namespace flowlib::detail
