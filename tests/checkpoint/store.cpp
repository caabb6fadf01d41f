// The checkpoint policies (checkpoint/memory.hpp, checkpoint/file.hpp) and
// what they share: CRC-32C (detail/crc32.hpp) against published vectors and
// a bitwise reference, the record framing (detail/checkpoint_record.hpp),
// and the checkpoint_store contract (checkpoint/store.hpp) over both
// policies: binary round trips, atomic overwrites, list/remove against a
// reference model on random operations, every corruption of a record
// reported as errc::checkpoint_corrupt naming the record and leaving it as
// it was, I/O failures as errc::checkpoint_io leaving the old state.
#include <flowlib/checkpoint/file.hpp>
#include <flowlib/checkpoint/memory.hpp>
#include <flowlib/detail/checkpoint_record.hpp>
#include <flowlib/detail/crc32.hpp>

#include <support/temp_files.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <unistd.h>

namespace checkpoint_store {

namespace fd = flowlib::detail;
namespace fs = std::filesystem;
using flowlib::errc;

namespace {

// --- helpers -------------------------------------------------------------------

std::uint32_t crc32c_bitwise(std::string_view s) {
  std::uint32_t c = 0xffffffffu;
  for (unsigned char b : s) {
    c ^= b;
    for (int i = 0; i < 8; ++i) c = (c & 1u) ? (c >> 1) ^ 0x82f63b78u : c >> 1;
  }
  return ~c;
}

std::string random_bytes(std::mt19937_64& rng, std::size_t n) {
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng() & 0xffu);
  return s;
}

std::string le(std::uint64_t v, int width) {
  std::string s;
  for (int i = 0; i < width; ++i, v >>= 8) s.push_back(static_cast<char>(v & 0xffu));
  return s;
}

/// The error `f` throws; fails the test when it throws none.
template <class F>
flowlib::error error_of(F&& f) {
  try {
    f();
  } catch (const flowlib::error& e) {
    return e;
  }
  FAIL("expected a flowlib::error");
  return flowlib::error(errc::invalid_argument, "", "", "", "");
}

bool contains(std::string_view text, std::string_view part) {
  return text.find(part) != std::string_view::npos;
}

using flowtest::temp_dir;
constexpr auto file_bytes = flowtest::read_file;
constexpr auto put_file = flowtest::write_file;

// --- the two policies, with raw access to their stored bytes -------------------

struct memory_policy {
  flowlib::MemoryCheckpoint store;
  std::optional<std::string> raw(std::string_view path) const { return store.raw(path); }
  void put_raw(std::string_view path, std::string bytes) { store.put_raw(path, std::move(bytes)); }
  std::size_t temp_files() const { return 0; }
};

struct file_policy {
  temp_dir dir;
  flowlib::FileCheckpoint store{dir.path / "ckpt"};
  std::optional<std::string> raw(std::string_view path) const {
    const fs::path p = store.path() / path;
    if (!fs::is_regular_file(p)) return std::nullopt;
    return file_bytes(p);
  }
  // Edits the file on disk, as a crash, a disk or a person would.
  void put_raw(std::string_view path, std::string bytes) { put_file(store.path() / path, bytes); }
  std::size_t temp_files() const {
    std::size_t n = 0;
    for (const auto& e : fs::recursive_directory_iterator(dir.path)) {
      if (e.path().filename().string().starts_with(".tmp-")) ++n;
    }
    return n;
  }
};

#define CHECKPOINT_POLICIES memory_policy, file_policy

// --- reference model of the store ----------------------------------------------

/// Records as a plain map; the folder rules spelled out by brute force.
struct model {
  std::map<std::string, std::string> records;

