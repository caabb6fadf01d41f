// flowlib/checkpoint/detail/impl/file_io.ipp
//
// The definitions checkpoint/detail/file_io.hpp declares: inline in
// header-only mode, compiled once by src/flowlib.cpp under
// FLOWLIB_SEPARATE_COMPILATION (detail/config.hpp).
#pragma once

#include <flowlib/checkpoint/detail/file_io.hpp>
#include <flowlib/detail/checkpoint_record.hpp>
#include <flowlib/error.hpp>

#include <cerrno>
#include <chrono>
#include <random>
#include <system_error>

#include <fcntl.h>
#include <unistd.h>

namespace flowlib::detail {

FLOWLIB_DECL std::string errno_text(int err) {
  return std::generic_category().message(err);
}

FLOWLIB_DECL std::uint64_t checkpoint_process_nonce() {
  static const std::uint64_t nonce = [] {
    std::random_device rd;
    std::uint64_t n = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
    n ^= static_cast<std::uint64_t>(
        std::chrono::steady_clock::now().time_since_epoch().count());
    return n;
  }();
  return nonce;
}

FLOWLIB_DECL int checkpoint_open(const char* path, int flags, mode_t mode) {
  int fd;
  do {
    fd = ::open(path, flags | O_CLOEXEC, mode);
  } while (fd < 0 && errno == EINTR);
  return fd;
}

FLOWLIB_DECL int checkpoint_fsync(int fd) {
  while (::fsync(fd) != 0) {
    if (errno != EINTR) return errno;
  }
  return 0;
}

FLOWLIB_DECL int checkpoint_close(int fd) {
  if (::close(fd) != 0 && errno != EINTR) return errno;
  return 0;
}

FLOWLIB_DECL int checkpoint_fsync_dir(const std::filesystem::path& dir) {
  const int fd = checkpoint_open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return errno;
  int err = checkpoint_fsync(fd);
  if (err == EINVAL) err = 0;
  const int cerr = checkpoint_close(fd);
  return err != 0 ? err : cerr;
}

FLOWLIB_DECL int checkpoint_write_all(int fd, std::string_view data) {
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

FLOWLIB_DECL int checkpoint_read_all(int fd, std::size_t hint, std::string& out) {
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

FLOWLIB_DECL void checkpoint_io_failure(std::string_view where, const std::string& what, int err,
                                        std::string_view after) {
  throw error(errc::checkpoint_io, std::string(checkpoint_error_owner), "", "",
              std::string(where) + ": " + what + ": " + errno_text(err) + std::string(after));
}

}  // namespace flowlib::detail
