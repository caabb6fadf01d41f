// flowlib/source/detail/json_check.hpp
//
// What the JSON decoders of the sources (json_row.hpp, the Debezium
// adapter) refuse, and how: a record's origin and the malformed_record
// errors that name it; the raw text of a value; and the check of a value
// that is not decoded (a key that names no column, a rescued value), so
// that a record is refused whenever it is not JSON (RFC 8259), whichever
// key holds the bad token (json_row.hpp's header comment states the
// rules). Internal; needs simdjson.
#pragma once

#include <flowlib/detail/json.hpp>
#include <flowlib/error.hpp>

#include <simdjson.h>

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

namespace flowlib::detail {

/// Where a record came from, for messages: source "orders", where
/// "file 'a.jsonl' line 12" or "partition 3 offset 42".
struct record_origin {
  std::string_view source;
  std::string_view where;
};

// --- errors ----------------------------------------------------------------

/// `raw` cut to 80 bytes ("..." marks a cut).
inline std::string json_cut(std::string_view raw) {
  std::string s(raw.substr(0, 80));
  if (raw.size() > 80) s += "...";
  return s;
}

[[noreturn]] inline void json_fail(const record_origin& origin, std::string_view column,
                                   std::string_view reason, std::string_view raw,
                                   bool with_value = true) {
  std::string detail(origin.where);
  if (!detail.empty()) detail += ": ";
  detail += reason;
  if (with_value) {
    detail += ", value ";
    detail += json_cut(raw);
  }
  throw error(errc::malformed_record, std::string(origin.source), std::string(column), "",
              std::move(detail));
}

/// The text of a simdjson error, for "not valid JSON" messages.
/// (NUMBER_OUT_OF_RANGE comes from json_number_token only.)
inline std::string json_syntax_reason(simdjson::error_code e) {
  std::string s = "not valid JSON (";
  s += e == simdjson::NUMBER_OUT_OF_RANGE ? "a number beyond the range of a double"
                                          : simdjson::error_message(e);
  s += ")";
  return s;
}

/// A value under a key that names no column is not JSON.
[[noreturn]] inline void json_fail_unknown(const record_origin& origin, std::string_view key,
                                           simdjson::error_code e) {
  std::string reason = json_syntax_reason(e);
  reason += " in the value of key ";
  std::string quoted;
  json_append_string(quoted, key);
  reason += json_cut(quoted);
  json_fail(origin, "", reason, "", false);
}

/// `token` without the blanks simdjson keeps after a token.
inline std::string_view json_trim_token(std::string_view token) noexcept {
  while (!token.empty() && (token.back() == ' ' || token.back() == '\t' ||
                            token.back() == '\n' || token.back() == '\r'))
    token.remove_suffix(1);
  return token;
}

/// The text of `v`, an object or array (`t`), in `text`, skipped
/// unchecked; consumes `v`.
inline simdjson::error_code json_container_text(simdjson::ondemand::value& v,
                                                simdjson::ondemand::json_type t,
                                                std::string_view& text) {
  if (t == simdjson::ondemand::json_type::object) {
    simdjson::ondemand::object o;
    if (auto e = v.get_object().get(o)) return e;
    return o.raw_json().get(text);
  }
  simdjson::ondemand::array a;
  if (auto e = v.get_array().get(a)) return e;
  return a.raw_json().get(text);
}

/// The raw JSON text of `v` (a whole object or array, or one scalar token),
/// without the blanks after it. Consumes an object or array; does not check
/// what it skips (json_checked_raw does).
inline std::string_view json_raw_value(simdjson::ondemand::value& v) {
  using simdjson::ondemand::json_type;
  json_type t{};
  if (v.type().get(t)) return json_trim_token(v.raw_json_token());
  if (t == json_type::object || t == json_type::array) {
    std::string_view out;
    if (json_container_text(v, t, out)) return {};
    return json_trim_token(out);
  }
  return json_trim_token(v.raw_json_token());
}

// --- checking a value that is not decoded ------------------------------------
//
// simdjson On-Demand checks a value only when it is read: a value skipped
// (the value of a key that names no column) or taken as raw text (a
// rescued value) is checked for nothing but its brackets and quotes, and
// `tru`, `01`, `"\x"` or `[1,,2]` would pass. These functions read such a
// value in full, so that a record holding one is refused as not JSON.

/// Objects and arrays that lie this many levels deep in their document
/// (a record's own object is level 1; a rescued value's copy is checked as
/// a document of its own), or deeper, are refused: simdjson's parsers keep
/// one slot per level below their max_depth() (this default), which
/// On-Demand does not check outside debug builds, and the check recurses
/// once per level.
inline constexpr std::size_t json_max_depth = simdjson::DEFAULT_MAX_DEPTH;

/// Whether container `v` lies json_max_depth levels deep or deeper.
inline bool json_too_deep(simdjson::ondemand::value& v) noexcept {
  return static_cast<std::size_t>(v.current_depth()) >= json_max_depth;
}

/// Whether `token` (blanks after it allowed) is one JSON number: RFC
/// 8259's grammar, -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?, and a
/// value within a double's range once rounded (1e400 is refused, as by
/// simdjson's and most JSON parsers, which read numbers as doubles; 1e-400
/// is 0 and an integer beyond 64 bits a double, both accepted). SUCCESS,
/// NUMBER_ERROR (the grammar) or NUMBER_OUT_OF_RANGE (the range). By hand
/// because simdjson's number parsers also refuse integers beyond 64 bits.
inline simdjson::error_code json_number_token(std::string_view token) noexcept {
  token = json_trim_token(token);
  const std::size_t n = token.size();
  std::size_t i = 0;
  const auto digit = [&](std::size_t j) { return j < n && token[j] >= '0' && token[j] <= '9'; };
  if (i < n && token[i] == '-') ++i;
  if (!digit(i)) return simdjson::NUMBER_ERROR;
  // The number is below 10^(magnitude + exponent).
  std::int64_t magnitude = 0;
  if (token[i++] != '0') {
    for (magnitude = 1; digit(i); ++i) ++magnitude;
  }
  if (i < n && token[i] == '.') {
    if (!digit(++i)) return simdjson::NUMBER_ERROR;
    for (bool leading = magnitude == 0; digit(i); ++i) {
      if (leading && token[i] == '0') {
        --magnitude;
      } else {
        leading = false;
      }
    }
  }
  std::int64_t exponent = 0;
  if (i < n && (token[i] == 'e' || token[i] == 'E')) {
    ++i;
    bool negative = false;
    if (i < n && (token[i] == '+' || token[i] == '-')) negative = token[i++] == '-';
    if (!digit(i)) return simdjson::NUMBER_ERROR;
    for (; digit(i); ++i)
      if (exponent < 100000) exponent = exponent * 10 + (token[i] - '0');
    if (negative) exponent = -exponent;
  }
  if (i != n) return simdjson::NUMBER_ERROR;
  if (magnitude + exponent <= 308) return simdjson::SUCCESS;  // below 1e308
  double d = 0;
  const auto r = std::from_chars(token.data(), token.data() + n, d);
  return r.ec == std::errc::result_out_of_range ? simdjson::NUMBER_OUT_OF_RANGE : simdjson::SUCCESS;
}

/// The first error in `field`'s key: its escapes, when it has any (the
/// rest stage 1 checked).
inline simdjson::error_code json_check_key(simdjson::ondemand::field& field) {
  const char* p = field.key().raw();
  while (*p != '"' && *p != '\\') ++p;
  if (*p == '"') return simdjson::SUCCESS;
  std::string_view key;
  return field.unescaped_key().get(key);
}

/// Reads `v` in full, consuming it, and returns the first error: keys and
/// strings that hold escapes are unescaped (bad escapes and surrogates),
/// literals and numbers checked, objects and arrays walked (missing or
/// extra commas, colons and keys). Control characters in strings, invalid
/// UTF-8 and unbalanced brackets or quotes are the document's stage 1
/// errors, found before any value is read.
inline simdjson::error_code json_check_value(simdjson::ondemand::value v, std::size_t depth = 0) {
  using simdjson::ondemand::json_type;
  json_type t{};
  if (auto e = v.type().get(t)) return e;
  // Each member of container `c` (an object's fields, an array's values)
  // read and checked by `check`, one level deeper.
  const auto members = [](auto& c, auto&& check) -> simdjson::error_code {
    for (auto member : c) {
      if (auto e = member.error()) return e;
      if (auto e = check(member.value_unsafe())) return e;
    }
    return simdjson::SUCCESS;
  };
  switch (t) {
    case json_type::object:
    case json_type::array: {
      if (depth >= json_max_depth || json_too_deep(v)) return simdjson::DEPTH_ERROR;
      if (t == json_type::object) {
        simdjson::ondemand::object o;
        if (auto e = v.get_object().get(o)) return e;
        return members(o, [&](simdjson::ondemand::field& field) {
          if (auto e = json_check_key(field)) return e;
          return json_check_value(field.value(), depth + 1);
        });
      }
      simdjson::ondemand::array a;
      if (auto e = v.get_array().get(a)) return e;
      return members(a, [&](simdjson::ondemand::value& element) {
        return json_check_value(element, depth + 1);
      });
    }
    case json_type::string: {
      // Stage 1 found its closing quote, control characters and UTF-8:
      // only escapes are left to check. Read either way: a string left
      // unread is skipped as a key when a colon follows it ("a":1).
      const std::string_view token = v.raw_json_token();
      if (std::memchr(token.data(), '\\', token.size()) == nullptr) {
        simdjson::ondemand::raw_json_string r;
        return v.get_raw_json_string().get(r);
      }
      std::string_view s;
      return v.get_string().get(s);
    }
    case json_type::number:
      return json_number_token(v.raw_json_token());
    case json_type::boolean: {
      bool b = false;
      if (!v.get_bool().get(b)) return simdjson::SUCCESS;
      return v.raw_json_token().front() == 't' ? simdjson::T_ATOM_ERROR : simdjson::F_ATOM_ERROR;
    }
    case json_type::null: {
      bool null = false;
      if (!v.is_null().get(null) && null) return simdjson::SUCCESS;
      return simdjson::N_ATOM_ERROR;
    }
  }
  return simdjson::TAPE_ERROR;
}

/// json_check_value over `text`, one JSON value, in a padded copy read by a
/// parser of the calling thread (both reused).
inline simdjson::error_code json_check_text(std::string_view text) {
  thread_local simdjson::ondemand::parser parser;
  thread_local std::string buffer;
  const std::size_t need = text.size() + simdjson::SIMDJSON_PADDING;
  if (buffer.size() < need) buffer.resize(need);
  std::memcpy(buffer.data(), text.data(), text.size());
  std::memset(buffer.data() + text.size(), ' ', simdjson::SIMDJSON_PADDING);
  simdjson::ondemand::document doc;
  if (auto e = parser.iterate(simdjson::padded_string_view(buffer.data(), text.size(), buffer.size()))
                   .get(doc))
    return e;
  simdjson::ondemand::value v;
  if (auto e = doc.get_value().get(v)) return e;
  if (auto e = json_check_value(v)) return e;
  const char* rest = nullptr;
  if (!doc.current_location().get(rest)) return simdjson::TRAILING_CONTENT;
  return simdjson::SUCCESS;
}

/// The raw JSON text of `v` (as json_raw_value) in `raw`, and the first
/// error json_check_value finds in it; consumes `v`. An object or array is
/// checked in a copy of its text (json_check_text): its text is wanted
/// whole, and simdjson gives that only by skipping the value unchecked.
inline simdjson::error_code json_checked_raw(simdjson::ondemand::value& v, std::string_view& raw) {
  using simdjson::ondemand::json_type;
  raw = json_trim_token(v.raw_json_token());
  json_type t{};
  if (auto e = v.type().get(t)) return e;
  if (t != json_type::object && t != json_type::array) return json_check_value(v);
  std::string_view text;
  if (auto e = json_container_text(v, t, text)) return e;
  raw = json_trim_token(text);
  return json_check_text(raw);
}

}  // namespace flowlib::detail
