// flowlib/source/detail/json_lines.hpp
//
// The JSON lines decoder of FileSource (source/file.hpp): a range of a
// loaded file's records into rows, through json_row.hpp. The lines of the
// records are found first (memchr; the records before the range are
// skipped there, undecoded), then decoded: in one simdjson document stream
// over their bytes when the batch is large enough to pay for it, each line
// on its own for the rest, or from the first line the stream cannot take
// (see json_lines_reader::stream). Internal; needs simdjson.
#pragma once

#include <flowlib/error.hpp>
#include <flowlib/source/detail/file_manifest.hpp>
#include <flowlib/source/detail/json_row.hpp>

#include <simdjson.h>

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace flowlib::detail {

/// Decodes the records of JSON lines files into rows; keeps its parser and
/// scratch from batch to batch. One thread at a time.
template <class Row>
class json_lines_reader {
 public:
  json_lines_reader() {
#ifdef SIMDJSON_THREADS_ENABLED
    parser_.threaded = false;  // a read decodes in the calling thread, and starts none
#endif
  }

  /// Decodes records [at, stop) of file `e` into `out`, from `pos` (in the
  /// file, at or before `at`); returns the cursor after them. `bytes` holds
  /// the file, followed by SIMDJSON_PADDING readable bytes. In rescue mode
  /// (o.rescue) a line that does not decode at all becomes a row whose
  /// rescued column `set_rescued` sets to its _raw record. Throws
  /// errc::malformed_record naming `source`, the file and the line,
  /// errc::source_data_lost when the file ends first.
  file_cursor read(std::string_view source, const file_entry& e, const file_bytes& bytes, file_cursor pos,
                   std::uint64_t at, std::uint64_t stop, const json_row_options& o,
                   void (*set_rescued)(Row&, std::string&&), std::vector<Row>& out) {
    const char* const base = bytes.data.get();
    const std::size_t n = bytes.size;
    std::size_t byte = pos.byte;
    std::uint64_t rec = e.first + pos.row;
    std::uint64_t line = pos.line;
    spans_.clear();
    while (rec < stop) {
      if (byte >= n) fewer_records(source, e);
      const char* p = base + byte;
      const char* nl = static_cast<const char*>(std::memchr(p, '\n', n - byte));
      const std::size_t len = nl != nullptr ? static_cast<std::size_t>(nl - p) : n - byte;
      const char* q = p;
      while (q < p + len && (*q == ' ' || *q == '\t' || *q == '\r')) ++q;
      if (q != p + len) {  // not blank: a record
        if (rec >= at) spans_.push_back(line_span{byte, static_cast<std::size_t>(q - base), byte + len, line});
        ++rec;
      }
      ++line;
      byte += len + (nl != nullptr ? 1 : 0);
    }
    const std::size_t streamed = stream(source, bytes, o, out);
    if (streamed < spans_.size()) {
      where_ = "file '";
      where_ += e.name;
      where_ += "' line ";
      const std::size_t prefix = where_.size();
      for (std::size_t k = streamed; k < spans_.size(); ++k)
        decode_line(source, e, bytes, spans_[k], prefix, o, set_rescued, out);
    }
    return file_cursor{byte, rec - e.first, line};
  }

 private:
  // One record's line: where it starts, its first byte that is not blank,
  // where it ends (before its '\n'), its number.
  struct line_span {
    std::size_t begin = 0, first = 0, end = 0;
    std::uint64_t line = 0;
  };

  // Decodes spans_ from the start as one simdjson document stream
  // (iterate_many: stage 1 over many records at once, which is what makes it
  // faster than a parse per line); returns how many it decoded, the rows in
  // `out`. A line is a record while each document starts where its line's
  // first non-blank byte is: a document that runs over into the next line,
  // two documents on one line, anything that is not an object, a syntax
  // error, a record that fails to decode all stop the stream at document k,
  // and the rows from k - 1 on (the document before may be the one that ran
  // over) are dropped and decoded line by line, which gives the errors and
  // rescued rows of the lines themselves. Decoding errors need no
  // message here (they are decoded again), so no "where" is built per row.
  std::size_t stream(std::string_view source, const file_bytes& bytes, const json_row_options& o,
                     std::vector<Row>& out) {
    const std::size_t n = spans_.size();
    if (n < 16) return 0;  // a short batch: the stream's setup would cost more
    const std::size_t from = spans_.front().first;
    const std::size_t len = spans_.back().end - from;
    const std::size_t batch = std::clamp<std::size_t>(len, 64, std::size_t{1} << 20);
    const char* const base = bytes.data.get();
    const std::size_t rows_before = out.size();
    const record_origin origin{source, ""};
    std::size_t k = 0;
    bool whole = false;
    {
      simdjson::ondemand::document_stream docs;
      if (parser_.iterate_many(base + from, len, batch).get(docs)) return 0;
      auto it = docs.begin();
      for (; it != docs.end(); ++it, ++k) {
        if (k == n || it.error() || from + it.current_index() != spans_[k].first) break;
        simdjson::ondemand::document_reference doc;
        simdjson::ondemand::object object;
        if ((*it).get(doc) || doc.get_object().get(object)) break;
        Row& row = out.emplace_back();
        try {
          json_to_row(object, row, origin, o);
        } catch (...) {
          break;
        }
      }
      whole = k == n && !(it != docs.end());
    }
    if (whole) return n;
    const std::size_t keep = k == 0 ? 0 : k - 1;
    out.erase(out.begin() + static_cast<std::ptrdiff_t>(rows_before + keep), out.end());
    return keep;
  }

  // Decodes one record's line on its own, with its origin for messages;
  // in rescue mode a line that does not decode at all becomes a _raw row.
  void decode_line(std::string_view source, const file_entry& e, const file_bytes& bytes, const line_span& s,
                   std::size_t prefix, const json_row_options& o, void (*set_rescued)(Row&, std::string&&),
                   std::vector<Row>& out) {
    const char* const p = bytes.data.get() + s.begin;
    const std::size_t len = s.end - s.begin;
    const std::size_t capacity = bytes.size + simdjson::SIMDJSON_PADDING - s.begin;
    where_.resize(prefix);
    char digits[24];
    where_.append(digits, std::to_chars(digits, digits + sizeof digits, s.line).ptr);
    const record_origin origin{source, where_};
    Row& row = out.emplace_back();
    if (!o.rescue) {
      json_text_to_row(parser_, simdjson::padded_string_view(p, len, capacity), row, origin, o);
      return;
    }
    try {
      json_text_to_row(parser_, simdjson::padded_string_view(p, len, capacity), row, origin, o);
    } catch (const error& x) {
      if (x.code() != errc::malformed_record) throw;
      row = Row{};
      std::string_view text(p, len);
      if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
      set_rescued(row, raw_record_json(text, e.name, s.line));
    }
  }

  simdjson::ondemand::parser parser_;
  std::string where_;              // "file 'x' line N" of the record being decoded
  std::vector<line_span> spans_;   // a batch's records
};

}  // namespace flowlib::detail
