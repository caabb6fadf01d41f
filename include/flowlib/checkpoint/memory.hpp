// flowlib/checkpoint/memory.hpp
//
// MemoryCheckpoint: the checkpoint policy that keeps its records in memory.
// Not durable: the records last as long as the object, which outlives the
// pipelines over it. A program makes one, hands it to a Pipeline by
// reference, and after destroying that pipeline makes a new one over the
// same MemoryCheckpoint: a restart within one process, with the same
// recovery as a restart from a file checkpoint. That is also how tests
// exercise recovery without a file system.
//
// It meets the checkpoint_store contract (checkpoint/store.hpp) the same
// way the file policy does, so that code tested over memory behaves the
// same over files:
//   - records are stored framed (detail/checkpoint_record.hpp); raw() and
//     put_raw() give tools and tests the framed bytes, and a record stored
//     by put_raw() is verified on every read, so a corrupted record is
//     reported exactly as a file checkpoint reports it. A record stored by
//     write() holds the bytes write() framed and nothing else ever touches
//     them: its checksum is computed when raw() first hands it out, and a
//     read returns its payload unverified. (A pipeline writes several
//     records per batch, some as large as its state, and reads them only to
//     restore; the checksum of each would cost as much as copying it.)
//   - paths name records and folders as a directory tree would: writing
//     "a/b" where "a" is a record, or writing "a" where records exist under
//     "a/", fails with errc::checkpoint_io and changes nothing, as the file
//     policy's rename or mkdir would;
//   - every write replaces the whole record at once (under the lock).
//
// Thread-safe: one mutex guards the records (a Stream and a Pipeline may
// read the same checkpoint, an import for instance).
#pragma once

#include <flowlib/checkpoint/store.hpp>
#include <flowlib/detail/checkpoint_record.hpp>
#include <flowlib/error.hpp>

#include <algorithm>
#include <cstddef>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace flowlib {

/// @brief A checkpoint kept in memory: not durable, outlives the pipelines
/// over it (see the header comment).
class MemoryCheckpoint final : public checkpoint_store {
 public:
  MemoryCheckpoint() = default;
  MemoryCheckpoint(const MemoryCheckpoint&) = delete;
  MemoryCheckpoint& operator=(const MemoryCheckpoint&) = delete;

  /// @brief False: the records die with the object.
  bool durable() const noexcept override { return false; }
  /// @brief "memory checkpoint".
  std::string describe() const override { return "memory checkpoint"; }

  /// @brief The record at `path`, verified; nullopt when there is none.
  /// Throws errc::checkpoint_corrupt (the stored bytes stay as they are).
  std::optional<std::string> read(std::string_view path) const override {
    detail::check_record_path(path, describe(), false);
    std::lock_guard lock(mutex_);
    const auto it = records_.find(path);
    if (it == records_.end()) return std::nullopt;
    const record& r = it->second;
    if (r.written) return std::string(payload_of(r.framed));  // see the header comment
    return std::string(detail::unframe(r.framed, detail::checkpoint_where(path, describe())));
  }

  /// @brief Stores `bytes` at `path`, replacing any record there. Throws
  /// errc::checkpoint_io when `path` collides with a folder or runs through
  /// a record (nothing is changed).
  void write(std::string_view path, std::string_view bytes) override {
    detail::check_record_path(path, describe(), false);
    // Framed outside the lock; the checksum's 4 bytes are written by seal().
    std::string framed;
    framed.reserve(bytes.size() + detail::checkpoint_record_overhead);
    framed.assign(detail::checkpoint_record_header, '\0');
    framed.append(bytes);
    detail::frame_header(framed);
    framed.append(4, '\0');
    std::lock_guard lock(mutex_);
    check_placement(path);
    store(path, record{std::move(framed), true, false});
  }

  /// @brief The names directly under `path` ("" is the root), sorted.
  std::vector<std::string> list(std::string_view path) const override {
    detail::check_record_path(path, describe(), true);
    const std::string prefix = folder_prefix(path);
    std::vector<std::string> names;
    std::lock_guard lock(mutex_);
    for (auto it = records_.lower_bound(prefix);
         it != records_.end() && it->first.starts_with(prefix); ++it) {
      const std::string_view rest = std::string_view(it->first).substr(prefix.size());
      const std::string_view name = rest.substr(0, rest.find('/'));
      // Keys are sorted, but a folder's name sorts by its records' keys
      // ("a-b" < "a/c" while "a" < "a-b"): keep the list sorted by name.
      if (names.empty() || names.back() != name) names.emplace_back(name);
    }
    return detail::listed_names(std::move(names));
  }

