// MemoryCheckpoint's records as stored: a record written by write() is
// checksummed only when raw() first hands it out, so these tests check that
// what raw() gives is exactly the record detail::frame() builds, whenever
// it is asked (before or after reads, after overwrites), that byte_size()
// counts the same bytes either way, and that a written record read back is
// its payload while bytes stored by put_raw() are still verified.
#include <flowlib/checkpoint/memory.hpp>
#include <flowlib/detail/checkpoint_record.hpp>

#include <doctest/doctest.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <random>
#include <string>

namespace checkpoint_memory_records {

namespace fl = flowlib;
namespace fd = flowlib::detail;

std::string random_payload(std::mt19937_64& g) {
  const std::size_t n = std::array<std::size_t, 5>{0, 1, 7, 64, 3000}[g() % 5];
  std::string s;
  for (std::size_t i = 0; i < n; ++i) s.push_back(static_cast<char>(g() & 0xff));
  return s;
}

TEST_CASE("MemoryCheckpoint: raw() is the framed record, checksum included, whenever it is asked") {
  for (std::uint64_t seed = 1; seed <= 8; ++seed) {
    CAPTURE(seed);
    std::mt19937_64 g(seed);
    fl::MemoryCheckpoint c;
    std::map<std::string, std::string> model;  // path -> payload
    for (int step = 0; step < 300; ++step) {
      CAPTURE(step);
      const std::string path = "flows/61/state/" + std::to_string(g() % 12);
      switch (g() % 4) {
        case 0:
        case 1: {
          const std::string payload = random_payload(g);
          c.write(path, payload);
          model[path] = payload;
          break;
        }
        case 2: {
          const auto raw = c.raw(path);
          const auto it = model.find(path);
          REQUIRE(raw.has_value() == (it != model.end()));
          if (raw) {
            CHECK(*raw == fd::frame(it->second));
            CHECK(fd::unframe(*raw, "test") == it->second);
          }
          break;
        }
        default: {
          const auto got = c.read(path);
          const auto it = model.find(path);
          REQUIRE(got.has_value() == (it != model.end()));
          if (got) CHECK(*got == it->second);
        }
      }
      std::size_t bytes = 0;
      for (const auto& [p, payload] : model) bytes += payload.size() + fd::checkpoint_record_overhead;
      CHECK(c.byte_size() == bytes);
      CHECK(c.record_count() == model.size());
    }
  }
}

TEST_CASE("MemoryCheckpoint: a written record read back is its payload; put_raw() bytes are verified") {
  fl::MemoryCheckpoint c;
  c.write("a/b", "payload");
  CHECK(c.read("a/b") == "payload");
  const std::string good = *c.raw("a/b");
  CHECK(c.read("a/b") == "payload");  // after raw(): the same
  std::string bad = good;
  bad[good.size() - 1] = static_cast<char>(bad[good.size() - 1] ^ 0x10);  // the checksum
  c.put_raw("a/b", bad);
  CHECK_THROWS_AS((void)c.read("a/b"), fl::error);
  CHECK(c.raw("a/b") == bad);  // put_raw() bytes are kept as given
  c.put_raw("a/b", good);
  CHECK(c.read("a/b") == "payload");
  c.write("a/b", "new");  // written again: trusted again
  CHECK(c.read("a/b") == "new");
  CHECK(c.raw("a/b") == fd::frame("new"));
}

}  // namespace checkpoint_memory_records
