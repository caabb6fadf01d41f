// flowlib/checkpoint/impl/memory.ipp
//
// The definitions checkpoint/memory.hpp declares: inline in header-only mode,
// compiled once by src/flowlib.cpp under FLOWLIB_SEPARATE_COMPILATION
// (detail/config.hpp).
#pragma once

#include <flowlib/checkpoint/memory.hpp>

namespace flowlib {

FLOWLIB_DECL std::optional<std::string> MemoryCheckpoint::read(std::string_view path) const {
  detail::check_record_path(path, describe(), false);
  std::lock_guard lock(mutex_);
  const auto it = records_.find(path);
  if (it == records_.end()) return std::nullopt;
  const record& r = it->second;
  if (r.written) return std::string(payload_of(r.framed));  // see the header comment
  return std::string(detail::unframe(r.framed, detail::checkpoint_where(path, describe())));
}

FLOWLIB_DECL void MemoryCheckpoint::write(std::string_view path, std::string_view bytes) {
  detail::check_record_path(path, describe(), false);
  // Framed outside the lock; the checksum's 4 bytes are written by seal().
  std::string framed;
  framed.reserve(bytes.size() + detail::checkpoint_record_overhead);
  framed.assign(detail::checkpoint_record_header, '\0');
  framed.append(bytes);
  detail::frame_header(framed);
  framed.append(4, '\0');
  std::lock_guard lock(mutex_);
  check_placement(path);
  store(path, record{std::move(framed), true, false});
}

FLOWLIB_DECL std::vector<std::string> MemoryCheckpoint::list(std::string_view path) const {
  detail::check_record_path(path, describe(), true);
  const std::string prefix = folder_prefix(path);
  std::vector<std::string> names;
  std::lock_guard lock(mutex_);
  for (auto it = records_.lower_bound(prefix);
       it != records_.end() && it->first.starts_with(prefix); ++it) {
    const std::string_view rest = std::string_view(it->first).substr(prefix.size());
    const std::string_view name = rest.substr(0, rest.find('/'));
    // Keys are sorted, but a folder's name sorts by its records' keys
    // ("a-b" < "a/c" while "a" < "a-b"): keep the list sorted by name.
    if (names.empty() || names.back() != name) names.emplace_back(name);
  }
  return detail::listed_names(std::move(names));
}

FLOWLIB_DECL void MemoryCheckpoint::remove(std::string_view path) {
  detail::check_record_path(path, describe(), true);
  std::lock_guard lock(mutex_);
  if (path.empty()) {
    records_.clear();
    bytes_ = 0;
    return;
  }
  if (const auto it = records_.find(path); it != records_.end()) erase(it);
  const std::string prefix = folder_prefix(path);
  auto it = records_.lower_bound(prefix);
  while (it != records_.end() && it->first.starts_with(prefix)) it = erase(it);
}

FLOWLIB_DECL std::optional<std::string> MemoryCheckpoint::raw(std::string_view path) const {
  std::lock_guard lock(mutex_);
  const auto it = records_.find(path);
  if (it == records_.end()) return std::nullopt;
  seal(it->second);
  return it->second.framed;
}

FLOWLIB_DECL void MemoryCheckpoint::put_raw(std::string_view path, std::string bytes) {
  detail::check_record_path(path, describe(), false);
  std::lock_guard lock(mutex_);
  check_placement(path);
  store(path, record{std::move(bytes), false, true});
}

FLOWLIB_DECL std::size_t MemoryCheckpoint::record_count() const {
  std::lock_guard lock(mutex_);
  return records_.size();
}

FLOWLIB_DECL std::size_t MemoryCheckpoint::byte_size() const {
  std::lock_guard lock(mutex_);
  return bytes_;
}

FLOWLIB_DECL void MemoryCheckpoint::seal(const record& r) {
  if (r.sealed) return;
  detail::frame_seal(r.framed);
  r.sealed = true;
}

FLOWLIB_DECL std::string MemoryCheckpoint::folder_prefix(std::string_view path) {
  std::string p(path);
  if (!p.empty()) p.push_back('/');
  return p;
}

FLOWLIB_DECL void MemoryCheckpoint::check_placement(std::string_view path) const {
  for (std::size_t slash = path.find('/'); slash != std::string_view::npos;
       slash = path.find('/', slash + 1)) {
    const std::string_view up = path.substr(0, slash);
    if (records_.find(up) != records_.end()) {
      io_failure(path, "'" + std::string(up) + "' is a record, not a folder");
    }
  }
  const std::string prefix = folder_prefix(path);
  const auto it = records_.lower_bound(prefix);
  if (it != records_.end() && it->first.starts_with(prefix)) {
    io_failure(path, "it is a folder of records");
  }
}

[[noreturn]] FLOWLIB_DECL void MemoryCheckpoint::io_failure(
    std::string_view path, const std::string& why) const {
  throw error(errc::checkpoint_io, std::string(detail::checkpoint_error_owner), "", "",
              describe() + ": cannot write record '" + std::string(path) + "': " + why +
                  "; nothing was changed");
}

FLOWLIB_DECL void MemoryCheckpoint::store(std::string_view path, record r) {
  const auto it = records_.find(path);
  if (it == records_.end()) {
    bytes_ += r.framed.size();
    records_.emplace(std::string(path), std::move(r));
  } else {
    bytes_ = bytes_ - it->second.framed.size() + r.framed.size();
    it->second = std::move(r);
  }
}

FLOWLIB_DECL MemoryCheckpoint::map_type::iterator MemoryCheckpoint::erase(map_type::iterator it) {
  bytes_ -= it->second.framed.size();
  return records_.erase(it);
}

}  // namespace flowlib