  /// Whether a write of `p` must fail: a proper prefix of it is a record,
  /// or records exist under it.
  bool write_collides(const std::string& p) const {
    for (const auto& [k, v] : records) {
      if (p.size() > k.size() && p.starts_with(k) && p[k.size()] == '/') return true;
      if (k.size() > p.size() && k.starts_with(p) && k[p.size()] == '/') return true;
    }
    return false;
  }
  std::vector<std::string> list(const std::string& folder) const {
    std::set<std::string> names;
    const std::string prefix = folder.empty() ? "" : folder + "/";
    for (const auto& [k, v] : records) {
      if (!k.starts_with(prefix)) continue;
      const std::string rest = k.substr(prefix.size());
      names.insert(rest.substr(0, rest.find('/')));
    }
    return {names.begin(), names.end()};
  }
  void remove(const std::string& p) {
    for (auto it = records.begin(); it != records.end();) {
      const bool under = p.empty() || it->first == p ||
                         (it->first.starts_with(p) && it->first[p.size()] == '/');
      it = under ? records.erase(it) : std::next(it);
    }
  }
};

std::vector<std::string> path_universe() {
  std::vector<std::string> out;
  const std::vector<std::string> parts = {"a", "a-b", "b"};
  for (const auto& x : parts) {
    out.push_back(x);
    for (const auto& y : parts) {
      out.push_back(x + "/" + y);
      for (const auto& z : parts) out.push_back(x + "/" + y + "/" + z);
    }
  }
  return out;
}

}  // namespace

// --- CRC-32C -------------------------------------------------------------------

TEST_CASE("crc32c: published test vectors (RFC 3720 B.4) and the check value") {
  CHECK(fd::crc32c("") == 0u);
  CHECK(fd::crc32c("123456789") == 0xE3069283u);
  CHECK(fd::crc32c("a") == 0xC1D04330u);
  CHECK(fd::crc32c(std::string(32, '\0')) == 0x8A9136AAu);
  CHECK(fd::crc32c(std::string(32, '\xff')) == 0x62A8AB43u);
  std::string up, down;
  for (int i = 0; i < 32; ++i) {
    up.push_back(static_cast<char>(i));
    down.push_back(static_cast<char>(31 - i));
  }
  CHECK(fd::crc32c(up) == 0x46DD794Eu);
  CHECK(fd::crc32c(down) == 0x113FDB5Cu);
  CHECK(crc32c_bitwise("123456789") == 0xE3069283u);  // the reference is right too
}

TEST_CASE("crc32c: slicing-by-8 equals the bitwise definition at every length, offset and split") {
  for (std::uint64_t seed : {1u, 2u, 3u, 4u}) {
    std::mt19937_64 rng(seed);
    const std::string data = random_bytes(rng, 300);
    for (std::size_t off = 0; off < 9; ++off) {  // every alignment
      for (std::size_t len = 0; off + len <= data.size(); len += 1 + rng() % 7) {
        const std::string_view s = std::string_view(data).substr(off, len);
        const std::uint32_t want = crc32c_bitwise(s);
        REQUIRE(fd::crc32c(s) == want);
        const std::size_t cut = len == 0 ? 0 : rng() % (len + 1);
        REQUIRE(fd::crc32c_extend(fd::crc32c(s.substr(0, cut)), s.substr(cut)) == want);
      }
    }
  }
}

// --- record framing --------------------------------------------------------------

TEST_CASE("checkpoint record: the byte layout is magic, version, flags, length, payload, CRC") {
  const std::string payload("a\0c", 3);
  const std::string head = std::string("FLCK") + le(1, 2) + le(0, 2) + le(3, 8);
  const std::string want = head + payload + le(crc32c_bitwise(head + payload), 4);
  CHECK(fd::frame(payload) == want);
  CHECK(fd::frame(payload).size() == payload.size() + fd::checkpoint_record_overhead);
  CHECK(fd::unframe(want, "w") == payload);
  const std::string empty = fd::frame("");
  CHECK(empty.size() == 20);
  CHECK(fd::unframe(empty, "w").empty());
}

