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
// removals are staged in memory (reads see them), and commit_batch()
// appends them as one entry to the journal file ".journal-log" in the
// directory (framed and checksummed as a record) followed by one
// fdatasync: that is the batch's commit point, so all of a batch's records
// (positions, table deltas, state, commit record) count together or not at
// all. The entries' records are written to their own files later, together:
// after 64 entries or 64 MiB of journal, and by flush(), each path's last
// change only, without fsync, then one syncfs() of the file system (sync()
// off Linux), then the journal file is removed (a failure there is not the
// committing batch's: the entries stay, and the next commit or flush()
// tries again; flush() reports it). Until then reads and list() see the
// journal's records over the files. While entries are pending, a
// write or removal outside a batch is journaled too (an entry of its own),
// so that an older entry can never be replayed over it.
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

#include <flowlib/checkpoint/store.hpp>
#include <flowlib/detail/checkpoint_record.hpp>
#include <flowlib/error.hpp>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

namespace flowlib {

namespace detail {

/// The system's text for `err` (strerror's, but thread-safe).
inline std::string errno_text(int err) { return std::generic_category().message(err); }

/// A number that tells this process's temporary files from those of an
/// earlier process that had the same pid (pid 1 in a container, say).
inline std::uint64_t checkpoint_process_nonce() {
  static const std::uint64_t nonce = [] {
    std::random_device rd;
    std::uint64_t n = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
    n ^= static_cast<std::uint64_t>(
        std::chrono::steady_clock::now().time_since_epoch().count());
    return n;
  }();
  return nonce;
}

/// Opens `path`, retrying EINTR; -1 with errno set on failure.
inline int checkpoint_open(const char* path, int flags, mode_t mode = 0) {
  int fd;
  do {
    fd = ::open(path, flags | O_CLOEXEC, mode);
  } while (fd < 0 && errno == EINTR);
  return fd;
}

/// fsync, retrying EINTR; 0, or an errno value.
inline int checkpoint_fsync(int fd) {
  while (::fsync(fd) != 0) {
    if (errno != EINTR) return errno;
  }
  return 0;
}

/// Closes `fd` (only the first close counts: Linux frees the descriptor even
/// when close() reports EINTR); 0, or an errno value.
inline int checkpoint_close(int fd) {
  if (::close(fd) != 0 && errno != EINTR) return errno;
  return 0;
}

/// fsyncs the directory `dir`; 0, or an errno value. EINVAL (a file system
/// that cannot sync directories) counts as success: there is nothing more
/// to wait for there.
inline int checkpoint_fsync_dir(const std::filesystem::path& dir) {
  const int fd = checkpoint_open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return errno;
  int err = checkpoint_fsync(fd);
  if (err == EINVAL) err = 0;
  const int cerr = checkpoint_close(fd);
  return err != 0 ? err : cerr;
}

/// Writes all of `data` to `fd`, retrying EINTR and short writes; 0, or an
/// errno value.
inline int checkpoint_write_all(int fd, std::string_view data) {
  const char* p = data.data();
  std::size_t left = data.size();
  while (left > 0) {
    const ::ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (n == 0) return EIO;
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  return 0;
}

}  // namespace detail

/// @brief A durable checkpoint: a directory, one file per record, written
/// atomically and durably (see the header comment).
class FileCheckpoint final : public checkpoint_store {
 public:
  /// @brief The checkpoint in `dir`, created (with its parents, each
  /// fsynced) when missing. Throws errc::checkpoint_io when it cannot be
  /// created, or when `dir` exists and is not a directory.
  explicit FileCheckpoint(std::filesystem::path dir) {
    if (dir.empty()) {
      throw error(errc::invalid_argument, std::string(detail::checkpoint_error_owner), "", "",
                  "file checkpoint: no directory given");
    }
    std::error_code ec;
    auto abs = std::filesystem::absolute(dir, ec);
    if (ec) fail_io("cannot resolve '" + dir.string() + "'", ec.value(), "");
    abs = abs.lexically_normal();
    if (!abs.has_filename() && abs.has_relative_path()) abs = abs.parent_path();
    dir_ = std::move(abs);
    make_directories(dir_.root_path(), dir_.relative_path(), "cannot create the directory");
    load_journal();
  }
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
  std::optional<std::string> read(std::string_view path) const override {
    detail::check_record_path(path, describe(), false);
    {
      std::lock_guard lock(state_);
      if (const auto staged = latest_op(path)) {
        if (staged->first == op_kind::write) return std::string(staged->second);
        return std::nullopt;
      }
    }
    const std::filesystem::path file = dir_ / path;
    const int fd = detail::checkpoint_open(file.c_str(), O_RDONLY);
    if (fd < 0) {
      if (errno == ENOENT || errno == ENOTDIR) return std::nullopt;
      fail_io("cannot read record '" + std::string(path) + "': open '" + file.string() + "'",
              errno, "");
    }
    std::string bytes;
    int err = 0;
    bool folder = false;
    struct ::stat st {};
    if (::fstat(fd, &st) != 0) {
      err = errno;
    } else if (S_ISDIR(st.st_mode)) {
      folder = true;
    } else {
      err = read_all(fd, st.st_size > 0 ? static_cast<std::size_t>(st.st_size) : 0, bytes);
    }
    const int cerr = detail::checkpoint_close(fd);
    if (err == 0) err = cerr;
    if (folder) return std::nullopt;
    if (err != 0) {
      fail_io("cannot read record '" + std::string(path) + "': '" + file.string() + "'", err, "");
    }
    const std::string_view payload =
        detail::unframe(bytes, detail::checkpoint_where(path, describe()));
    // The payload in place: drop the checksum, then the header.
    const std::size_t size = payload.size();
    bytes.resize(detail::checkpoint_record_header + size);
    bytes.erase(0, detail::checkpoint_record_header);
    return bytes;
  }

