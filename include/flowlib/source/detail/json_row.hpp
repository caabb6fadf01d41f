// flowlib/source/detail/json_row.hpp
//
// One JSON object into one row, column by column through the row's
// FLOWLIB_SCHEMA: the decoding shared by the sources that read JSON (JSON
// lines files, Kafka records, Debezium envelopes). Internal; needs simdjson.
//
//   simdjson::ondemand::parser parser;
//   Order row;
//   detail::json_text_to_row(parser, R"({"id":7,"day":"2024-03-01"})", row,
//                            {.source = "orders", .where = "file 'a.jsonl' line 12"});
//
// Contract:
//   - keys are matched against the schema's column names exactly (after
//     unescaping); keys that name no column are ignored (their values are
//     still checked, below); of duplicate keys the last one wins;
//   - the record must be JSON (RFC 8259) whichever key holds the bad
//     token: a value that is not JSON under any key, known or not, nested
//     or not, is errc::malformed_record ("not valid JSON (...)", naming the
//     column, or the key when it names none), in rescue mode too (strict
//     mode names the record's first problem, which may be an earlier
//     refused value). Not JSON: bad literals (tru, nul, fals), bad numbers
//     (01, 1., .5, +1, NaN, -), bad escapes or surrogates, missing or extra
//     commas, colons or keys, unterminated strings, control characters in
//     strings, invalid UTF-8, anything after the object; and a number
//     beyond a double's range (1e400: the limit of simdjson and of most
//     parsers, which read numbers as doubles), so that any rescued text
//     parses. An integer beyond 64 bits is JSON (a column may refuse it).
//     Objects and arrays 1024 levels deep (the record's object is level
//     1) or deeper are refused;
//   - values: JSON null -> a std::optional column is std::nullopt (null in
//     any other column is an error); numbers -> integer columns
//     (range-checked against the column's type; a number written with a
//     fraction or an exponent is refused, 1.0 included), float and double
//     (a finite number beyond a float's range is refused); true/false ->
//     bool; strings -> std::string (unescaped); sys_days and time points
//     from an ISO 8601 string (text_value.hpp's rules) or from an integer
//     (days since 1970-01-01 for sys_days, a count of the time point's own
//     duration for a time point); enums from integers. Nothing else converts:
//     a string is not a number, a number is not a string;
//   - a column missing from the object: a std::optional column becomes
//     std::nullopt, any other column is an error;
//   - errors throw flowlib::error(errc::malformed_record, source, column, "",
//     "<where>: <reason>, value <raw JSON, cut to 80 bytes>");
//   - rescue (options.rescue; Row must have a column named
//     options.rescued_column of type std::string or std::optional<std::string>,
//     else errc::invalid_argument): a value that cannot be stored leaves its
//     column value-initialised (std::nullopt for an optional) and goes to the
//     rescued column, which holds the JSON object {"<key>":<raw JSON>,...}
//     of every rescued value, in the record's order, exactly as the record
//     wrote them (no spaces added, the blanks after a value dropped), so
//     the rescued text is always JSON: a value that is not JSON is not
//     rescued but fails the whole record (above), for the caller to keep
//     whole (FileSource's _raw row); with rescue_unknown, keys that name no
//     column too. A key named like the rescued column is then an unknown key.
//     Nothing rescued -> the rescued column is empty (std::nullopt for an
//     optional). A missing non-optional column is still an error. Of
//     duplicate keys each occurrence is decoded in turn, so an occurrence
//     rescued before a good one stays in the rescued column;
//   - json_text_to_row(parser, std::string_view, ...) copies the text into a
//     padded buffer of the calling thread (reused: no allocation once it has
//     grown to the longest record), because a record handed over by a
//     library (a Kafka message) has no SIMDJSON_PADDING bytes after it.
//     The overload taking a simdjson::padded_string_view parses in place:
//     use it when the bytes after the text are readable (a whole file read
//     into a buffer with SIMDJSON_PADDING spare bytes at its end). A syntax
//     error, a text that is not one object, or anything after the object
//     is errc::malformed_record naming origin.where.
//
// Cost: no allocation per row beyond the row's own strings (and a refused
// value's reason). Keys are found through tables built at compile time:
// first the column of the next schema position, since most writers keep
// the schema's order, compared with the raw key in place (a fixed-size
// memcmp, without measuring the key; a name of at most SIMDJSON_PADDING
// bytes may read past a shorter key, into the rest of the document or its
// padding, which simdjson requires anyway); otherwise the key is measured
// and compared with the names of its length. Each column's reader is a
// plain function in a table indexed by column; it asks simdjson for the
// column's type directly and looks at the value's JSON type only to
// explain a refusal. Values of unknown keys are read only to be checked
// (json_check_value: keys and strings with escapes unescaped into the
// parser's buffer, literals and numbers checked, nothing stored), which
// costs only records that have such keys; a refused or rescued object or
// array is checked in a copy of its text.
//
// The parts: json_check.hpp (a record's origin and its errors, raw values,
// the check of values not decoded), json_value.hpp (one value into a
// column's type); here the row's compile-time table and the decoding of
// an object into a row.
#pragma once

