// flowlib/storage/sqlite.hpp
//
// SqliteStorage: the durable storage policy. A table's rows live in an SQL
// table of the pipeline's SqliteCheckpoint database (checkpoint/sqlite.hpp),
// and, as its working set, in a memory store: flows read and write memory
// exactly as with MemoryStorage (every hot-path hook, the change journal
// included, is the memory store's), and each micro-batch's changes are
// written through to SQLite in the batch's transaction, together with the
// checkpoint's state and commit records. Needs the CMake target
// flowlib::sqlite.
//
//   flowlib::SqliteCheckpoint checkpoint{"app.db"};
//   flowlib::StreamingTable<Booking, flowlib::SqliteStorage> current{"bookings_current"};
//   flowlib::Pipeline pipeline{"bookings", checkpoint};   // attaches `current` at open
//
// Unattached (before a pipeline opens, or without one) the store is the
// memory store and writes nothing anywhere. A Pipeline attaches every table
// its flows write when it opens, before anything is written and before the
// flows restore their state (so REPLACE USING, AUTO CDC and the others
// rebuild their indexes from the loaded rows). Attaching:
//   - refuses any checkpoint but a SqliteCheckpoint (errc::
//     checkpoint_mismatch): the table's rows and the checkpoint must be one
//     database, changed in one transaction;
//   - needs a non-empty table name not starting with "sqlite_" or
//     "flowlib_" (errc::invalid_argument);
//   - creates, when missing, the SQL table named as the table:
//       "__flowlib_row_id" INTEGER PRIMARY KEY, then one column per
//       FLOWLIB_SCHEMA column (types in storage/detail/sqlite_columns.hpp),
//     and "<name>__flowlib_log" for the table's append log:
//       "__flowlib_offset" INTEGER PRIMARY KEY, then the same columns;
//     when they exist, checks their columns against the row type: a missing,
//     extra or differently typed column is errc::checkpoint_mismatch naming
//     the SQL table and the column, and nothing is written;
//   - loads the rows into memory under their saved ids, with the saved
//     id_bound() (flowlib_tables), so every row id is the one committed
//     (AUTO CDC's checkpoint refers to rows by id), and reloads the append
//     log at its saved offsets (a TableSource reading the table resumes
//     where its checkpoint says). The database is the truth: rows the
//     memory store held before are replaced.
// No index is made on the flows' key columns: a reload reads the table
// whole, and the flows keep their key indexes in memory.
//
// Writing through (write_changes(), called by the pipeline after the flow
// ran and before the state and commit records, inside the batch's
// transaction): the rows the batch erased are deleted by
// "__flowlib_row_id", the rows it inserted or changed are written with
// INSERT OR REPLACE, the rows appended to the append log are inserted, and
// flowlib_tables gets the new id bound and log offsets; only what the batch
// changed is written (O(batch)), with prepared statements reused from batch
// to batch. After a clear() (a full refresh) the next write deletes every
// row first and writes the live ones. Rows dropped from the append log
// (full refresh, retention) are deleted from its SQL table; the log is
// otherwise kept whole, so it grows with the rows appended to a table that
// a TableSource reads. A failure throws errc::storage_io; the pipeline
// then rolls back the transaction and the memory journal together.
//
// Changes made to an attached store outside a pipeline batch are written
// only after a clear() (the next write rewrites the table), except direct
// inserts (flowlib::dml_insert, insert_durably()), which are written at
// once in a transaction of their own; otherwise write to a durable table
// through a pipeline. An attached store keeps the database connection open
// until it is destroyed or detached.
#pragma once

#include <flowlib/checkpoint/sqlite.hpp>
#include <flowlib/checkpoint/store.hpp>
#include <flowlib/detail/config.hpp>
#include <flowlib/error.hpp>
#include <flowlib/storage/detail/sqlite_columns.hpp>
#include <flowlib/storage/detail/sqlite_db.hpp>
#include <flowlib/storage/memory.hpp>
#include <flowlib/storage/row_log.hpp>

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <iterator>
#include <memory>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

