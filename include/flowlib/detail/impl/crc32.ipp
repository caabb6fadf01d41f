// flowlib/detail/impl/crc32.ipp
//
// The definitions detail/crc32.hpp declares: inline in header-only mode,
// compiled once by src/flowlib.cpp under FLOWLIB_SEPARATE_COMPILATION
// (detail/config.hpp).
#pragma once

#include <flowlib/detail/crc32.hpp>

namespace flowlib::detail {

FLOWLIB_DECL std::uint32_t crc32c_extend(std::uint32_t crc, std::string_view data) noexcept {
  const auto& t = crc32c_tables;
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
  std::size_t n = data.size();
  std::uint32_t c = ~crc;
  while (n >= 8) {
    const std::uint32_t lo = c ^ crc32c_load_le32(p);
    const std::uint32_t hi = crc32c_load_le32(p + 4);
    c = t[7][lo & 0xffu] ^ t[6][(lo >> 8) & 0xffu] ^ t[5][(lo >> 16) & 0xffu] ^ t[4][lo >> 24] ^
        t[3][hi & 0xffu] ^ t[2][(hi >> 8) & 0xffu] ^ t[1][(hi >> 16) & 0xffu] ^ t[0][hi >> 24];
    p += 8;
    n -= 8;
  }
  while (n > 0) {
    c = (c >> 8) ^ t[0][(c ^ *p) & 0xffu];
    ++p;
    --n;
  }
  return ~c;
}

}  // namespace flowlib::detail
