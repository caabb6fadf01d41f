// tests/support/durable_configs.hpp
//
// The durable configurations, a traits struct each, for suites templated on
// them (tests/storage/durable/: TEST_CASE_TEMPLATE("...", Config,
// FLOWTEST_DURABLE_CONFIGS)) and for the tests of each one:
//
//   sqlite_durable  SqliteStorage tables + SqliteCheckpoint, one database file
//   file_durable    FileStorage tables + FileCheckpoint, one directory
//
// Each names its `storage` and `checkpoint` policies and gives:
//   place                  where a test's data goes (`place at{"stem"}`),
//                          removed when it goes;
//   open(at)               a new checkpoint over it (a new program's);
//   load<Row>(…, name)     what the storage holds for a table, read without
//                          its pipeline (stored_table: rows by id, id bound,
//                          append log);
//   check_same(…, t)       that it holds what the table holds in memory;
//   check_stored(at, ck, t), stored_rows<Row>(at, name): the same two, in
//                          the form a templated suite calls.
// And plain SQLite reads for the SQLite configuration (sql_text, sql_reader).
#pragma once

#include <flowlib/checkpoint/file.hpp>
#include <flowlib/checkpoint/sqlite.hpp>
#include <flowlib/runtime/export.hpp>
#include <flowlib/storage/file.hpp>
#include <flowlib/storage/sqlite.hpp>
#include <flowlib/table.hpp>

#include <support/rows.hpp>
#include <support/temp_files.hpp>

#include <doctest/doctest.h>
#include <sqlite3.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace flowtest {

/// A table's rows by id.
template <class Table>
std::map<flowlib::row_id, typename Table::row_type> rows_by_id(const Table& t) {
  std::map<flowlib::row_id, typename Table::row_type> m;
  t.store().for_each_row([&](flowlib::row_id id, const auto& r) { m.emplace(id, r); });
  return m;
}

/// What a durable table's storage holds, as the pipeline's next open loads
/// it; for FileStorage also how many records count (`live`), do not count
/// (`stale`: written by a batch that never committed) and are superseded
/// (`old`).
template <class Row>
struct stored_table {
  std::map<flowlib::row_id, Row> rows;
  std::uint64_t id_bound = 0;
  std::vector<Row> log;
  std::uint64_t log_begin = 0, log_end = 0;
  std::size_t live = 0, stale = 0, old = 0;
};

/// `s` holds what `t` holds in memory: rows under the same ids, id bound,
/// append log.
template <class Row, class Table>
void check_stored_table(const stored_table<Row>& s, const Table& t) {
  CAPTURE(t.name());
  CHECK(s.rows == rows_by_id(t));
  CHECK(s.id_bound == t.store().id_bound());
  CHECK(s.log_begin == t.append_log().begin_offset());
  CHECK(s.log_end == t.append_log().end_offset());
  std::vector<Row> log;
  t.append_log().read(t.append_log().begin_offset(), t.append_log().end_offset(), log);
  CHECK(s.log == log);
}

struct sqlite_durable {
  static constexpr const char* name = "SqliteStorage + SqliteCheckpoint";
  using storage = flowlib::SqliteStorage;
  using checkpoint = flowlib::SqliteCheckpoint;
  using place = temp_db;

  /// synchronous = off: these tests do not cut the power (durable_crash_test
  /// kills with the default).
  static flowlib::SqliteOptions options() {
    flowlib::SqliteOptions o;
    o.synchronous = flowlib::SqliteSync::off;
    return o;
  }
  static std::unique_ptr<checkpoint> open(const place& at) {
    return std::make_unique<checkpoint>(at.path, options());
  }

  /// Table `name` as a fresh table attached through a read-only connection
  /// loads it.
  template <class Row>
  static stored_table<Row> load(const std::string& path, const std::string& name) {
    flowlib::SqliteOptions o;
    o.read_only = true;
    checkpoint ck{path, o};
    flowlib::StreamingTable<Row, storage> t{name};
    t.store().attach(ck, t.name(), t.append_log());
    stored_table<Row> s;
    s.rows = rows_by_id(t);
    s.id_bound = t.store().id_bound();
    s.log_begin = t.append_log().begin_offset();
    s.log_end = t.append_log().end_offset();
    t.append_log().read(s.log_begin, s.log_end, s.log);
    return s;
  }
  template <class Table>
  static void check_same(const std::string& path, const Table& t) {
    check_stored_table(load<typename Table::row_type>(path, t.name()), t);
  }