  /// @brief Writes the record at `path` atomically and durably (see the
  /// header comment); inside a batch, stages it for the batch's journal.
  /// Throws errc::checkpoint_io, leaving the old record.
  void write(std::string_view path, std::string_view bytes) override {
    detail::check_record_path(path, describe(), false);
    std::lock_guard lock(state_);
    if (batch_ || !quiet()) {
      if (!batch_) start_entry(staged_);
      add_op(staged_, op_kind::write, path, bytes);
      if (!batch_) commit_staged();
      return;
    }
    try {
      write_file(path, detail::frame(bytes), true);
    } catch (const renamed_unsynced& e) {
      fail_io(e.what, e.err, "; the new record is in place but may not survive a crash");
    }
  }

  /// @brief The names directly under `path` ("" is the root), sorted;
  /// temporary files are not listed.
  std::vector<std::string> list(std::string_view path) const override {
    detail::check_record_path(path, describe(), true);
    std::lock_guard lock(state_);
    return list_merged(path);
  }

  /// @brief Removes `path` and everything under it ("" is every record),
  /// then fsyncs the directory that held it; inside a batch, stages the
  /// removal for the batch's journal. Throws errc::checkpoint_io.
  void remove(std::string_view path) override {
    detail::check_record_path(path, describe(), true);
    std::lock_guard lock(state_);
    if (batch_ || !quiet()) {
      if (!batch_) start_entry(staged_);
      add_op(staged_, op_kind::remove, path, {});
      if (!batch_) commit_staged();
    } else {
      remove_now(path, true);
    }
  }

  /// @brief Removes each of `paths` as remove() does, with one fsync per
  /// directory that held them rather than one per path (a pipeline prunes
  /// old records in groups). Throws errc::checkpoint_io.
  void remove_many(const std::vector<std::string>& paths) override {
    for (const auto& path : paths) detail::check_record_path(path, describe(), false);
    std::lock_guard lock(state_);
    if (batch_ || !quiet()) {
      if (!batch_) start_entry(staged_);
      for (const auto& path : paths) add_op(staged_, op_kind::remove, path, {});
      if (!batch_) commit_staged();
      return;
    }
    remove_paths(paths, true);
  }

  /// @brief Starts staging the records of one micro-batch: they are written
  /// together by commit_batch() (see the header comment).
  void begin_batch() override {
    std::lock_guard lock(state_);
    batch_ = true;
    start_entry(staged_);
  }
  /// @brief Writes the batch's journal (the commit point), then applies it.
  /// Throws errc::checkpoint_io; the batch counts when its journal was
  /// written, even if applying it failed (reads see it; the next write
  /// applies it again).
  void commit_batch() override {
    std::lock_guard lock(state_);
    batch_ = false;
    if (!staged_.ops.empty()) commit_staged();
  }
  /// @brief Forgets the staged records.
  void abort_batch() noexcept override {
    std::lock_guard lock(state_);
    batch_ = false;
    staged_.ops.clear();
  }

