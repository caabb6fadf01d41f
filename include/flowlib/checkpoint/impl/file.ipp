// flowlib/checkpoint/impl/file.ipp
//
// The definitions checkpoint/file.hpp declares: inline in header-only mode,
// compiled once by src/flowlib.cpp under FLOWLIB_SEPARATE_COMPILATION
// (detail/config.hpp).
#pragma once

#include <flowlib/checkpoint/detail/file_io.hpp>
#include <flowlib/checkpoint/file.hpp>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <limits>
#include <system_error>
#include <utility>

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

namespace flowlib {

FLOWLIB_DECL FileCheckpoint::FileCheckpoint(std::filesystem::path dir) {
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
  journal_.load(dir_, describe());
}

FLOWLIB_DECL std::optional<std::string> FileCheckpoint::read(std::string_view path) const {
  detail::check_record_path(path, describe(), false);
  {
    std::lock_guard lock(state_);
    if (const auto staged = journal_.latest(path, batch_ ? &staged_ : nullptr)) {
      if (staged->first == detail::journal_op_kind::write) return std::string(staged->second);
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
    err = detail::checkpoint_read_all(fd, st.st_size > 0 ? static_cast<std::size_t>(st.st_size) : 0, bytes);
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

FLOWLIB_DECL void FileCheckpoint::write(std::string_view path, std::string_view bytes) {
  detail::check_record_path(path, describe(), false);
  std::lock_guard lock(state_);
  if (batch_ || !journal_.empty()) {
    if (!batch_) journal::start_entry(staged_);
    journal::add_op(staged_, detail::journal_op_kind::write, path, bytes);
    if (!batch_) commit_staged();
    return;
  }
  try {
    write_file(path, detail::frame(bytes), true);
  } catch (const renamed_unsynced& e) {
    fail_io(e.what, e.err, "; the new record is in place but may not survive a crash");
  }
}

FLOWLIB_DECL std::vector<std::string> FileCheckpoint::list(std::string_view path) const {
  detail::check_record_path(path, describe(), true);
  std::lock_guard lock(state_);
  return list_merged(path);
}

FLOWLIB_DECL void FileCheckpoint::remove(std::string_view path) {
  detail::check_record_path(path, describe(), true);
  std::lock_guard lock(state_);
  if (batch_ || !journal_.empty()) {
    if (!batch_) journal::start_entry(staged_);
    journal::add_op(staged_, detail::journal_op_kind::remove, path, {});
    if (!batch_) commit_staged();
  } else {
    remove_now(path, true);
  }
}

FLOWLIB_DECL void FileCheckpoint::remove_many(const std::vector<std::string>& paths) {
  for (const auto& path : paths) detail::check_record_path(path, describe(), false);
  std::lock_guard lock(state_);
  if (batch_ || !journal_.empty()) {
    if (!batch_) journal::start_entry(staged_);
    for (const auto& path : paths) journal::add_op(staged_, detail::journal_op_kind::remove, path, {});
    if (!batch_) commit_staged();
    return;
  }
  remove_paths(paths, true);
}

FLOWLIB_DECL void FileCheckpoint::begin_batch() {
  std::lock_guard lock(state_);
  batch_ = true;
  journal::start_entry(staged_);
}

FLOWLIB_DECL void FileCheckpoint::commit_batch() {
  std::lock_guard lock(state_);
  batch_ = false;
  if (!staged_.ops.empty()) commit_staged();
}

FLOWLIB_DECL void FileCheckpoint::abort_batch() noexcept {
  std::lock_guard lock(state_);
  batch_ = false;
  staged_.ops.clear();
}

FLOWLIB_DECL void FileCheckpoint::flush() {
  std::lock_guard lock(state_);
  apply();
}

FLOWLIB_DECL std::vector<std::string> FileCheckpoint::list_disk(std::string_view path) const {
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

[[noreturn]] FLOWLIB_DECL void FileCheckpoint::fail_io(const std::string& what, int err,
                                                       std::string_view after) const {
  const std::string where = dir_.empty() ? std::string("file checkpoint") : describe();
  detail::checkpoint_io_failure(where, what, err, after);
}

FLOWLIB_DECL void FileCheckpoint::write_file(std::string_view path, std::string_view framed,
                                             bool sync) {
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

FLOWLIB_DECL void FileCheckpoint::remove_now(std::string_view path, bool sync) {
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

FLOWLIB_DECL void FileCheckpoint::remove_paths(const std::vector<std::string>& paths, bool sync) {
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

FLOWLIB_DECL void FileCheckpoint::make_directories(const std::filesystem::path& base,
                                                   const std::filesystem::path& rel,
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

FLOWLIB_DECL std::string FileCheckpoint::temp_name() {
  static std::atomic<std::uint64_t> counter{0};
  std::string name(detail::checkpoint_temp_prefix);
  name += std::to_string(::getpid());
  name += '-';
  name += hex(detail::checkpoint_process_nonce());
  name += '-';
  name += std::to_string(counter.fetch_add(1, std::memory_order_relaxed));
  return name;
}

FLOWLIB_DECL std::string FileCheckpoint::hex(std::uint64_t v) {
  constexpr char digits[] = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) s[static_cast<std::size_t>(i)] = digits[v & 0xfu];
  return s;
}

FLOWLIB_DECL bool FileCheckpoint::stale_temp(std::string_view name) {
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

FLOWLIB_DECL void FileCheckpoint::sweep_stale_temps(const std::filesystem::path& folder) {
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

FLOWLIB_DECL std::vector<std::string> FileCheckpoint::list_merged(std::string_view path) const {
  std::vector<std::string> names = list_disk(path);
  if (!batch_ && journal_.empty()) return names;
  std::set<std::string> merged(names.begin(), names.end());
  bool deeper = false;  // a removal below a listed name
  const auto through = [&](detail::journal_op_kind kind, std::string_view changed) {
    list_through(kind, changed, path, merged);
    if (kind == detail::journal_op_kind::remove && (path.empty() || journal::covers(path, changed))) {
      const std::size_t skip = path.empty() ? 0 : path.size() + 1;
      if (changed.size() > skip && changed.find('/', skip) != std::string_view::npos) deeper = true;
    }
  };
  for (const auto& e : journal_.pending())
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

FLOWLIB_DECL bool FileCheckpoint::holds_records(const std::string& path) const {
  if (const auto o = journal_.latest(path, batch_ ? &staged_ : nullptr)) {
    if (o->first == detail::journal_op_kind::write) return true;
  } else {
    struct ::stat st {};
    if (::stat((dir_ / path).c_str(), &st) == 0 && S_ISREG(st.st_mode)) return true;
  }
  return !list_merged(path).empty();
}

FLOWLIB_DECL void FileCheckpoint::list_through(detail::journal_op_kind kind,
                                               std::string_view changed, std::string_view path,
                                               std::set<std::string>& names) {
  if (kind == detail::journal_op_kind::remove && journal::covers(changed, path)) {
    names.clear();
    return;
  }
  std::string_view rest = changed;
  if (!path.empty()) {
    if (!journal::covers(path, rest) || rest.size() == path.size()) return;
    rest.remove_prefix(path.size() + 1);
  }
  const auto slash = rest.find('/');
  if (kind == detail::journal_op_kind::write) {
    names.insert(std::string(rest.substr(0, slash)));
  } else if (slash == std::string_view::npos) {
    names.erase(std::string(rest));
  }
}

FLOWLIB_DECL void FileCheckpoint::commit_staged() {
  journal_.append(staged_);
  if (journal_.due()) {
    // The batch is committed: a failure to write the records out is not
    // its failure. The entries stay pending (reads see them), and the
    // next commit or flush() tries again.
    try {
      apply();
    } catch (const error&) {
    }
  }
}

FLOWLIB_DECL void FileCheckpoint::apply() {
  if (journal_.empty()) return;
  for (const auto& [e, o] : journal_.live_changes()) {
    if (o->kind == detail::journal_op_kind::write) {
      write_file(e->path(*o), detail::frame(e->data(*o)), false);  // not synced: no renamed_unsynced
    } else {
      remove_now(e->path(*o), false);
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
  journal_.applied();
}

}  // namespace flowlib