namespace flowlib {
namespace detail {

/// What a SqliteStorage table does in SQL that does not depend on its row
/// type: it checks the checkpoint and the name, creates or checks the SQL
/// tables, prepares the statements and keeps the committed marks. Compiled
/// once per program, not once per row type; the store binds and reads the
/// rows (sqlite_row_codec). See the header comment.
class sqlite_table_sql {
 public:
  /// The columns of a row type, after the id column the SQL tables start with.
  using columns = std::vector<sqlite_column_def>;

  /// The database of `checkpoint` for table `table`: checks that the
  /// checkpoint is a SqliteCheckpoint and that the name is allowed.
  FLOWLIB_SQLITE_DECL static std::shared_ptr<sqlite_connection> connect(
      checkpoint_store& checkpoint, const std::string& table, std::string& describe);

  /// The row type's columns after `id_column`.
  FLOWLIB_SQLITE_DECL static columns with_id(std::string_view id_column, columns row_columns);

  FLOWLIB_SQLITE_DECL static std::string insert_sql(const std::string& table, const columns& cols);

  /// UPDATE of every column but the id (parameter 1) by id.
  FLOWLIB_SQLITE_DECL static std::string update_sql(const std::string& table, const columns& cols);

  FLOWLIB_SQLITE_DECL static std::string select_sql(const std::string& table, const columns& cols);

  // Creates `sql_table` with columns `cols`, or checks the columns of the
  // one there (see the header comment).
  FLOWLIB_SQLITE_DECL static void ensure_table(const sqlite_connection& c, const std::string& owner,
                                               const std::string& sql_table, const columns& cols);

  /// The id bound and the append log's end saved for `table` (0, 0 when
  /// none is saved).
  FLOWLIB_SQLITE_DECL static std::pair<std::uint64_t, std::uint64_t> saved_marks(
      const sqlite_connection& c, const std::string& table, const std::string& describe);

  /// The id of the current row of a read: not negative.
  FLOWLIB_SQLITE_DECL static std::uint64_t row_id_of(const sqlite_stmt& s, const std::string& owner,
                                                     const std::string& sql_table);

  [[noreturn]] FLOWLIB_SQLITE_DECL static void bad_row(const std::string& owner,
                                                       const std::string& sql_table,
                                                       std::uint64_t id, const std::string& what);
  [[noreturn]] FLOWLIB_SQLITE_DECL static void bad_value(
      const std::string& owner, const std::string& sql_table, std::string_view column,
      const std::string& id);

  // --- Attached: the database, the statements, the committed marks ------------------

  /// Attached to `db` for SQL tables `table` and `log_table`, with the
  /// given columns (the id column first) and committed marks.
  FLOWLIB_SQLITE_DECL void attach(std::shared_ptr<sqlite_connection> db, std::string table,
                                  std::string describe, columns row_cols, columns log_cols,
                                  std::uint64_t bound, std::uint64_t log_begin,
                                  std::uint64_t log_end);
  FLOWLIB_SQLITE_DECL void detach() noexcept;
  bool attached() const noexcept { return db_ != nullptr; }
  void cleared() noexcept { cleared_ = true; }

  /// Runs `write` in a transaction of its own and commits it; on an error
  /// rolls it back and rethrows. Refused (errc::invalid_argument) while a
  /// transaction is open on the connection: a pipeline's batch is running.
  template <class Write>
  void in_transaction(Write&& write) {
    if (db_->in_transaction()) {
      throw error(errc::invalid_argument, table_, "", "",
                  "a direct write to durable table '" + table_ +
                      "' while a batch of its pipeline is open; write between updates");
    }
    const std::string what = "writing table '" + table_ + "' in " + describe_;
    db_->exec("BEGIN IMMEDIATE", errc::storage_io, table_, what);
    try {
      write();
      db_->exec("COMMIT", errc::storage_io, table_, what);
    } catch (...) {
      db_->rollback_quietly();
      throw;
    }
  }

