// flowlib/checkpoint/detail/impl/journal.ipp
//
// The definitions checkpoint/detail/journal.hpp declares: inline in
// header-only mode, compiled once by src/flowlib.cpp under
// FLOWLIB_SEPARATE_COMPILATION (detail/config.hpp).
#pragma once

#include <flowlib/checkpoint/detail/file_io.hpp>
#include <flowlib/checkpoint/detail/journal.hpp>
#include <flowlib/error.hpp>

#include <algorithm>
#include <cerrno>
#include <set>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace flowlib::detail {

FLOWLIB_DECL checkpoint_journal::~checkpoint_journal() {
  if (fd_ >= 0) checkpoint_close(fd_);
}

FLOWLIB_DECL void checkpoint_journal::add_op(journal_entry& e, journal_op_kind kind,
                                             std::string_view path, std::string_view bytes) {
  e.bytes.push_back(static_cast<char>(kind));
  checkpoint_put_le(e.bytes, path.size(), 8);
  const std::size_t path_at = e.bytes.size();
  e.bytes.append(path);
  checkpoint_put_le(e.bytes, bytes.size(), 8);
  const std::size_t bytes_at = e.bytes.size();
  e.bytes.append(bytes);
  e.ops.push_back({kind, path_at, path.size(), bytes_at, bytes.size()});
}

FLOWLIB_DECL void checkpoint_journal::load(const std::filesystem::path& dir, std::string where) {
  dir_ = dir;
  where_ = std::move(where);
  const std::filesystem::path path = file();
  const int fd = checkpoint_open(path.c_str(), O_RDONLY);
  if (fd < 0) {
    if (errno == ENOENT) return;
    fail("cannot read journal '" + path.string() + "'", errno, "");
  }
  std::string bytes;
  struct ::stat st {};
  int err = ::fstat(fd, &st) != 0 ? errno : checkpoint_read_all(fd, static_cast<std::size_t>(st.st_size), bytes);
  const int cerr = checkpoint_close(fd);
  if (err == 0) err = cerr;
  if (err != 0) fail("cannot read journal '" + path.string() + "'", err, "");
  std::size_t at = 0;
  while (bytes.size() - at >= checkpoint_record_overhead) {
    const std::uint64_t length = checkpoint_get_le(bytes, at + 8, 8);
    if (length > bytes.size() - at - checkpoint_record_overhead) break;
    const std::size_t size = static_cast<std::size_t>(length) + checkpoint_record_overhead;
    journal_entry e;
    e.bytes.assign(bytes, at, size);
    try {
      unframe(e.bytes, "journal");
    } catch (const error&) {
      break;
    }
    if (!index(e)) break;
    pending_.push_back(std::move(e));
    at += size;
  }
  end_ = at;
}

FLOWLIB_DECL std::optional<std::pair<journal_op_kind, std::string_view>> checkpoint_journal::latest(
    std::string_view path, const journal_entry* staged) const noexcept {
  const auto in = [&](const journal_entry& e) -> std::optional<std::pair<journal_op_kind, std::string_view>> {
    for (auto it = e.ops.rbegin(); it != e.ops.rend(); ++it) {
      const std::string_view p = e.path(*it);
      if (it->kind == journal_op_kind::write ? p == path : covers(p, path)) return std::pair{it->kind, e.data(*it)};
    }
    return std::nullopt;
  };
  if (staged != nullptr)
    if (auto o = in(*staged)) return o;
  for (auto e = pending_.rbegin(); e != pending_.rend(); ++e)
    if (auto o = in(*e)) return o;
  return std::nullopt;
}

FLOWLIB_DECL void checkpoint_journal::append(journal_entry& e) {
  open();
  checkpoint_put_le_at(e.bytes, payload_at, e.ops.size(), 8);
  frame_close(e.bytes);
  int err = 0;
  std::size_t done = 0;
  while (done < e.bytes.size()) {
    const ::ssize_t n = ::pwrite(fd_, e.bytes.data() + done, e.bytes.size() - done,
                                 static_cast<::off_t>(end_ + done));
    if (n < 0) {
      if (errno == EINTR) continue;
      err = errno;
      break;
    }
    done += static_cast<std::size_t>(n);
  }
  while (err == 0 && ::fdatasync(fd_) != 0) {
    if (errno != EINTR) err = errno;
  }
  if (err != 0) {
    // Not committed: cut the entry off again, so that the next append
    // follows the last good one (a reader stops at a bad entry anyway).
    if (::ftruncate(fd_, static_cast<::off_t>(end_)) != 0) {
    }
    e.ops.clear();
    fail("cannot append to journal '" + file().string() + "'", err, "; the batch is not committed");
  }
  end_ += e.bytes.size();
  const std::size_t size = e.bytes.size();
  pending_.push_back(std::move(e));
  e = journal_entry{};
  // The next batch is likely as large: one allocation rather than a
  // chain of them (a spare buffer, once entries were applied).
  if (!spare_.empty()) {
    e.bytes = std::move(spare_.back());
    spare_.pop_back();
  }
  e.bytes.reserve(size);
}

