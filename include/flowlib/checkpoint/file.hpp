// flowlib/checkpoint/file.hpp
//
// FileCheckpoint: the durable checkpoint policy, a directory with one file
// per record (the record "flows/6d61/commits/12" is the file
// <dir>/flows/6d61/commits/12), each framed and checksummed
// (detail/checkpoint_record.hpp). POSIX only.
//
// Every write is atomic and durable. Outside a batch, with no journal entry
// pending (see "Batches" below), a write goes to its file in this order:
//   1. write the framed record to a new temporary file in the record's
//      directory (".tmp-<pid>-<nonce>-<n>", created with O_EXCL, so unique
//      per process and per call), retrying interrupted and short writes;
//   2. fsync the temporary file: its bytes are on disk before any name
//      points to them (else a crash after step 3 could leave the new name
//      on an empty or partial file);
//   3. rename it over the record: rename is atomic, so a reader (this
//      process or the next) sees the whole old record or the whole new one;
//   4. fsync the directory: the rename itself is durable (else a crash
//      could bring the old record back after the batch was reported done).
// A missing directory on the way is created, and its parent fsynced so that
// the new directory's entry is durable too.
//
// A failure before step 3 removes the temporary file and leaves the old
// record in place (errc::checkpoint_io, naming the file and what the
// system said). A failure of step 4 throws too: the new record is in place
// but may not survive a crash, and the runtime treats the batch as not
// committed.
//
// A process that crashes between steps 1 and 3 leaves a ".tmp-*" file
// behind: list() never shows it, and the first write into that directory
// by a later FileCheckpoint deletes it when its process no longer runs on
// this host (the pid in its name is gone, or is the writer's own pid with
// another nonce). Temporary files of live processes, and names that are not
// in that form, are left alone.
//
// read() of a missing record (or of a folder) is std::nullopt; a record
// that fails verification throws errc::checkpoint_corrupt and is left as it
// is on disk. remove() deletes recursively, removes the folders that leaves
// empty (a folder exists while it holds records, as in the memory policy),
// then fsyncs the directory whose entry went last. All members are safe to
// call from several threads.
//
// Batches: one journal entry, one fsync. Between begin_batch() and
// commit_batch() (a pipeline's micro-batch, or a full refresh) writes and
// removals are staged in memory (reads see them), and commit_batch() appends
// them as one entry to the journal file ".journal-log" in the directory
// (framed and checksummed as a record; the journal is
// checkpoint/detail/journal.hpp) followed by one fdatasync: that is the
// batch's commit point, so all of a batch's records (positions, table
// deltas, state, commit record) count together or not at all. The entries'
// records are written to their own files later, together: after 64 entries
// or 64 MiB of journal, and by flush(), each path's last change only,
// without fsync, then one syncfs() of the file system (sync() off Linux),
// then the journal file is removed (a failure there is not the committing
// batch's: the entries stay, and the next commit or flush() tries again;
// flush() reports it). Until then reads and list() see the journal's records
// over the files. While entries are pending, a write or removal outside a
// batch is journaled too (an entry of its own), so that an older entry can
// never be replayed over it.
//
// A process that dies leaves the journal: the next FileCheckpoint over the
// directory reads it when constructed (reads see its records at once) and
// writes its records to their files at its next flush. An entry cut short
// or failing its checksum ends the journal: it was being appended when the
// process died, never acknowledged, and nothing follows it; the next append
// cuts it off. The destructor leaves the journal as it is (the next open
// reads it), so a program that wants every record in its own file (to copy
// the directory without flowlib, say) calls flush() first. A reader in
// another process sees the journal as it was when its FileCheckpoint was
// constructed: build a new one for each read-out.
#pragma once

#include <flowlib/checkpoint/detail/journal.hpp>
#include <flowlib/checkpoint/store.hpp>
#include <flowlib/detail/checkpoint_record.hpp>
#include <flowlib/detail/config.hpp>
#include <flowlib/error.hpp>

#include <cstdint>
#include <filesystem>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace flowlib {

/// @brief A durable checkpoint: a directory, one file per record, written
/// atomically and durably (see the header comment).
class FileCheckpoint final : public checkpoint_store {
 public:
  /// @brief The checkpoint in `dir`, created (with its parents, each
  /// fsynced) when missing. Throws errc::checkpoint_io when it cannot be
  /// created, or when `dir` exists and is not a directory.
  FLOWLIB_DECL explicit FileCheckpoint(std::filesystem::path dir);
  FileCheckpoint(const FileCheckpoint&) = delete;
  FileCheckpoint& operator=(const FileCheckpoint&) = delete;

  /// @brief The checkpoint's directory (absolute).
  const std::filesystem::path& path() const noexcept { return dir_; }

  /// @brief True: records survive the process.
  bool durable() const noexcept override { return true; }
  /// @brief "file checkpoint '<dir>'".
  std::string describe() const override { return "file checkpoint '" + dir_.string() + "'"; }

  /// @brief The record at `path`, verified; nullopt when there is none (no
  /// file, or a folder). Throws errc::checkpoint_corrupt (the file is left
  /// as it is) or errc::checkpoint_io.
  FLOWLIB_DECL std::optional<std::string> read(std::string_view path) const override;

  /// @brief Writes the record at `path` atomically and durably (see the
  /// header comment); inside a batch, stages it for the batch's journal.
  /// Throws errc::checkpoint_io, leaving the old record.
  FLOWLIB_DECL void write(std::string_view path, std::string_view bytes) override;

