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
#include <flowlib/detail/sqlite_db.hpp>
#include <flowlib/sqlite_options.hpp>
#include <flowlib/error.hpp>

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
  explicit SqliteCheckpoint(std::string path, SqliteOptions options = {})
      : options_(options),
        db_(std::make_shared<detail::sqlite_connection>(std::move(path), options)) {
    const auto& c = *db_;
    check_version();
    if (options_.cache_kib > 0) {
      c.exec("PRAGMA cache_size=-" + std::to_string(options_.cache_kib), errc::checkpoint_io, owner(),
             "setting the page cache of " + describe());
    }
    if (!options_.read_only) {
      c.exec("PRAGMA journal_mode=WAL", errc::checkpoint_io, owner(), "setting the WAL journal on " + describe());
      static constexpr const char* levels[] = {"OFF", "NORMAL", "FULL", "EXTRA"};
      c.exec(std::string("PRAGMA synchronous=") + levels[static_cast<int>(options_.synchronous)],
             errc::checkpoint_io, owner(), "setting synchronous on " + describe());
      detail::sqlite_savepoint sp(c, errc::checkpoint_io, owner());
      c.exec("CREATE TABLE IF NOT EXISTS flowlib_meta(key TEXT PRIMARY KEY, value INTEGER NOT NULL)",
             errc::checkpoint_io, owner(), "creating flowlib_meta in " + describe());
      c.exec("INSERT OR IGNORE INTO flowlib_meta(key, value) VALUES('format_version', " +
                 std::to_string(format_version) + ")",
             errc::checkpoint_io, owner(), "writing the format version in " + describe());
      c.exec("CREATE TABLE IF NOT EXISTS flowlib_records(path TEXT PRIMARY KEY, bytes BLOB NOT NULL)",
             errc::checkpoint_io, owner(), "creating flowlib_records in " + describe());
      c.exec("CREATE TABLE IF NOT EXISTS flowlib_tables(name TEXT PRIMARY KEY, id_bound INTEGER NOT "
             "NULL, log_begin INTEGER NOT NULL, log_end INTEGER NOT NULL)",
             errc::checkpoint_io, owner(), "creating flowlib_tables in " + describe());
      sp.release();
    }
  }
  SqliteCheckpoint(const SqliteCheckpoint&) = delete;
  SqliteCheckpoint& operator=(const SqliteCheckpoint&) = delete;
  ~SqliteCheckpoint() override {
    std::lock_guard lock(mutex_);
    stmts_ = {};  // before the connection may close
  }

  /// @brief True: the records are in a database file.
  bool durable() const noexcept override { return true; }
  /// @brief "SQLite checkpoint '<path>'".
  std::string describe() const override { return "SQLite checkpoint '" + db_->path() + "'"; }
  /// @brief The database file's path.
  const std::string& path() const noexcept { return db_->path(); }
  /// @brief The options it was opened with.
  const SqliteOptions& options() const noexcept { return options_; }

  /// @brief The record at `path`, verified; nullopt when there is none.
  std::optional<std::string> read(std::string_view path) const override {
    detail::check_record_path(path, describe(), false);
    std::lock_guard lock(mutex_);
    auto& s = stmt(stmts_.read, "SELECT bytes FROM flowlib_records WHERE path = ?1");
    detail::sqlite_reset_guard g{s};
    s.bind_text(1, path);
    if (!s.step("reading record '" + std::string(path) + "' in " + describe())) return std::nullopt;
    return std::string(detail::unframe(s.column_blob(0), detail::checkpoint_where(path, describe())));
  }

  /// @brief Stores `bytes` (framed) at `path`, replacing any record there.
  void write(std::string_view path, std::string_view bytes) override {
    detail::check_record_path(path, describe(), false);
    const std::string framed = detail::frame(bytes);
    std::lock_guard lock(mutex_);
    auto& s = stmt(stmts_.write, "INSERT OR REPLACE INTO flowlib_records(path, bytes) VALUES(?1, ?2)");
    s.bind_text(1, path);
    s.bind_blob(2, framed);
    s.run("writing record '" + std::string(path) + "' in " + describe());
  }

  /// @brief The names directly under `path` ("" is the root), sorted.
  std::vector<std::string> list(std::string_view path) const override {
    detail::check_record_path(path, describe(), true);
    const std::string prefix = path.empty() ? std::string() : std::string(path) + "/";
    std::vector<std::string> names;
    std::lock_guard lock(mutex_);
    auto& s = stmt(stmts_.list, "SELECT path FROM flowlib_records WHERE path >= ?1 AND path < ?2");
    detail::sqlite_reset_guard g{s};
    bind_range(s, prefix);
    while (s.step("listing '" + std::string(path) + "' in " + describe())) {
      const std::string_view rest = s.column_text(0).substr(prefix.size());
      names.emplace_back(rest.substr(0, rest.find('/')));
    }
    return detail::listed_names(std::move(names));
  }

  void remove(std::string_view path) override {
    detail::check_record_path(path, describe(), true);
    std::lock_guard lock(mutex_);
    remove_locked(path);
  }

  /// @brief Removes each of `paths`, in one transaction.
  void remove_many(const std::vector<std::string>& paths) override {
    for (const auto& p : paths) detail::check_record_path(p, describe(), true);
    std::lock_guard lock(mutex_);
    detail::sqlite_savepoint sp(*db_, errc::checkpoint_io, owner());
    for (const auto& p : paths) remove_locked(p);
    sp.release();
  }

  /// @brief BEGIN IMMEDIATE: the batch's table changes and records are one
  /// transaction.
  void begin_batch() override {
    std::lock_guard lock(mutex_);
    db_->rollback_quietly();  // a transaction left open by a failure before
    db_->exec("BEGIN IMMEDIATE", errc::checkpoint_io, owner(), "starting a batch in " + describe());
  }
  /// @brief COMMIT. Throws errc::checkpoint_io when it fails (the batch then
  /// does not count; abort_batch() rolls it back).
  void commit_batch() override {
    std::lock_guard lock(mutex_);
    db_->exec("COMMIT", errc::checkpoint_io, owner(), "committing a batch in " + describe());
  }
  /// @brief ROLLBACK (when a transaction is open); cannot fail.
  void abort_batch() noexcept override {
    std::lock_guard lock(mutex_);
    db_->rollback_quietly();
  }

  /// @brief For tools and tests: the SQLite connection (for example to
  /// set `PRAGMA max_page_count`). Do not close it or leave a transaction
  /// open on it.
  sqlite3* native_handle() const noexcept { return db_->get(); }

  /// @brief The connection SqliteStorage tables attach to (internal).
  const std::shared_ptr<detail::sqlite_connection>& connection() const noexcept { return db_; }

 private:
  static std::string owner() { return std::string(detail::checkpoint_error_owner); }

  void check_version() const {
    const auto& c = *db_;
    detail::sqlite_stmt has(c,
                            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = "
                            "'flowlib_meta'",
                            errc::checkpoint_io, owner());
    has.step("reading the format version of " + describe());
    const bool exists = has.column_int(0) != 0;
    has.reset();
    if (!exists) return;
    detail::sqlite_stmt v(c, "SELECT value FROM flowlib_meta WHERE key = 'format_version'",
                          errc::checkpoint_io, owner());
    if (!v.step("reading the format version of " + describe()) || v.is_null(0)) {
      throw error(errc::checkpoint_corrupt, owner(), "", "",
                  describe() + ": flowlib_meta has no format_version; the file was left as it is");
    }
    const std::int64_t version = v.column_int(0);
    if (version != format_version) {
      throw error(errc::checkpoint_corrupt, owner(), "", "",
                  describe() + ": format version " + std::to_string(version) +
                      (version > format_version ? " is newer than" : " is not") +
                      " the version this build reads (" + std::to_string(format_version) +
                      "); the file was left as it is");
    }
  }

  detail::sqlite_stmt& stmt(detail::sqlite_stmt& s, const char* sql) const {
    if (!s) s = detail::sqlite_stmt(*db_, sql, errc::checkpoint_io, owner());
    return s;
  }

  // Binds ?1 and ?2 to the key range of the records under `prefix` ("" is
  // every record): [prefix, prefix with its last '/' raised to '0').
  static void bind_range(detail::sqlite_stmt& s, const std::string& prefix) {
    s.bind_text(1, prefix);
    if (prefix.empty()) {
      s.bind_text(2, "\x7f");  // above every path character ([0-9a-z_./-])
    } else {
      std::string upper = prefix;
      upper.back() = static_cast<char>('/' + 1);
      s.bind_text(2, upper);
    }
  }

  void remove_locked(std::string_view path) {
    const std::string what = "removing '" + std::string(path) + "' in " + describe();
    if (path.empty()) {
      db_->exec("DELETE FROM flowlib_records", errc::checkpoint_io, owner(), what);
      return;
    }
    auto& one = stmt(stmts_.remove_one, "DELETE FROM flowlib_records WHERE path = ?1");
    one.bind_text(1, path);
    one.run(what);
    auto& under = stmt(stmts_.remove_under, "DELETE FROM flowlib_records WHERE path >= ?1 AND path < ?2");
    bind_range(under, std::string(path) + "/");
    under.run(what);
  }

  struct statements {
    detail::sqlite_stmt read, write, list, remove_one, remove_under;
  };

  SqliteOptions options_;
  std::shared_ptr<detail::sqlite_connection> db_;
  mutable std::mutex mutex_;
  mutable statements stmts_;
};

}  // namespace flowlib
