// The byte codec of flow and operator state (detail/byte_codec.hpp): round
// trips of every encodable shape, the fixed layout, and clear errors on
// truncated or malformed input (R-DEDUP-6's format, reused by checkpoints).
#include <flowlib/detail/byte_codec.hpp>

#include <doctest/doctest.h>

#include "support/errors.hpp"

#include <chrono>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <tuple>

namespace detail_byte_codec {

namespace fd = flowlib::detail;

namespace {

enum class Color : std::uint8_t { red = 1, blue = 7 };

template <class T>
void round_trip(const T& v) {
  const std::string bytes = fd::encode(v);
  CHECK(fd::decode<T>(bytes, "codec") == v);
}

template <class T>
std::string error_of(std::string_view bytes) {
  const flowlib::error e = flowtest::error_of([&] { (void)fd::decode<T>(bytes, "my_flow"); });
  CHECK(e.code() == flowlib::errc::invalid_argument);
  CHECK(e.flow() == "my_flow");
  return e.what();
}

}  // namespace

TEST_CASE("R-DEDUP-6: byte codec round trips integers, bool, enums, strings and times") {
  round_trip<std::int8_t>(-5);
  round_trip<std::uint16_t>(65535);
  round_trip<std::int32_t>(std::numeric_limits<std::int32_t>::min());
  round_trip<std::int64_t>(std::numeric_limits<std::int64_t>::max());
  round_trip<std::uint64_t>(0x0123456789abcdefULL);
  round_trip(true);
  round_trip(false);
  round_trip(Color::blue);
  round_trip(std::string{});
  round_trip(std::string("hello, world"));
  round_trip(std::string("with\0nul", 8));
  round_trip(std::string(1000, 'x'));
  round_trip(std::chrono::milliseconds(-1234));
  round_trip(std::chrono::sys_time<std::chrono::seconds>(std::chrono::seconds(1700000000)));
}

TEST_CASE("R-DEDUP-6: byte codec round trips optionals and tuples of those") {
  round_trip(std::optional<std::int64_t>{});
  round_trip(std::optional<std::int64_t>{42});
  round_trip(std::optional<std::string>{"x"});
  round_trip(std::tuple<std::int64_t, std::string, std::optional<std::int32_t>>{7, "k", std::nullopt});
  round_trip(std::tuple<std::string, std::tuple<bool, std::optional<std::string>>>{
      "outer", {true, std::string("inner")}});
  static_assert(fd::byte_encodable<std::tuple<std::int64_t, std::optional<std::string>>>);
  static_assert(!fd::byte_encodable<double>);
  static_assert(!fd::byte_encodable<std::tuple<int, float>>);
}

TEST_CASE("R-DEDUP-6: byte codec layout is fixed: little-endian, length-prefixed") {
  CHECK(fd::encode<std::uint32_t>(0x01020304u) == std::string("\x04\x03\x02\x01", 4));
  CHECK(fd::encode(std::string("ab")) == std::string("\x02\0\0\0\0\0\0\0ab", 10));
  CHECK(fd::encode(std::optional<std::uint8_t>{}) == std::string("\0", 1));
  CHECK(fd::encode(std::optional<std::uint8_t>{9}) == std::string("\x01\x09", 2));
  CHECK(fd::encode(std::tuple<std::uint8_t, bool>{3, true}) == std::string("\x03\x01", 2));
}

TEST_CASE("R-DEDUP-6: truncated or malformed input throws a clear flowlib::error") {
  // Every strict prefix of a valid encoding is truncated.
  using T = std::tuple<std::int64_t, std::string, std::optional<std::string>>;
  const std::string full = fd::encode(T{1, "abc", std::string("de")});
  for (std::size_t n = 0; n < full.size(); ++n) {
    const std::string msg = error_of<T>(std::string_view(full).substr(0, n));
    CHECK(msg.find("at byte") != std::string::npos);
  }
  CHECK(error_of<std::int32_t>(std::string("\x01\x02", 2)).find("truncated") != std::string::npos);
  // A string length running past the end.
  CHECK(error_of<std::string>(std::string("\xff\0\0\0\0\0\0\0ab", 10)).find("length") !=
        std::string::npos);
  // Flags other than 0 or 1.
  CHECK(error_of<bool>(std::string("\x02", 1)).find("boolean") != std::string::npos);
  CHECK(error_of<std::optional<std::int8_t>>(std::string("\x05\x01", 2)).find("null flag") !=
        std::string::npos);
  // Trailing bytes.
  CHECK(error_of<std::uint8_t>(std::string("\x01\x02", 2)).find("unexpected bytes") !=
        std::string::npos);
}

TEST_CASE("R-DEDUP-6: byte_reader names the owner and the caller's suffix") {
  const std::string bytes = fd::encode<std::uint8_t>(1);
  fd::byte_reader r{bytes, 0, "dedup", "; the state is unchanged"};
  CHECK(fd::byte_codec<std::uint8_t>::read(r) == 1);
  CHECK(r.remaining() == 0);
  const flowlib::error e = flowtest::error_of([&] { (void)fd::byte_codec<std::uint16_t>::read(r); });
  CHECK(flowtest::contains(e.what(), "the state is unchanged"));
  CHECK(e.flow() == "dedup");
}

}  // namespace detail_byte_codec