TEST_CASE("checkpoint record: each defect gets its own message naming the record") {
  const std::string good = fd::frame("payload");
  const auto message = [](const std::string& bytes) {
    const auto e = error_of([&] { (void)fd::unframe(bytes, "record 'x/y' in test store"); });
    CHECK(e.code() == errc::checkpoint_corrupt);
    CHECK(contains(e.what(), "record 'x/y' in test store: "));
    CHECK(contains(e.what(), "the record is left as it is"));
    return std::string(e.what());
  };
  CHECK(contains(message("JUNKJUNKJUNKJUNKJUNKJUNK"), "not a flowlib checkpoint record"));
  CHECK(contains(message("FL"), "truncated: 2 bytes of at least 20"));
  CHECK(contains(message("FX"), "not a flowlib checkpoint record"));

  std::string v7 = good;
  v7[4] = 7;
  CHECK(contains(message(v7), "unknown format version 7 (this build reads version 1)"));
  // Re-checksummed, so that only the version is wrong: still the version.
  v7.resize(v7.size() - 4);
  v7 += le(crc32c_bitwise(v7), 4);
  CHECK(contains(message(v7), "unknown format version 7 (this build reads version 1)"));

  CHECK(contains(message(good.substr(0, good.size() - 1)),
                 "truncated: " + std::to_string(good.size() - 1) + " bytes of " +
                     std::to_string(good.size())));
  CHECK(contains(message(good + "x"), "trailing bytes"));
  std::string flipped = good;
  flipped[17] ^= 0x10;
  const std::string m = message(flipped);
  CHECK(contains(m, "checksum mismatch (stored 0x"));
  CHECK(contains(m, ", computed 0x"));

  std::string flagged = good.substr(0, good.size() - 4);
  flagged[6] = 1;
  flagged += le(crc32c_bitwise(flagged), 4);
  CHECK(contains(message(flagged), "unknown flags 0x00000001"));

  std::string huge = good;
  for (int i = 8; i < 16; ++i) huge[static_cast<std::size_t>(i)] = '\xff';
  CHECK(contains(message(huge), "bytes of more than 2^64"));
}

// --- the store contract, over both policies -------------------------------------

TEST_CASE_TEMPLATE("checkpoint store: binary payloads round trip exactly", P, CHECKPOINT_POLICIES) {
  P p;
  auto& s = p.store;
  std::string all;
  for (int i = 0; i < 256; ++i) all.push_back(static_cast<char>(i));
  std::mt19937_64 rng(42);
  const std::string big = random_bytes(rng, 1u << 20);

  CHECK_FALSE(s.read("none").has_value());
  s.write("bytes", all);
  s.write("empty", "");
  s.write("deep/er/big", big);
  CHECK(s.read("bytes") == all);
  CHECK(s.read("empty") == std::string());
  CHECK(s.read("deep/er/big") == big);
  CHECK(p.raw("bytes") == fd::frame(all));
  CHECK_FALSE(s.read("deep").has_value());  // a folder is not a record
  CHECK_FALSE(s.read("bytes/x").has_value());
  CHECK(p.temp_files() == 0);
}

TEST_CASE_TEMPLATE("checkpoint store: an overwrite leaves exactly the new record, no temporary file",
                   P, CHECKPOINT_POLICIES) {
  P p;
  auto& s = p.store;
  std::mt19937_64 rng(7);
  for (int i = 0; i < 20; ++i) {
    const std::string v = random_bytes(rng, rng() % 3000);
    s.write("flows/f/state", v);
    REQUIRE(s.read("flows/f/state") == v);
    REQUIRE(p.raw("flows/f/state") == fd::frame(v));
    REQUIRE(p.temp_files() == 0);
  }
  CHECK(s.list("flows/f") == std::vector<std::string>{"state"});
}

TEST_CASE_TEMPLATE("checkpoint store: concurrent writers and readers see whole records only", P,
                   CHECKPOINT_POLICIES) {
  P p;
  auto& s = p.store;
  // Payload k is k+1 copies of byte k: any mix of two is recognisable.
  const auto payload = [](int k) { return std::string(static_cast<std::size_t>(k + 1) * 97, char('A' + k)); };
  s.write("shared", payload(0));
  std::vector<std::thread> threads;
  std::vector<int> bad(8, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 25; ++i) s.write("shared", payload(t * 2 + (i % 2)));
    });
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        const auto got = s.read("shared");
        bool ok = false;
        for (int k = 0; k < 8 && got; ++k) ok = ok || *got == payload(k);
        if (!ok) ++bad[static_cast<std::size_t>(t)];
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(std::count(bad.begin(), bad.end(), 0) == 8);
  CHECK(p.temp_files() == 0);
}

