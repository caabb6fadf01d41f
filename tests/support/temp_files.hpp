// tests/support/temp_files.hpp
//
// Files and directories a test makes under the system's temporary
// directory, each at a path of its own (the process id and a counter in the
// name: programs run in parallel, and so do the optimised and sanitizer
// builds of other checkouts on one machine), removed when the object goes:
//
//   temp_path  a path with nothing there yet (the test makes the file or
//              directory, or the code under test does)
//   temp_dir   a directory, made at once
//   memory_dir a directory, made at once, in memory (/dev/shm) where there
//              is one: for tests of restarts, not of power loss, whose
//              checkpoints' fsyncs would be slow on a busy disk
//   temp_db    a database file: the path, and SQLite's -wal, -shm and
//              -journal files beside it, removed before and after
//
// and whole files read and written as bytes.
#pragma once

#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

namespace flowtest {

/// A fresh path under the temporary directory: `<stem>_<pid>_<n><suffix>`.
inline std::filesystem::path fresh_temp_path(std::string_view stem, std::string_view suffix = "") {
  static int n = 0;
  std::string name(stem);
  name.append("_").append(std::to_string(::getpid())).append("_").append(std::to_string(n++));
  name.append(suffix);
  return std::filesystem::temp_directory_path() / name;
}

struct temp_path {
  std::filesystem::path path;
  explicit temp_path(std::string_view stem, std::string_view suffix = "")
      : temp_path(at{}, fresh_temp_path(stem, suffix)) {}
  temp_path(const temp_path&) = delete;
  temp_path& operator=(const temp_path&) = delete;
  ~temp_path() { remove(); }
  void remove() const {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }

 protected:
  struct at {};
  temp_path(at, std::filesystem::path p) : path(std::move(p)) { remove(); }
};

struct temp_dir : temp_path {
  explicit temp_dir(std::string_view stem = "flowlib_test_dir") : temp_path(stem) {
    std::filesystem::create_directories(path);
  }
};

struct memory_dir : temp_path {
  explicit memory_dir(std::string_view stem) : temp_path(at{}, in_memory(fresh_temp_path(stem))) {
    std::filesystem::create_directories(path);
  }

 private:
  static std::filesystem::path in_memory(const std::filesystem::path& p) {
    std::error_code ec;
    return std::filesystem::is_directory("/dev/shm", ec) ? std::filesystem::path("/dev/shm") / p.filename() : p;
  }
};

/// Removes a database file and SQLite's -wal, -shm and -journal files beside it.
inline void remove_database(const std::string& path) {
  std::error_code ec;
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) std::filesystem::remove(path + suffix, ec);
}

struct temp_db {
  std::string path;
  explicit temp_db(std::string_view stem) : path(fresh_temp_path(stem, ".db").string()) { remove(); }
  temp_db(const temp_db&) = delete;
  temp_db& operator=(const temp_db&) = delete;
  ~temp_db() { remove(); }
  void remove() const { remove_database(path); }
  /// The database file's bytes (not its WAL).
  std::string bytes() const;
};

/// A file's bytes (empty when it cannot be read).
inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// Replaces a file's bytes; the test fails when they cannot be written.
inline void write_file(const std::filesystem::path& p, std::string_view bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

inline std::string temp_db::bytes() const { return read_file(path); }

}  // namespace flowtest
