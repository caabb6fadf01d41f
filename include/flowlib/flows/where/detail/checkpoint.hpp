// flowlib/flows/where/detail/checkpoint.hpp
//
// The state a REPLACE WHERE flow carries from one update to the next, and
// its checkpoint encoding (R-WHERE-7, R-WHERE-8):
//
//   - updates: how many updates the flow applied (a pipeline's positions for
//     the flow are this count: one batch per update);
//   - has_previous: an update ran since the flow started on the table (or
//     since the table's last full refresh): the next one may be incremental;
//   - previous_window: the interval the previous update's predicate selected
//     on the slice column, or none (not a single-column range of that
//     column: the next update cannot compare its window and recomputes);
//   - previous_nondeterministic: the previous predicate used rand();
//   - source_versions: each source's version() when the previous update
//     read it (changed_values() since then are the slices to reprocess);
//   - target_rows, target_id_bound: the target's size() and id_bound()
//     after the previous update, the watermark that reveals rows inserted
//     behind the flow's back (R-WHERE-5);
//   - definition: the flow's definition the previous update ran under
//     (its incremental option: ReplaceWhere::definition(), the text
//     replace_where_definition() gives), and query: the query's identity
//     (ReplaceWhere::query_id()); another definition or query at the next
//     update makes it a complete recompute (R-WHERE-10). The predicate is
//     no part of the definition: a changed predicate is judged by its
//     window against previous_window, as a window moved by the clock is
//     (R-WHERE-7, R-WHERE-8).
//
// The state is a few dozen bytes, so every blob (snapshot or delta) holds
// all of it and the last blob read wins. Blob: header "FLRW" (format 3,
// detail/flow_checkpoint.hpp), then the fields above in that order; a
// window is the column name, then each bound as a presence byte, an
// inclusive byte and a value (a kind byte and its payload). Older formats
// are still read:
//   - format 2 has the same fields, but its definition was "REPLACE WHERE ",
//     the predicate's text, and " (no incremental)" when incremental
//     updates were off; it is read as the definition of that option (the
//     predicate's text is dropped: previous_window says what it selected);
//   - format 1 ends before the definition: the definition and query are
//     unknown (empty), so different from any flow's.
// Decoding throws errc::checkpoint_corrupt naming the flow; nothing
// changes then. Internal.
#pragma once

#include <flowlib/checkpoint/store.hpp>
#include <flowlib/detail/byte_codec.hpp>
#include <flowlib/detail/flow_checkpoint.hpp>
#include <flowlib/where/value.hpp>
#include <flowlib/where/window.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace flowlib::detail {

/// What a REPLACE WHERE flow remembers between updates (see the header).
struct replace_where_state {
  std::uint64_t updates = 0;
  bool has_previous = false;
  std::optional<where::window> previous_window;
  bool previous_nondeterministic = false;
  std::vector<std::uint64_t> source_versions;
  std::uint64_t target_rows = 0;
  std::uint64_t target_id_bound = 0;
  std::string definition;  ///< ReplaceWhere::definition() of the previous update
  std::string query;       ///< ReplaceWhere::query_id() of the previous update
};

/// A query identity no other flow object's matches: "unversioned " and 128
/// random bits (R-WHERE-10).
inline std::string unversioned_query_id() {
  std::random_device rd;
  static constexpr char hex[] = "0123456789abcdef";
  std::string id = "unversioned ";
  for (int i = 0; i < 4; ++i) {
    std::uint32_t x = rd();
    for (int k = 0; k < 8; ++k, x >>= 4) id += hex[x & 0xF];
  }
  return id;
}

inline constexpr char replace_where_tag[5] = "FLRW";
inline constexpr std::uint16_t replace_where_format = 3;

/// The definition a flow records (R-WHERE-10): what of the flow, beside its
/// query, must be the same for an update to go on from the previous one's
/// state. The predicate is not in it (see the header comment).
inline std::string replace_where_definition(bool incremental) {
  return incremental ? "REPLACE WHERE" : "REPLACE WHERE (no incremental)";
}

/// A format-2 definition ("REPLACE WHERE " + predicate text, then
/// " (no incremental)" when incremental updates were off) as the format-3
/// definition of the same option; any other text is kept (it matches no
/// flow's definition, so the next update recomputes).
inline std::string definition_from_format2(std::string text) {
  constexpr std::string_view prefix = "REPLACE WHERE ";
  constexpr std::string_view off = " (no incremental)";
  if (!text.starts_with(prefix)) return text;
  return replace_where_definition(!text.ends_with(off));
}

/// Writes a where::value: a kind byte and its payload.
inline void encode_value(byte_writer& w, const where::value& v) {
  using where::kind;
  w.integer<std::uint8_t>(static_cast<std::uint8_t>(v.type()));
  switch (v.type()) {
    case kind::null: break;
    case kind::boolean: w.integer<std::uint8_t>(v.as_bool() ? 1 : 0); break;
    case kind::int64: w.integer<std::int64_t>(v.as_int()); break;
    case kind::float64: {
      const double d = v.as_double();
      std::uint64_t bits = 0;
      static_assert(sizeof bits == sizeof d);
      __builtin_memcpy(&bits, &d, sizeof d);
      w.integer<std::uint64_t>(bits);
      break;
    }
    case kind::string: w.bytes(v.as_string()); break;
    case kind::date: w.integer<std::int64_t>(v.as_date().time_since_epoch().count()); break;
    case kind::timestamp: w.integer<std::int64_t>(v.as_timestamp().time_since_epoch().count()); break;
    case kind::interval:
      w.integer<std::int64_t>(v.as_interval().days);
      w.integer<std::int64_t>(v.as_interval().micros);
      break;
  }
}