TEST_CASE_TEMPLATE("checkpoint store: list is sorted and per folder; remove is recursive", P,
                   CHECKPOINT_POLICIES) {
  P p;
  auto& s = p.store;
  for (const char* path : {"b", "a/x", "a-b", "a.c/1", "a_d", "a/y/z", "a/y/w", "c/d/e/f"}) {
    s.write(path, path);
  }
  CHECK(s.list("") == std::vector<std::string>{"a", "a-b", "a.c", "a_d", "b", "c"});
  CHECK(s.list("a") == std::vector<std::string>{"x", "y"});
  CHECK(s.list("a/y") == std::vector<std::string>{"w", "z"});
  CHECK(s.list("c/d") == std::vector<std::string>{"e"});
  CHECK(s.list("b").empty());  // a record has nothing under it
  CHECK(s.list("nothing/here").empty());

  s.remove("a");
  CHECK(s.list("") == std::vector<std::string>{"a-b", "a.c", "a_d", "b", "c"});
  CHECK_FALSE(s.read("a/y/z").has_value());
  CHECK(s.read("a-b") == "a-b");  // a sibling with the same prefix stays
  s.remove("c/d/e/f");
  CHECK(s.list("") == std::vector<std::string>{"a-b", "a.c", "a_d", "b"});  // empty folders go
  s.remove("missing/x");
  s.remove("b");
  CHECK_FALSE(s.read("b").has_value());
  s.write("b/now-a-folder", "ok");  // "b" was a record, is gone: fine now
  CHECK(s.read("b/now-a-folder") == "ok");
  s.remove("");
  CHECK(s.list("").empty());
  CHECK(p.temp_files() == 0);
}

TEST_CASE_TEMPLATE("checkpoint store: random writes and removes match a reference model", P,
                   CHECKPOINT_POLICIES) {
  const std::vector<std::string> universe = path_universe();
  std::vector<std::string> folders = {""};
  for (const auto& u : universe) folders.push_back(u);
  for (std::uint64_t seed : {11u, 12u, 13u}) {
    CAPTURE(seed);
    P p;
    auto& s = p.store;
    model m;
    std::mt19937_64 rng(seed);
    for (int op = 0; op < 60; ++op) {
      const std::string& path = universe[rng() % universe.size()];
      CAPTURE(op);
      CAPTURE(path);
      if (rng() % 4 == 0) {
        s.remove(path);
        m.remove(path);
      } else {
        const std::string v = random_bytes(rng, rng() % 40);
        if (m.write_collides(path)) {
          const auto e = error_of([&] { s.write(path, v); });
          CHECK(e.code() == errc::checkpoint_io);
          CHECK(contains(e.what(), "cannot write record '" + path + "'"));
        } else {
          s.write(path, v);
          m.records[path] = v;
        }
      }
      for (const auto& u : universe) {
        const auto it = m.records.find(u);
        REQUIRE(s.read(u) == (it == m.records.end() ? std::nullopt
                                                    : std::optional<std::string>(it->second)));
      }
      for (const auto& f : folders) REQUIRE(s.list(f) == m.list(f));
    }
    CHECK(p.temp_files() == 0);
  }
}

TEST_CASE_TEMPLATE("checkpoint store: every flipped byte is reported as corrupt, naming the record, "
                   "and the record is left as it was", P, CHECKPOINT_POLICIES) {
  P p;
  auto& s = p.store;
  const std::string path = "flows/6d61696e/commits/12";
  s.write(path, "twelve bytes");
  const std::string good = *p.raw(path);
  REQUIRE(good.size() == 32);
  for (std::size_t i = 0; i < good.size(); ++i) {
    for (unsigned mask : {0x01u, 0x80u, 0xffu}) {
      CAPTURE(i);
      CAPTURE(mask);
      std::string bad = good;
      bad[i] = static_cast<char>(static_cast<unsigned char>(bad[i]) ^ mask);
      p.put_raw(path, bad);
      const auto e = error_of([&] { (void)s.read(path); });
      REQUIRE(e.code() == errc::checkpoint_corrupt);
      CHECK(contains(e.what(), "record '" + path + "' in " + s.describe()));
      CHECK(p.raw(path) == bad);  // the failed read changed nothing
    }
  }
  p.put_raw(path, good);
  CHECK(s.read(path) == "twelve bytes");
}

TEST_CASE_TEMPLATE("checkpoint store: a record cut at any length is reported as truncated", P,
                   CHECKPOINT_POLICIES) {
  P p;
  auto& s = p.store;
  const std::string path = "sources/0/offsets/3";
  s.write(path, "some offsets");
  const std::string good = *p.raw(path);
  for (std::size_t n = 0; n < good.size(); ++n) {
    CAPTURE(n);
    p.put_raw(path, good.substr(0, n));
    const auto e = error_of([&] { (void)s.read(path); });
    REQUIRE(e.code() == errc::checkpoint_corrupt);
    CHECK(contains(e.what(), "record '" + path + "' in " + s.describe()));
    CHECK(contains(e.what(), "truncated: " + std::to_string(n) + " bytes of "));
    CHECK(p.raw(path) == good.substr(0, n));
  }
}

