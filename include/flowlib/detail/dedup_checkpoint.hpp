// flowlib/detail/dedup_checkpoint.hpp
//
// The byte encoding of DedupWithinWatermark's state for a checkpoint
// (R-DEDUP-6): write_dedup_state() and read_dedup_state(), over a
// detail::dedup_state and the operator's watermarks. The format is
// documented at DedupWithinWatermark::write_checkpoint() and in
// docs/dedup-within-watermark.md; the key columns use detail/byte_codec.hpp.
// Internal.
//
// Writing. A pipeline writes a delta after every batch and a snapshot now
// and then, so the identities are encoded straight into the output: the
// bytes of all entries are counted first (a constant per entry for a key of
// fixed width), the output grown once, and each entry stored in place
// (encode_key_to(): byte_codec's encoding, byte for byte, without a
// capacity check per byte). A snapshot lists the identities in expiry
// order; the expiry buckets are already in that order, so only each
// bucket's entries are sorted (stably: the same bytes as one stable sort of
// the whole state).
//
// Reading validates everything before anything is committed: the result is
// a fresh state the operator swaps in only if no error was thrown.
#pragma once

#include <flowlib/detail/byte_codec.hpp>
#include <flowlib/detail/dedup_state.hpp>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace flowlib::detail {

inline constexpr char dedup_magic[4] = {'F', 'L', 'D', 'W'};
inline constexpr std::uint8_t dedup_format_version = 1;

// --- Keys, encoded in place -------------------------------------------------------
//
// byte_codec's encoding (detail/byte_codec.hpp) into a buffer the caller has
// sized: encoded_key_size() bytes for a value, fixed_key_size<T>() for every
// value of a fixed-width type (0 when the width varies: strings, optionals).

/// The encoded width shared by every value of T, or 0 when it varies.
template <class T>
constexpr std::size_t fixed_key_size() {
  if constexpr (std::is_same_v<T, bool>) {
    return 1;
  } else if constexpr (std::is_integral_v<T>) {
    return sizeof(T);
  } else if constexpr (std::is_enum_v<T>) {
    return sizeof(std::underlying_type_t<T>);
  } else if constexpr (is_duration<T>::value || is_time_point_codec<T>::value) {
    return sizeof(typename T::rep);
  } else if constexpr (is_std_tuple<T>::value) {
    return []<class... Ts>(std::type_identity<std::tuple<Ts...>>) {
      return ((fixed_key_size<Ts>() != 0) && ...) ? (fixed_key_size<Ts>() + ... + std::size_t{0})
                                                  : std::size_t{0};
    }(std::type_identity<T>{});
  } else {
    return 0;  // std::string, std::optional
  }
}

/// The bytes byte_codec<T>::write() writes for `v`.
template <class T>
std::size_t encoded_key_size(const T& v) noexcept {
  if constexpr (fixed_key_size<T>() != 0) {
    return fixed_key_size<T>();
  } else if constexpr (std::is_same_v<T, std::string>) {
    return sizeof(std::uint64_t) + v.size();
  } else if constexpr (is_optional_v<T>) {
    return 1 + (v ? encoded_key_size(*v) : 0);
  } else {  // a tuple with a column of varying width
    return std::apply([](const auto&... xs) { return (encoded_key_size(xs) + ... + std::size_t{0}); }, v);
  }
}

/// Stores the integer `v` at `p`, little-endian; returns the end.
template <class I>
char* put_le(char* p, I v) noexcept {
  using U = std::make_unsigned_t<I>;
  auto u = static_cast<U>(v);
  if constexpr (std::endian::native == std::endian::little) {
    std::memcpy(p, &u, sizeof(U));
  } else {
    for (std::size_t i = 0; i < sizeof(U); ++i) {
      p[i] = static_cast<char>(static_cast<unsigned char>(u & 0xffu));
      if constexpr (sizeof(U) > 1) u = static_cast<U>(u >> 8);
    }
  }
  return p + sizeof(U);
}

