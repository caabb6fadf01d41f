// flowlib/storage/detail/sqlite_db.hpp
//
// A thin RAII layer over the SQLite C API, shared by SqliteCheckpoint
// (checkpoint/sqlite.hpp) and SqliteStorage (storage/sqlite.hpp). Internal,
// except SqliteOptions and SqliteSync, which users pass to SqliteCheckpoint.
//
//   - sqlite_connection: sqlite3_open_v2, WAL journal, the `synchronous`
//     level and the busy timeout from SqliteOptions, exec() for statements
//     without parameters. Closed with sqlite3_close_v2, so statements still
//     alive keep it open until they are finalized.
//   - sqlite_stmt: a prepared statement, prepared once with
//     SQLITE_PREPARE_PERSISTENT and reused batch after batch (reset and
//     cleared after each use by sqlite_stmt::run / the guard in step loops).
//   - sqlite_savepoint: a nested transaction (SAVEPOINT / RELEASE /
//     ROLLBACK TO), usable inside or outside an open BEGIN.
//   - Error translation: every failing call throws flowlib::error with
//     errc::storage_io (tables) or errc::checkpoint_io (records), in plain
//     words first ("the database or disk is full"), then SQLite's own
//     message and its extended result code. A corrupt file or one that is
//     not a database is errc::checkpoint_corrupt for the checkpoint.
//   - SQL text is never built from data: identifiers are quoted (a double
//     quote doubled) and every value is bound.
#pragma once

#include <flowlib/detail/config.hpp>
#include <flowlib/error.hpp>
#include <flowlib/sqlite_options.hpp>

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>

namespace flowlib {

namespace detail {

/// `name` as an SQL identifier: in double quotes, inner quotes doubled.
FLOWLIB_SQLITE_DECL std::string sql_quote(std::string_view name);

/// The plain-words part of an error message for SQLite result code `rc`.
FLOWLIB_SQLITE_DECL std::string sqlite_plain_words(int rc, int busy_timeout_ms);

/// Throws the flowlib::error for a failed SQLite call (see the header
/// comment). `what` says what was being done ("writing table 'x'"),
/// `owner` is the error's flow field (the table, or "checkpoint").
[[noreturn]] FLOWLIB_SQLITE_DECL void sqlite_fail(sqlite3* db, int rc, errc code,
                                                  std::string_view owner, std::string_view what,
                                                  int busy_timeout_ms);

/// An open database (see the header comment). Not copyable; shared by
/// shared_ptr between the checkpoint and the tables attached to it.
class sqlite_connection {
 public:
  /// Opens (read-write: creates) `path`. Throws errc::checkpoint_io.
  FLOWLIB_SQLITE_DECL sqlite_connection(std::string path, const SqliteOptions& options);
  sqlite_connection(const sqlite_connection&) = delete;
  sqlite_connection& operator=(const sqlite_connection&) = delete;
  FLOWLIB_SQLITE_DECL ~sqlite_connection();

  sqlite3* get() const noexcept { return db_; }
  const std::string& path() const noexcept { return path_; }
  int busy_timeout_ms() const noexcept { return busy_ms_; }
  /// Whether a transaction (BEGIN) is open.
  bool in_transaction() const noexcept { return sqlite3_get_autocommit(db_) == 0; }

  /// Runs `sql` (no parameters, results ignored); throws `code` naming
  /// `owner` and `what` on failure.
  FLOWLIB_SQLITE_DECL void exec(const std::string& sql, errc code, std::string_view owner,
                                std::string_view what) const;
  /// Rolls back an open transaction, ignoring failures (a failed batch's
  /// cleanup; SQLite may have rolled back already).
  FLOWLIB_SQLITE_DECL void rollback_quietly() const noexcept;

 private:
  std::string path_;
  int busy_ms_;
  sqlite3* db_ = nullptr;
};

/// A prepared statement (see the header comment).
class sqlite_stmt {
 public:
  sqlite_stmt() = default;
  /// Prepares `sql` on `c` (persistent: it is reused). Throws `code`.
  FLOWLIB_SQLITE_DECL sqlite_stmt(const sqlite_connection& c, const std::string& sql, errc code,
                                  std::string owner);
  sqlite_stmt(const sqlite_stmt&) = delete;
  sqlite_stmt& operator=(const sqlite_stmt&) = delete;
  sqlite_stmt(sqlite_stmt&& o) noexcept { *this = std::move(o); }
  sqlite_stmt& operator=(sqlite_stmt&& o) noexcept {
    if (this != &o) {
      sqlite3_finalize(st_);
      st_ = std::exchange(o.st_, nullptr);
      db_ = o.db_;
      busy_ms_ = o.busy_ms_;
      code_ = o.code_;
      owner_ = std::move(o.owner_);
    }
    return *this;
  }
  ~sqlite_stmt() { sqlite3_finalize(st_); }

