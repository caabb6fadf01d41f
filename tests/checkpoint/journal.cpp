// FileCheckpoint's batches (checkpoint/file.hpp, "Batches"): the records of
// a begin_batch() ... commit_batch() bracket are staged (reads see them),
// committed as one journal entry with one fdatasync, and written to their
// own files later, together. Checked against a reference model over random
// batches, aborts, writes outside batches, reopenings (a new instance reads
// the journal the old one left, as after a crash) and flushes; a journal
// cut at every length, or damaged, keeps exactly the entries before the
// damage.
#include <flowlib/checkpoint/file.hpp>
#include <flowlib/detail/checkpoint_record.hpp>

#include <support/temp_files.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace checkpoint_journal {

namespace fs = std::filesystem;
namespace fl = flowlib;
using flowtest::temp_dir;

const char* const journal = ".journal-log";

bool on_disk(const fs::path& dir, const std::string& path) { return fs::exists(dir / path); }

// Concatenation by append (g++ 12 warns falsely, -Wrestrict, about
// "literal" + std::string temporaries).
template <class... Parts>
std::string cat(const Parts&... parts) {
  std::string out;
  (out.append(parts), ...);
  return out;
}
std::string num(std::uint64_t n) { return std::to_string(n); }

// The records a model holds: path -> bytes, in folders "f<i>" of records "r<j>".
using model = std::map<std::string, std::string>;

void check_matches(const fl::checkpoint_store& ck, const model& m) {
  for (int f = 0; f < 4; ++f) {
    const std::string folder = cat("f", num(static_cast<std::uint64_t>(f)));
    std::vector<std::string> want;
    for (int r = 0; r < 5; ++r) {
      const std::string path = cat(folder, "/r", num(static_cast<std::uint64_t>(r)));
      const auto it = m.find(path);
      CAPTURE(path);
      const auto got = ck.read(path);
      if (it == m.end()) {
        CHECK_FALSE(got.has_value());
      } else {
        REQUIRE(got.has_value());
        CHECK(*got == it->second);
        want.push_back(cat("r", num(static_cast<std::uint64_t>(r))));
      }
    }
    CAPTURE(folder);
    CHECK(ck.list(folder) == want);
  }
  std::vector<std::string> top;
  for (int f = 0; f < 4; ++f) {
    const std::string folder = cat("f", num(static_cast<std::uint64_t>(f)));
    const auto it = m.lower_bound(cat(folder, "/"));
    if (it != m.end() && it->first.starts_with(cat(folder, "/"))) top.push_back(folder);
  }
  CHECK(ck.list("") == top);
}

TEST_CASE("R-DURABLE-6: a batch's records are staged, visible to reads and list, and reach the disk as one journal entry") {
  temp_dir dir;
  {
    fl::FileCheckpoint ck{dir.path};
    ck.begin_batch();
    ck.write("a/x", "one");
    ck.write("a/y", "two");
    CHECK(ck.read("a/x") == std::optional<std::string>("one"));
    CHECK(ck.list("a") == std::vector<std::string>{"x", "y"});
    CHECK(ck.list("") == std::vector<std::string>{"a"});
    CHECK_FALSE(on_disk(dir.path, "a/x"));  // nothing written before the commit
    CHECK_FALSE(on_disk(dir.path, journal));
    ck.commit_batch();
    CHECK(on_disk(dir.path, journal));     // the commit point
    CHECK_FALSE(on_disk(dir.path, "a/x"));  // not in its own file yet
    CHECK(ck.read("a/y") == std::optional<std::string>("two"));

    ck.begin_batch();
    ck.write("a/z", "three");
    ck.remove("a/x");
    ck.abort_batch();  // staged records are forgotten
    CHECK_FALSE(ck.read("a/z").has_value());
    CHECK(ck.read("a/x") == std::optional<std::string>("one"));
  }
  {
    // A new instance reads the journal the last one left (its destructor
    // leaves it, as a crash would).
    fl::FileCheckpoint ck{dir.path};
    CHECK(ck.read("a/x") == std::optional<std::string>("one"));
    CHECK(ck.list("a") == std::vector<std::string>{"x", "y"});
    ck.flush();
    CHECK(on_disk(dir.path, "a/x"));
    CHECK(on_disk(dir.path, "a/y"));
    CHECK_FALSE(on_disk(dir.path, journal));
  }
  fl::FileCheckpoint ck{dir.path};
  CHECK(ck.read("a/y") == std::optional<std::string>("two"));
}

