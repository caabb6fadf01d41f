// flowlib/detail/dedup_checkpoint.hpp
//
// The byte encoding of DedupWithinWatermark's state for a checkpoint
// (R-DEDUP-6): write_dedup_state() and read_dedup_state(), over a
// detail::dedup_state and the operator's watermarks. The format is
// documented at DedupWithinWatermark::write_checkpoint() and in
// docs/dedup-within-watermark.md; the key columns use detail/byte_codec.hpp.
// Internal.
//
// Reading validates everything before anything is committed: the result is
// a fresh state the operator swaps in only if no error was thrown.
#pragma once

#include <flowlib/detail/byte_codec.hpp>
#include <flowlib/detail/dedup_state.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace flowlib::detail {

inline constexpr char dedup_magic[4] = {'F', 'L', 'D', 'W'};
inline constexpr std::uint8_t dedup_format_version = 1;

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

/// The bytes of a checkpoint. `time_point` says whether the event time is a
/// std::chrono::time_point (else an integer); `policy` is 0 (min) or 1 (max).
template <class K, class Rep>
std::string write_dedup_state(const dedup_state<K, Rep>& s, bool time_point, std::uint8_t policy,
                              Rep delay, const std::optional<Rep>& global,
                              const std::vector<std::optional<Rep>>& inputs) {
  using key_type = typename K::value_type;
  std::string out;
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
  std::vector<std::uint32_t> order;
  order.reserve(s.index.size());
  for (const auto& [id, slots] : s.buckets) order.insert(order.end(), slots.begin(), slots.end());
  std::stable_sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
    return s.slab[a].expires < s.slab[b].expires;
  });
  for (std::uint32_t slot : order) {
    w.integer<Rep>(s.slab[slot].expires);
    key_codec<key_type>::write(w, s.slab[slot].key);
  }
  return out;
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
  using key_type = typename K::value_type;
  const auto opt = [&](const std::optional<Rep>& v) {
    w.integer<std::uint8_t>(v ? 1 : 0);
    if (v) w.integer<Rep>(*v);
  };
  opt(global);
  w.integer<std::uint32_t>(static_cast<std::uint32_t>(inputs.size()));
  for (const auto& i : inputs) opt(i);
  const std::size_t n = with_added ? s.added.size() : 0;
  w.integer<std::uint64_t>(n);
  for (std::size_t i = 0; i < n; ++i) {
    const auto& e = s.slab[s.added[i].slot];  // an evicted entry keeps its values until reused
    w.integer<Rep>(e.expires);
    key_codec<key_type>::write(w, e.key);
  }
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