  void remove(std::string_view path) override {
    detail::check_record_path(path, describe(), true);
    std::lock_guard lock(mutex_);
    if (path.empty()) {
      records_.clear();
      bytes_ = 0;
      return;
    }
    if (const auto it = records_.find(path); it != records_.end()) erase(it);
    const std::string prefix = folder_prefix(path);
    auto it = records_.lower_bound(prefix);
    while (it != records_.end() && it->first.starts_with(prefix)) it = erase(it);
  }

  /// @brief For tools and tests: the framed bytes as stored at `path`
  /// (detail/checkpoint_record.hpp), unverified; nullopt when there are none.
  std::optional<std::string> raw(std::string_view path) const {
    std::lock_guard lock(mutex_);
    const auto it = records_.find(path);
    if (it == records_.end()) return std::nullopt;
    seal(it->second);
    return it->second.framed;
  }

  /// @brief For tools and tests: stores `bytes` at `path` as they are, as
  /// the framed bytes of a record (a later read() verifies them). The same
  /// path rules and collisions as write().
  void put_raw(std::string_view path, std::string bytes) {
    detail::check_record_path(path, describe(), false);
    std::lock_guard lock(mutex_);
    check_placement(path);
    store(path, record{std::move(bytes), false, true});
  }

  /// @brief How many records are stored.
  std::size_t record_count() const {
    std::lock_guard lock(mutex_);
    return records_.size();
  }

  /// @brief The bytes stored: the framed records (payloads plus 20 bytes
  /// each), paths not counted.
  std::size_t byte_size() const {
    std::lock_guard lock(mutex_);
    return bytes_;
  }

 private:
  /// A stored record: its framed bytes, and whether write() framed them
  /// (`written`: trusted, read unverified) and whether their checksum is in
  /// place (`sealed`: always for put_raw()'s bytes, which are kept as given).
  struct record {
    mutable std::string framed;  // its checksum is filled in by a const raw()
    bool written = false;
    mutable bool sealed = true;
  };
  using map_type = std::map<std::string, record, std::less<>>;

  /// The payload of a record write() framed.
  static std::string_view payload_of(const std::string& framed) noexcept {
    return std::string_view(framed).substr(
        detail::checkpoint_record_header, framed.size() - detail::checkpoint_record_overhead);
  }
  /// Writes a written record's checksum, once (under the lock).
  static void seal(const record& r) {
    if (r.sealed) return;
    detail::frame_seal(r.framed);
    r.sealed = true;
  }

  static std::string folder_prefix(std::string_view path) {
    std::string p(path);
    if (!p.empty()) p.push_back('/');
    return p;
  }

  /// The collisions a directory tree would refuse (see the header comment).
  void check_placement(std::string_view path) const {
    for (std::size_t slash = path.find('/'); slash != std::string_view::npos;
         slash = path.find('/', slash + 1)) {
      const std::string_view up = path.substr(0, slash);
      if (records_.find(up) != records_.end()) {
        io_failure(path, "'" + std::string(up) + "' is a record, not a folder");
      }
    }
    const std::string prefix = folder_prefix(path);
    const auto it = records_.lower_bound(prefix);
    if (it != records_.end() && it->first.starts_with(prefix)) {
      io_failure(path, "it is a folder of records");
    }
  }

  [[noreturn]] void io_failure(std::string_view path, const std::string& why) const {
    throw error(errc::checkpoint_io, std::string(detail::checkpoint_error_owner), "", "",
                describe() + ": cannot write record '" + std::string(path) + "': " + why +
                    "; nothing was changed");
  }

  void store(std::string_view path, record r) {
    const auto it = records_.find(path);
    if (it == records_.end()) {
      bytes_ += r.framed.size();
      records_.emplace(std::string(path), std::move(r));
    } else {
      bytes_ = bytes_ - it->second.framed.size() + r.framed.size();
      it->second = std::move(r);
    }
  }

  map_type::iterator erase(map_type::iterator it) {
    bytes_ -= it->second.framed.size();
    return records_.erase(it);
  }

  mutable std::mutex mutex_;
  map_type records_;
  std::size_t bytes_ = 0;
};

}  // namespace flowlib
