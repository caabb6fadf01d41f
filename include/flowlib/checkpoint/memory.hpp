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
#include <flowlib/detail/config.hpp>
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
  FLOWLIB_DECL std::optional<std::string> read(std::string_view path) const override;

  /// @brief Stores `bytes` at `path`, replacing any record there. Throws
  /// errc::checkpoint_io when `path` collides with a folder or runs through
  /// a record (nothing is changed).
  FLOWLIB_DECL void write(std::string_view path, std::string_view bytes) override;

  /// @brief The names directly under `path` ("" is the root), sorted.
  FLOWLIB_DECL std::vector<std::string> list(std::string_view path) const override;

  FLOWLIB_DECL void remove(std::string_view path) override;

  /// @brief For tools and tests: the framed bytes as stored at `path`
  /// (detail/checkpoint_record.hpp), unverified; nullopt when there are none.
  FLOWLIB_DECL std::optional<std::string> raw(std::string_view path) const;

  /// @brief For tools and tests: stores `bytes` at `path` as they are, as
  /// the framed bytes of a record (a later read() verifies them). The same
  /// path rules and collisions as write().
  FLOWLIB_DECL void put_raw(std::string_view path, std::string bytes);

  /// @brief How many records are stored.
  FLOWLIB_DECL std::size_t record_count() const;

  /// @brief The bytes stored: the framed records (payloads plus 20 bytes
  /// each), paths not counted.
  FLOWLIB_DECL std::size_t byte_size() const;

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
  FLOWLIB_DECL static void seal(const record& r);

  FLOWLIB_DECL static std::string folder_prefix(std::string_view path);

  /// The collisions a directory tree would refuse (see the header comment).
  FLOWLIB_DECL void check_placement(std::string_view path) const;

  [[noreturn]] FLOWLIB_DECL void io_failure(std::string_view path, const std::string& why) const;

  FLOWLIB_DECL void store(std::string_view path, record r);

  FLOWLIB_DECL map_type::iterator erase(map_type::iterator it);

  mutable std::mutex mutex_;
  map_type records_;
  std::size_t bytes_ = 0;
};

}  // namespace flowlib

#if !defined(FLOWLIB_SEPARATE_COMPILATION)
#include <flowlib/checkpoint/impl/memory.ipp>
#endif