TEST_CASE_TEMPLATE("checkpoint store: a record of an unknown format version names the version", P,
                   CHECKPOINT_POLICIES) {
  P p;
  auto& s = p.store;
  s.write("r", "x");
  std::string future = *p.raw("r");
  future[4] = 2;
  future[5] = 1;  // version 258
  p.put_raw("r", future);
  const auto e = error_of([&] { (void)s.read("r"); });
  CHECK(e.code() == errc::checkpoint_corrupt);
  CHECK(contains(e.what(), "record 'r' in " + s.describe() +
                               ": unknown format version 258 (this build reads version 1)"));
  CHECK(p.raw("r") == future);
  p.put_raw("r", "not a record at all");
  CHECK(contains(error_of([&] { (void)s.read("r"); }).what(), "not a flowlib checkpoint record"));
}

TEST_CASE_TEMPLATE("checkpoint store: a write that collides with a record or a folder fails and "
                   "changes nothing", P, CHECKPOINT_POLICIES) {
  P p;
  auto& s = p.store;
  s.write("a", "record a");
  s.write("f/x", "record f/x");
  const auto e1 = error_of([&] { s.write("a/b", "v"); });
  CHECK(e1.code() == errc::checkpoint_io);
  CHECK(contains(e1.what(), s.describe() + ": cannot write record 'a/b'"));
  const auto e2 = error_of([&] { s.write("a/b/c", "v"); });
  CHECK(e2.code() == errc::checkpoint_io);
  const auto e3 = error_of([&] { s.write("f", "v"); });
  CHECK(e3.code() == errc::checkpoint_io);
  CHECK(contains(e3.what(), "cannot write record 'f'"));
  CHECK(s.read("a") == "record a");
  CHECK(s.read("f/x") == "record f/x");
  CHECK(s.list("") == std::vector<std::string>{"a", "f"});
  CHECK(s.list("f") == std::vector<std::string>{"x"});
  CHECK(p.temp_files() == 0);
}

TEST_CASE_TEMPLATE("checkpoint store: invalid record paths are refused", P, CHECKPOINT_POLICIES) {
  P p;
  auto& s = p.store;
  for (const char* bad : {"", "/abs", "a//b", "a/", "..", "a/../b", "./a", "a/.tmp-1"}) {
    CAPTURE(bad);
    if (std::string_view(bad).empty()) {
      CHECK(error_of([&] { s.write(bad, "v"); }).code() == errc::invalid_argument);
      continue;
    }
    const auto e = error_of([&] { s.write(bad, "v"); });
    CHECK(e.code() == errc::invalid_argument);
    CHECK(contains(e.what(), "invalid record path '" + std::string(bad) + "'"));
    CHECK(error_of([&] { (void)s.read(bad); }).code() == errc::invalid_argument);
    CHECK(error_of([&] { (void)s.list(bad); }).code() == errc::invalid_argument);
    CHECK(error_of([&] { s.remove(bad); }).code() == errc::invalid_argument);
  }
  CHECK(s.list("").empty());
}

// --- MemoryCheckpoint --------------------------------------------------------------

TEST_CASE("MemoryCheckpoint: not durable, counts records and framed bytes, outlives its users") {
  flowlib::MemoryCheckpoint ckpt;
  CHECK_FALSE(ckpt.durable());
  CHECK(ckpt.describe() == "memory checkpoint");
  {
    flowlib::checkpoint_store& first_pipeline = ckpt;
    first_pipeline.write("x", "12345");
    first_pipeline.write("y/z", "");
  }
  CHECK(ckpt.record_count() == 2);
  CHECK(ckpt.byte_size() == 5 + 2 * fd::checkpoint_record_overhead);
  {
    const flowlib::checkpoint_store& second_pipeline = ckpt;
    CHECK(second_pipeline.read("x") == "12345");
  }
  ckpt.write("x", "1");
  CHECK(ckpt.byte_size() == 1 + 2 * fd::checkpoint_record_overhead);
  ckpt.put_raw("raw", "anything");
  CHECK(ckpt.raw("raw") == "anything");
  CHECK(ckpt.byte_size() == 1 + 8 + 2 * fd::checkpoint_record_overhead);
  ckpt.remove("");
  CHECK(ckpt.record_count() == 0);
  CHECK(ckpt.byte_size() == 0);
  CHECK_FALSE(ckpt.raw("x").has_value());
}

