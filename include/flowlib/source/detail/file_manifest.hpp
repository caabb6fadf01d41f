// flowlib/source/detail/file_manifest.hpp
//
// The parts of FileSource (source/file.hpp) that know files but not rows:
// the directory listing, the counting pass over a new file, the list of
// files (the manifest) as checkpoint records, loading a listed file back
// with its identity checked, and what both formats' decoders share (the
// cursor in a loaded file, the rescued text of a record that does not
// decode, the error of a file with fewer records than counted). Internal.
//
// Checksum: XXH64 (seed 0, libxxhash) of a file's bytes, computed in the same pass
// that counts its records, and again when the file is loaded for reading.
// A 64-bit hash that runs at memory speed (four independent lanes), so the
// second pass costs a small fraction of decoding; it guards against a file
// rewritten in place with the same size within the same mtime tick (a
// copy tool that keeps times). It is not cryptographic: it detects
// accidents, not an adversary.
//
// Manifest records, under "sources/<hex of the source's name>/files/<n>"
// (n: 20 decimal digits, the index of the record's first file), one record
// per listing that found new files, written before any position that
// counts their records is returned. Payload (little-endian, byte_writer):
//   u8 version (1), u8 format (0 JSON lines, 1 CSV), u8 CSV header (0/1),
//   u8 CSV delimiter, u64 index of the first file, u32 file count, then per
//   file: bytes name, u64 size, i64 mtime in ns since 1970, u64 first record
//   number, u64 record count, u64 checksum.
// The format fields are checked when a source attaches: record counts made
// for one format mean nothing in another.
//
// Counting and loading read with read(2) into buffers of our own (no mmap:
// a file truncated under a mapping would kill the process with SIGBUS,
// and a file that changes is exactly what this code must report).
#pragma once

#include <flowlib/detail/checkpoint_record.hpp>
#include <flowlib/detail/json.hpp>
#include <flowlib/error.hpp>
#include <flowlib/state.hpp>

// libxxhash, inlined (static functions under names of its own): the
// program links nothing for it, and a program that also includes xxhash.h
// the ordinary way keeps its own symbols.
#ifdef XXH_INLINE_ALL
#include <xxhash.h>
#else
#define XXH_INLINE_ALL
#include <xxhash.h>
#undef XXH_INLINE_ALL
#endif

#include <dirent.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

namespace flowlib::detail {

/// The concatenation of `parts`, for messages (it also keeps clear of the
/// false -Wrestrict warnings g++ 12 gives for "literal" + std::string).
inline std::string file_message(std::initializer_list<std::string_view> parts) {
  std::size_t n = 0;
  for (const std::string_view p : parts) n += p.size();
  std::string s;
  s.reserve(n);
  for (const std::string_view p : parts) s.append(p);
  return s;
}

// --- XXH64 -------------------------------------------------------------------------

/// Streaming XXH64 with seed 0 (see the header comment), through libxxhash
/// (xxhash.h, Debian libxxhash-dev), inlined: no library to link.
class xxh64 {
 public:
  xxh64() noexcept { reset(); }

  void reset() noexcept { XXH64_reset(&state_, 0); }
  void update(const char* data, std::size_t n) noexcept { XXH64_update(&state_, data, n); }
  std::uint64_t digest() const noexcept { return XXH64_digest(&state_); }

  /// XXH64 of `s` at once.
  static std::uint64_t of(std::string_view s) noexcept { return XXH64(s.data(), s.size(), 0); }

