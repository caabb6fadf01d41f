// flowlib/detail/crc32.hpp
//
// CRC-32C (Castagnoli: reflected polynomial 0x82F63B78, initial value and
// final xor 0xFFFFFFFF), the checksum of checkpoint records
// (detail/checkpoint_record.hpp). Internal.
//
// Why CRC-32C: it detects every burst error up to 32 bits and every odd
// number of flipped bits, which is what a torn or bit-rotted record looks
// like; it is the checksum of iSCSI, ext4 and many log formats, so its test
// vectors are well known ("123456789" -> 0xE3069283).
//
// Portable code only, no SSE4.2 intrinsic: slicing-by-8 over eight 256-entry
// tables built at compile time (8 KiB), one table look-up per input byte
// but eight independent look-ups per step. Words are assembled from bytes,
// so the result does not depend on the machine's byte order or alignment.
//
//   std::uint32_t c = detail::crc32c(bytes);
//   // streaming: crc32c(a + b) == crc32c_extend(crc32c(a), b)
#pragma once

#include <flowlib/detail/config.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace flowlib::detail {

/// The reflected CRC-32C polynomial.
inline constexpr std::uint32_t crc32c_polynomial = 0x82F63B78u;

/// Slicing-by-8 tables: [0] is the byte-at-a-time table, [k] advances a
/// byte's contribution by k further bytes of zeros.
inline constexpr std::array<std::array<std::uint32_t, 256>, 8> crc32c_tables = [] {
  std::array<std::array<std::uint32_t, 256>, 8> t{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int bit = 0; bit < 8; ++bit) c = (c & 1u) ? (c >> 1) ^ crc32c_polynomial : c >> 1;
    t[0][i] = c;
  }
  for (std::size_t k = 1; k < 8; ++k) {
    for (std::size_t i = 0; i < 256; ++i) {
      const std::uint32_t prev = t[k - 1][i];
      t[k][i] = (prev >> 8) ^ t[0][prev & 0xffu];
    }
  }
  return t;
}();

/// Reads four bytes as a little-endian word (any alignment, any host order;
/// compilers turn this into one load on little-endian machines).
inline std::uint32_t crc32c_load_le32(const unsigned char* p) noexcept {
  return static_cast<std::uint32_t>(p[0]) | (static_cast<std::uint32_t>(p[1]) << 8) |
         (static_cast<std::uint32_t>(p[2]) << 16) | (static_cast<std::uint32_t>(p[3]) << 24);
}

/// @brief The CRC-32C of the bytes before `data` (whose CRC is `crc`; 0 for
/// none) followed by `data`: crc32c(a + b) == crc32c_extend(crc32c(a), b).
FLOWLIB_DECL std::uint32_t crc32c_extend(std::uint32_t crc, std::string_view data) noexcept;

/// @brief The CRC-32C of `data`.
inline std::uint32_t crc32c(std::string_view data) noexcept { return crc32c_extend(0, data); }

}  // namespace flowlib::detail

#if !defined(FLOWLIB_SEPARATE_COMPILATION)
#include <flowlib/detail/impl/crc32.ipp>
#endif
