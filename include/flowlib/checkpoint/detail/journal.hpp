// flowlib/checkpoint/detail/journal.hpp
//
// The batch journal of a file checkpoint (checkpoint/file.hpp, "Batches"):
// the file ".journal-log" in the checkpoint's directory, a sequence of
// entries, each one committed batch (or one change outside a batch while
// others are pending), framed and checksummed as a record
// (detail/checkpoint_record.hpp).
//
// An entry's payload is its change count (8 bytes), then per change its
// kind (1 byte: 0 a write, 1 a removal), its path and its bytes, each
// length-prefixed (8 bytes). A change is staged straight into an entry's
// bytes, so a batch's records are copied once on their way to the disk.
//
// checkpoint_journal keeps the entries appended and not yet applied to the
// records' own files (pending): load() reads those an earlier process left
// (the first entry cut short or failing its checksum ends the journal: it
// was never acknowledged, and nothing follows it); append() is a batch's
// commit point (one pwrite, one fdatasync; an entry that fails is cut off
// again); live_changes() lists what applying must write, each path's last
// change only; applied() removes the journal once the owner wrote those
// changes to their files and made them durable. The owner serialises every
// call (FileCheckpoint's lock). Internal; POSIX only.
#pragma once

#include <flowlib/detail/checkpoint_record.hpp>
#include <flowlib/detail/config.hpp>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace flowlib::detail {

/// What a change of a journal entry does.
enum class journal_op_kind : std::uint8_t { write = 0, remove = 1 };

/// A change inside an entry's bytes: a record's new bytes, or the removal
/// of a path (and everything under it).
struct journal_op {
  journal_op_kind kind;
  std::size_t path_at, path_size, bytes_at, bytes_size;
};

/// One journal entry as it is on disk (framed: header, payload, checksum)
/// and where its changes are in it.
struct journal_entry {
  std::string bytes;
  std::vector<journal_op> ops;
  std::string_view path(const journal_op& o) const noexcept { return {bytes.data() + o.path_at, o.path_size}; }
  std::string_view data(const journal_op& o) const noexcept { return {bytes.data() + o.bytes_at, o.bytes_size}; }
};

/// The journal file of one checkpoint directory. See the header comment.
class checkpoint_journal {
 public:
  /// The journal's file name in the checkpoint's directory.
  static constexpr std::string_view file_name = ".journal-log";
  /// Pending entries, or journal bytes, after which the owner applies them.
  static constexpr std::size_t batches_before_apply = 64;
  static constexpr std::size_t bytes_before_apply = std::size_t{64} << 20;
  /// Where an entry's payload starts.
  static constexpr std::size_t payload_at = checkpoint_record_header;

  checkpoint_journal() = default;
  checkpoint_journal(const checkpoint_journal&) = delete;
  checkpoint_journal& operator=(const checkpoint_journal&) = delete;
  /// Closes the file, leaving the journal as it is (the next open reads it).
  FLOWLIB_DECL ~checkpoint_journal();

  /// Whether `removed` (a removal's path; "" is every record) covers `path`.
  static bool covers(std::string_view removed, std::string_view path) noexcept {
    return removed.empty() || path == removed ||
           (path.size() > removed.size() && path.starts_with(removed) && path[removed.size()] == '/');
  }
  /// Starts `e` empty (its buffer kept).
  static void start_entry(journal_entry& e) {
    e.ops.clear();
    e.bytes.assign(payload_at + 8, '\0');  // the frame's header, the count
  }
  /// Adds a change to `e`.
  FLOWLIB_DECL static void add_op(journal_entry& e, journal_op_kind kind, std::string_view path,
                                  std::string_view bytes);

  /// Reads the journal of directory `dir` an earlier process (or a running
  /// writer) left; `where` names the checkpoint in errors. Read only.
  /// Throws errc::checkpoint_io when the file exists but cannot be read.
  FLOWLIB_DECL void load(const std::filesystem::path& dir, std::string where);

  /// Whether no entry is pending.
  bool empty() const noexcept { return pending_.empty(); }
  const std::vector<journal_entry>& pending() const noexcept { return pending_; }
  /// Whether the pending entries are due to be applied (batches_before_apply,
  /// bytes_before_apply).
  bool due() const noexcept {
    return pending_.size() >= batches_before_apply || end_ >= bytes_before_apply;
  }

  /// The latest change to `path` in `staged` (when not null) or else in the
  /// pending entries, newest first: its kind and bytes.
  FLOWLIB_DECL std::optional<std::pair<journal_op_kind, std::string_view>> latest(
      std::string_view path, const journal_entry* staged) const noexcept;

  /// Commits `e`: appends it to the journal file with one fdatasync (the
  /// commit point) and keeps it pending; `e` is left empty, with room for a
  /// batch as large. Throws errc::checkpoint_io, the entry cut off again
  /// and its changes dropped: not committed.
  FLOWLIB_DECL void append(journal_entry& e);

  /// The pending changes to write to the records' files, oldest first: of
  /// each path only the last change (a write that a later change
  /// overwrites or removes is left out). They view the pending entries.
  FLOWLIB_DECL std::vector<std::pair<const journal_entry*, const journal_op*>> live_changes() const;

  /// The pending changes are in their files, durably: removes the journal
  /// file (and syncs the directory) and forgets the entries. Throws
  /// errc::checkpoint_io; the entries stay pending then.
  FLOWLIB_DECL void applied();

 private:
  // The changes of a framed entry read back; false when they do not decode.
  FLOWLIB_DECL bool index(journal_entry& e) const;
  // Opens the file for appending, the first time: a cut-short tail an
  // earlier process left is cut off first.
  FLOWLIB_DECL void open();
  [[noreturn]] FLOWLIB_DECL void fail(const std::string& what, int err,
                                      std::string_view after) const;
  std::filesystem::path file() const { return dir_ / file_name; }

  std::filesystem::path dir_;
  std::string where_;                // the checkpoint, for messages
  std::vector<journal_entry> pending_;  // committed entries not in their files yet
  std::vector<std::string> spare_;   // buffers of applied entries, reused
  std::uint64_t end_ = 0;            // the file's committed size
  int fd_ = -1;                      // open for appending once an entry was committed
};

}  // namespace flowlib::detail

#if !defined(FLOWLIB_SEPARATE_COMPILATION)
#include <flowlib/checkpoint/detail/impl/journal.ipp>
#endif