/// Stores byte_codec<T>'s encoding of `v` at `p` (encoded_key_size(v)
/// bytes); returns the end.
template <class T>
char* encode_key_to(char* p, const T& v) noexcept {
  if constexpr (std::is_same_v<T, bool>) {
    return put_le<std::uint8_t>(p, v ? 1 : 0);
  } else if constexpr (std::is_integral_v<T>) {
    return put_le<T>(p, v);
  } else if constexpr (std::is_enum_v<T>) {
    using U = std::underlying_type_t<T>;
    return put_le<U>(p, static_cast<U>(v));
  } else if constexpr (std::is_same_v<T, std::string>) {
    p = put_le<std::uint64_t>(p, v.size());
    if (!v.empty()) std::memcpy(p, v.data(), v.size());
    return p + v.size();
  } else if constexpr (is_optional_v<T>) {
    p = put_le<std::uint8_t>(p, v.has_value() ? 1 : 0);
    return v ? encode_key_to(p, *v) : p;
  } else if constexpr (is_duration<T>::value) {
    return put_le<typename T::rep>(p, v.count());
  } else if constexpr (is_time_point_codec<T>::value) {
    return put_le<typename T::rep>(p, v.time_since_epoch().count());
  } else {  // tuple
    std::apply([&](const auto&... xs) { ((p = encode_key_to(p, xs)), ...); }, v);
    return p;
  }
}

/// Appends `count` x (rep expires_at, key) for the slab entries `slot(i)`
/// names, i in [0, count): the output is grown once, then filled in place.
template <class K, class Rep, class SlotAt>
void append_dedup_entries(std::string& out, const dedup_state<K, Rep>& s, std::size_t count,
                          const SlotAt& slot) {
  using key_type = typename K::value_type;
  constexpr std::size_t fixed = fixed_key_size<key_type>();
  std::size_t total = 0;
  if constexpr (fixed != 0) {
    total = count * (sizeof(Rep) + fixed);
  } else {
    for (std::size_t i = 0; i < count; ++i) total += sizeof(Rep) + encoded_key_size(s.slab[slot(i)].key);
  }
  const std::size_t at = out.size();
  out.resize(at + total);
  char* p = out.data() + at;
  for (std::size_t i = 0; i < count; ++i) {
    const auto& e = s.slab[slot(i)];
    p = put_le<Rep>(p, e.expires);
    p = encode_key_to(p, e.key);
  }
}

/// What a checkpoint holds besides the format's header: the operator's
/// delay, watermark policy (0 min, 1 max), watermarks and identities.
template <class K, class Rep>
struct dedup_checkpoint {
  Rep delay{};
  std::uint8_t policy = 0;
  std::optional<Rep> global;
  std::vector<std::optional<Rep>> inputs;
  std::unique_ptr<dedup_state<K, Rep>> state;
};

/// Appends the bytes of a checkpoint to `out`. `time_point` says whether the
/// event time is a std::chrono::time_point (else an integer); `policy` is 0
/// (min) or 1 (max). The identities are in expiry order (see the header
/// comment).
template <class K, class Rep>
void write_dedup_state(std::string& out, const dedup_state<K, Rep>& s, bool time_point,
                       std::uint8_t policy, Rep delay, const std::optional<Rep>& global,
                       const std::vector<std::optional<Rep>>& inputs) {
  byte_writer w{out};
  out.append(dedup_magic, sizeof dedup_magic);
  w.integer<std::uint8_t>(dedup_format_version);
  w.integer<std::uint8_t>(time_point ? 1 : 0);
  w.integer<std::uint8_t>(sizeof(Rep));
  w.integer<std::uint8_t>(policy);
  w.integer<Rep>(delay);
  w.integer<std::uint32_t>(static_cast<std::uint32_t>(inputs.size()));
  const auto opt = [&](const std::optional<Rep>& v) {
    w.integer<std::uint8_t>(v ? 1 : 0);
    if (v) w.integer<Rep>(*v);
  };
  opt(global);
  for (const auto& i : inputs) opt(i);
  w.integer<std::uint64_t>(s.index.size());
  // Bucket by bucket (buckets are in expiry order), each bucket's entries
  // stably sorted by expiry; the expiry is copied beside its slot so the
  // sort does not reach into the slab.
  struct item {
    Rep expires;
    std::uint32_t slot;
  };
  std::vector<item> order;
  order.reserve(s.index.size());
  for (const auto& [id, slots] : s.buckets) {
    const std::size_t first = order.size();
    for (std::uint32_t slot : slots) order.push_back(item{s.slab[slot].expires, slot});
    const auto by_expiry = [](const item& a, const item& b) { return a.expires < b.expires; };
    const auto b = order.begin() + static_cast<std::ptrdiff_t>(first);
    if (!std::is_sorted(b, order.end(), by_expiry)) std::stable_sort(b, order.end(), by_expiry);
  }
  append_dedup_entries(out, s, order.size(), [&](std::size_t i) { return order[i].slot; });
}