/// Reads what encode_value wrote.
inline where::value decode_value(byte_reader& r) {
  using where::kind;
  const auto k = r.integer<std::uint8_t>();
  switch (static_cast<kind>(k)) {
    case kind::null: return where::value{};
    case kind::boolean: return where::value(read_flag(r, "a boolean value"));
    case kind::int64: return where::value(r.integer<std::int64_t>());
    case kind::float64: {
      const auto bits = r.integer<std::uint64_t>();
      double d = 0;
      __builtin_memcpy(&d, &bits, sizeof d);
      return where::value(d);
    }
    case kind::string: return where::value(std::string(r.bytes()));
    case kind::date:
      return where::value(where::date_type(std::chrono::days(r.integer<std::int64_t>())));
    case kind::timestamp:
      return where::value(where::timestamp_type(std::chrono::microseconds(r.integer<std::int64_t>())));
    case kind::interval: {
      const auto d = r.integer<std::int64_t>();
      const auto us = r.integer<std::int64_t>();
      return where::value(where::interval{d, us});
    }
  }
  r.fail("unknown value kind " + std::to_string(k));
}

inline void encode_bound(byte_writer& w, const std::optional<where::endpoint>& b) {
  w.integer<std::uint8_t>(b ? 1 : 0);
  if (!b) return;
  w.integer<std::uint8_t>(b->inclusive ? 1 : 0);
  encode_value(w, b->at);
}

inline std::optional<where::endpoint> decode_bound(byte_reader& r) {
  if (!read_flag(r, "a bound's presence")) return std::nullopt;
  const bool inclusive = read_flag(r, "a bound's inclusiveness");
  where::value v = decode_value(r);
  return where::endpoint{std::move(v), inclusive};
}

/// Writes the whole state as one blob of `scope`.
inline void encode_replace_where_state(byte_writer& w, const replace_where_state& s,
                                       checkpoint_scope scope) {
  write_checkpoint_header(w, replace_where_tag, replace_where_format, scope);
  w.integer<std::uint64_t>(s.updates);
  w.integer<std::uint8_t>(s.has_previous ? 1 : 0);
  w.integer<std::uint8_t>(s.previous_nondeterministic ? 1 : 0);
  w.integer<std::uint8_t>(s.previous_window ? 1 : 0);
  if (s.previous_window) {
    w.bytes(s.previous_window->column());
    encode_bound(w, s.previous_window->lower());
    encode_bound(w, s.previous_window->upper());
  }
  w.integer<std::uint32_t>(static_cast<std::uint32_t>(s.source_versions.size()));
  for (std::uint64_t v : s.source_versions) w.integer<std::uint64_t>(v);
  w.integer<std::uint64_t>(s.target_rows);
  w.integer<std::uint64_t>(s.target_id_bound);
  w.bytes(s.definition);
  w.bytes(s.query);
}

/// Reads one blob of `scope` written by encode_replace_where_state.
inline replace_where_state decode_replace_where_state(std::string_view blob, checkpoint_scope scope,
                                                      std::string_view flow) {
  byte_reader r = checkpoint_reader(blob, flow);
  // Formats 1 and 2 are read too (see the header comment); any other
  // version is refused by read_checkpoint_header, naming this build's.
  std::uint16_t format = replace_where_format;
  if (blob.size() >= 6 && blob.substr(0, 4) == std::string_view(replace_where_tag, 4) && blob[5] == 0 &&
      (blob[4] == 1 || blob[4] == 2)) {
    format = static_cast<std::uint16_t>(blob[4]);
  }
  read_checkpoint_header(r, replace_where_tag, format, "REPLACE WHERE", scope);
  replace_where_state s;
  s.updates = r.integer<std::uint64_t>();
  s.has_previous = read_flag(r, "the previous-update flag");
  s.previous_nondeterministic = read_flag(r, "the non-deterministic flag");
  if (read_flag(r, "the window's presence")) {
    std::string column(r.bytes());
    auto lower = decode_bound(r);
    auto upper = decode_bound(r);
    s.previous_window.emplace(std::move(column), std::move(lower), std::move(upper));
  }
  const auto n = r.integer<std::uint32_t>();
  if (n > r.remaining() / 8) r.fail("the source count runs past the end of the data");
  s.source_versions.resize(n);
  for (auto& v : s.source_versions) v = r.integer<std::uint64_t>();
  s.target_rows = r.integer<std::uint64_t>();
  s.target_id_bound = r.integer<std::uint64_t>();
  if (format >= 2) {
    s.definition = std::string(r.bytes());
    if (format == 2) s.definition = definition_from_format2(std::move(s.definition));
    s.query = std::string(r.bytes());
  }
  expect_checkpoint_end(r);
  return s;
}

/// The state the blobs describe: the last one read wins (each holds all of
/// it); empty blobs give a fresh state.
inline replace_where_state read_replace_where_state(const checkpoint_blobs& blobs,
                                                    std::string_view flow) {
  replace_where_state s;
  if (blobs.snapshot) s = decode_replace_where_state(*blobs.snapshot, checkpoint_scope::snapshot, flow);
  for (std::string_view d : blobs.deltas) s = decode_replace_where_state(d, checkpoint_scope::delta, flow);
  return s;
}

}  // namespace flowlib::detail