  /// @brief Writes the journal's records to their own files, makes them
  /// durable and removes the journal (done by itself after 64 entries or
  /// 64 MiB; see the header comment). Throws errc::checkpoint_io.
  void flush() {
    std::lock_guard lock(state_);
    apply();
  }

  /// @brief Leaves the journal as it is: the next FileCheckpoint over the
  /// directory reads it (see the header comment).
  ~FileCheckpoint() override {
    if (journal_fd_ >= 0) detail::checkpoint_close(journal_fd_);
  }

 private:
  std::vector<std::string> list_disk(std::string_view path) const {
    const std::filesystem::path folder = path.empty() ? dir_ : dir_ / path;
    std::vector<std::string> names;
    ::DIR* d = ::opendir(folder.c_str());
    if (d == nullptr) {
      if (errno == ENOENT || errno == ENOTDIR) return names;
      fail_io("cannot list '" + folder.string() + "'", errno, "");
    }
    int err = 0;
    while (true) {
      errno = 0;
      const ::dirent* e = ::readdir(d);
      if (e == nullptr) {
        err = errno;
        break;
      }
      const std::string_view name = e->d_name;
      if (name == "." || name == ".." || name.starts_with(detail::checkpoint_temp_prefix) ||
          name.starts_with(detail::checkpoint_journal_prefix)) {
        continue;
      }
      names.emplace_back(name);
    }
    ::closedir(d);
    if (err != 0) fail_io("cannot list '" + folder.string() + "'", err, "");
    std::sort(names.begin(), names.end());
    return names;
  }

 private:
  [[noreturn]] void fail_io(const std::string& what, int err, std::string_view after) const {
    const std::string where = dir_.empty() ? std::string("file checkpoint") : describe();
    throw error(errc::checkpoint_io, std::string(detail::checkpoint_error_owner), "", "",
                where + ": " + what + ": " + detail::errno_text(err) + std::string(after));
  }

  // Writes `framed` at `path` (relative to the directory): atomically
  // (temporary file, rename), and durably when `sync` (fsync of the file
  // before the rename, of the directory after). Throws errc::checkpoint_io,
  // leaving the old record.
  void write_file(std::string_view path, std::string_view framed, bool sync) {
    const std::filesystem::path target = dir_ / path;
    const std::filesystem::path folder = target.parent_path();
    const std::string what =
        std::string(path.starts_with(detail::checkpoint_journal_prefix) ? "cannot write journal '"
                                                                        : "cannot write record '") +
        std::string(path) + "'";
    const char* const unchanged = "; the old record is unchanged";

    sweep_stale_temps(folder);
    const std::filesystem::path temp = folder / temp_name();
    int fd = detail::checkpoint_open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0 && errno == ENOENT && folder != dir_) {
      make_directories(dir_, folder.lexically_relative(dir_), what);
      fd = detail::checkpoint_open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0644);
    }
    if (fd < 0) fail_io(what + ": create '" + temp.string() + "'", errno, unchanged);

    const auto abandon = [&](const std::string& step, int err) {
      ::unlink(temp.c_str());
      fail_io(what + ": " + step + " '" + temp.string() + "'", err, unchanged);
    };
    if (const int err = detail::checkpoint_write_all(fd, framed); err != 0) {
      detail::checkpoint_close(fd);
      abandon("write", err);
    }
    if (const int err = sync ? detail::checkpoint_fsync(fd) : 0; err != 0) {
      detail::checkpoint_close(fd);
      abandon("fsync", err);
    }
    if (const int err = detail::checkpoint_close(fd); err != 0) abandon("close", err);
    if (::rename(temp.c_str(), target.c_str()) != 0) {
      const int err = errno;
      ::unlink(temp.c_str());
      fail_io(what + ": rename '" + temp.string() + "' to '" + target.string() + "'", err,
              unchanged);
    }
    if (!sync) return;
    if (const int err = detail::checkpoint_fsync_dir(folder); err != 0) {
      throw renamed_unsynced{what + ": fsync of the directory '" + folder.string() + "'", err};
    }
  }