FLOWLIB_DECL std::vector<std::pair<const journal_entry*, const journal_op*>>
checkpoint_journal::live_changes() const {
  // Each change, newest first: a write that a later change overwrites or
  // removes is skipped.
  std::vector<std::pair<const journal_entry*, const journal_op*>> order;
  for (const auto& e : pending_)
    for (const auto& o : e.ops) order.emplace_back(&e, &o);
  std::set<std::string_view> written;     // paths a later change writes
  std::vector<std::string_view> removed;  // paths a later change removes
  std::vector<std::pair<const journal_entry*, const journal_op*>> live;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const journal_op& o = *it->second;
    const std::string_view p = it->first->path(o);
    const bool shadowed =
        (o.kind == journal_op_kind::write && written.count(p) != 0) ||
        std::any_of(removed.begin(), removed.end(), [&](std::string_view r) { return covers(r, p); });
    if (!shadowed) live.push_back(*it);
    if (o.kind == journal_op_kind::write) written.insert(p); else removed.push_back(p);
  }
  std::reverse(live.begin(), live.end());
  return live;
}

FLOWLIB_DECL void checkpoint_journal::applied() {
  if (fd_ >= 0) {
    checkpoint_close(fd_);
    fd_ = -1;
  }
  if (::unlink(file().c_str()) != 0 && errno != ENOENT) {
    fail("cannot remove journal '" + file().string() + "'", errno, "");
  }
  if (const int e = checkpoint_fsync_dir(dir_); e != 0) {
    fail("cannot sync '" + dir_.string() + "' after removing its journal", e, "");
  }
  end_ = 0;
  for (auto& e : pending_) {
    if (spare_.size() < 2) spare_.push_back(std::move(e.bytes));
  }
  pending_.clear();
}

FLOWLIB_DECL bool checkpoint_journal::index(journal_entry& e) const {
  const std::size_t end = e.bytes.size() - 4;  // the checksum
  std::size_t at = payload_at;
  const auto get = [&](std::size_t width, std::uint64_t& v) {
    if (end - at < width) return false;
    v = checkpoint_get_le(e.bytes, at, width);
    at += width;
    return true;
  };
  std::uint64_t n = 0;
  if (!get(8, n)) return false;
  for (std::uint64_t i = 0; i < n; ++i) {
    std::uint64_t kind = 0, size = 0;
    journal_op o{};
    if (!get(1, kind) || kind > 1 || !get(8, size) || size > end - at) return false;
    o.kind = static_cast<journal_op_kind>(kind);
    o.path_at = at;
    o.path_size = static_cast<std::size_t>(size);
    at += o.path_size;
    if (!get(8, size) || size > end - at) return false;
    o.bytes_at = at;
    o.bytes_size = static_cast<std::size_t>(size);
    at += o.bytes_size;
    try {
      check_record_path(e.path(o), where_, o.kind == journal_op_kind::remove);
    } catch (const error&) {
      return false;
    }
    e.ops.push_back(o);
  }
  return at == end;
}

FLOWLIB_DECL void checkpoint_journal::open() {
  if (fd_ >= 0) return;
  const std::filesystem::path path = file();
  const int fd = checkpoint_open(path.c_str(), O_WRONLY | O_CREAT, 0644);
  if (fd < 0) fail("cannot open journal '" + path.string() + "'", errno, "");
  struct ::stat st {};
  int err = ::fstat(fd, &st) != 0 ? errno : 0;
  if (err == 0 && static_cast<std::uint64_t>(st.st_size) != end_) {
    if (::ftruncate(fd, static_cast<::off_t>(end_)) != 0 || checkpoint_fsync(fd) != 0) err = errno;
  }
  if (err == 0 && st.st_size == 0) err = checkpoint_fsync_dir(dir_);  // its name, once
  if (err != 0) {
    checkpoint_close(fd);
    fail("cannot open journal '" + path.string() + "'", err, "");
  }
  fd_ = fd;
}

FLOWLIB_DECL void checkpoint_journal::fail(const std::string& what, int err,
                                           std::string_view after) const {
  checkpoint_io_failure(where_, what, err, after);
}

}  // namespace flowlib::detail
