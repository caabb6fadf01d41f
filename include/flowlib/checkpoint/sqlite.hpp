// flowlib/checkpoint/sqlite.hpp
//
// SqliteCheckpoint: a durable checkpoint policy in one SQLite database file,
// the same file SqliteStorage tables (storage/sqlite.hpp) live in, so that
// one micro-batch (its table changes, its state records and its commit
// record) is ONE SQLite transaction: after a crash the tables and the
// checkpoint are always at the same batch. Needs the CMake target
// flowlib::sqlite (it links SQLite).
//
//   flowlib::SqliteCheckpoint checkpoint{"/var/lib/app/bookings.db"};
//   flowlib::StreamingTable<Booking, flowlib::SqliteStorage> current{"bookings_current"};
//   flowlib::Pipeline pipeline{"bookings", checkpoint};
//
// The file's layout (all names reserved to flowlib start with "flowlib_" or
// contain "__flowlib"):
//   flowlib_meta(key TEXT PRIMARY KEY, value INTEGER): 'format_version' = 1.
//     A file whose version is newer than this build's is refused
//     (errc::checkpoint_corrupt) before anything is written.
//   flowlib_records(path TEXT PRIMARY KEY, bytes BLOB): the checkpoint's
//     records (checkpoint/store.hpp), each framed and checksummed as the
//     file and memory policies frame them (detail/checkpoint_record.hpp), so
//     a damaged record is reported as checkpoint_corrupt, never misread.
//   flowlib_tables(name TEXT PRIMARY KEY, id_bound INTEGER, log_begin
//     INTEGER, log_end INTEGER): per durable table, its row-id bound and
//     its append log's offsets (storage/sqlite.hpp).
//   one SQL table per SqliteStorage table, and one "<name>__flowlib_log"
//     per table for its append log (storage/sqlite.hpp).
//
// The file uses SQLite's WAL journal: readers (the `sqlite3` shell, a
// report) read the last committed batch while a pipeline writes. See
// SqliteSync (sqlite_options.hpp) for what each `synchronous` level risks.
//
// Batches: begin_batch() is BEGIN IMMEDIATE (the write lock is taken up
// front, waiting up to busy_timeout_ms for another writer), commit_batch()
// is COMMIT, abort_batch() is ROLLBACK. A record written outside a batch is
// its own transaction; remove_many() is one transaction.
//
// Differences from the file and memory policies: record paths are keys, so
// a record and a folder of the same name may coexist (the runtime never
// makes them). Failures are errc::checkpoint_io (or checkpoint_corrupt for
// a damaged file) with SQLite's message: "the database or disk is full",
// "the database file is read-only", "the database is locked by another
// connection (busy timeout N ms)", "I/O error".
//
// Thread-safe: the connection is opened in SQLite's serialized mode and a
// mutex guards the checkpoint's statements. The tables attached to the
// checkpoint share its connection and are written from the pipeline's thread.
#pragma once

#include <flowlib/checkpoint/store.hpp>
#include <flowlib/detail/checkpoint_record.hpp>
#include <flowlib/detail/config.hpp>
#include <flowlib/error.hpp>
#include <flowlib/sqlite_options.hpp>
#include <flowlib/storage/detail/sqlite_db.hpp>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace flowlib {

/// @brief A durable checkpoint in an SQLite database file, shared with the
/// SqliteStorage tables of the pipeline (see the header comment).
class SqliteCheckpoint final : public checkpoint_store {
 public:
  /// @brief The format version this build writes and reads.
  static constexpr std::int64_t format_version = 1;

  /// @brief Opens (creates, unless options.read_only) the database at
  /// `path`. Throws errc::checkpoint_io when it cannot be opened, and
  /// errc::checkpoint_corrupt when it is not a database or was written by a
  /// newer format version (nothing is written then).
  FLOWLIB_SQLITE_DECL explicit SqliteCheckpoint(std::string path, SqliteOptions options = {});
  SqliteCheckpoint(const SqliteCheckpoint&) = delete;
  SqliteCheckpoint& operator=(const SqliteCheckpoint&) = delete;
  FLOWLIB_SQLITE_DECL ~SqliteCheckpoint() override;

  /// @brief True: the records are in a database file.
  bool durable() const noexcept override { return true; }
  /// @brief "SQLite checkpoint '<path>'".
  FLOWLIB_SQLITE_DECL std::string describe() const override;
  /// @brief The database file's path.
  const std::string& path() const noexcept { return db_->path(); }
  /// @brief The options it was opened with.
  const SqliteOptions& options() const noexcept { return options_; }

  /// @brief The record at `path`, verified; nullopt when there is none.
  FLOWLIB_SQLITE_DECL std::optional<std::string> read(std::string_view path) const override;

  /// @brief Stores `bytes` (framed) at `path`, replacing any record there.
  FLOWLIB_SQLITE_DECL void write(std::string_view path, std::string_view bytes) override;

  /// @brief The names directly under `path` ("" is the root), sorted.
  FLOWLIB_SQLITE_DECL std::vector<std::string> list(std::string_view path) const override;

  FLOWLIB_SQLITE_DECL void remove(std::string_view path) override;

  /// @brief Removes each of `paths`, in one transaction.
  FLOWLIB_SQLITE_DECL void remove_many(const std::vector<std::string>& paths) override;

  /// @brief BEGIN IMMEDIATE: the batch's table changes and records are one
  /// transaction.
  FLOWLIB_SQLITE_DECL void begin_batch() override;
  /// @brief COMMIT. Throws errc::checkpoint_io when it fails (the batch then
  /// does not count; abort_batch() rolls it back).
  FLOWLIB_SQLITE_DECL void commit_batch() override;
  /// @brief ROLLBACK (when a transaction is open); cannot fail.
  FLOWLIB_SQLITE_DECL void abort_batch() noexcept override;

  /// @brief For tools and tests: the SQLite connection (for example to
  /// set `PRAGMA max_page_count`). Do not close it or leave a transaction
  /// open on it.
  sqlite3* native_handle() const noexcept { return db_->get(); }

  /// @brief The connection SqliteStorage tables attach to (internal).
  const std::shared_ptr<detail::sqlite_connection>& connection() const noexcept { return db_; }

 private:
  FLOWLIB_SQLITE_DECL static std::string owner();

  FLOWLIB_SQLITE_DECL void check_version() const;

  FLOWLIB_SQLITE_DECL detail::sqlite_stmt& stmt(detail::sqlite_stmt& s, const char* sql) const;

  // Binds ?1 and ?2 to the key range of the records under `prefix` ("" is
  // every record): [prefix, prefix with its last '/' raised to '0').
  FLOWLIB_SQLITE_DECL static void bind_range(detail::sqlite_stmt& s, const std::string& prefix);

  FLOWLIB_SQLITE_DECL void remove_locked(std::string_view path);

  struct statements {
    detail::sqlite_stmt read, write, list, remove_one, remove_under;
  };

  SqliteOptions options_;
  std::shared_ptr<detail::sqlite_connection> db_;
  mutable std::mutex mutex_;
  mutable statements stmts_;
};

}  // namespace flowlib

#if !defined(FLOWLIB_SQLITE_SEPARATE_COMPILATION)
#include <flowlib/checkpoint/impl/sqlite.ipp>
#endif
