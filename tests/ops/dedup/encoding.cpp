// DedupWithinWatermark's checkpoint bytes (R-DEDUP-6) against byte_codec and
// a model. The operator encodes its identities in place (detail/
// dedup_checkpoint.hpp); these tests check the bytes it writes, not only
// that it reads them back:
//   - a key encoded in place is byte_codec's encoding, byte for byte, for
//     every column type a key may have (random values, several seeds);
//   - a delta, decoded with byte_codec, lists exactly the identities the
//     batch stored, in batch order, with their expiry, and the watermarks;
//     a snapshot lists exactly the model's state, in expiry order; both for
//     a fixed-width key and a key with strings and optionals, several seeds;
//   - a batch that throws leaves the operator's snapshot byte for byte as
//     before, and its next delta is the one of an operator that never saw
//     the failed batch.
#include <flowlib/detail/dedup_checkpoint.hpp>
#include <flowlib/ops/dedup_within_watermark.hpp>

#include <support/checkpoint_blobs.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace ops_dedup_encoding {

namespace fl = flowlib;
namespace fd = flowlib::detail;

enum class Color : std::int16_t { red = -3, green = 7, blue = 300 };

std::string random_string(std::mt19937_64& g) {
  // Empty, short (in the small-string buffer) and long.
  const std::size_t n = std::array<std::size_t, 4>{0, 3, 15, 40}[g() % 4];
  std::string s;
  for (std::size_t i = 0; i < n; ++i) s.push_back(static_cast<char>(g() & 0xff));
  return s;
}

template <class T>
T random_value(std::mt19937_64& g) {
  if constexpr (std::is_same_v<T, bool>) {
    return g() % 2 == 0;
  } else if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(g());
  } else if constexpr (std::is_same_v<T, Color>) {
    return std::array<Color, 3>{Color::red, Color::green, Color::blue}[g() % 3];
  } else if constexpr (std::is_same_v<T, std::string>) {
    return random_string(g);
  } else if constexpr (fd::is_optional_v<T>) {
    if (g() % 3 == 0) return std::nullopt;
    return T{random_value<typename T::value_type>(g)};
  } else if constexpr (fd::is_duration<T>::value) {
    return T(static_cast<typename T::rep>(g()));
  } else if constexpr (fd::is_time_point_codec<T>::value) {
    return T(typename T::duration(static_cast<typename T::rep>(g())));
  } else {
    return [&]<class... Ts>(std::type_identity<std::tuple<Ts...>>) {
      return std::tuple<Ts...>{random_value<Ts>(g)...};
    }(std::type_identity<T>{});
  }
}

template <class T>
void check_in_place_encoding(std::uint64_t seed) {
  std::mt19937_64 g(seed);
  for (int i = 0; i < 200; ++i) {
    const T v = random_value<T>(g);
    const std::string expected = fd::encode(v);
    CAPTURE(i);
    REQUIRE(fd::encoded_key_size(v) == expected.size());
    if constexpr (fd::fixed_key_size<T>() != 0) REQUIRE(fd::fixed_key_size<T>() == expected.size());
    std::string got(expected.size() + 3, '\x5a');  // guard bytes after the value
    char* end = fd::encode_key_to(got.data(), v);
    REQUIRE(end == got.data() + expected.size());
    CHECK(got.substr(0, expected.size()) == expected);
    CHECK(got.substr(expected.size()) == "\x5a\x5a\x5a");
  }
}