  // Removes `path` and everything under it ("" is every record, the
  // journals excepted), then, when `sync`, fsyncs the directory that held it.
  void remove_now(std::string_view path, bool sync) {
    if (path.empty()) {
      std::error_code ec;
      for (std::filesystem::directory_iterator it(dir_, ec), end; !ec && it != end;
           it.increment(ec)) {
        if (it->path().filename().string().starts_with(detail::checkpoint_journal_prefix)) continue;
        std::filesystem::remove_all(it->path(), ec);
        if (ec) break;
      }
      if (ec) fail_io("cannot remove the records", ec.value(), "");
      if (!sync) return;
      if (const int err = detail::checkpoint_fsync_dir(dir_); err != 0) {
        fail_io("cannot remove the records: fsync of '" + dir_.string() + "'", err, "");
      }
      return;
    }
    const std::filesystem::path target = dir_ / path;
    std::error_code ec;
    const auto removed = std::filesystem::remove_all(target, ec);
    if (ec) {
      if (ec.value() == ENOTDIR || ec.value() == ENOENT) return;  // nothing there
      fail_io("cannot remove '" + target.string() + "'", ec.value(), "");
    }
    if (removed == 0) return;
    // Folders left empty go too, as a folder exists only while it holds
    // records (the memory policy's view): a later write of a record at a
    // pruned folder's path then succeeds the same way over both policies.
    std::filesystem::path folder = target.parent_path();
    while (folder != dir_ && ::rmdir(folder.c_str()) == 0) folder = folder.parent_path();
    if (!sync) return;
    if (const int err = detail::checkpoint_fsync_dir(folder); err != 0) {
      fail_io("removed '" + target.string() + "', but the fsync of '" + folder.string() +
                  "' failed",
              err, "; the removal may not survive a crash");
    }
  }

  // Removes each of `paths` as remove_now() does, with one fsync per
  // directory that held them (none without `sync`).
  void remove_paths(const std::vector<std::string>& paths, bool sync) {
    std::vector<std::filesystem::path> folders;
    for (const auto& path : paths) {
      const std::filesystem::path target = dir_ / path;
      std::error_code ec;
      const auto removed = std::filesystem::remove_all(target, ec);
      if (ec) {
        if (ec.value() == ENOTDIR || ec.value() == ENOENT) continue;
        fail_io("cannot remove '" + target.string() + "'", ec.value(), "");
      }
      if (removed == 0) continue;
      std::filesystem::path folder = target.parent_path();
      while (folder != dir_ && ::rmdir(folder.c_str()) == 0) folder = folder.parent_path();
      if (std::find(folders.begin(), folders.end(), folder) == folders.end()) folders.push_back(folder);
    }
    if (!sync) return;
    for (auto folder : folders) {
      // A later path may have emptied (and so removed) a folder queued
      // here: its parent holds the change then.
      int err = detail::checkpoint_fsync_dir(folder);
      while (err == ENOENT && folder != dir_) {
        folder = folder.parent_path();
        err = detail::checkpoint_fsync_dir(folder);
      }
      if (err != 0) {
        fail_io("removed records under '" + folder.string() + "', but its fsync failed", err,
                "; the removal may not survive a crash");
      }
    }
  }

  static int read_all(int fd, std::size_t hint, std::string& out) {
    out.resize(hint > 0 ? hint : 4096);
    std::size_t have = 0;
    while (true) {
      if (have == out.size()) out.resize(out.size() * 2);
      const ::ssize_t n = ::read(fd, out.data() + have, out.size() - have);
      if (n < 0) {
        if (errno == EINTR) continue;
        return errno;
      }
      if (n == 0) break;
      have += static_cast<std::size_t>(n);
    }
    out.resize(have);
    return 0;
  }

  /// Creates each missing directory of `base`/`rel`, fsyncing its parent.
  void make_directories(const std::filesystem::path& base, const std::filesystem::path& rel,
                        const std::string& what) const {
    std::filesystem::path at = base;
    for (const auto& part : rel) {
      if (part.empty()) continue;
      const std::filesystem::path parent = at;
      at /= part;
      if (::mkdir(at.c_str(), 0755) == 0) {
        if (const int err = detail::checkpoint_fsync_dir(parent.empty() ? "." : parent);
            err != 0) {
          fail_io(what + ": fsync of '" + parent.string() + "'", err, "");
        }
        continue;
      }
      const int err = errno;
      struct ::stat st {};
      if (err == EEXIST && ::stat(at.c_str(), &st) == 0) {
        if (S_ISDIR(st.st_mode)) continue;
        fail_io(what + ": '" + at.string() + "' exists and is not a directory", ENOTDIR, "");
      }
      fail_io(what + ": mkdir '" + at.string() + "'", err, "");
    }
  }