 private:
  XXH64_state_t state_;
};

// --- The manifest ------------------------------------------------------------------

/// One listed file: its identity when it was listed and its records.
struct file_entry {
  std::string name;             // within the directory
  std::uint64_t size = 0;       // bytes
  std::int64_t mtime_ns = 0;    // modification time, ns since 1970
  std::uint64_t first = 0;      // the source's record number of its first record
  std::uint64_t count = 0;      // its records
  std::uint64_t checksum = 0;   // XXH64 of its bytes
  std::uint64_t end() const noexcept { return first + count; }
};

/// What a manifest's record counts depend on (see the header comment).
struct manifest_format {
  std::uint8_t format = 0;  // 0 JSON lines, 1 CSV
  bool csv_header = true;
  char delimiter = ',';
  friend bool operator==(const manifest_format&, const manifest_format&) = default;
};

inline constexpr std::uint8_t manifest_version = 1;

/// The folder of source `source`'s manifest records.
inline std::string manifest_dir(std::string_view source) {
  std::string d = "sources/";
  d += checkpoint_name_hex(source);
  d += "/files";
  return d;
}

/// The record holding the files from index `first_index` on.
inline std::string manifest_record(const std::string& dir, std::uint64_t first_index) {
  const std::string n = std::to_string(first_index);
  std::string r = dir;
  r += '/';
  r.append(20 - n.size(), '0');
  r += n;
  return r;
}

/// The index a record name stands for; nullopt for a name that is not one.
inline std::optional<std::uint64_t> manifest_record_index(std::string_view name) {
  std::uint64_t v = 0;
  const auto [p, ec] = std::from_chars(name.data(), name.data() + name.size(), v);
  if (ec != std::errc{} || p != name.data() + name.size() || name.size() != 20) return std::nullopt;
  return v;
}

inline std::string encode_manifest(const manifest_format& f, std::uint64_t first_index,
                                   const file_entry* files, std::size_t n) {
  std::string out;
  byte_writer w{out};
  w.integer<std::uint8_t>(manifest_version);
  w.integer<std::uint8_t>(f.format);
  w.integer<std::uint8_t>(f.csv_header ? 1 : 0);
  w.integer<std::uint8_t>(static_cast<std::uint8_t>(f.delimiter));
  w.integer<std::uint64_t>(first_index);
  w.integer<std::uint32_t>(static_cast<std::uint32_t>(n));
  for (std::size_t i = 0; i < n; ++i) {
    const file_entry& e = files[i];
    w.bytes(e.name);
    w.integer<std::uint64_t>(e.size);
    w.integer<std::int64_t>(e.mtime_ns);
    w.integer<std::uint64_t>(e.first);
    w.integer<std::uint64_t>(e.count);
    w.integer<std::uint64_t>(e.checksum);
  }
  return out;
}

struct manifest_chunk {
  manifest_format format;
  std::uint64_t first_index = 0;
  std::vector<file_entry> files;
};

/// Decodes a manifest record; throws errc::checkpoint_corrupt naming `where`.
inline manifest_chunk decode_manifest(std::string_view payload, const std::string& where) {
  const std::string suffix = file_message({" (", where, "; the record is left as it is)"});
  byte_reader r{payload, 0, checkpoint_error_owner, suffix, errc::checkpoint_corrupt};
  const auto version = r.integer<std::uint8_t>();
  if (version != manifest_version)
    r.fail(file_message({"unknown file list version ", std::to_string(version), " (this build reads version 1)"}));
  manifest_chunk c;
  c.format.format = r.integer<std::uint8_t>();
  const auto header = r.integer<std::uint8_t>();
  if (c.format.format > 1 || header > 1) r.fail("an unknown file format");
  c.format.csv_header = header == 1;
  c.format.delimiter = static_cast<char>(r.integer<std::uint8_t>());
  c.first_index = r.integer<std::uint64_t>();
  const auto n = r.integer<std::uint32_t>();
  r.need(std::size_t{n} * 48);  // at least the fixed part of each file
  c.files.reserve(n);
  for (std::uint32_t i = 0; i < n; ++i) {
    file_entry e;
    e.name = std::string(r.bytes());
    e.size = r.integer<std::uint64_t>();
    e.mtime_ns = r.integer<std::int64_t>();
    e.first = r.integer<std::uint64_t>();
    e.count = r.integer<std::uint64_t>();
    e.checksum = r.integer<std::uint64_t>();
    c.files.push_back(std::move(e));
  }
  if (r.pos != payload.size()) r.fail("unexpected bytes after the file list");
  return c;
}

// --- Files -------------------------------------------------------------------------

/// The system's message for errno value `err`.
inline std::string file_errno_text(int err) { return std::system_category().message(err); }

/// A file descriptor closed on destruction.
struct unique_fd {
  int fd = -1;
  unique_fd() = default;
  explicit unique_fd(int f) noexcept : fd(f) {}
  unique_fd(const unique_fd&) = delete;
  unique_fd& operator=(const unique_fd&) = delete;
  ~unique_fd() {
    if (fd >= 0) ::close(fd);
  }
};

/// A file's identity as the manifest records it.
struct file_identity {
  std::uint64_t size = 0;
  std::int64_t mtime_ns = 0;
  bool regular = false;
  friend bool operator==(const file_identity&, const file_identity&) = default;
};

inline file_identity identity_of(const struct ::stat& st) noexcept {
  file_identity id;
  id.size = static_cast<std::uint64_t>(st.st_size);
  id.mtime_ns = static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 +
                static_cast<std::int64_t>(st.st_mtim.tv_nsec);
  id.regular = S_ISREG(st.st_mode);
  return id;
}

/// open(2) for reading, retrying EINTR; the descriptor, or -errno.
inline int open_for_reading(const std::string& path) noexcept {
  for (;;) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) return fd;
    if (errno != EINTR) return -errno;
  }
}