TEST_CASE_TEMPLATE("R-DEDUP-6: a key encoded in place is byte_codec's encoding, byte for byte", T,
                   std::int8_t, std::uint16_t, std::int32_t, std::int64_t, std::uint64_t, bool, Color,
                   std::chrono::duration<std::int32_t, std::milli>,
                   std::chrono::sys_time<std::chrono::milliseconds>, std::string,
                   std::optional<std::int32_t>, std::optional<std::string>,
                   std::tuple<std::int64_t, std::int32_t>,
                   std::tuple<std::int64_t, std::string, std::optional<bool>>,
                   std::tuple<Color, std::uint8_t, std::chrono::duration<std::int64_t>>) {
  for (std::uint64_t seed = 1; seed <= 4; ++seed) {
    CAPTURE(seed);
    check_in_place_encoding<T>(seed);
  }
  // Fixed width exactly where every value has the same width.
  static_assert(fd::fixed_key_size<std::tuple<std::int64_t, std::int32_t>>() == 12);
  static_assert(fd::fixed_key_size<std::tuple<std::int64_t, std::string>>() == 0);
  static_assert(fd::fixed_key_size<std::optional<std::int32_t>>() == 0);
}

// --- Deltas and snapshots against a model ------------------------------------------

struct Fixed {
  std::int64_t id;
  std::int32_t part;
  std::int64_t ts;
};
FLOWLIB_SCHEMA(Fixed, id, part, ts);

struct Varied {
  std::optional<std::string> session;
  std::int32_t n;
  std::int64_t ts;
};
FLOWLIB_SCHEMA(Varied, session, n, ts);

using FixedDedup = fl::DedupWithinWatermark<fl::Key<&Fixed::id, &Fixed::part>, fl::EventTime<&Fixed::ts>>;
using VariedDedup = fl::DedupWithinWatermark<fl::Key<&Varied::session, &Varied::n>, fl::EventTime<&Varied::ts>>;

Fixed make_row(std::mt19937_64& g, std::int64_t ts, Fixed*) {
  return Fixed{static_cast<std::int64_t>(g() % 40) - 20, static_cast<std::int32_t>(g() % 3), ts};
}
Varied make_row(std::mt19937_64& g, std::int64_t ts, Varied*) {
  static const std::array<std::optional<std::string>, 4> sessions = {
      std::nullopt, std::string(""), std::string("s"), std::string("a session name past the buffer")};
  return Varied{sessions[g() % 4], static_cast<std::int32_t>(g() % 10), ts};
}

/// The simple model: identity -> expiry, the watermark (one input).
template <class Key>
struct model {
  std::map<Key, std::int64_t> state;
  std::optional<std::int64_t> wm;
  std::int64_t delay;

  /// One batch: the identities it stores, in batch order, with expiry.
  template <class Row, class KeyOf>
  std::vector<std::pair<std::int64_t, Key>> process(const std::vector<Row>& rows, const KeyOf& key_of) {
    std::vector<std::pair<std::int64_t, Key>> stored;
    std::optional<std::int64_t> max_et;
    for (const auto& r : rows) {
      if (!max_et || *max_et < r.ts) max_et = r.ts;
      if (wm && r.ts <= *wm) continue;  // late
      const Key k = key_of(r);
      if (state.contains(k)) continue;  // duplicate
      state.emplace(k, r.ts + delay);
      stored.emplace_back(r.ts + delay, k);
    }
    if (max_et && (!wm || *wm < *max_et - delay)) wm = *max_et - delay;
    if (wm) std::erase_if(state, [&](const auto& e) { return e.second <= *wm; });
    return stored;
  }
};

/// The watermark and entries of a blob, decoded with byte_codec.
template <class Key>
struct decoded {
  std::optional<std::int64_t> wm;
  std::vector<std::pair<std::int64_t, Key>> entries;
};

std::optional<std::int64_t> read_opt(fd::byte_reader& r) {
  if (r.integer<std::uint8_t>() == 0) return std::nullopt;
  return r.integer<std::int64_t>();
}

template <class Key>
void read_entries(fd::byte_reader& r, decoded<Key>& d) {
  const auto n = r.integer<std::uint64_t>();
  for (std::uint64_t i = 0; i < n; ++i) {
    const auto expires = r.integer<std::int64_t>();
    d.entries.emplace_back(expires, fd::byte_codec<Key>::read(r));
  }
  REQUIRE(r.pos == r.in.size());
}