  /// Starts writing a batch's changes: with `clear` pending, every row of
  /// the SQL table is deleted first. Returns what errors say is being done.
  FLOWLIB_SQLITE_DECL std::string begin_write();
  bool clearing() const noexcept { return cleared_; }
  /// INSERT OR REPLACE of a row, its id bound to parameter 1.
  FLOWLIB_SQLITE_DECL sqlite_stmt& upsert();
  /// UPDATE of a row that exists, its id bound to parameter 1 (a row type
  /// with no column but the id has nothing to update: then the upsert).
  FLOWLIB_SQLITE_DECL sqlite_stmt& update();
  /// Rows the last statement changed.
  int changed_rows() const noexcept { return sqlite3_changes(db_->get()); }
  /// Deletes row `id`.
  FLOWLIB_SQLITE_DECL void erase(std::int64_t id, const std::string& what);
  /// Deletes the append log's rows before `begin` when it moved since the
  /// last commit; returns the first log offset not written yet.
  FLOWLIB_SQLITE_DECL std::uint64_t trim_log(std::uint64_t begin, const std::string& what);
  /// INSERT OR REPLACE of an append log row, its offset bound to parameter 1.
  FLOWLIB_SQLITE_DECL sqlite_stmt& log_insert();
  /// Ends writing a batch: records the new marks in flowlib_tables when
  /// they changed.
  FLOWLIB_SQLITE_DECL void end_write(std::uint64_t bound, std::uint64_t log_begin,
                                     std::uint64_t log_end, const std::string& what);
  /// The batch's transaction committed: what was written is committed.
  void mark_committed() noexcept {
    if (!written_) return;
    committed_ = pending_;
    cleared_ = false;
    written_ = false;
  }
  /// The batch's transaction rolled back: what was written is forgotten.
  void mark_rolled_back() noexcept { written_ = false; }

 private:
  struct statements {
    sqlite_stmt upsert, update, erase, log_insert, log_trim, tables;
  };
  struct marks {
    std::uint64_t bound = 0, log_begin = 0, log_end = 0;
  };

  template <class Make>
  sqlite_stmt& prepared(sqlite_stmt& s, Make&& sql) {
    if (!s) s = sqlite_stmt(*db_, sql(), errc::storage_io, table_);
    return s;
  }

  std::shared_ptr<sqlite_connection> db_;
  std::string table_, log_table_, describe_;
  columns row_cols_, log_cols_;
  statements stmts_;
  marks committed_, pending_;
  bool cleared_ = false;  // a clear() not yet written and committed
  bool written_ = false;  // write_changes() ran since the last commit or rollback
};

/// The SqliteStorage row store: a memory_row_store that an attached table
/// writes through to SQLite. See the header comment.
template <class Row>
class sqlite_row_store : public memory_row_store<Row> {
  using base = memory_row_store<Row>;
  using codec = sqlite_row_codec<Row>;
  using sql = sqlite_table_sql;

 public:
  using row_type = Row;
  /// Rows survive the process once attached (the pipeline requires a
  /// durable checkpoint, and a SqliteCheckpoint in particular).
  static constexpr bool durable = true;

  sqlite_row_store() = default;

  /// Removes every row; an attached store deletes them from SQL at the next
  /// write_changes().
  void clear() noexcept {
    base::clear();
    sql_.cleared();
  }
  /// As the memory store's; an attached store also takes the changes it
  /// wrote since as committed (call it after the transaction committed).
  void commit_journal() noexcept {
    base::commit_journal();
    sql_.mark_committed();
  }
  /// As the memory store's; what write_changes() wrote is forgotten (the
  /// transaction it was in is rolled back with the batch).
  void rollback_journal() noexcept {
    base::rollback_journal();
    sql_.mark_rolled_back();
  }

  /// Whether the store is attached to a database.
  bool attached() const noexcept { return sql_.attached(); }