/// read(2) of up to `n` bytes, retrying EINTR and short reads until `n`
/// bytes or the end of the file; the bytes read, or -errno.
inline std::int64_t read_fully(int fd, char* buf, std::size_t n) noexcept {
  std::size_t done = 0;
  while (done < n) {
    const ::ssize_t got = ::read(fd, buf + done, n - done);
    if (got < 0) {
      if (errno == EINTR) continue;
      return -errno;
    }
    if (got == 0) break;
    done += static_cast<std::size_t>(got);
  }
  return static_cast<std::int64_t>(done);
}

/// Names listed by FileSource are never hidden ones: a leading '.' or '_'
/// marks a file still being written, or a tool's own.
inline bool hidden_name(std::string_view name) noexcept {
  return name.empty() || name.front() == '.' || name.front() == '_';
}

/// The names in `dir` that match `pattern` (fnmatch, no flags) and are not
/// hidden, unsorted. Throws errc::source_io naming `source` when the
/// directory cannot be read.
inline std::vector<std::string> matching_names(const std::filesystem::path& dir,
                                               const std::string& pattern, std::string_view source) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    const int err = errno;
    throw error(errc::source_io, std::string(source), "", "",
                file_message({"cannot list directory '", dir.string(), "': ", file_errno_text(err)}));
  }
  std::vector<std::string> names;
  try {
    for (;;) {
      errno = 0;
      const struct ::dirent* e = ::readdir(d);
      if (e == nullptr) {
        if (errno != 0) {
          const int err = errno;
          throw error(errc::source_io, std::string(source), "", "",
                      file_message({"cannot list directory '", dir.string(), "': ", file_errno_text(err)}));
        }
        break;
      }
      const std::string_view name = e->d_name;
      if (hidden_name(name)) continue;
      if (::fnmatch(pattern.c_str(), e->d_name, 0) != 0) continue;
      names.emplace_back(name);
    }
  } catch (...) {
    ::closedir(d);
    throw;
  }
  ::closedir(d);
  return names;
}

/// The identity of `path` now; nullopt when it is gone (any stat failure
/// other than ENOENT/ENOTDIR throws errc::source_io naming `source`).
inline std::optional<file_identity> stat_file(const std::string& path, std::string_view source) {
  struct ::stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    const int err = errno;
    if (err == ENOENT || err == ENOTDIR) return std::nullopt;
    throw error(errc::source_io, std::string(source), "", "",
                file_message({"cannot read the attributes of file '", path, "': ", file_errno_text(err)}));
  }
  return identity_of(st);
}

