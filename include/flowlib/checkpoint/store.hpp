// flowlib/checkpoint/store.hpp
//
// The contract between the pipeline runtime and a checkpoint policy
// (MemoryCheckpoint, FileCheckpoint): `checkpoint_store`, a small store of
// named records, and the vocabulary flows and operators use to save and
// restore their state through it.
//
// Records. A record is a byte string stored under a path of '/'-separated
// components ("flows/6d61696e/commits/12"). The runtime builds every path
// from fixed names and hex-encoded flow names, so a store sees only the
// characters [0-9a-z_./-]. A store:
//   - writes a record atomically: a reader (this process or the next) sees
//     the whole new record or the whole old one (or none), never a part;
//   - verifies a record when it reads it: a record that is truncated, fails
//     its checksum or carries a format version the store does not know
//     throws flowlib::error (errc::checkpoint_corrupt) naming the record, and
//     nothing is changed;
//   - reports I/O failures as flowlib::error (errc::checkpoint_io), saying
//     what the system said; a failed write leaves the old record in place;
//   - lists the names directly under a path, and removes a path with
//     everything under it.
// The pipeline's protocol on top of these records (offset log, commit log,
// state deltas and snapshots) is in runtime/checkpoint_log.hpp and
// docs/pipelines.md.
//
// Batches. begin_batch() / commit_batch() / abort_batch() bracket the
// records of one micro-batch. The memory and file stores need nothing there
// (each record is atomic, and the commit record written last decides), a
// store over a database makes the bracket one transaction.
//
// Durability. durable() says whether records survive the process. The
// runtime refuses a durable checkpoint over tables whose storage is not
// durable, and the reverse: either would lose data silently at a restart.
#pragma once

#include <flowlib/error.hpp>
#include <flowlib/state.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace flowlib {

/// @brief A checkpoint policy's store of records. See the header comment.
class checkpoint_store {
 public:
  virtual ~checkpoint_store() = default;

  /// Whether records survive the process (a file checkpoint) or not (memory).
  virtual bool durable() const noexcept = 0;
  /// Where the records are, for messages ("memory checkpoint",
  /// "file checkpoint '/var/lib/app/ckpt'").
  virtual std::string describe() const = 0;

  /// The record at `path`, verified; std::nullopt when there is none.
  /// Throws errc::checkpoint_corrupt or errc::checkpoint_io.
  virtual std::optional<std::string> read(std::string_view path) const = 0;
  /// Writes the record at `path` atomically, replacing any record there.
  /// Throws errc::checkpoint_io, leaving the old record.
  virtual void write(std::string_view path, std::string_view bytes) = 0;
  /// The names (last components) of the records and folders directly under
  /// `path`, sorted; empty when there are none.
  virtual std::vector<std::string> list(std::string_view path) const = 0;
  /// Removes `path` and everything under it (nothing when absent).
  virtual void remove(std::string_view path) = 0;
  /// Removes each of `paths` as remove() does; a store may make the removals
  /// durable together (one directory fsync for many files).
  virtual void remove_many(const std::vector<std::string>& paths) {
    for (const auto& p : paths) remove(p);
  }

  /// Brackets one micro-batch's records (see the header comment).
  virtual void begin_batch() {}
  virtual void commit_batch() {}
  virtual void abort_batch() noexcept {}

 protected:
  checkpoint_store() = default;
  checkpoint_store(const checkpoint_store&) = default;
  checkpoint_store& operator=(const checkpoint_store&) = default;
};

}  // namespace flowlib
