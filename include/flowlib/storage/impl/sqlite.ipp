// flowlib/storage/impl/sqlite.ipp
//
// The definitions storage/sqlite.hpp declares: inline in header-only mode,
// compiled once by src/sqlite.cpp under FLOWLIB_SQLITE_SEPARATE_COMPILATION
// (detail/config.hpp).
#pragma once

#include <flowlib/storage/sqlite.hpp>

namespace flowlib::detail {

FLOWLIB_SQLITE_DECL std::shared_ptr<sqlite_connection> sqlite_table_sql::connect(
    checkpoint_store& checkpoint, const std::string& table, std::string& describe) {
  const auto* ck = dynamic_cast<const SqliteCheckpoint*>(&checkpoint);
  if (ck == nullptr) {
    throw error(errc::checkpoint_mismatch, table, "", "",
                "the table uses flowlib::SqliteStorage, whose rows live in the SQLite database "
                "of the pipeline's checkpoint, but the checkpoint is a " +
                    checkpoint.describe() +
                    ": use a flowlib::SqliteCheckpoint, so that the table and the checkpoint "
                    "are one database, changed in one transaction per batch");
  }
  if (table.empty() || table.starts_with("sqlite_") || table.starts_with("flowlib_")) {
    throw error(errc::invalid_argument, table, "", "",
                "a flowlib::SqliteStorage table needs a name (it names its SQL table) that is "
                "not empty and does not start with 'sqlite_' or 'flowlib_'; give the table "
                "such a name");
  }
  describe = ck->describe();
  return ck->connection();
}

FLOWLIB_SQLITE_DECL sqlite_table_sql::columns sqlite_table_sql::with_id(
    std::string_view id_column, columns row_columns) {
  columns cols{{std::string(id_column), "INTEGER", false}};
  cols.insert(cols.end(), std::make_move_iterator(row_columns.begin()),
              std::make_move_iterator(row_columns.end()));
  return cols;
}

FLOWLIB_SQLITE_DECL std::string sqlite_table_sql::insert_sql(
    const std::string& table, const columns& cols) {
  std::string sql = "INSERT OR REPLACE INTO " + sql_quote(table) + "(";
  std::string values = ") VALUES(";
  for (std::size_t i = 0; i < cols.size(); ++i) {
    if (i != 0) {
      sql += ", ";
      values += ", ";
    }
    sql += sql_quote(cols[i].name);
    values += "?" + std::to_string(i + 1);
  }
  return sql + values + ")";
}

FLOWLIB_SQLITE_DECL std::string sqlite_table_sql::update_sql(
    const std::string& table, const columns& cols) {
  std::string sql = "UPDATE " + sql_quote(table) + " SET ";
  for (std::size_t i = 1; i < cols.size(); ++i) {
    if (i != 1) sql += ", ";
    sql += sql_quote(cols[i].name) + " = ?" + std::to_string(i + 1);
  }
  return sql + " WHERE " + sql_quote(cols[0].name) + " = ?1";
}

FLOWLIB_SQLITE_DECL std::string sqlite_table_sql::select_sql(
    const std::string& table, const columns& cols) {
  std::string sql = "SELECT ";
  for (std::size_t i = 0; i < cols.size(); ++i) sql += (i != 0 ? ", " : "") + sql_quote(cols[i].name);
  return sql + " FROM " + sql_quote(table) + " ORDER BY 1";
}

FLOWLIB_SQLITE_DECL void sqlite_table_sql::ensure_table(const sqlite_connection& c,
                                                        const std::string& owner,
                                                        const std::string& sql_table,
                                                        const columns& cols) {
  std::vector<std::pair<std::string, std::string>> have;
  {
    sqlite_stmt s(c, "SELECT name, type FROM pragma_table_info(?1)", errc::storage_io, owner);
    s.bind_text(1, sql_table);
    while (s.step("reading the columns of '" + sql_table + "'")) {
      have.emplace_back(std::string(s.column_text(0)), std::string(s.column_text(1)));
    }
  }
  if (have.empty()) {
    std::string sql = "CREATE TABLE " + sql_quote(sql_table) + "(";
    for (std::size_t i = 0; i < cols.size(); ++i) {
      if (i != 0) sql += ", ";
      sql += sql_quote(cols[i].name) + " " + std::string(cols[i].type);
      if (i == 0) sql += " PRIMARY KEY";
      else if (!cols[i].null_ok) sql += " NOT NULL";
    }
    c.exec(sql + ")", errc::storage_io, owner, "creating SQL table '" + sql_table + "'");
    return;
  }
  const auto mismatch = [&](const std::string& column, const std::string& why) {
    throw error(errc::checkpoint_mismatch, owner, column, "",
                "SQL table '" + sql_table + "' " + why +
                    ": it was made for another row type; nothing was written (rename the "
                    "table, or migrate the SQL table to the row type)");
  };
  for (const auto& col : cols) {
    const auto it = std::find_if(have.begin(), have.end(), [&](const auto& h) { return h.first == col.name; });
    if (it == have.end()) mismatch(col.name, "has no column '" + col.name + "', which the row type has");
    if (it->second != col.type) {
      mismatch(col.name, "has column '" + col.name + "' of type " +
                             (it->second.empty() ? std::string("(none)") : it->second) +
                             " where the row type needs " + std::string(col.type));
    }
  }
  for (const auto& h : have) {
    const auto it = std::find_if(cols.begin(), cols.end(), [&](const auto& col) { return col.name == h.first; });
    if (it == cols.end()) mismatch(h.first, "has a column '" + h.first + "' that the row type does not have");
  }
}

FLOWLIB_SQLITE_DECL std::pair<std::uint64_t, std::uint64_t> sqlite_table_sql::saved_marks(
    const sqlite_connection& c, const std::string& table, const std::string& describe) {
  sqlite_stmt s(c, "SELECT id_bound, log_end FROM flowlib_tables WHERE name = ?1",
                errc::storage_io, table);
  s.bind_text(1, table);
  if (!s.step("reading table '" + table + "' in " + describe)) return {0, 0};
  return {static_cast<std::uint64_t>(s.column_int(0)), static_cast<std::uint64_t>(s.column_int(1))};
}

FLOWLIB_SQLITE_DECL std::uint64_t sqlite_table_sql::row_id_of(
    const sqlite_stmt& s, const std::string& owner, const std::string& sql_table) {
  const std::int64_t id = s.column_int(0);
  if (id < 0) bad_row(owner, sql_table, static_cast<std::uint64_t>(id), "a negative id");
  return static_cast<std::uint64_t>(id);
}

[[noreturn]] FLOWLIB_SQLITE_DECL void sqlite_table_sql::bad_row(
    const std::string& owner, const std::string& sql_table, std::uint64_t id,
    const std::string& what) {
  throw error(errc::storage_io, owner, "", "id=" + std::to_string(id),
              "SQL table '" + sql_table + "' holds " + what + "; nothing was loaded");
}

[[noreturn]] FLOWLIB_SQLITE_DECL void sqlite_table_sql::bad_value(
    const std::string& owner, const std::string& sql_table, std::string_view column,
    const std::string& id) {
  throw error(errc::storage_io, owner, std::string(column), id,
              "SQL table '" + sql_table +
                  "' holds NULL or a value that cannot be read as the column's C++ type");
}

FLOWLIB_SQLITE_DECL void sqlite_table_sql::attach(std::shared_ptr<sqlite_connection> db,
                                                  std::string table, std::string describe,
                                                  columns row_cols, columns log_cols,
                                                  std::uint64_t bound, std::uint64_t log_begin,
                                                  std::uint64_t log_end) {
  stmts_ = {};
  db_ = std::move(db);
  table_ = std::move(table);
  log_table_ = table_ + "__flowlib_log";
  describe_ = std::move(describe);
  row_cols_ = std::move(row_cols);
  log_cols_ = std::move(log_cols);
  cleared_ = written_ = false;
  committed_ = {bound, log_begin, log_end};
}

FLOWLIB_SQLITE_DECL void sqlite_table_sql::detach() noexcept {
  stmts_ = {};
  db_.reset();
}

FLOWLIB_SQLITE_DECL std::string sqlite_table_sql::begin_write() {
  std::string what = "writing table '" + table_ + "' in " + describe_;
  if (cleared_) db_->exec("DELETE FROM " + sql_quote(table_), errc::storage_io, table_, what);
  return what;
}

FLOWLIB_SQLITE_DECL sqlite_stmt& sqlite_table_sql::upsert() {
  return prepared(stmts_.upsert, [&] { return insert_sql(table_, row_cols_); });
}

FLOWLIB_SQLITE_DECL sqlite_stmt& sqlite_table_sql::update() {
  if (row_cols_.size() < 2) return upsert();
  return prepared(stmts_.update, [&] { return update_sql(table_, row_cols_); });
}

FLOWLIB_SQLITE_DECL void sqlite_table_sql::erase(std::int64_t id, const std::string& what) {
  auto& del = prepared(stmts_.erase, [&] {
    return "DELETE FROM " + sql_quote(table_) + " WHERE \"__flowlib_row_id\" = ?1";
  });
  del.bind_int(1, id);
  del.run(what);
}

FLOWLIB_SQLITE_DECL std::uint64_t sqlite_table_sql::trim_log(
    std::uint64_t begin, const std::string& what) {
  if (begin > committed_.log_begin) {
    auto& trim = prepared(stmts_.log_trim, [&] {
      return "DELETE FROM " + sql_quote(log_table_) + " WHERE \"__flowlib_offset\" < ?1";
    });
    trim.bind_int(1, static_cast<std::int64_t>(begin));
    trim.run(what);
  }
  return std::max(begin, committed_.log_end);
}

FLOWLIB_SQLITE_DECL sqlite_stmt& sqlite_table_sql::log_insert() {
  return prepared(stmts_.log_insert, [&] { return insert_sql(log_table_, log_cols_); });
}

FLOWLIB_SQLITE_DECL void sqlite_table_sql::end_write(std::uint64_t bound, std::uint64_t log_begin,
                                                     std::uint64_t log_end,
                                                     const std::string& what) {
  pending_ = {bound, log_begin, log_end};
  if (pending_.bound != committed_.bound || pending_.log_begin != committed_.log_begin ||
      pending_.log_end != committed_.log_end || cleared_) {
    auto& t = prepared(stmts_.tables, [] {
      return std::string(
          "INSERT OR REPLACE INTO flowlib_tables(name, id_bound, log_begin, log_end) "
          "VALUES(?1, ?2, ?3, ?4)");
    });
    t.bind_text(1, table_);
    t.bind_int(2, static_cast<std::int64_t>(pending_.bound));
    t.bind_int(3, static_cast<std::int64_t>(pending_.log_begin));
    t.bind_int(4, static_cast<std::int64_t>(pending_.log_end));
    t.run(what);
  }
  written_ = true;
}

}  // namespace flowlib::detail