/// The counting pass over a file not listed yet: reads it once, feeding
/// each block to `counter` (feed(const char*, size_t), finish(), records)
/// and to the checksum. Returns the entry (first left 0), or nullopt when
/// the file is not a regular file, is gone, or changed while it was read
/// (a writer still at work: it is listed at a later listing). Throws
/// errc::source_io naming `source` and the file on a read error.
template <class Counter>
std::optional<file_entry> count_file(const std::filesystem::path& dir, const std::string& name,
                                     Counter& counter, std::vector<char>& block,
                                     std::string_view source) {
  const std::string path = (dir / name).string();
  const auto io_error = [&](int err) {
    throw error(errc::source_io, std::string(source), "", "",
                file_message({"cannot read file '", name, "' in '", dir.string(), "': ", file_errno_text(err)}));
  };
  const int fd = open_for_reading(path);
  if (fd < 0) {
    if (-fd == ENOENT) return std::nullopt;  // removed since the directory was read
    io_error(-fd);
  }
  unique_fd guard(fd);
  struct ::stat st {};
  if (::fstat(fd, &st) != 0) io_error(errno);
  const file_identity before = identity_of(st);
  if (!before.regular) return std::nullopt;
  if (block.size() < (std::size_t{1} << 20)) block.resize(std::size_t{1} << 20);
  xxh64 hash;
  std::uint64_t total = 0;
  for (;;) {
    const std::int64_t got = read_fully(fd, block.data(), block.size());
    if (got < 0) io_error(static_cast<int>(-got));
    if (got == 0) break;
    const auto n = static_cast<std::size_t>(got);
    hash.update(block.data(), n);
    counter.feed(block.data(), n);
    total += n;
    if (n < block.size()) break;
  }
  counter.finish();
  if (::fstat(fd, &st) != 0) io_error(errno);
  const file_identity after = identity_of(st);
  if (after != before || total != before.size) return std::nullopt;
  file_entry e;
  e.name = name;
  e.size = before.size;
  e.mtime_ns = before.mtime_ns;
  e.count = counter.records;
  e.checksum = hash.digest();
  return e;
}

/// A buffer for a listed file's bytes, followed by zero bytes of padding:
/// kept from file to file (see load_file).
struct file_bytes {
  std::unique_ptr<char[]> data;
  std::size_t size = 0;      // the file's bytes
  std::size_t capacity = 0;  // allocated
  std::string_view view() const noexcept { return {data.get(), size}; }
};

/// "file 'a.jsonl' (records 10 to 19 of the source)".
inline std::string describe_file(const file_entry& e) {
  std::string s = "file '";
  s += e.name;
  s += "' (records ";
  s += std::to_string(e.first);
  s += " to ";
  s += std::to_string(e.end() == 0 ? 0 : e.end() - 1);
  s += " of the source)";
  return s;
}

[[noreturn]] inline void file_lost(std::string_view source, const file_entry& e, const std::string& what) {
  throw error(errc::source_data_lost, std::string(source), "", "",
              describe_file(e) + " " + what +
                  " after it was listed, and records of it are still to be read; nothing was "
                  "read (R-SOURCE-3). Put the file back as it was listed, or read the directory "
                  "again under another source name (a new file list) with a full refresh of the "
                  "flow's table");
}