  static std::string temp_name() {
    static std::atomic<std::uint64_t> counter{0};
    std::string name(detail::checkpoint_temp_prefix);
    name += std::to_string(::getpid());
    name += '-';
    name += hex(detail::checkpoint_process_nonce());
    name += '-';
    name += std::to_string(counter.fetch_add(1, std::memory_order_relaxed));
    return name;
  }

  static std::string hex(std::uint64_t v) {
    constexpr char digits[] = "0123456789abcdef";
    std::string s(16, '0');
    for (int i = 15; i >= 0; --i, v >>= 4) s[static_cast<std::size_t>(i)] = digits[v & 0xfu];
    return s;
  }

  /// Whether the temporary file `name` was left by a process that no longer
  /// runs on this host (see the header comment).
  static bool stale_temp(std::string_view name) {
    name.remove_prefix(detail::checkpoint_temp_prefix.size());
    const std::size_t dash1 = name.find('-');
    if (dash1 == std::string_view::npos || dash1 == 0 || dash1 > 10) return false;
    const std::size_t dash2 = name.find('-', dash1 + 1);
    if (dash2 != dash1 + 17) return false;
    long long pid = 0;  // 10 digits fit
    for (char c : name.substr(0, dash1)) {
      if (c < '0' || c > '9') return false;
      pid = pid * 10 + (c - '0');
    }
    // Never 0 or beyond pid_t: kill(0, ...) would address a process group.
    if (pid <= 0 || pid > std::numeric_limits<::pid_t>::max()) return false;
    if (name.substr(dash1 + 1, 16) == hex(detail::checkpoint_process_nonce())) return false;
    if (pid == static_cast<long long>(::getpid())) return true;
    return ::kill(static_cast<::pid_t>(pid), 0) != 0 && errno == ESRCH;
  }

  /// Deletes stale temporary files in `folder`, the first time this object
  /// writes there. Best effort: a failure here is not the write's failure.
  void sweep_stale_temps(const std::filesystem::path& folder) {
    {
      std::lock_guard lock(mutex_);
      if (!swept_.insert(folder.string()).second) return;
    }
    ::DIR* d = ::opendir(folder.c_str());
    if (d == nullptr) {  // not there yet: sweep when it is
      std::lock_guard lock(mutex_);
      swept_.erase(folder.string());
      return;
    }
    std::vector<std::string> stale;
    while (const ::dirent* e = ::readdir(d)) {
      const std::string_view name = e->d_name;
      if (name.starts_with(detail::checkpoint_temp_prefix) && stale_temp(name)) {
        stale.emplace_back(name);
      }
    }
    ::closedir(d);
    for (const auto& name : stale) ::unlink((folder / name).c_str());
  }

  // --- Batches and journals (see the header comment) ---------------------------------

  enum class op_kind : std::uint8_t { write = 0, remove = 1 };
  /// A change inside an entry's bytes: a record's new bytes, or the removal
  /// of a path.
  struct op {
    op_kind kind;
    std::size_t path_at, path_size, bytes_at, bytes_size;
  };
  /// One journal entry as it is on disk (framed: header, payload, checksum;
  /// the payload is the count, then per change its kind, its path and its
  /// bytes, length-prefixed), and where its changes are in it. Staged
  /// changes are written straight into an entry, so a batch's records are
  /// copied once on their way to the disk.
  struct entry {
    std::string bytes;
    std::vector<op> ops;
    std::string_view path(const op& o) const noexcept { return {bytes.data() + o.path_at, o.path_size}; }
    std::string_view data(const op& o) const noexcept { return {bytes.data() + o.bytes_at, o.bytes_size}; }
  };
  /// A directory fsync failed after a rename: the file is in place, maybe
  /// not durable.
  struct renamed_unsynced {
    std::string what;
    int err;
  };

  static constexpr std::string_view journal_file = ".journal-log";
  static constexpr std::size_t batches_before_apply = 64;
  static constexpr std::size_t journal_bytes_before_apply = std::size_t{64} << 20;
  static constexpr std::size_t payload_at = detail::checkpoint_record_header;

  // Whether no journal entry is pending: a write outside a batch may then go
  // straight to its file; otherwise it is journaled too, so that a replay of
  // an older entry can never overwrite it.
  bool quiet() const noexcept { return pending_.empty(); }

  static bool covers(std::string_view removed, std::string_view path) noexcept {
    return removed.empty() || path == removed ||
           (path.size() > removed.size() && path.starts_with(removed) && path[removed.size()] == '/');
  }