void read_header(fd::byte_reader& r, std::uint8_t scope) {
  REQUIRE(r.in.substr(0, 4) == "FLDD");
  r.pos = 4;
  REQUIRE(r.integer<std::uint16_t>() == 1);
  REQUIRE(r.integer<std::uint8_t>() == scope);
}

template <class Key>
decoded<Key> decode_delta(const std::string& blob) {
  fd::byte_reader r{blob, 0, "test", ""};
  read_header(r, 1);
  REQUIRE(r.integer<std::uint8_t>() == 0);  // the last batch's identities
  decoded<Key> d;
  d.wm = read_opt(r);
  REQUIRE(r.integer<std::uint32_t>() == 1);
  REQUIRE(read_opt(r) == d.wm);  // the only input's watermark is the global one
  read_entries(r, d);
  return d;
}

template <class Key>
decoded<Key> decode_snapshot(const std::string& blob, std::int64_t delay) {
  fd::byte_reader outer{blob, 0, "test", ""};
  read_header(outer, 0);
  const std::string_view state = outer.bytes();
  REQUIRE(outer.pos == blob.size());
  fd::byte_reader r{state, 0, "test", ""};
  REQUIRE(state.substr(0, 4) == "FLDW");
  r.pos = 4;
  REQUIRE(r.integer<std::uint8_t>() == 1);  // version
  REQUIRE(r.integer<std::uint8_t>() == 0);  // an integer event time
  REQUIRE(r.integer<std::uint8_t>() == 8);  // its width
  REQUIRE(r.integer<std::uint8_t>() == 0);  // min policy
  REQUIRE(r.integer<std::int64_t>() == delay);
  REQUIRE(r.integer<std::uint32_t>() == 1);
  decoded<Key> d;
  d.wm = read_opt(r);
  REQUIRE(read_opt(r) == d.wm);
  read_entries(r, d);
  return d;
}

template <class Dedup, class Row>
void check_blobs_against_model(std::uint64_t seed) {
  using Key = typename Dedup::key_type;
  std::mt19937_64 g(seed);
  // Delays up to 124: expiry buckets (delay/32 wide) hold several expiries.
  const std::int64_t delay = 5 + static_cast<std::int64_t>(g() % 120);
  Dedup op{delay, "events"};
  const auto key_of = [&](const Row& r) { return typename Dedup::key_policy{}(r); };
  model<Key> m{{}, std::nullopt, delay};
  flowtest::written log;
  std::int64_t now = 0;
  const std::size_t batches = 10 + g() % 20;
  for (std::size_t b = 0; b < batches; ++b) {
    CAPTURE(b);
    now += static_cast<std::int64_t>(g() % 8);
    std::vector<Row> rows;
    const std::size_t n = g() % 30;
    for (std::size_t i = 0; i < n; ++i) {
      rows.push_back(make_row(g, now - static_cast<std::int64_t>(g() % 25), static_cast<Row*>(nullptr)));
    }
    op.process(rows);
    const auto stored = m.process(rows, key_of);

    const std::string delta = flowtest::delta_of(op);
    const auto d = decode_delta<Key>(delta);
    CHECK(d.wm == m.wm);
    CHECK(d.entries == stored);

    if (g() % 3 == 0) {
      const std::string snap = flowtest::snapshot_of(op);
      const auto s = decode_snapshot<Key>(snap, delay);
      CHECK(s.wm == m.wm);
      CHECK(std::is_sorted(s.entries.begin(), s.entries.end(),
                           [](const auto& a, const auto& c) { return a.first < c.first; }));
      std::vector<std::pair<std::int64_t, Key>> expected;
      for (const auto& [k, e] : m.state) expected.emplace_back(e, k);
      auto got = s.entries;
      std::sort(got.begin(), got.end());
      std::sort(expected.begin(), expected.end());
      CHECK(got == expected);
      log.commits.push_back({snap, ""});
    } else {
      log.commits.push_back({std::nullopt, delta});
    }
    // What the blobs restore is the model's state.
    Dedup back{delay, "events"};
    back.read_checkpoint(log.upto(log.commits.size()));
    REQUIRE(back.state_size() == m.state.size());
    for (const auto& [k, e] : m.state) {
      const auto at = back.expires_at(k);
      REQUIRE(at.has_value());
      CHECK(*at == e);
    }
  }
}

