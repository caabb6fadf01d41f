// flowlib/storage/detail/impl/sqlite_db.ipp
//
// The definitions storage/detail/sqlite_db.hpp declares: inline in header-only
// mode, compiled once by src/sqlite.cpp under
// FLOWLIB_SQLITE_SEPARATE_COMPILATION (detail/config.hpp).
#pragma once

#include <flowlib/storage/detail/sqlite_db.hpp>

namespace flowlib::detail {

FLOWLIB_SQLITE_DECL std::string sql_quote(std::string_view name) {
  std::string out;
  out.reserve(name.size() + 2);
  out.push_back('"');
  for (char c : name) {
    if (c == '"') out.push_back('"');
    out.push_back(c);
  }
  out.push_back('"');
  return out;
}

FLOWLIB_SQLITE_DECL std::string sqlite_plain_words(int rc, int busy_timeout_ms) {
  switch (rc & 0xff) {
    case SQLITE_FULL: return "the database or disk is full";
    case SQLITE_READONLY: return "the database file is read-only";
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return "the database is locked by another connection (busy timeout " +
             std::to_string(busy_timeout_ms) + " ms)";
    case SQLITE_IOERR: return "I/O error";
    case SQLITE_CORRUPT: return "the database file is corrupt";
    case SQLITE_NOTADB: return "the file is not a database";
    case SQLITE_CANTOPEN: return "the database file cannot be opened";
    case SQLITE_PERM: return "permission denied";
    case SQLITE_NOMEM: return "out of memory";
    case SQLITE_CONSTRAINT: return "a constraint refused the change";
    default: return "the operation failed";
  }
}

[[noreturn]] FLOWLIB_SQLITE_DECL void sqlite_fail(sqlite3* db, int rc, errc code,
                                                  std::string_view owner, std::string_view what,
                                                  int busy_timeout_ms) {
  const int primary = rc & 0xff;
  if (code == errc::checkpoint_io && (primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB)) {
    code = errc::checkpoint_corrupt;
  }
  std::string msg = std::string(what) + ": " + sqlite_plain_words(rc, busy_timeout_ms);
  msg += " (SQLite: ";
  msg += db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  msg += ", code " + std::to_string(rc) + ")";
  throw error(code, std::string(owner), "", "", std::move(msg));
}

FLOWLIB_SQLITE_DECL sqlite_connection::sqlite_connection(std::string path, const SqliteOptions& options)
    : path_(std::move(path)), busy_ms_(options.busy_timeout_ms) {
  const int flags = options.read_only ? SQLITE_OPEN_READONLY
                                      : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  const int rc = sqlite3_open_v2(path_.c_str(), &db_, flags | SQLITE_OPEN_FULLMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db_ != nullptr ? sqlite3_errmsg(db_) : sqlite3_errstr(rc);
    sqlite3_close_v2(db_);
    db_ = nullptr;
    throw error(errc::checkpoint_io, "checkpoint", "", "",
                "opening SQLite database '" + path_ + "': " + sqlite_plain_words(rc, busy_ms_) +
                    " (SQLite: " + msg + ", code " + std::to_string(rc) + ")");
  }
  sqlite3_extended_result_codes(db_, 1);
  sqlite3_busy_timeout(db_, busy_ms_);
}

FLOWLIB_SQLITE_DECL sqlite_connection::~sqlite_connection() {
  if (db_ != nullptr) {
    if (sqlite3_get_autocommit(db_) == 0) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    sqlite3_close_v2(db_);
  }
}

FLOWLIB_SQLITE_DECL void sqlite_connection::exec(const std::string& sql, errc code,
                                                 std::string_view owner,
                                                 std::string_view what) const {
  const int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) sqlite_fail(db_, rc, code, owner, what, busy_ms_);
}

FLOWLIB_SQLITE_DECL void sqlite_connection::rollback_quietly() const noexcept {
  if (in_transaction()) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
}

FLOWLIB_SQLITE_DECL sqlite_stmt::sqlite_stmt(const sqlite_connection& c, const std::string& sql, errc code,
                                             std::string owner)
    : db_(c.get()), busy_ms_(c.busy_timeout_ms()), code_(code), owner_(std::move(owner)) {
  const int rc = sqlite3_prepare_v3(db_, sql.c_str(), static_cast<int>(sql.size()),
                                    SQLITE_PREPARE_PERSISTENT, &st_, nullptr);
  if (rc != SQLITE_OK) sqlite_fail(db_, rc, code_, owner_, "preparing '" + sql + "'", busy_ms_);
}

FLOWLIB_SQLITE_DECL sqlite_savepoint::sqlite_savepoint(const sqlite_connection& c, errc code,
                                                       std::string owner)
    : c_(c), code_(code), owner_(std::move(owner)) {
  c_.exec("SAVEPOINT flowlib_sp", code_, owner_, "starting a transaction");
}

FLOWLIB_SQLITE_DECL void sqlite_savepoint::release() {
  c_.exec("RELEASE flowlib_sp", code_, owner_, "committing a transaction");
  done_ = true;
}

FLOWLIB_SQLITE_DECL sqlite_savepoint::~sqlite_savepoint() {
  if (done_) return;
  sqlite3* db = c_.get();
  // After some errors (a full disk) SQLite has rolled back the whole
  // transaction already: then there is no savepoint left to roll back to.
  if (sqlite3_exec(db, "ROLLBACK TO flowlib_sp", nullptr, nullptr, nullptr) == SQLITE_OK) {
    sqlite3_exec(db, "RELEASE flowlib_sp", nullptr, nullptr, nullptr);
  }
}

}  // namespace flowlib::detail