/// Loads listed file `e` whole into `b` (reusing its allocation when it is
/// large enough: fresh pages cost a fault each, which on some machines
/// costs more than reading the bytes), followed by `padding` zero bytes,
/// checking that it is still the file that was listed (size, modification
/// time, checksum): errc::source_data_lost when it is gone or changed,
/// errc::source_io on a read error, both naming `source` and the file (`b`
/// then holds nothing: size 0).
inline void load_file(const std::filesystem::path& dir, const file_entry& e, std::size_t padding,
                      std::string_view source, file_bytes& b) {
  b.size = 0;
  const std::string path = (dir / e.name).string();
  const auto io_error = [&](int err) {
    throw error(errc::source_io, std::string(source), "", "",
                file_message({"cannot read ", describe_file(e), " in '", dir.string(), "': ", file_errno_text(err)}));
  };
  const int fd = open_for_reading(path);
  if (fd < 0) {
    if (-fd == ENOENT) file_lost(source, e, "was removed");
    io_error(-fd);
  }
  unique_fd guard(fd);
  struct ::stat st {};
  if (::fstat(fd, &st) != 0) io_error(errno);
  const file_identity now = identity_of(st);
  if (now.size != e.size) {
    file_lost(source, e,
              file_message({"changed (", std::to_string(e.size), " bytes when listed, ", std::to_string(now.size), " now)"}));
  }
  if (now.mtime_ns != e.mtime_ns) file_lost(source, e, "changed (its modification time is not the listed one)");
  const auto size = static_cast<std::size_t>(e.size);
  if (b.capacity < size + padding + 1) {
    b.data.reset();
    b.capacity = 0;
    b.data = std::make_unique_for_overwrite<char[]>(size + padding + 1);
    b.capacity = size + padding + 1;
  }
  // Read and hashed a block at a time, while the block is in the cache;
  // one byte more than listed is asked for: has the file grown?
  xxh64 hash;
  std::size_t done = 0;
  for (;;) {
    const std::size_t want = std::min<std::size_t>(size + 1 - done, std::size_t{1} << 20);
    const std::int64_t got = read_fully(fd, b.data.get() + done, want);
    if (got < 0) io_error(static_cast<int>(-got));
    hash.update(b.data.get() + done, static_cast<std::size_t>(got));
    done += static_cast<std::size_t>(got);
    if (static_cast<std::size_t>(got) < want || done > size) break;
  }
  if (done != size) file_lost(source, e, "changed (its length is not the listed one)");
  std::memset(b.data.get() + size, 0, padding + 1);
  if (hash.digest() != e.checksum) file_lost(source, e, "changed (its checksum is not the listed one)");
  b.size = size;
}

// --- Reading a loaded file -------------------------------------------------------

/// A place between two records of a loaded file: `byte` where the next
/// record's text starts (or blank text before it), `row` the records
/// before it (for CSV, libcsv's rows, the header included), `line` its
/// line. A later batch of the same file starts there instead of at the
/// file's beginning.
struct file_cursor {
  std::size_t byte = 0;
  std::uint64_t row = 0;
  std::uint64_t line = 1;
};

/// The rescued text of a record that cannot be decoded at all (see
/// source/file.hpp): {"_raw":"<text>","_file":"<file>","_line":<line>}.
inline std::string raw_record_json(std::string_view text, std::string_view file, std::uint64_t line) {
  std::string s = "{\"_raw\":";
  json_append_string(s, text);
  s += ",\"_file\":";
  json_append_string(s, file);
  s += ",\"_line\":";
  s += std::to_string(line);
  s += '}';
  return s;
}

/// File `e` has fewer records than its count: it cannot, having passed its
/// checksum, unless the counting pass and the reader disagree.
[[noreturn]] inline void fewer_records(std::string_view source, const file_entry& e) {
  throw error(errc::source_data_lost, std::string(source), "", "",
              describe_file(e) + " holds fewer records than were counted when it was "
              "listed; nothing was read");
}

// --- JSON lines: counting ----------------------------------------------------------

/// Whether [p, e) holds only spaces, tabs and carriage returns (a blank line).
inline bool blank_line(const char* p, const char* e) noexcept {
  for (; p < e; ++p)
    if (*p != ' ' && *p != '\t' && *p != '\r') return false;
  return true;
}

/// Counts the records of a JSON lines file: its lines that are not blank;
/// a last line without '\n' counts (see source/file.hpp).
struct json_line_counter {
  std::uint64_t records = 0;
  bool content = false;  // the current line has a non-blank byte
  void feed(const char* p, std::size_t n) noexcept {
    const char* end = p + n;
    while (p < end) {
      const char* nl = static_cast<const char*>(std::memchr(p, '\n', static_cast<std::size_t>(end - p)));
      const char* stop = nl != nullptr ? nl : end;
      if (!content) content = !blank_line(p, stop);
      if (nl == nullptr) return;
      if (content) ++records;
      content = false;
      p = nl + 1;
    }
  }
  void finish() noexcept {
    if (content) ++records;
    content = false;
  }
};

}  // namespace flowlib::detail
