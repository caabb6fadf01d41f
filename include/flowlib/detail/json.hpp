// flowlib/detail/json.hpp
//
// A small streaming JSON writer, for the event log (event_log.hpp).
// Internal.
//
//   detail::json_writer w;
//   w.begin_object();
//   w.key("flow").value("orders");
//   w.key("rows").value(std::uint64_t{12});
//   w.key("target").null();
//   w.end_object();
//   w.str();  // {"flow":"orders","rows":12,"target":null}
//
// Contract:
//   - the output is always valid JSON text (RFC 8259) and valid UTF-8,
//     whatever bytes the strings hold: `"` and `\` are escaped; the control
//     characters U+0000..U+001F are written \b \t \n \f \r or \u00XX (DEL,
//     U+007F, needs no escape and is written as is); valid UTF-8 passes
//     through unchanged; each maximal ill-formed subsequence of bytes (the
//     Unicode Standard's "substitution of maximal subparts", chapter 3.9) is
//     replaced by U+FFFD. Flow names and error messages come from programs
//     and systems that do not promise UTF-8; a log a reader cannot parse
//     would lose every event after the bad one;
//   - integers are written exactly (u64 and i64); finite doubles in the
//     shortest form that reads back to the same double (std::to_chars);
//     NaN and infinities, which JSON cannot represent, as null;
//   - the caller nests correctly (a key() before each value in an object,
//     none in an array); the writer inserts the commas. Nesting mistakes
//     are programming errors of flowlib itself and are not diagnosed.
// No whitespace is written: one value is one line.
#pragma once

#include <charconv>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <utility>
#include <vector>

namespace flowlib::detail {

/// @brief Appends `s` to `out` as a JSON string (with its quotes), escaped
/// and with ill-formed UTF-8 replaced by U+FFFD (see the header comment).
inline void json_append_string(std::string& out, std::string_view s) {
  static constexpr char hex[] = "0123456789abcdef";
  static constexpr std::string_view replacement = "\xEF\xBF\xBD";  // U+FFFD
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
  out += '"';
  std::size_t i = 0;
  const std::size_t n = s.size();
  while (i < n) {
    // Runs of printable ASCII are copied at once.
    std::size_t run = i;
    while (run < n) {
      const unsigned char c = byte(run);
      if (c < 0x20 || c >= 0x80 || c == '"' || c == '\\') break;
      ++run;
    }
    out.append(s.data() + i, run - i);
    i = run;
    if (i == n) break;

    const unsigned char c = byte(i);
    if (c < 0x80) {
      switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\b': out += "\\b"; break;
        case '\t': out += "\\t"; break;
        case '\n': out += "\\n"; break;
        case '\f': out += "\\f"; break;
        case '\r': out += "\\r"; break;
        default:
          out += "\\u00";
          out += hex[c >> 4];
          out += hex[c & 0xF];
      }
      ++i;
      continue;
    }

    // A multi-byte sequence: its length and the range of its second byte
    // (Unicode Table 3-7, "Well-Formed UTF-8 Byte Sequences"), which rules
    // out overlong forms, surrogates and code points above U+10FFFF.
    std::size_t len = 0;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c == 0xE0) {
      len = 3;
      lo = 0xA0;
    } else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) {
      len = 3;
    } else if (c == 0xED) {
      len = 3;
      hi = 0x9F;
    } else if (c == 0xF0) {
      len = 4;
      lo = 0x90;
    } else if (c >= 0xF1 && c <= 0xF3) {
      len = 4;
    } else if (c == 0xF4) {
      len = 4;
      hi = 0x8F;
    }
    if (len == 0) {  // a continuation byte or a byte never valid in UTF-8
      out += replacement;
      ++i;
      continue;
    }
    // The longest well-formed prefix of the sequence: one U+FFFD replaces
    // it when the sequence is incomplete.
    std::size_t good = 1;
    if (i + 1 < n && byte(i + 1) >= lo && byte(i + 1) <= hi) {
      good = 2;
      while (good < len && i + good < n && byte(i + good) >= 0x80 && byte(i + good) <= 0xBF)
        ++good;
    }
    if (good == len) {
      out.append(s.data() + i, len);
    } else {
      out += replacement;
    }
    i += good;
  }
  out += '"';
}

/// @brief A streaming JSON writer; see the header comment.
class json_writer {
 public:
  /// The text written so far.
  const std::string& str() const& noexcept { return out_; }
  /// Takes the text written so far; the writer is then empty.
  std::string take() {
    std::string s = std::move(out_);
    clear();
    return s;
  }
  /// Empties the writer (keeps its memory).
  void clear() noexcept {
    out_.clear();
    first_.clear();
    after_key_ = false;
  }

  json_writer& begin_object() { return open('{'); }
  json_writer& end_object() { return close('}'); }
  json_writer& begin_array() { return open('['); }
  json_writer& end_array() { return close(']'); }

  /// The key of the next member of the current object.
  json_writer& key(std::string_view k) {
    separate();
    json_append_string(out_, k);
    out_ += ':';
    after_key_ = true;
    return *this;
  }

  json_writer& value(std::string_view s) {
    separate();
    json_append_string(out_, s);
    return *this;
  }
  /// (Without this overload a string literal would convert to bool.)
  json_writer& value(const char* s) { return value(std::string_view(s)); }
  json_writer& value(const std::string& s) { return value(std::string_view(s)); }

  json_writer& value(bool b) {
    separate();
    out_ += b ? "true" : "false";
    return *this;
  }

  /// Any integer but bool and the character types, exactly.
  template <std::integral I>
    requires(!std::same_as<I, bool> && !std::same_as<I, char> && !std::same_as<I, char8_t> &&
             !std::same_as<I, char16_t> && !std::same_as<I, char32_t> &&
             !std::same_as<I, wchar_t>)
  json_writer& value(I v) {
    separate();
    char buf[24];
    const auto r = std::to_chars(buf, buf + sizeof buf, v);
    out_.append(buf, r.ptr);
    return *this;
  }

  /// A finite double in its shortest round-trip form; NaN and infinities
  /// as null.
  json_writer& value(double d) {
    if (!std::isfinite(d)) return null();
    separate();
    char buf[32];
    const auto r = std::to_chars(buf, buf + sizeof buf, d);
    out_.append(buf, r.ptr);
    return *this;
  }

  json_writer& null() {
    separate();
    out_ += "null";
    return *this;
  }
  /// The value `v` holds, or null.
  template <class T>
  json_writer& value_or_null(const std::optional<T>& v) {
    return v ? value(*v) : null();
  }

 private:
  json_writer& open(char c) {
    separate();
    out_ += c;
    first_.push_back(true);
    return *this;
  }
  json_writer& close(char c) {
    out_ += c;
    if (!first_.empty()) first_.pop_back();
    return *this;
  }
  // Writes the comma before a value or key that is not the first of its
  // object or array (a value right after its key needs none).
  void separate() {
    if (after_key_) {
      after_key_ = false;
      return;
    }
    if (first_.empty()) return;
    if (!first_.back()) out_ += ',';
    first_.back() = false;
  }

  std::string out_;
  std::vector<bool> first_;  // per open object/array: nothing written in it yet
  bool after_key_ = false;
};

}  // namespace flowlib::detail