  template <class Table>
  static void check_stored(const place& at, const checkpoint&, const Table& t) {
    check_same(at.path, t);
  }
  /// Table `name`'s committed rows, sorted.
  template <class Row>
  static std::vector<Row> stored_rows(const place& at, const std::string& name) {
    std::vector<Row> out;
    for (auto& [id, r] : load<Row>(at.path, name).rows) out.push_back(r);
    return sorted(out);
  }
};

struct file_durable {
  static constexpr const char* name = "FileStorage + FileCheckpoint";
  using storage = flowlib::FileStorage;
  using checkpoint = flowlib::FileCheckpoint;
  using place = memory_dir;
  using layout = flowlib::detail::file_table_layout;

  static std::unique_ptr<checkpoint> open(const place& at) { return std::make_unique<checkpoint>(at.path); }

  /// Table `name`'s records in `ck` (any durable checkpoint), read without
  /// changing anything (read_table's reading, with the ids).
  template <class Row>
  static stored_table<Row> load(const flowlib::checkpoint_store& ck, const std::string& name) {
    const auto listing = layout::read(ck, name, [&](std::string_view flow, std::uint64_t batch) {
      return flowlib::detail::export_committed(ck, flow, batch);
    });
    flowlib::detail::file_table_image<Row> image{{}, 0, flowlib::row_log<Row>(name), 0, 0, 0};
    image.load(listing, name, ck);
    stored_table<Row> s;
    for (auto& [id, r] : image.rows) s.rows.emplace(id, r);
    s.id_bound = image.id_bound;
    s.log_begin = image.log.begin_offset();
    s.log_end = image.log.end_offset();
    image.log.read(s.log_begin, s.log_end, s.log);
    s.live = listing.live.size();
    s.stale = listing.stale.size();
    s.old = listing.old.size();
    return s;
  }
  /// The records hold what `t` holds, and read_table() reads its rows in id
  /// order; returns how many records do not count, for tests that expect
  /// some.
  template <class Table>
  static std::size_t check_same(const flowlib::checkpoint_store& ck, const Table& t) {
    using Row = typename Table::row_type;
    const auto s = load<Row>(ck, t.name());
    check_stored_table(s, t);
    std::vector<Row> in_id_order;
    for (auto& [id, r] : rows_by_id(t)) in_id_order.push_back(r);
    CHECK(flowlib::read_table<Row>(ck, t.name()) == in_id_order);
    return s.stale;
  }

  template <class Table>
  static void check_stored(const place&, const checkpoint& ck, const Table& t) {
    check_same(ck, t);
  }
  template <class Row>
  static std::vector<Row> stored_rows(const place& at, const std::string& name) {
    const checkpoint ck{at.path};
    return sorted(flowlib::read_table<Row>(ck, name));
  }
};

/// The first column of the first row of `sql`, as text ("NULL" for NULL,
/// "(no row)" when there is none).
inline std::string sql_text(sqlite3* db, const std::string& sql) {
  sqlite3_stmt* st = nullptr;
  REQUIRE_MESSAGE(sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) == SQLITE_OK, sqlite3_errmsg(db));
  std::string out = "(no row)";
  if (sqlite3_step(st) == SQLITE_ROW) {
    const unsigned char* t = sqlite3_column_text(st, 0);
    out = t != nullptr ? reinterpret_cast<const char*>(t) : "NULL";
  }
  sqlite3_finalize(st);
  return out;
}

/// A reader independent of flowlib: plain SQLite, read-only.
struct sql_reader {
  sqlite3* db = nullptr;
  explicit sql_reader(const std::string& path) {
    REQUIRE(sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
  }
  ~sql_reader() { sqlite3_close(db); }
  sql_reader(const sql_reader&) = delete;
  sql_reader& operator=(const sql_reader&) = delete;
  std::string text(const std::string& sql) const { return sql_text(db, sql); }
};

}  // namespace flowtest

/// The type list for TEST_CASE_TEMPLATE (doctest takes the types inline).
#define FLOWTEST_DURABLE_CONFIGS flowtest::sqlite_durable, flowtest::file_durable

TYPE_TO_STRING_AS("sqlite_durable", flowtest::sqlite_durable);
TYPE_TO_STRING_AS("file_durable", flowtest::file_durable);