TEST_CASE("R-DEDUP-6: deltas and snapshots hold exactly the model's identities (fixed-width key)") {
  for (std::uint64_t seed = 1; seed <= 40; ++seed) {
    CAPTURE(seed);
    check_blobs_against_model<FixedDedup, Fixed>(seed);
  }
}

TEST_CASE("R-DEDUP-6: ... and with a key of optional strings") {
  for (std::uint64_t seed = 1; seed <= 40; ++seed) {
    CAPTURE(seed);
    check_blobs_against_model<VariedDedup, Varied>(seed);
  }
}

// --- A failed batch ---------------------------------------------------------------------

/// A row whose copy throws when `fail` is set and the row is marked.
struct Fragile {
  std::int64_t id;
  std::int64_t ts;
  bool marked = false;
  static inline bool fail = false;
  Fragile(std::int64_t i, std::int64_t t, bool m = false) : id(i), ts(t), marked(m) {}
  Fragile(const Fragile& o) : id(o.id), ts(o.ts), marked(o.marked) {
    if (fail && marked) throw std::runtime_error("copy failed");
  }
  Fragile& operator=(const Fragile&) = default;
};
FLOWLIB_SCHEMA(Fragile, id, ts, marked);

using FragileDedup = fl::DedupWithinWatermark<fl::Key<&Fragile::id>, fl::EventTime<&Fragile::ts>>;

TEST_CASE("R-DEDUP-6: a batch that throws leaves the snapshot as it was and the next delta as an "
          "operator's that never saw it") {
  for (std::uint64_t seed = 1; seed <= 30; ++seed) {
    CAPTURE(seed);
    std::mt19937_64 g(seed);
    FragileDedup a{10, "fragile"};
    FragileDedup b{10, "fragile"};
    std::int64_t now = 0;
    const auto batch = [&](bool mark) {
      std::vector<Fragile> rows;
      now += static_cast<std::int64_t>(g() % 5);
      const std::size_t n = 1 + g() % 20;
      for (std::size_t i = 0; i < n; ++i) {
        rows.emplace_back(static_cast<std::int64_t>(g() % 30), now - static_cast<std::int64_t>(g() % 15));
      }
      if (mark) {
        // A new identity, not late: the operator copies it into its output.
        const auto at = rows.begin() + static_cast<std::ptrdiff_t>(g() % (n + 1));
        rows.insert(at, Fragile{1000 + static_cast<std::int64_t>(seed), now, true});
      }
      return rows;
    };
    for (int i = 0; i < 6; ++i) {
      const auto rows = batch(false);
      a.process(rows);
      b.process(rows);
      CHECK(flowtest::delta_of(a) == flowtest::delta_of(b));
    }
    const std::string before = flowtest::snapshot_of(a);
    CHECK(before == flowtest::snapshot_of(b));
    // The failed batch: every row copied (a const batch), one copy throws.
    const auto bad = batch(true);
    Fragile::fail = true;
    CHECK_THROWS_AS(a.process(bad), std::runtime_error);
    Fragile::fail = false;
    CHECK(flowtest::snapshot_of(a) == before);
    const auto next = batch(false);
    const auto ra = a.process(next);
    const auto rb = b.process(next);
    REQUIRE(ra.size() == rb.size());
    CHECK(a.last_stats() == b.last_stats());
    CHECK(flowtest::delta_of(a) == flowtest::delta_of(b));
    CHECK(flowtest::snapshot_of(a) == flowtest::snapshot_of(b));
  }
}

}  // namespace ops_dedup_encoding