  /// Attaches the store of table `table` (its append log `log`) to the
  /// database of `checkpoint`, which must be a SqliteCheckpoint: creates or
  /// checks the SQL tables and loads the rows and the log (see the header
  /// comment). Not while a journal is open. Throws errc::checkpoint_mismatch,
  /// errc::invalid_argument or errc::storage_io, writing nothing.
  void attach(checkpoint_store& checkpoint, const std::string& table, row_log<Row>& log) {
    assert(!this->journaling() && "flowlib::SqliteStorage: attach() while a journal is open");
    std::string describe;
    auto db = sql::connect(checkpoint, table, describe);
    const sqlite_connection& c = *db;
    const std::string log_table = table + "__flowlib_log";
    auto row_cols = sql::with_id("__flowlib_row_id", row_columns());
    auto log_cols = sql::with_id("__flowlib_offset", row_columns());
    std::vector<std::pair<row_id, Row>> rows;
    row_log<Row> loaded(log.owner());
    std::uint64_t bound = 0, log_end = 0;
    {
      sqlite_savepoint sp(c, errc::storage_io, table);
      sql::ensure_table(c, table, table, row_cols);
      sql::ensure_table(c, table, log_table, log_cols);
      std::tie(bound, log_end) = sql::saved_marks(c, table, describe);
      read_rows(c, table, table, row_cols, [&](std::uint64_t id, Row&& r) {
        if (id >= std::uint64_t{0xffffffff}) sql::bad_row(table, table, id, "a row id above 2^32-2");
        if (!rows.empty() && rows.back().first >= id) sql::bad_row(table, table, id, "ids out of order");
        rows.emplace_back(static_cast<row_id>(id), std::move(r));
        if (id + 1 > bound) bound = id + 1;
      });
      bool any = false;
      std::uint64_t next = 0;
      read_rows(c, table, log_table, log_cols, [&](std::uint64_t off, Row&& r) {
        if (!any) {
          loaded.restart_at(off);
          next = off;
          any = true;
        }
        if (off != next) sql::bad_row(table, log_table, off, "a gap in the append log's offsets");
        loaded.append(r);
        ++next;
      });
      if (!any) {
        loaded.restart_at(log_end);
      } else if (next < log_end) {
        sql::bad_row(table, log_table, next, "fewer rows than flowlib_tables records (log_end " +
                                                 std::to_string(log_end) + ")");
      }
      sp.release();
    }
    // Everything was read: only now is anything in memory replaced.
    base::restore_rows(rows, static_cast<std::size_t>(bound));
    log = std::move(loaded);
    log_ = &log;
    sql_.attach(std::move(db), table, std::move(describe), std::move(row_cols), std::move(log_cols),
                static_cast<std::uint64_t>(base::id_bound()), log.begin_offset(), log.end_offset());
  }

  /// Inserts `rows` outside any pipeline batch (flowlib::dml_insert) and
  /// writes them to the database in a transaction of their own: all or
  /// nothing, in memory and in the file. `table` is the table's name, for
  /// errors. The store must be attached (its pipeline attaches it when it
  /// opens, at its first update): rows inserted before would be replaced by
  /// the database's at attach, so that is errc::invalid_argument, as is a
  /// call while a journal is open (a batch writing this table). Throws
  /// errc::storage_io when the write fails; nothing has changed then.
  void insert_durably(std::vector<Row>& rows, std::string_view table) {
    if (!sql_.attached()) {
      throw error(errc::invalid_argument, std::string(table), "", "",
                  "a direct insert into a SqliteStorage table not attached to its database yet: "
                  "its pipeline attaches it when it opens (at the first update), and loads the "
                  "database's rows in place of what the table held; insert after that");
    }
    if (this->journaling()) {
      throw error(errc::invalid_argument, std::string(table), "", "",
                  "a direct insert while a batch writing this table is open; insert between updates");
    }
    base::begin_journal();
    try {
      base::reserve(rows.size());
      for (Row& r : rows) base::insert(std::move(r));
      sql_.in_transaction([&] { write_changes(); });
    } catch (...) {
      rollback_journal();
      throw;
    }
    commit_journal();
  }