TEST_CASE("R-DURABLE-6: a write outside a batch while entries are pending is journaled after them, never overwritten by a replay") {
  temp_dir dir;
  {
    fl::FileCheckpoint ck{dir.path};
    ck.begin_batch();
    ck.write("k/v", "old");
    ck.commit_batch();
    ck.write("k/v", "new");  // outside a batch, an entry is pending
    ck.remove("k/w");        // nothing there: still fine
    CHECK_FALSE(on_disk(dir.path, "k/v"));
  }
  fl::FileCheckpoint ck{dir.path};
  CHECK(ck.read("k/v") == std::optional<std::string>("new"));
  ck.flush();
  fl::FileCheckpoint again{dir.path};
  CHECK(again.read("k/v") == std::optional<std::string>("new"));
  // With nothing pending a write goes straight to its file.
  again.write("k/u", "direct");
  CHECK(on_disk(dir.path, "k/u"));
  CHECK_FALSE(on_disk(dir.path, journal));
}

TEST_CASE("R-DURABLE-6: after 64 entries the records are written to their files and the journal goes") {
  temp_dir dir;
  fl::FileCheckpoint ck{dir.path};
  for (int i = 0; i < 64; ++i) {
    ck.begin_batch();
    ck.write(cat("n/", num(static_cast<std::uint64_t>(i % 7))), num(static_cast<std::uint64_t>(i)));
    if (i % 5 == 0) ck.remove(cat("n/", num(static_cast<std::uint64_t>((i + 3) % 7))));
    ck.commit_batch();
  }
  CHECK_FALSE(on_disk(dir.path, journal));
  model m;
  for (int i = 0; i < 64; ++i) {
    m[cat("n/", num(static_cast<std::uint64_t>(i % 7)))] = num(static_cast<std::uint64_t>(i));
    if (i % 5 == 0) m.erase(cat("n/", num(static_cast<std::uint64_t>((i + 3) % 7))));
  }
  for (int k = 0; k < 7; ++k) {
    const std::string p = cat("n/", num(static_cast<std::uint64_t>(k)));
    CAPTURE(p);
    CHECK(on_disk(dir.path, p) == (m.count(p) != 0));
    if (m.count(p) != 0) CHECK(ck.read(p) == std::optional<std::string>(m[p]));
  }
}

