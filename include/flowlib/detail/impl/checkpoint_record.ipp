// flowlib/detail/impl/checkpoint_record.ipp
//
// The definitions detail/checkpoint_record.hpp declares: inline in
// header-only mode, compiled once by src/flowlib.cpp under
// FLOWLIB_SEPARATE_COMPILATION (detail/config.hpp).
#pragma once

#include <flowlib/detail/checkpoint_record.hpp>

namespace flowlib::detail {

FLOWLIB_DECL std::string checkpoint_hex32(std::uint32_t v) {
  constexpr char digits[] = "0123456789abcdef";
  std::string s = "0x";
  for (int shift = 28; shift >= 0; shift -= 4) s.push_back(digits[(v >> shift) & 0xfu]);
  return s;
}

FLOWLIB_DECL std::string checkpoint_name_hex(std::string_view name) {
  constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(name.size() * 2);
  for (unsigned char c : name) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out.empty() ? std::string("_") : out;
}

FLOWLIB_DECL std::string checkpoint_where(std::string_view path, std::string_view store) {
  std::string w = "record '";
  w.append(path);
  w += "' in ";
  w.append(store);
  return w;
}

FLOWLIB_DECL void frame_header(std::string& out) {
  const std::size_t payload = out.size() - checkpoint_record_header;
  out.replace(0, checkpoint_record_magic.size(), checkpoint_record_magic);
  checkpoint_put_le_at(out, 4, checkpoint_record_version, 2);
  checkpoint_put_le_at(out, 6, 0, 2);
  checkpoint_put_le_at(out, 8, payload, 8);
}

FLOWLIB_DECL void frame_close(std::string& out) {
  frame_header(out);
  checkpoint_put_le(out, crc32c(out), 4);
}

FLOWLIB_DECL void frame_seal(std::string& record) {
  const std::size_t body = record.size() - 4;
  checkpoint_put_le_at(record, body, crc32c(std::string_view(record).substr(0, body)), 4);
}

FLOWLIB_DECL std::string frame(std::string_view payload) {
  std::string out;
  out.reserve(payload.size() + checkpoint_record_overhead);
  out.assign(checkpoint_record_header, '\0');
  out.append(payload);
  frame_close(out);
  return out;
}

[[noreturn]] FLOWLIB_DECL void checkpoint_corrupt(std::string_view where, const std::string& what) {
  throw error(errc::checkpoint_corrupt, std::string(checkpoint_error_owner), "", "",
              std::string(where) + ": " + what + "; the record is left as it is");
}

FLOWLIB_DECL std::string_view unframe(std::string_view bytes, std::string_view where) {
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

FLOWLIB_DECL std::vector<std::string> listed_names(std::vector<std::string> names) {
  if (!std::is_sorted(names.begin(), names.end())) std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

FLOWLIB_DECL void check_record_path(std::string_view path, std::string_view store, bool root_ok) {
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