  explicit operator bool() const noexcept { return st_ != nullptr; }
  sqlite3_stmt* get() const noexcept { return st_; }

  // Binding (1-based parameter index). A failure here is a programming
  // error or out of memory; it is reported as the statement's errc.
  void bind_null(int i) { check(sqlite3_bind_null(st_, i), "binding"); }
  void bind_int(int i, std::int64_t v) { check(sqlite3_bind_int64(st_, i, v), "binding"); }
  void bind_real(int i, double v) { check(sqlite3_bind_double(st_, i, v), "binding"); }
  /// The text is copied by SQLite (SQLITE_TRANSIENT): `v` may die after.
  void bind_text(int i, std::string_view v) {
    check(sqlite3_bind_text64(st_, i, v.data(), v.size(), SQLITE_TRANSIENT, SQLITE_UTF8), "binding");
  }
  void bind_blob(int i, std::string_view v) {
    check(sqlite3_bind_blob64(st_, i, v.data(), v.size(), SQLITE_TRANSIENT), "binding");
  }

  /// Steps once: true when a row is available, false when done. Throws on
  /// failure (the statement is reset first, so it can be used again).
  bool step(std::string_view what) {
    const int rc = sqlite3_step(st_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    sqlite3_reset(st_);
    sqlite3_clear_bindings(st_);
    sqlite_fail(db_, rc, code_, owner_, what, busy_ms_);
  }
  /// Runs a statement that returns no rows, then resets it.
  void run(std::string_view what) {
    step(what);
    reset();
  }
  /// Ready for the next use: reset, bindings cleared.
  void reset() noexcept {
    sqlite3_reset(st_);
    sqlite3_clear_bindings(st_);
  }

  // Reading the current row (0-based column index).
  int column_type(int i) const noexcept { return sqlite3_column_type(st_, i); }
  bool is_null(int i) const noexcept { return column_type(i) == SQLITE_NULL; }
  std::int64_t column_int(int i) const noexcept { return sqlite3_column_int64(st_, i); }
  double column_real(int i) const noexcept { return sqlite3_column_double(st_, i); }
  std::string_view column_text(int i) const noexcept {
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(st_, i));
    const int n = sqlite3_column_bytes(st_, i);
    return p == nullptr ? std::string_view() : std::string_view(p, static_cast<std::size_t>(n));
  }
  std::string_view column_blob(int i) const noexcept {
    const auto* p = static_cast<const char*>(sqlite3_column_blob(st_, i));
    const int n = sqlite3_column_bytes(st_, i);
    return p == nullptr ? std::string_view() : std::string_view(p, static_cast<std::size_t>(n));
  }

  errc code() const noexcept { return code_; }
  const std::string& owner() const noexcept { return owner_; }

 private:
  void check(int rc, std::string_view what) {
    if (rc != SQLITE_OK) sqlite_fail(db_, rc, code_, owner_, what, busy_ms_);
  }
  sqlite3_stmt* st_ = nullptr;
  sqlite3* db_ = nullptr;
  int busy_ms_ = 0;
  errc code_ = errc::storage_io;
  std::string owner_;
};

/// Resets a statement when a step loop ends (also by an exception).
struct sqlite_reset_guard {
  sqlite_stmt& s;
  ~sqlite_reset_guard() { s.reset(); }
};

/// A nested transaction: SAVEPOINT now; release() keeps the changes
/// (RELEASE), the destructor without release() undoes them (ROLLBACK TO,
/// then RELEASE). Works inside an open BEGIN and outside one (then it is
/// the transaction).
class sqlite_savepoint {
 public:
  FLOWLIB_SQLITE_DECL sqlite_savepoint(const sqlite_connection& c, errc code, std::string owner);
  sqlite_savepoint(const sqlite_savepoint&) = delete;
  sqlite_savepoint& operator=(const sqlite_savepoint&) = delete;
  FLOWLIB_SQLITE_DECL void release();
  FLOWLIB_SQLITE_DECL ~sqlite_savepoint();

 private:
  const sqlite_connection& c_;
  errc code_;
  std::string owner_;
  bool done_ = false;
};

}  // namespace detail
}  // namespace flowlib

#if !defined(FLOWLIB_SQLITE_SEPARATE_COMPILATION)
#include <flowlib/storage/detail/impl/sqlite_db.ipp>
#endif