/// Parses a checkpoint written by write_dedup_state() for the operator
/// `name` with identity `key`, whose event time is a time point or not
/// (`time_point`) and which has `inputs` inputs. Throws flowlib::error
/// (errc::checkpoint_corrupt) on malformed data.
template <class K, class Rep>
dedup_checkpoint<K, Rep> read_dedup_state(std::string_view data, std::string_view name,
                                          const K& key, bool time_point, std::size_t inputs) {
  using key_type = typename K::value_type;
  using state = dedup_state<K, Rep>;
  byte_reader r{data, 0, name, "; the operator's state is unchanged (R-DEDUP-6)",
                errc::checkpoint_corrupt};
  r.need(sizeof dedup_magic);
  if (data.substr(0, sizeof dedup_magic) != std::string_view(dedup_magic, sizeof dedup_magic)) {
    r.fail("the data does not start with \"FLDW\" (not a DedupWithinWatermark state)");
  }
  r.pos = sizeof dedup_magic;
  if (r.integer<std::uint8_t>() != dedup_format_version) r.fail("unknown format version");
  if (r.integer<std::uint8_t>() != (time_point ? 1 : 0) ||
      r.integer<std::uint8_t>() != sizeof(Rep)) {
    r.fail("the event-time type differs from this operator's");
  }
  dedup_checkpoint<K, Rep> c;
  c.policy = r.integer<std::uint8_t>();
  if (c.policy > 1) r.fail("unknown watermark policy");
  c.delay = r.integer<Rep>();
  if (is_negative_rep(c.delay)) r.fail("negative delay");
  if (r.integer<std::uint32_t>() != inputs) {
    r.fail("the number of inputs differs from this operator's (" + std::to_string(inputs) + ")");
  }
  const auto opt = [&]() -> std::optional<Rep> {
    const auto has = r.integer<std::uint8_t>();
    if (has > 1) r.fail("a watermark flag is neither 0 nor 1");
    if (has == 0) return std::nullopt;
    return r.integer<Rep>();
  };
  c.global = opt();
  for (std::size_t i = 0; i < inputs; ++i) c.inputs.push_back(opt());
  const auto count = r.integer<std::uint64_t>();
  if (count > 0xfffffffeu) r.fail("too many identities");
  auto fresh = std::make_unique<state>(key, c.delay);
  fresh->slab.reserve(static_cast<std::size_t>(std::min<std::uint64_t>(count, data.size())));
  fresh->index.reserve(fresh->slab.capacity());
  for (std::uint64_t i = 0; i < count; ++i) {
    const Rep expires = r.integer<Rep>();
    if (c.global && expires <= *c.global) r.fail("an identity expired at or before the watermark");
    key_type k = key_codec<key_type>::read(r);
    const auto slot = static_cast<std::uint32_t>(fresh->slab.size());
    fresh->slab.push_back(typename state::entry{std::move(k), expires});
    if (!fresh->index.insert(slot).second) r.fail("an identity appears twice");
    fresh->bucket_for(expires).push_back(slot);
  }
  if (r.pos != data.size()) r.fail("unexpected bytes after the last identity");
  c.state = std::move(fresh);
  return c;
}