  /// @brief The names directly under `path` ("" is the root), sorted;
  /// temporary files are not listed.
  FLOWLIB_DECL std::vector<std::string> list(std::string_view path) const override;

  /// @brief Removes `path` and everything under it ("" is every record),
  /// then fsyncs the directory that held it; inside a batch, stages the
  /// removal for the batch's journal. Throws errc::checkpoint_io.
  FLOWLIB_DECL void remove(std::string_view path) override;

  /// @brief Removes each of `paths` as remove() does, with one fsync per
  /// directory that held them rather than one per path (a pipeline prunes
  /// old records in groups). Throws errc::checkpoint_io.
  FLOWLIB_DECL void remove_many(const std::vector<std::string>& paths) override;

  /// @brief Starts staging the records of one micro-batch: they are written
  /// together by commit_batch() (see the header comment).
  FLOWLIB_DECL void begin_batch() override;
  /// @brief Writes the batch's journal (the commit point), then applies it.
  /// Throws errc::checkpoint_io; the batch counts when its journal was
  /// written, even if applying it failed (reads see it; the next write
  /// applies it again).
  FLOWLIB_DECL void commit_batch() override;
  /// @brief Forgets the staged records.
  FLOWLIB_DECL void abort_batch() noexcept override;

  /// @brief Writes the journal's records to their own files, makes them
  /// durable and removes the journal (done by itself after 64 entries or
  /// 64 MiB; see the header comment). Throws errc::checkpoint_io.
  FLOWLIB_DECL void flush();

  /// @brief Leaves the journal as it is: the next FileCheckpoint over the
  /// directory reads it (see the header comment).
  ~FileCheckpoint() override = default;

 private:
  using journal = detail::checkpoint_journal;

  /// A directory fsync failed after a rename: the file is in place, maybe
  /// not durable.
  struct renamed_unsynced {
    std::string what;
    int err;
  };

  // Throws errc::checkpoint_io: "<this checkpoint>: <what>: <the system's
  // text for err><after>".
  [[noreturn]] FLOWLIB_DECL void fail_io(const std::string& what, int err,
                                         std::string_view after) const;

  // --- Records in their own files --------------------------------------------------

  // The names under `path` on disk, temporary files and journals left out.
  FLOWLIB_DECL std::vector<std::string> list_disk(std::string_view path) const;

  // Writes `framed` at `path` (relative to the directory): atomically
  // (temporary file, rename), and durably when `sync` (fsync of the file
  // before the rename, of the directory after). Throws errc::checkpoint_io,
  // leaving the old record.
  FLOWLIB_DECL void write_file(std::string_view path, std::string_view framed, bool sync);

  // Removes `path` and everything under it ("" is every record, the
  // journals excepted), then, when `sync`, fsyncs the directory that held it.
  FLOWLIB_DECL void remove_now(std::string_view path, bool sync);

  // Removes each of `paths` as remove_now() does, with one fsync per
  // directory that held them (none without `sync`).
  FLOWLIB_DECL void remove_paths(const std::vector<std::string>& paths, bool sync);

  /// Creates each missing directory of `base`/`rel`, fsyncing its parent.
  FLOWLIB_DECL void make_directories(const std::filesystem::path& base,
                                     const std::filesystem::path& rel,
                                     const std::string& what) const;

  FLOWLIB_DECL static std::string temp_name();

  FLOWLIB_DECL static std::string hex(std::uint64_t v);

  /// Whether the temporary file `name` was left by a process that no longer
  /// runs on this host (see the header comment).
  FLOWLIB_DECL static bool stale_temp(std::string_view name);

  /// Deletes stale temporary files in `folder`, the first time this object
  /// writes there. Best effort: a failure here is not the write's failure.
  FLOWLIB_DECL void sweep_stale_temps(const std::filesystem::path& folder);

  // --- Batches and the journal (see the header comment) ------------------------------

  // list(): the names under `path` on disk, as the pending journal entries
  // and the open batch change them. A folder whose records were all removed
  // one by one is gone (a folder exists while it holds records).
  FLOWLIB_DECL std::vector<std::string> list_merged(std::string_view path) const;

  // Whether a record is at `path` or under it, as list_merged() sees it.
  FLOWLIB_DECL bool holds_records(const std::string& path) const;

  // Applies a change of `changed` to the names listed under `path`.
  FLOWLIB_DECL static void list_through(detail::journal_op_kind kind, std::string_view changed,
                                        std::string_view path, std::set<std::string>& names);

  // Commits the staged entry to the journal (the commit point). Its records
  // are written to their files later, together, by apply(): at once when
  // the journal is due.
  FLOWLIB_DECL void commit_staged();

  // Writes the pending entries' records to their files (only each path's
  // last change), makes them durable with one sync of the file system, then
  // removes the journal. A crash in between replays the journal, which
  // writes the same records again.
  FLOWLIB_DECL void apply();

  std::filesystem::path dir_;
  std::mutex mutex_;
  std::set<std::string> swept_;
  mutable std::mutex state_;           // guards what follows
  bool batch_ = false;                 // between begin_batch() and commit/abort_batch()
  detail::journal_entry staged_;       // the open batch's changes (or one change outside a batch)
  journal journal_;                    // committed entries not in their files yet
};

}  // namespace flowlib

#if !defined(FLOWLIB_SEPARATE_COMPILATION)
#include <flowlib/checkpoint/impl/file.ipp>
#endif
