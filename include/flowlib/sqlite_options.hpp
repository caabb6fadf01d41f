// flowlib/sqlite_options.hpp
//
// How a SqliteCheckpoint (checkpoint/sqlite.hpp) opens its database:
// SqliteOptions and the synchronous level SqliteSync. A header of its own,
// without SQLite, so that the options can be named where the database is
// not opened.
#pragma once

namespace flowlib {

/// @brief SQLite's `PRAGMA synchronous` level: what a power loss or an
/// operating-system crash can cost (a process crash loses nothing at any
/// level: a committed transaction is in the operating system's hands).
///   - off: nothing is flushed to the disk; a power loss can lose the last
///     committed batches and can corrupt the database file.
///   - normal: with the WAL journal flowlib uses, the log is flushed only
///     at WAL checkpoints; a power loss can lose the last committed batches
///     but never corrupts the file, and tables and checkpoint stay
///     consistent with each other (they are one transaction), so a restart
///     replays the lost batches from the sources exactly once.
///   - full (default): every commit is flushed; a committed batch survives
///     a power loss.
///   - extra: as full, and the directory is flushed as well.
enum class SqliteSync { off, normal, full, extra };

/// @brief How a SqliteCheckpoint opens its database file.
struct SqliteOptions {
  /// See SqliteSync. `full` by default: a batch reported committed stays
  /// committed, the guarantee FileCheckpoint gives.
  SqliteSync synchronous = SqliteSync::full;
  /// How long a statement waits for another connection's lock before
  /// failing with a "locked" error (sqlite3_busy_timeout).
  int busy_timeout_ms = 5000;
  /// Open the file read-only (SQLITE_OPEN_READONLY): reading works, any
  /// write fails with "the database file is read-only". The file must exist.
  bool read_only = false;
  /// The page cache of the connection, in KiB (PRAGMA cache_size=-N). The
  /// tables' working set is in memory already, so the cache serves the
  /// writes: with SQLite's default of 2 MiB a batch that changes rows all
  /// over a larger table reads their pages back from the file first. 0
  /// keeps SQLite's default.
  int cache_kib = 64 * 1024;
};

}  // namespace flowlib