  // Starts `e` empty, its bytes recycled from an applied entry when one is kept.
  static void start_entry(entry& e) {
    e.ops.clear();
    e.bytes.assign(payload_at + 8, '\0');  // the frame's header, the count
  }
  static void add_op(entry& e, op_kind kind, std::string_view path, std::string_view bytes) {
    e.bytes.push_back(static_cast<char>(kind));
    detail::checkpoint_put_le(e.bytes, path.size(), 8);
    const std::size_t path_at = e.bytes.size();
    e.bytes.append(path);
    detail::checkpoint_put_le(e.bytes, bytes.size(), 8);
    const std::size_t bytes_at = e.bytes.size();
    e.bytes.append(bytes);
    e.ops.push_back({kind, path_at, path.size(), bytes_at, bytes.size()});
  }

  // The latest staged or pending change to `path`: its kind and bytes.
  std::optional<std::pair<op_kind, std::string_view>> latest_op(std::string_view path) const noexcept {
    const auto in = [&](const entry& e) -> std::optional<std::pair<op_kind, std::string_view>> {
      for (auto it = e.ops.rbegin(); it != e.ops.rend(); ++it) {
        const std::string_view p = e.path(*it);
        if (it->kind == op_kind::write ? p == path : covers(p, path)) return std::pair{it->kind, e.data(*it)};
      }
      return std::nullopt;
    };
    if (batch_)
      if (auto o = in(staged_)) return o;
    for (auto e = pending_.rbegin(); e != pending_.rend(); ++e)
      if (auto o = in(*e)) return o;
    return std::nullopt;
  }

  // list(): the names under `path` on disk, as the pending journal entries
  // and the open batch change them. A folder whose records were all removed
  // one by one is gone (a folder exists while it holds records).
  std::vector<std::string> list_merged(std::string_view path) const {
    std::vector<std::string> names = list_disk(path);
    if (!batch_ && pending_.empty()) return names;
    std::set<std::string> merged(names.begin(), names.end());
    bool deeper = false;  // a removal below a listed name
    const auto through = [&](op_kind kind, std::string_view changed) {
      list_through(kind, changed, path, merged);
      if (kind == op_kind::remove && (path.empty() || covers(path, changed))) {
        const std::size_t skip = path.empty() ? 0 : path.size() + 1;
        if (changed.size() > skip && changed.find('/', skip) != std::string_view::npos) deeper = true;
      }
    };
    for (const auto& e : pending_)
      for (const auto& o : e.ops) through(o.kind, e.path(o));
    if (batch_)
      for (const auto& o : staged_.ops) through(o.kind, staged_.path(o));
    if (deeper) {
      for (auto it = merged.begin(); it != merged.end();) {
        const std::string child = path.empty() ? *it : std::string(path) + "/" + *it;
        it = holds_records(child) ? std::next(it) : merged.erase(it);
      }
    }
    return {merged.begin(), merged.end()};
  }

  // Whether a record is at `path` or under it, as list_merged() sees it.
  bool holds_records(const std::string& path) const {
    if (const auto o = latest_op(path)) {
      if (o->first == op_kind::write) return true;
    } else {
      struct ::stat st {};
      if (::stat((dir_ / path).c_str(), &st) == 0 && S_ISREG(st.st_mode)) return true;
    }
    return !list_merged(path).empty();
  }

  // Applies a change of `changed` to the names listed under `path`.
  static void list_through(op_kind kind, std::string_view changed, std::string_view path,
                           std::set<std::string>& names) {
    if (kind == op_kind::remove && covers(changed, path)) {
      names.clear();
      return;
    }
    std::string_view rest = changed;
    if (!path.empty()) {
      if (!covers(path, rest) || rest.size() == path.size()) return;
      rest.remove_prefix(path.size() + 1);
    }
    const auto slash = rest.find('/');
    if (kind == op_kind::write) {
      names.insert(std::string(rest.substr(0, slash)));
    } else if (slash == std::string_view::npos) {
      names.erase(std::string(rest));
    }
  }