// --- FileCheckpoint ------------------------------------------------------------------

TEST_CASE("FileCheckpoint: durable, creates its directory, a new instance reads the records") {
  temp_dir tmp;
  const fs::path dir = tmp.path / "x" / "y" / "ckpt";
  {
    flowlib::FileCheckpoint ckpt(dir);
    CHECK(ckpt.durable());
    CHECK(fs::is_directory(dir));
    CHECK(ckpt.path() == dir);
    CHECK(ckpt.describe() == "file checkpoint '" + dir.string() + "'");
    ckpt.write("flows/a/1", "one");
  }
  CHECK(fs::is_regular_file(dir / "flows" / "a" / "1"));
  flowlib::FileCheckpoint again(dir.string() + "/");  // a trailing '/' names the same directory
  CHECK(again.path() == dir);
  CHECK(again.read("flows/a/1") == "one");
}

TEST_CASE("FileCheckpoint: a directory that cannot be created is an I/O error") {
  temp_dir tmp;
  put_file(tmp.path / "plain", "a regular file");
  const auto e1 = error_of([&] { flowlib::FileCheckpoint c(tmp.path / "plain" / "ckpt"); });
  CHECK(e1.code() == errc::checkpoint_io);
  CHECK(contains(e1.what(), (tmp.path / "plain" / "ckpt").string()));
  CHECK(contains(e1.what(), "Not a directory"));
  const auto e2 = error_of([&] { flowlib::FileCheckpoint c(tmp.path / "plain"); });
  CHECK(e2.code() == errc::checkpoint_io);
  CHECK(contains(e2.what(), "exists and is not a directory"));
  CHECK(file_bytes(tmp.path / "plain") == "a regular file");
}

TEST_CASE("FileCheckpoint: collisions report what the system said, naming the file") {
  temp_dir tmp;
  flowlib::FileCheckpoint ckpt(tmp.path);
  ckpt.write("a", "record a");
  ckpt.write("f/x", "record f/x");
  const auto e1 = error_of([&] { ckpt.write("a/b", "v"); });
  CHECK(contains(e1.what(), (tmp.path / "a").string()));
  CHECK(contains(e1.what(), "Not a directory"));
  CHECK(contains(e1.what(), "the old record is unchanged"));
  const auto e2 = error_of([&] { ckpt.write("f", "v"); });
  CHECK(contains(e2.what(), "rename"));
  CHECK(contains(e2.what(), "Is a directory"));
  CHECK(file_bytes(tmp.path / "a") == fd::frame("record a"));
}

TEST_CASE("FileCheckpoint: temporary files of dead processes are ignored, then swept") {
  temp_dir tmp;
  const fs::path dir = tmp.path / "ckpt";
  fs::create_directories(dir / "flows");
  const std::string own_pid = std::to_string(::getpid());
  const std::string parent_pid = std::to_string(::getppid());
  const std::vector<std::string> stale = {
      ".tmp-2147483647-0123456789abcdef-0",  // no such process
      ".tmp-" + own_pid + "-0123456789abcdef-3",  // an earlier process with this pid
  };
  const std::vector<std::string> kept = {
      ".tmp-" + parent_pid + "-0123456789abcdef-1",  // a live process
      ".tmp-garbage",                                // not a name flowlib makes
  };
  for (const auto& n : stale) put_file(dir / "flows" / n, "partial");
  for (const auto& n : kept) put_file(dir / "flows" / n, "partial");
  flowlib::FileCheckpoint ckpt(dir);
  CHECK(ckpt.list("flows").empty());
  CHECK(ckpt.list("").size() == 1);
  ckpt.write("flows/r", "v");
  CHECK(ckpt.list("flows") == std::vector<std::string>{"r"});
  for (const auto& n : stale) CHECK_FALSE(fs::exists(dir / "flows" / n));
  for (const auto& n : kept) CHECK(fs::exists(dir / "flows" / n));
  CHECK(ckpt.read("flows/r") == "v");
}

}  // namespace checkpoint_store