TEST_CASE("R-DURABLE-6: random batches, aborts, writes outside batches, reopenings and flushes match a model") {
  for (std::uint64_t seed = 1; seed <= 12; ++seed) {
    CAPTURE(seed);
    std::mt19937_64 rng(seed);
    const auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<std::uint64_t>(n)); };
    temp_dir dir;
    auto ck = std::make_unique<fl::FileCheckpoint>(dir.path);
    model committed;
    for (int step = 0; step < 120; ++step) {
      const int what = pick(10);
      if (what == 0) {
        ck.reset();  // as a crash: the journal stays
        ck = std::make_unique<fl::FileCheckpoint>(dir.path);
      } else if (what == 1) {
        ck->flush();
        CHECK_FALSE(on_disk(dir.path, journal));
      } else if (what == 2) {
        const std::string p = cat("f", num(static_cast<std::uint64_t>(pick(4))), "/r", num(static_cast<std::uint64_t>(pick(5))));
        const std::string v = cat("out", num(static_cast<std::uint64_t>(step)));
        ck->write(p, v);
        committed[p] = v;
      } else {
        model staged = committed;
        ck->begin_batch();
        for (int n = 1 + pick(6); n > 0; --n) {
          const int f = pick(4);
          const std::string folder = cat("f", num(static_cast<std::uint64_t>(f)));
          if (pick(6) == 0) {
            ck->remove(folder);
            for (auto it = staged.begin(); it != staged.end();) {
              it = it->first.starts_with(cat(folder, "/")) ? staged.erase(it) : std::next(it);
            }
          } else if (pick(4) == 0) {
            const std::string p = cat(folder, "/r", num(static_cast<std::uint64_t>(pick(5))));
            ck->remove(p);
            staged.erase(p);
          } else {
            const std::string p = cat(folder, "/r", num(static_cast<std::uint64_t>(pick(5))));
            const std::string v = cat("b", num(static_cast<std::uint64_t>(step)), ".", num(static_cast<std::uint64_t>(n)), std::string(static_cast<std::size_t>(pick(50)), 'x'));
            ck->write(p, v);
            staged[p] = v;
          }
        }
        check_matches(*ck, staged);  // reads see the open batch
        if (pick(5) == 0) {
          ck->abort_batch();
        } else {
          ck->commit_batch();
          committed = staged;
        }
      }
      check_matches(*ck, committed);
    }
    ck.reset();
    check_matches(fl::FileCheckpoint(dir.path), committed);
  }
}

TEST_CASE("R-DURABLE-6: a journal cut short or damaged keeps exactly the entries before the damage; the next commit follows them") {
  temp_dir master;
  std::vector<std::uintmax_t> ends;  // the journal's size after each entry
  {
    fl::FileCheckpoint ck{master.path};
    for (int i = 0; i < 3; ++i) {
      ck.begin_batch();
      ck.write(cat("e/", num(static_cast<std::uint64_t>(i))), std::string(static_cast<std::size_t>(20 + 10 * i), static_cast<char>('a' + i)));
      ck.commit_batch();
      ends.push_back(fs::file_size(master.path / journal));
    }
  }
  const std::string bytes = flowtest::read_file(master.path / journal);
  REQUIRE(bytes.size() == ends.back());
  // Cut at every length, and a flipped byte in each entry.
  std::vector<std::string> damaged;
  for (std::size_t n = 0; n <= bytes.size(); ++n) damaged.push_back(bytes.substr(0, n));
  for (std::size_t at : {std::size_t{5}, static_cast<std::size_t>(ends[0] + 30), static_cast<std::size_t>(ends[1] + 30)}) {
    std::string b = bytes;
    b[at] = static_cast<char>(b[at] ^ 0x10);
    damaged.push_back(b);
  }
  for (const std::string& b : damaged) {
    // The entries wholly before the damage survive.
    std::size_t keep = 0;
    for (std::size_t i = 0; i < ends.size(); ++i) {
      if (b.size() >= ends[i] && b.compare(0, ends[i], bytes, 0, ends[i]) == 0) keep = i + 1;
    }
    CAPTURE(b.size());
    CAPTURE(keep);
    temp_dir dir;
    flowtest::write_file(dir.path / journal, b);
    {
      fl::FileCheckpoint ck{dir.path};
      for (std::size_t i = 0; i < 3; ++i) CHECK(ck.read(cat("e/", num(i))).has_value() == (i < keep));
      ck.begin_batch();
      ck.write("e/next", "after");
      ck.commit_batch();
    }
    fl::FileCheckpoint ck{dir.path};
    CHECK(ck.read("e/next") == std::optional<std::string>("after"));
    for (std::size_t i = 0; i < 3; ++i) CHECK(ck.read(cat("e/", num(i))).has_value() == (i < keep));
  }
}

}  // namespace checkpoint_journal
