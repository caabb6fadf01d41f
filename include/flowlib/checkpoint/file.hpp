// flowlib/checkpoint/file.hpp
//
// FileCheckpoint: the durable checkpoint policy, a directory with one file
// per record (the record "flows/6d61/commits/12" is the file
// <dir>/flows/6d61/commits/12), each framed and checksummed
// (detail/checkpoint_record.hpp). POSIX only.
//
// Every write is atomic and durable, in this order:
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
#pragma once

#include <flowlib/checkpoint/store.hpp>
#include <flowlib/detail/checkpoint_record.hpp>
#include <flowlib/error.hpp>

#include <algorithm>
#include <atomic>
#include <cerrno>
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
  /// header comment). Throws errc::checkpoint_io, leaving the old record.
  void write(std::string_view path, std::string_view bytes) override {
    detail::check_record_path(path, describe(), false);
    const std::filesystem::path target = dir_ / path;
    const std::filesystem::path folder = target.parent_path();
    const std::string framed = detail::frame(bytes);
    const std::string what = "cannot write record '" + std::string(path) + "'";
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
    if (const int err = detail::checkpoint_fsync(fd); err != 0) {
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
    if (const int err = detail::checkpoint_fsync_dir(folder); err != 0) {
      fail_io(what + ": fsync of the directory '" + folder.string() + "'", err,
              "; the new record is in place but may not survive a crash");
    }
  }

  /// @brief The names directly under `path` ("" is the root), sorted;
  /// temporary files are not listed.
  std::vector<std::string> list(std::string_view path) const override {
    detail::check_record_path(path, describe(), true);
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
      if (name == "." || name == ".." || name.starts_with(detail::checkpoint_temp_prefix)) {
        continue;
      }
      names.emplace_back(name);
    }
    ::closedir(d);
    if (err != 0) fail_io("cannot list '" + folder.string() + "'", err, "");
    std::sort(names.begin(), names.end());
    return names;
  }

  /// @brief Removes `path` and everything under it ("" is every record),
  /// then fsyncs the directory that held it. Throws errc::checkpoint_io.
  void remove(std::string_view path) override {
    detail::check_record_path(path, describe(), true);
    if (path.empty()) {
      std::error_code ec;
      for (std::filesystem::directory_iterator it(dir_, ec), end; !ec && it != end;
           it.increment(ec)) {
        std::filesystem::remove_all(it->path(), ec);
        if (ec) break;
      }
      if (ec) fail_io("cannot remove the records", ec.value(), "");
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
    if (const int err = detail::checkpoint_fsync_dir(folder); err != 0) {
      fail_io("removed '" + target.string() + "', but the fsync of '" + folder.string() +
                  "' failed",
              err, "; the removal may not survive a crash");
    }
  }

  /// @brief Removes each of `paths` as remove() does, with one fsync per
  /// directory that held them rather than one per path (a pipeline prunes
  /// old records in groups). Throws errc::checkpoint_io.
  void remove_many(const std::vector<std::string>& paths) override {
    std::vector<std::filesystem::path> folders;
    for (const auto& path : paths) {
      detail::check_record_path(path, describe(), false);
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
    for (const auto& folder : folders) {
      if (const int err = detail::checkpoint_fsync_dir(folder); err != 0) {
        fail_io("removed records under '" + folder.string() + "', but its fsync failed", err,
                "; the removal may not survive a crash");
      }
    }
  }

 private:
  [[noreturn]] void fail_io(const std::string& what, int err, std::string_view after) const {
    const std::string where = dir_.empty() ? std::string("file checkpoint") : describe();
    throw error(errc::checkpoint_io, std::string(detail::checkpoint_error_owner), "", "",
                where + ": " + what + ": " + detail::errno_text(err) + std::string(after));
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

  std::filesystem::path dir_;
  std::mutex mutex_;
  std::set<std::string> swept_;
};

}  // namespace flowlib