  // The changes of a framed entry read back; false when they do not decode.
  bool index(entry& e) const {
    const std::size_t end = e.bytes.size() - 4;  // the checksum
    std::size_t at = payload_at;
    const auto get = [&](std::size_t width, std::uint64_t& v) {
      if (end - at < width) return false;
      v = detail::checkpoint_get_le(e.bytes, at, width);
      at += width;
      return true;
    };
    std::uint64_t n = 0;
    if (!get(8, n)) return false;
    for (std::uint64_t i = 0; i < n; ++i) {
      std::uint64_t kind = 0, size = 0;
      op o{};
      if (!get(1, kind) || kind > 1 || !get(8, size) || size > end - at) return false;
      o.kind = static_cast<op_kind>(kind);
      o.path_at = at;
      o.path_size = static_cast<std::size_t>(size);
      at += o.path_size;
      if (!get(8, size) || size > end - at) return false;
      o.bytes_at = at;
      o.bytes_size = static_cast<std::size_t>(size);
      at += o.bytes_size;
      try {
        detail::check_record_path(e.path(o), describe(), o.kind == op_kind::remove);
      } catch (const error&) {
        return false;
      }
      e.ops.push_back(o);
    }
    return at == end;
  }

  // Reads the journal an earlier process (or a running writer) left: its
  // entries are committed batches whose records may not all be in their
  // files. Each entry is checked; the first that is cut short or fails its
  // checksum ends the journal (a crash during its append: it was never
  // acknowledged, nor was anything after it). Read only.
  void load_journal() {
    const std::filesystem::path file = dir_ / journal_file;
    const int fd = detail::checkpoint_open(file.c_str(), O_RDONLY);
    if (fd < 0) {
      if (errno == ENOENT) return;
      fail_io("cannot read journal '" + file.string() + "'", errno, "");
    }
    std::string bytes;
    struct ::stat st {};
    int err = ::fstat(fd, &st) != 0 ? errno : read_all(fd, static_cast<std::size_t>(st.st_size), bytes);
    const int cerr = detail::checkpoint_close(fd);
    if (err == 0) err = cerr;
    if (err != 0) fail_io("cannot read journal '" + file.string() + "'", err, "");
    std::size_t at = 0;
    while (bytes.size() - at >= detail::checkpoint_record_overhead) {
      const std::uint64_t length = detail::checkpoint_get_le(bytes, at + 8, 8);
      if (length > bytes.size() - at - detail::checkpoint_record_overhead) break;
      const std::size_t size = static_cast<std::size_t>(length) + detail::checkpoint_record_overhead;
      entry e;
      e.bytes.assign(bytes, at, size);
      try {
        detail::unframe(e.bytes, "journal");
      } catch (const error&) {
        break;
      }
      if (!index(e)) break;
      pending_.push_back(std::move(e));
      at += size;
    }
    journal_end_ = at;
  }

  // Opens the journal for appending, the first time this object commits:
  // a cut-short tail an earlier process left is cut off first.
  void open_journal() {
    if (journal_fd_ >= 0) return;
    const std::filesystem::path file = dir_ / journal_file;
    const int fd = detail::checkpoint_open(file.c_str(), O_WRONLY | O_CREAT, 0644);
    if (fd < 0) fail_io("cannot open journal '" + file.string() + "'", errno, "");
    struct ::stat st {};
    int err = ::fstat(fd, &st) != 0 ? errno : 0;
    if (err == 0 && static_cast<std::uint64_t>(st.st_size) != journal_end_) {
      if (::ftruncate(fd, static_cast<::off_t>(journal_end_)) != 0 || detail::checkpoint_fsync(fd) != 0) err = errno;
    }
    if (err == 0 && st.st_size == 0) err = detail::checkpoint_fsync_dir(dir_);  // its name, once
    if (err != 0) {
      detail::checkpoint_close(fd);
      fail_io("cannot open journal '" + file.string() + "'", err, "");
    }
    journal_fd_ = fd;
  }