// --- Deltas (read_checkpoint / write_checkpoint) ---------------------------------
//
// A delta of one batch: the watermarks after the batch and the identities
// the batch stored, each with its expiry:
//   u8 has_global [rep global]  u32 inputs  inputs x (u8 has [rep watermark])
//   u64 count  count x (rep expires_at, key)
// Replaying it on the state before the batch gives the state after it:
// evict every identity with expires_at <= the new global watermark
// (R-DEDUP-4), then store the batch's identities that expire after it. (An
// identity the batch stored was absent from the state when its row came
// (R-DEDUP-3), so none is stored twice; one that the batch's own watermark
// expired is evicted at the end of the batch, and is skipped here.)

/// Writes the delta of the last batch: its watermarks and the identities it
/// stored (s.added, which the operator keeps until the next batch starts).
/// O(the batch).
template <class K, class Rep>
void write_dedup_delta(byte_writer& w, const dedup_state<K, Rep>& s, bool with_added,
                       const std::optional<Rep>& global,
                       const std::vector<std::optional<Rep>>& inputs) {
  const auto opt = [&](const std::optional<Rep>& v) {
    w.integer<std::uint8_t>(v ? 1 : 0);
    if (v) w.integer<Rep>(*v);
  };
  opt(global);
  w.integer<std::uint32_t>(static_cast<std::uint32_t>(inputs.size()));
  for (const auto& i : inputs) opt(i);
  const std::size_t n = with_added ? s.added.size() : 0;
  w.integer<std::uint64_t>(n);
  // An evicted entry keeps its values until its slot is reused (by a later batch).
  append_dedup_entries(w.out, s, n, [&](std::size_t i) { return s.added[i].slot; });
}

/// Replays a delta written by write_dedup_delta() on `c` (see above).
/// Throws through `r` (the delta is corrupt) with `c` possibly changed: the
/// caller replays on a fresh state it discards on an error.
template <class K, class Rep>
void replay_dedup_delta(byte_reader& r, dedup_checkpoint<K, Rep>& c) {
  using key_type = typename K::value_type;
  using state = dedup_state<K, Rep>;
  const auto opt = [&]() -> std::optional<Rep> {
    const auto has = r.integer<std::uint8_t>();
    if (has > 1) r.fail("a watermark flag is neither 0 nor 1");
    if (has == 0) return std::nullopt;
    return r.integer<Rep>();
  };
  const std::optional<Rep> global = opt();
  if (c.global && (!global || *global < *c.global)) r.fail("the watermark decreases");
  if (r.integer<std::uint32_t>() != c.inputs.size()) {
    r.fail("the number of inputs differs from this operator's (" +
           std::to_string(c.inputs.size()) + ")");
  }
  for (auto& i : c.inputs) i = opt();
  state& s = *c.state;
  if (global) {
    s.reserve_eviction(*global, 0);
    s.evict(*global);
  }
  c.global = global;
  const auto count = r.integer<std::uint64_t>();
  for (std::uint64_t i = 0; i < count; ++i) {
    const Rep expires = r.integer<Rep>();
    key_type k = key_codec<key_type>::read(r);
    if (global && expires <= *global) continue;  // stored and evicted by the same batch
    if (s.slab.size() >= 0xfffffffeu) r.fail("too many identities");
    std::uint32_t slot;
    if (!s.free.empty()) {
      slot = s.free.back();
      s.slab[slot] = typename state::entry{std::move(k), expires};
    } else {
      slot = static_cast<std::uint32_t>(s.slab.size());
      s.slab.push_back(typename state::entry{std::move(k), expires});
    }
    if (!s.index.insert(slot).second) r.fail("an identity is stored twice");
    if (!s.free.empty() && s.free.back() == slot) s.free.pop_back();
    s.bucket_for(expires).push_back(slot);
  }
}

}  // namespace flowlib::detail