  /// Detaches the store: it keeps its rows in memory and writes nothing.
  void detach() noexcept {
    sql_.detach();
    log_ = nullptr;
  }

  /// Writes the changes since the last commit to the database (see the
  /// header comment); nothing when unattached. Call inside the batch's
  /// transaction, with the journal still open (or after a clear()). Throws
  /// errc::storage_io.
  void write_changes() {
    if (!sql_.attached()) return;
    const bool rewrite = sql_.clearing();
    const std::string what = sql_.begin_write();
    sqlite_stmt& upsert = sql_.upsert();
    if (rewrite) {
      base::for_each_row([&](row_id id, const Row& r) { write_row(upsert, id, r, what); });
    } else {
      ids_.clear();
      base::journal_erased(ids_);
      for (const row_id id : ids_) sql_.erase(id, what);
      // Rows the batch inserted are inserted; rows it changed are updated
      // in place by id (INSERT OR REPLACE would delete and insert them).
      ids_.clear();
      base::journal_changed(ids_);
      const std::size_t inserted = base::journal_inserted().size();
      const base& self = *this;
      sqlite_stmt& update = sql_.update();
      for (std::size_t i = 0; i < ids_.size(); ++i) {
        const row_id id = ids_[i];
        if (i < inserted) {
          write_row(upsert, id, self.get(id), what);
        } else {
          write_row(update, id, self.get(id), what);
          if (sql_.changed_rows() == 0) write_row(upsert, id, self.get(id), what);
        }
      }
    }
    const std::uint64_t begin = log_->begin_offset(), end = log_->end_offset();
    const std::uint64_t from = sql_.trim_log(begin, what);
    if (end > from) {
      sqlite_stmt& ins = sql_.log_insert();
      log_rows_.clear();
      log_->read(from, end, log_rows_);
      std::uint64_t off = from;
      for (const Row& r : log_rows_) write_row(ins, off++, r, what);
      log_rows_.clear();
    }
    sql_.end_write(static_cast<std::uint64_t>(base::id_bound()), begin, end, what);
  }

 private:
  static sql::columns row_columns() {
    sql::columns cols;
    codec::columns(cols);
    return cols;
  }

  static void write_row(sqlite_stmt& s, std::uint64_t id, const Row& r, const std::string& what) {
    s.bind_int(1, static_cast<std::int64_t>(id));
    codec::bind(s, 2, r);
    s.run(what);
  }

  // Calls f(id, row) for every row of `sql_table`, by increasing id.
  template <class F>
  static void read_rows(const sqlite_connection& c, const std::string& owner,
                        const std::string& sql_table, const sql::columns& cols, F&& f) {
    sqlite_stmt s(c, sql::select_sql(sql_table, cols), errc::storage_io, owner);
    while (s.step("reading SQL table '" + sql_table + "'")) {
      const std::uint64_t id = sql::row_id_of(s, owner, sql_table);
      Row r{};
      const std::string_view bad = codec::read(s, 1, r);
      if (!bad.empty()) sql::bad_value(owner, sql_table, bad, cols.front().name + "=" + std::to_string(id));
      f(id, std::move(r));
    }
  }

  sqlite_table_sql sql_;
  row_log<Row>* log_ = nullptr;
  std::vector<row_id> ids_;
  std::vector<Row> log_rows_;
};

}  // namespace detail

/// @brief The durable storage policy: rows in the SQLite database of the
/// pipeline's SqliteCheckpoint, with a memory store as the working set. See
/// the header comment.
struct SqliteStorage {
  template <class Row>
  using store = detail::sqlite_row_store<Row>;
};

}  // namespace flowlib

#if !defined(FLOWLIB_SQLITE_SEPARATE_COMPILATION)
#include <flowlib/storage/impl/sqlite.ipp>
#endif