#include <flowlib/detail/json.hpp>
#include <flowlib/detail/type_traits.hpp>
#include <flowlib/error.hpp>
#include <flowlib/schema.hpp>
#include <flowlib/source/detail/json_check.hpp>
#include <flowlib/source/detail/json_value.hpp>

#include <simdjson.h>

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace flowlib::detail {

/// How json_to_row treats values it cannot store: see the header comment.
struct json_row_options {
  bool rescue = false;
  bool rescue_unknown = false;
  std::string_view rescued_column = "_rescued_data";
};

/// Column masks for decoders built on json_to_row (the Debezium adapter):
/// `skip`: columns not read from the object (keys of their names are
/// unknown keys) and never required; the row keeps their values.
/// `lenient`: columns that take their value-initialised value when missing
/// or null, whatever their type.
struct json_row_masks {
  std::uint64_t skip = 0;
  std::uint64_t lenient = 0;
};

// --- a row's compile-time table -------------------------------------------

template <class Row>
struct json_row_table {
  using S = schema_of<Row>;
  static constexpr std::size_t N = S::size;
  static_assert(N <= 64, "FLOWLIB_SCHEMA holds at most 64 columns");

  template <std::size_t I>
  using col = typename column_at<S, I>::type;
  template <std::size_t I>
  using value_t = std::remove_cvref_t<typename col<I>::value_type>;

  using reader = bool (*)(simdjson::ondemand::value&, Row&, std::string&);
  using resetter = void (*)(Row&);

  template <std::size_t I>
  static bool read(simdjson::ondemand::value& v, Row& row, std::string& why) {
    return json_decode(v, col<I>::get(row), why);
  }
  template <std::size_t I>
  static void reset(Row& row) {
    col<I>::get(row) = value_t<I>{};
  }
  template <std::size_t... I>
  static constexpr std::array<reader, N> make_readers(std::index_sequence<I...>) {
    return {&read<I>...};
  }
  template <std::size_t... I>
  static constexpr std::array<resetter, N> make_resetters(std::index_sequence<I...>) {
    return {&reset<I>...};
  }
  template <std::size_t... I>
  static constexpr std::uint64_t make_optional_mask(std::index_sequence<I...>) {
    return ((is_optional<value_t<I>>::value ? (std::uint64_t{1} << I) : 0) | ... | 0);
  }
  template <std::size_t... I>
  static constexpr std::uint64_t make_string_mask(std::index_sequence<I...>) {
    return ((std::is_same_v<unwrap_optional_t<value_t<I>>, std::string> ? (std::uint64_t{1} << I)
                                                                         : 0) |
            ... | 0);
  }

  static constexpr std::array<reader, N> readers = make_readers(std::make_index_sequence<N>{});
  static constexpr std::array<resetter, N> resetters =
      make_resetters(std::make_index_sequence<N>{});
  static constexpr std::uint64_t all_mask =
      N == 64 ? ~std::uint64_t{0} : ((std::uint64_t{1} << N) - 1);
  static constexpr std::uint64_t optional_mask =
      make_optional_mask(std::make_index_sequence<N>{});
  static constexpr std::uint64_t string_mask = make_string_mask(std::make_index_sequence<N>{});

  // Column indices ordered by name length; by_length[len] .. by_length[len+1]
  // is the range of the names of length len (len <= max_len).
  static constexpr std::size_t max_len = [] {
    std::size_t m = 0;
    for (auto n : S::names) m = n.size() > m ? n.size() : m;
    return m;
  }();
  static constexpr std::array<std::uint8_t, N> order = [] {
    std::array<std::uint8_t, N> o{};
    std::size_t k = 0;
    for (std::size_t len = 0; len <= max_len; ++len)
      for (std::size_t i = 0; i < N; ++i)
        if (S::names[i].size() == len) o[k++] = static_cast<std::uint8_t>(i);
    return o;
  }();
  static constexpr std::array<std::uint8_t, max_len + 2> by_length = [] {
    std::array<std::uint8_t, max_len + 2> b{};
    std::size_t k = 0;
    for (std::size_t len = 0; len <= max_len; ++len) {
      b[len] = static_cast<std::uint8_t>(k);
      for (std::size_t i = 0; i < N; ++i)
        if (S::names[i].size() == len) ++k;
    }
    b[max_len + 1] = static_cast<std::uint8_t>(k);
    return b;
  }();

  /// Equal bytes, for keys of a few bytes (a loop beats a call to memcmp).
  static bool same(const char* a, const char* b, std::size_t n) noexcept {
    for (std::size_t j = 0; j < n; ++j)
      if (a[j] != b[j]) return false;
    return true;
  }

  /// Whether no name holds a quote or a backslash (else at_hint is off).
  static constexpr bool plain_names = [] {
    for (auto n : S::names)
      for (char c : n)
        if (c == '"' || c == '\\') return false;
    return true;
  }();

  /// `hint` when the raw key at `k` (the bytes after its opening quote)
  /// is that column's name followed by the closing quote; else N. The
  /// comparison stops at the key's closing quote at the latest (no name
  /// holds one), so it reads nothing past the key; and the quote after an
  /// equal prefix is not escaped (no name holds a backslash).
  static std::size_t at_hint(const char* k, std::size_t hint) noexcept {
    if constexpr (!plain_names) {
      return N;
    } else {
      if (hint >= N) return N;
      return matchers[hint](k) ? hint : N;
    }
  }
  /// Column I's name, then the closing quote, at `k`. A name of at most
  /// SIMDJSON_PADDING bytes is compared whole (a few wide loads, its
  /// length known at compile time): the bytes after a shorter key are the
  /// document's or its padding, readable.
  template <std::size_t I>
  static bool match(const char* k) noexcept {
    constexpr std::string_view name = S::names[I];
    if constexpr (name.size() <= simdjson::SIMDJSON_PADDING) {
      return std::memcmp(k, name.data(), name.size()) == 0 && k[name.size()] == '"';
    } else {
      return same(name.data(), k, name.size()) && k[name.size()] == '"';
    }
  }
  template <std::size_t... I>
  static constexpr std::array<bool (*)(const char*) noexcept, N> make_matchers(
      std::index_sequence<I...>) {
    return {&match<I>...};
  }
  static constexpr std::array<bool (*)(const char*) noexcept, N> matchers =
      make_matchers(std::make_index_sequence<N>{});

  /// The column named `key`, or N.
  static std::size_t find(std::string_view key) noexcept {
    if (key.size() > max_len) return N;
    for (std::size_t k = by_length[key.size()]; k < by_length[key.size() + 1]; ++k) {
      const std::size_t i = order[k];
      if (same(S::names[i].data(), key.data(), key.size())) return i;
    }
    return N;
  }
};

/// Appends `"key":raw` to the rescued object in `text` (opened on first use).
inline void json_rescue_append(std::string& text, std::string_view key, std::string_view raw) {
  text += text.empty() ? '{' : ',';
  json_append_string(text, key);
  text += ':';
  text.append(raw.data(), raw.size());
}

/// json_to_row with column masks (json_row_masks); json_to_row is this with
/// none.
template <class Row>
void json_to_row_masked(simdjson::ondemand::object object, Row& out, const record_origin& origin,
                        const json_row_options& options, const json_row_masks& masks) {
  static_assert(has_schema<Row>,
                "flowlib: JSON records are decoded into a row by column name: declare "
                "FLOWLIB_SCHEMA(Row, ...) for the row type, listing the columns to read");
  using table = json_row_table<Row>;
  using S = typename table::S;
  constexpr std::size_t N = table::N;

  // The rescued column, when rescue is on.
  std::size_t rescued = N;
  std::string* rescued_text = nullptr;
  std::optional<std::string>* rescued_opt = nullptr;
  std::string rescued_buf;
  if (options.rescue) {
    rescued = S::index_of(options.rescued_column);
    if (rescued == N || ((table::string_mask >> rescued) & 1) == 0) {
      std::string m = "rescue needs a column named '";
      m += options.rescued_column;
      m += "' of type std::string or std::optional<std::string> in FLOWLIB_SCHEMA of ";
      m += S::name;
      throw error(errc::invalid_argument, std::string(origin.source),
                  std::string(options.rescued_column), "", std::move(m));
    }
    S::for_each([&](auto c) {
      using V = std::remove_cvref_t<typename decltype(c)::value_type>;
      if (decltype(c)::name != options.rescued_column) return;
      if constexpr (std::is_same_v<V, std::string>) {
        rescued_text = &decltype(c)::get(out);
        rescued_text->clear();
      } else if constexpr (std::is_same_v<V, std::optional<std::string>>) {
        rescued_opt = &decltype(c)::get(out);
        rescued_opt->reset();
      }
    });
  }
  std::string& rescue_into = rescued_text ? *rescued_text : rescued_buf;
  const std::uint64_t rescued_bit = rescued < N ? (std::uint64_t{1} << rescued) : 0;
  const std::uint64_t skip = masks.skip | rescued_bit;

  std::uint64_t seen = 0;
  std::size_t hint = 0;
  std::string why;  // a refused value's reason
  for (auto field_result : object) {
    // value_unsafe() after the error check: no copy of the field (moving
    // it out costs a store-forwarding stall per field).
    if (auto e = field_result.error()) json_fail(origin, "", json_syntax_reason(e), "", false);
    simdjson::ondemand::field& field = field_result.value_unsafe();
    // The key as written: first, without measuring it, the column at the
    // next schema position (writers mostly keep the schema's order); else
    // up to its closing quote, unless it holds an escape.
    const char* const k = field.key().raw();
    std::size_t i = table::at_hint(k, hint);
    std::string_view key;
    if (i == N || options.rescue) {
      const char* p = k;
      while (*p != '"' && *p != '\\') ++p;
      if (*p == '"') {
        key = std::string_view(k, static_cast<std::size_t>(p - k));
      } else if (auto e = field.unescaped_key().get(key)) {
        json_fail(origin, "", json_syntax_reason(e), "", false);
      }
      if (i == N) i = table::find(key);
    }
    if (i < N && ((skip >> i) & 1)) {
      if (key.data() == nullptr) key = S::names[i];  // matched at the hint
      i = N;
    }
    if (i == N) {
      // A value no column takes is still read in full: a record holding
      // one that is not JSON is not JSON.
      if (options.rescue && options.rescue_unknown) {
        std::string_view raw;
        if (auto e = json_checked_raw(field.value(), raw)) json_fail_unknown(origin, key, e);
        json_rescue_append(rescue_into, key, raw);
      } else if (auto e = json_check_value(field.value())) {
        json_fail_unknown(origin, key, e);
      }
      continue;
    }
    hint = i + 1;
    seen |= std::uint64_t{1} << i;
    simdjson::ondemand::value& v = field.value();
    if (table::readers[i](v, out, why)) continue;
    if ((masks.lenient >> i) & 1) {
      simdjson::ondemand::json_type t{};
      if (!v.type().get(t) && t == simdjson::ondemand::json_type::null) {
        table::resetters[i](out);
        continue;
      }
    }
    // A refused value is rescued or named as written, so it must be JSON:
    // one that is not makes the record not JSON, in rescue mode too.
    std::string_view raw;
    if (auto e = json_checked_raw(v, raw)) json_fail(origin, S::names[i], json_syntax_reason(e), raw);
    if (options.rescue) {
      table::resetters[i](out);
      json_rescue_append(rescue_into, key, raw);
      continue;
    }
    json_fail(origin, S::names[i], why, raw);
  }

  const std::uint64_t unseen = table::all_mask & ~seen & ~skip;
  if (unseen != 0) {
    const std::uint64_t missing = unseen & ~table::optional_mask & ~masks.lenient;
    if (missing != 0) {
      json_fail(origin, S::names[static_cast<std::size_t>(std::countr_zero(missing))],
                "the column is missing from the record", "", false);
    }
    for (std::uint64_t m = unseen; m != 0; m &= m - 1) {
      table::resetters[static_cast<std::size_t>(std::countr_zero(m))](out);
    }
  }
  if (!rescue_into.empty()) {
    rescue_into += '}';
    if (rescued_opt) *rescued_opt = std::move(rescued_buf);
  }
}

/// Decodes one JSON object into Row: see the header comment.
template <class Row>
void json_to_row(simdjson::ondemand::object object, Row& out, const record_origin& origin,
                 const json_row_options& options = {}) {
  json_to_row_masked(object, out, origin, options, json_row_masks{});
}

/// Parses `json` (one object, padded) and decodes it with `decode(object)`;
/// errors name origin.where.
template <class F>
void json_parse_object(simdjson::ondemand::parser& parser, simdjson::padded_string_view json,
                       const record_origin& origin, F&& decode) {
  simdjson::ondemand::document doc;
  if (auto e = parser.iterate(json).get(doc)) {
    json_fail(origin, "", json_syntax_reason(e), json, true);
  }
  simdjson::ondemand::object object;
  if (auto e = doc.get_object().get(object)) {
    if (e == simdjson::INCORRECT_TYPE) json_fail(origin, "", "not a JSON object", json, true);
    json_fail(origin, "", json_syntax_reason(e), json, true);
  }
  decode(object);
  // Anything after the object's closing brace: the iterator is not at the
  // document's end.
  const char* rest = nullptr;
  if (!doc.current_location().get(rest)) {
    json_fail(origin, "", "more than one JSON value in the record", json, true);
  }
}

/// The calling thread's padded copy of `json` (see the header comment).
inline simdjson::padded_string_view json_padded_copy(std::string_view json) {
  thread_local std::string buffer;
  const std::size_t need = json.size() + simdjson::SIMDJSON_PADDING;
  if (buffer.size() < need) buffer.resize(need);
  std::memcpy(buffer.data(), json.data(), json.size());
  std::memset(buffer.data() + json.size(), ' ', simdjson::SIMDJSON_PADDING);
  return simdjson::padded_string_view(buffer.data(), json.size(), buffer.size());
}

/// One JSON object in padded text, decoded in place: see the header comment.
template <class Row>
void json_text_to_row(simdjson::ondemand::parser& parser, simdjson::padded_string_view json,
                      Row& out, const record_origin& origin, const json_row_options& options = {}) {
  json_parse_object(parser, json, origin, [&](simdjson::ondemand::object object) {
    json_to_row(object, out, origin, options);
  });
}

/// One JSON object in any text, copied into a padded buffer first: see the
/// header comment.
template <class Row>
void json_text_to_row(simdjson::ondemand::parser& parser, std::string_view json, Row& out,
                      const record_origin& origin, const json_row_options& options = {}) {
  json_text_to_row(parser, json_padded_copy(json), out, origin, options);
}

}  // namespace flowlib::detail
