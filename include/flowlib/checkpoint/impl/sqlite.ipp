// flowlib/checkpoint/impl/sqlite.ipp
//
// The definitions checkpoint/sqlite.hpp declares: inline in header-only mode,
// compiled once by src/sqlite.cpp under FLOWLIB_SQLITE_SEPARATE_COMPILATION
// (detail/config.hpp).
#pragma once

#include <flowlib/checkpoint/sqlite.hpp>

namespace flowlib {

FLOWLIB_SQLITE_DECL SqliteCheckpoint::SqliteCheckpoint(std::string path, SqliteOptions options)
    : options_(options), db_(std::make_shared<detail::sqlite_connection>(std::move(path), options)) {
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

FLOWLIB_SQLITE_DECL SqliteCheckpoint::~SqliteCheckpoint() {
  std::lock_guard lock(mutex_);
  stmts_ = {};  // before the connection may close
}

FLOWLIB_SQLITE_DECL std::optional<std::string> SqliteCheckpoint::read(std::string_view path) const {
  detail::check_record_path(path, describe(), false);
  std::lock_guard lock(mutex_);
  auto& s = stmt(stmts_.read, "SELECT bytes FROM flowlib_records WHERE path = ?1");
  detail::sqlite_reset_guard g{s};
  s.bind_text(1, path);
  if (!s.step("reading record '" + std::string(path) + "' in " + describe())) return std::nullopt;
  return std::string(detail::unframe(s.column_blob(0), detail::checkpoint_where(path, describe())));
}

FLOWLIB_SQLITE_DECL void SqliteCheckpoint::write(std::string_view path, std::string_view bytes) {
  detail::check_record_path(path, describe(), false);
  const std::string framed = detail::frame(bytes);
  std::lock_guard lock(mutex_);
  auto& s = stmt(stmts_.write, "INSERT OR REPLACE INTO flowlib_records(path, bytes) VALUES(?1, ?2)");
  s.bind_text(1, path);
  s.bind_blob(2, framed);
  s.run("writing record '" + std::string(path) + "' in " + describe());
}

FLOWLIB_SQLITE_DECL std::vector<std::string> SqliteCheckpoint::list(std::string_view path) const {
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

FLOWLIB_SQLITE_DECL void SqliteCheckpoint::remove(std::string_view path) {
  detail::check_record_path(path, describe(), true);
  std::lock_guard lock(mutex_);
  remove_locked(path);
}

FLOWLIB_SQLITE_DECL void SqliteCheckpoint::remove_many(const std::vector<std::string>& paths) {
  for (const auto& p : paths) detail::check_record_path(p, describe(), true);
  std::lock_guard lock(mutex_);
  detail::sqlite_savepoint sp(*db_, errc::checkpoint_io, owner());
  for (const auto& p : paths) remove_locked(p);
  sp.release();
}

FLOWLIB_SQLITE_DECL void SqliteCheckpoint::begin_batch() {
  std::lock_guard lock(mutex_);
  db_->rollback_quietly();  // a transaction left open by a failure before
  db_->exec("BEGIN IMMEDIATE", errc::checkpoint_io, owner(), "starting a batch in " + describe());
}

FLOWLIB_SQLITE_DECL void SqliteCheckpoint::commit_batch() {
  std::lock_guard lock(mutex_);
  db_->exec("COMMIT", errc::checkpoint_io, owner(), "committing a batch in " + describe());
}

FLOWLIB_SQLITE_DECL void SqliteCheckpoint::abort_batch() noexcept {
  std::lock_guard lock(mutex_);
  db_->rollback_quietly();
}

FLOWLIB_SQLITE_DECL std::string SqliteCheckpoint::describe() const {
  return "SQLite checkpoint '" + db_->path() + "'";
}

FLOWLIB_SQLITE_DECL std::string SqliteCheckpoint::owner() {
  return std::string(detail::checkpoint_error_owner);
}

FLOWLIB_SQLITE_DECL void SqliteCheckpoint::check_version() const {
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

FLOWLIB_SQLITE_DECL detail::sqlite_stmt& SqliteCheckpoint::stmt(
    detail::sqlite_stmt& s, const char* sql) const {
  if (!s) s = detail::sqlite_stmt(*db_, sql, errc::checkpoint_io, owner());
  return s;
}

FLOWLIB_SQLITE_DECL void SqliteCheckpoint::bind_range(detail::sqlite_stmt& s,
                                                      const std::string& prefix) {
  s.bind_text(1, prefix);
  if (prefix.empty()) {
    s.bind_text(2, "\x7f");  // above every path character ([0-9a-z_./-])
  } else {
    std::string upper = prefix;
    upper.back() = static_cast<char>('/' + 1);
    s.bind_text(2, upper);
  }
}

FLOWLIB_SQLITE_DECL void SqliteCheckpoint::remove_locked(std::string_view path) {
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

}  // namespace flowlib