  // Commits the staged entry: appended to the journal with one fdatasync,
  // the commit point. Its records are written to their files later,
  // together, by apply().
  void commit_staged() {
    open_journal();
    entry& e = staged_;
    detail::checkpoint_put_le_at(e.bytes, payload_at, e.ops.size(), 8);
    detail::frame_close(e.bytes);
    int err = 0;
    std::size_t done = 0;
    while (done < e.bytes.size()) {
      const ::ssize_t n = ::pwrite(journal_fd_, e.bytes.data() + done, e.bytes.size() - done,
                                   static_cast<::off_t>(journal_end_ + done));
      if (n < 0) {
        if (errno == EINTR) continue;
        err = errno;
        break;
      }
      done += static_cast<std::size_t>(n);
    }
    while (err == 0 && ::fdatasync(journal_fd_) != 0) {
      if (errno != EINTR) err = errno;
    }
    if (err != 0) {
      // Not committed: cut the entry off again, so that the next append
      // follows the last good one (a reader stops at a bad entry anyway).
      if (::ftruncate(journal_fd_, static_cast<::off_t>(journal_end_)) != 0) {
      }
      e.ops.clear();
      fail_io("cannot append to journal '" + (dir_ / journal_file).string() + "'", err,
              "; the batch is not committed");
    }
    journal_end_ += e.bytes.size();
    const std::size_t size = e.bytes.size();
    pending_.push_back(std::move(e));
    e = entry{};
    // The next batch is likely as large: one allocation rather than a
    // chain of them (a spare buffer, once entries were applied).
    if (!spare_.empty()) {
      e.bytes = std::move(spare_.back());
      spare_.pop_back();
    }
    e.bytes.reserve(size);
    if (pending_.size() >= batches_before_apply || journal_end_ >= journal_bytes_before_apply) {
      // The batch is committed: a failure to write the records out is not
      // its failure. The entries stay pending (reads see them), and the
      // next commit or flush() tries again.
      try {
        apply();
      } catch (const error&) {
      }
    }
  }

  // Writes the pending entries' records to their files (only each path's
  // last change), makes them durable with one sync of the file system, then
  // removes the journal. A crash in between replays the journal, which
  // writes the same records again.
  void apply() {
    if (pending_.empty()) return;
    // Each change, newest first: a write that a later change overwrites or
    // removes is skipped.
    std::vector<std::pair<const entry*, const op*>> order;
    for (const auto& e : pending_)
      for (const auto& o : e.ops) order.emplace_back(&e, &o);
    std::set<std::string_view> written;     // paths a later change writes
    std::vector<std::string_view> removed;  // paths a later change removes
    std::vector<std::pair<const entry*, const op*>> live;
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      const op& o = *it->second;
      const std::string_view p = it->first->path(o);
      const bool shadowed =
          (o.kind == op_kind::write && written.count(p) != 0) ||
          std::any_of(removed.begin(), removed.end(), [&](std::string_view r) { return covers(r, p); });
      if (!shadowed) live.push_back(*it);
      if (o.kind == op_kind::write) written.insert(p); else removed.push_back(p);
    }
    for (auto it = live.rbegin(); it != live.rend(); ++it) {
      const op& o = *it->second;
      if (o.kind == op_kind::write) {
        write_file(it->first->path(o), detail::frame(it->first->data(o)), false);  // not synced: no renamed_unsynced
      } else {
        remove_now(it->first->path(o), false);
      }
    }
    const int fd = detail::checkpoint_open(dir_.c_str(), O_RDONLY | O_DIRECTORY);
    if (fd < 0) fail_io("cannot open '" + dir_.string() + "' to sync it", errno, "");
#ifdef __linux__
    int err = ::syncfs(fd) != 0 ? errno : 0;
#else
    ::sync();
    int err = 0;
#endif
    const int cerr = detail::checkpoint_close(fd);
    if (err == 0) err = cerr;
    if (err != 0) fail_io("cannot sync the records of '" + dir_.string() + "'", err, "; the journal stays");
    // Every record is in its file: the journal goes.
    if (journal_fd_ >= 0) {
      detail::checkpoint_close(journal_fd_);
      journal_fd_ = -1;
    }
    if (::unlink((dir_ / journal_file).c_str()) != 0 && errno != ENOENT) {
      fail_io("cannot remove journal '" + (dir_ / journal_file).string() + "'", errno, "");
    }
    if (const int e = detail::checkpoint_fsync_dir(dir_); e != 0) {
      fail_io("cannot sync '" + dir_.string() + "' after removing its journal", e, "");
    }
    journal_end_ = 0;
    for (auto& e : pending_) {
      if (spare_.size() < 2) spare_.push_back(std::move(e.bytes));
    }
    pending_.clear();
  }

  std::filesystem::path dir_;
  std::mutex mutex_;
  std::set<std::string> swept_;
  mutable std::mutex state_;           // guards what follows
  bool batch_ = false;                 // between begin_batch() and commit/abort_batch()
  entry staged_;                       // the open batch's changes (or one change outside a batch)
  std::vector<entry> pending_;         // committed entries not in their files yet
  std::vector<std::string> spare_;     // buffers of applied entries, reused
  std::uint64_t journal_end_ = 0;      // the journal's committed size
  int journal_fd_ = -1;                // open for appending once this object committed
};

}  // namespace flowlib
