// flowlib/checkpoint/detail/file_io.hpp
//
// The POSIX calls of the file checkpoint (checkpoint/file.hpp) and of its
// journal (checkpoint/detail/journal.hpp), each retrying EINTR and, for
// writes and reads, short transfers, and returning 0 or an errno value
// rather than throwing, so that the caller decides what a failure leaves
// behind; and the one way both report a failure. Internal; POSIX only.
#pragma once

#include <flowlib/detail/config.hpp>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include <sys/types.h>

namespace flowlib::detail {

/// The system's text for `err` (strerror's, but thread-safe).
FLOWLIB_DECL std::string errno_text(int err);

/// A number that tells this process's temporary files from those of an
/// earlier process that had the same pid (pid 1 in a container, say).
FLOWLIB_DECL std::uint64_t checkpoint_process_nonce();

/// Opens `path`, retrying EINTR; -1 with errno set on failure.
FLOWLIB_DECL int checkpoint_open(const char* path, int flags, mode_t mode = 0);

/// fsync, retrying EINTR; 0, or an errno value.
FLOWLIB_DECL int checkpoint_fsync(int fd);

/// Closes `fd` (only the first close counts: Linux frees the descriptor even
/// when close() reports EINTR); 0, or an errno value.
FLOWLIB_DECL int checkpoint_close(int fd);

/// fsyncs the directory `dir`; 0, or an errno value. EINVAL (a file system
/// that cannot sync directories) counts as success: there is nothing more
/// to wait for there.
FLOWLIB_DECL int checkpoint_fsync_dir(const std::filesystem::path& dir);

/// Writes all of `data` to `fd`, retrying EINTR and short writes; 0, or an
/// errno value.
FLOWLIB_DECL int checkpoint_write_all(int fd, std::string_view data);

/// Reads `fd` to its end into `out` (`hint`: the expected size, 0 when
/// unknown), retrying EINTR and short reads; 0, or an errno value.
FLOWLIB_DECL int checkpoint_read_all(int fd, std::size_t hint, std::string& out);

/// Throws flowlib::error (errc::checkpoint_io) "<where>: <what>: <the
/// system's text for err><after>": how the file checkpoint and its journal
/// report a failed system call (`where` names the checkpoint).
[[noreturn]] FLOWLIB_DECL void checkpoint_io_failure(std::string_view where,
                                                     const std::string& what, int err,
                                                     std::string_view after);

}  // namespace flowlib::detail

#if !defined(FLOWLIB_SEPARATE_COMPILATION)
#include <flowlib/checkpoint/detail/impl/file_io.ipp>
#endif
