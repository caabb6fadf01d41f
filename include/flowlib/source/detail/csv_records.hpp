// flowlib/source/detail/csv_records.hpp
//
// CSV records for FileSource (source/file.hpp), through libcsv: counting a
// file's records, reading its header, and decoding a range of its records
// into rows by FLOWLIB_SCHEMA column names, each field through
// detail::parse_text (csv_file_reader: one file, batch by batch).
// Internal; needs libcsv (<csv.h>).
//
// What a record is: whatever libcsv's parser (non-strict mode, the
// source's delimiter, '"' quotes) reports as a row: RFC 4180 records, a
// quoted field may hold delimiters, doubled quotes and line breaks; CR, LF
// and CRLF end a record; blank lines are not records; spaces and tabs
// around an unquoted field are dropped. The counting pass and the reading
// use the same parser on the same bytes, so they agree on every record by
// construction, whatever the quoting (libcsv's result does not depend on
// how its input is cut into calls).
//
// Positions inside a file. The reader feeds libcsv the bytes in pieces that
// each end at a CR or LF (or the end of the file). A record can end only at
// such a byte, so each record ends at the end of a piece, and the parser is
// between records (its state ROW_NOT_BEGUN, visible in libcsv's public
// struct) exactly at the ends of the pieces that close records or hold only
// blank text. Such a place, with the number of records before it and its
// line number, is a file_cursor (file_manifest.hpp): a later batch starts a
// fresh parser there instead of parsing the file again from its beginning.
// The piece also gives a record's raw text (for rescue) and its first line
// (for messages).
//
// Exceptions never cross libcsv (a C library, compiled without unwind
// tables): the callbacks catch, keep the first exception, ignore the rest
// of the piece, and the driver rethrows it once csv_parse returns.
#pragma once

#include <flowlib/detail/json.hpp>
#include <flowlib/detail/type_traits.hpp>
#include <flowlib/error.hpp>
#include <flowlib/schema.hpp>
#include <flowlib/source/detail/file_manifest.hpp>
#include <flowlib/source/detail/text_value.hpp>

#include <csv.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace flowlib::detail {

/// A libcsv parser, freed on destruction.
class csv_handle {
 public:
  explicit csv_handle(char delimiter) {
    if (::csv_init(&p_, 0) != 0) throw std::bad_alloc();
    ::csv_set_delim(&p_, static_cast<unsigned char>(delimiter));
    ::csv_set_blk_size(&p_, 1024);
  }
  csv_handle(const csv_handle&) = delete;
  csv_handle& operator=(const csv_handle&) = delete;
  ~csv_handle() { ::csv_free(&p_); }
  ::csv_parser* get() noexcept { return &p_; }
  /// Between records (libcsv's ROW_NOT_BEGUN, state 0).
  bool between_records() const noexcept { return p_.pstate == 0; }

 private:
  ::csv_parser p_{};
};

/// Counts a CSV file's records (the header, when there is one, is not a
/// record): the counting pass's `Counter` (detail/file_manifest.hpp).
class csv_row_counter {
 public:
  csv_row_counter(char delimiter, bool header) : parser_(delimiter), header_(header) {}
  std::uint64_t records = 0;

  void feed(const char* p, std::size_t n) {
    if (::csv_parse(parser_.get(), p, n, nullptr, &on_row, &rows_) != n) throw std::bad_alloc();
  }
  void finish() {
    ::csv_fini(parser_.get(), nullptr, &on_row, &rows_);
    records = header_ && rows_ > 0 ? rows_ - 1 : rows_;
  }

 private:
  static void on_row(int, void* rows) { ++*static_cast<std::uint64_t*>(rows); }
  csv_handle parser_;
  bool header_;
  std::uint64_t rows_ = 0;
};

/// Runs libcsv over a file's bytes from a file_cursor (see the header
/// comment). The handler gets field(std::string_view) for the fields of
/// rows with index >= `from_row`, and row(index, line, raw text) at the end
/// of each such row; rows before `from_row` are parsed and skipped.
template <class Handler>
class csv_scan {
 public:
  csv_scan(std::string_view bytes, char delimiter, Handler& h) : bytes_(bytes), parser_(delimiter), h_(h) {}

  /// Parses from `at` until `to_row` rows (the header included) have ended
  /// or the bytes end; returns the cursor after the last row it ended.
  file_cursor run(file_cursor at, std::uint64_t from_row, std::uint64_t to_row) {
    from_row_ = from_row;
    row_ = at.row;
    line_ = at.line;
    file_cursor last = at;
    const char* const base = bytes_.data();
    const std::size_t n = bytes_.size();
    std::size_t pos = at.byte;
    while (row_ < to_row && pos < n) {
      // The piece: up to and including the next CR or LF.
      const char* p = base + pos;
      const char* nl = static_cast<const char*>(std::memchr(p, '\n', n - pos));
      const std::size_t lf_end = nl != nullptr ? static_cast<std::size_t>(nl - base) : n;
      const char* cr = static_cast<const char*>(std::memchr(p, '\r', lf_end - pos));
      const std::size_t end = cr != nullptr ? static_cast<std::size_t>(cr - base) + 1
                                            : (nl != nullptr ? lf_end + 1 : n);
      if (parser_.between_records()) {
        row_start_ = pos;
        row_line_ = line_;
      }
      piece_end_ = end;
      if (::csv_parse(parser_.get(), p, end - pos, &on_field, &on_row, this) != end - pos && !failure_)
        failure_ = std::make_exception_ptr(std::bad_alloc());
      if (failure_) std::rethrow_exception(failure_);
      // Lines: LF ends one, and so does a CR not followed by LF.
      const char last_byte = base[end - 1];
      if (last_byte == '\n' || (last_byte == '\r' && (end == n || base[end] != '\n'))) ++line_;
      pos = end;
      if (parser_.between_records()) last = file_cursor{pos, row_, line_};
    }
    if (pos == n && row_ < to_row && !parser_.between_records()) {
      piece_end_ = n + 1;  // no terminator to leave out of the raw text
      ::csv_fini(parser_.get(), &on_field, &on_row, this);
      if (failure_) std::rethrow_exception(failure_);
      last = file_cursor{n, row_, line_};
    }
    return last;
  }

 private:
  static void on_field(void* data, std::size_t len, void* self) noexcept {
    auto& s = *static_cast<csv_scan*>(self);
    if (s.failure_ || s.row_ < s.from_row_) return;
    try {
      s.h_.field(std::string_view(static_cast<const char*>(data), len));
    } catch (...) {
      s.failure_ = std::current_exception();
    }
  }
  static void on_row(int, void* self) noexcept {
    auto& s = *static_cast<csv_scan*>(self);
    const std::uint64_t index = s.row_++;
    if (s.failure_ || index < s.from_row_) return;
    try {
      const std::size_t raw_end = s.piece_end_ - 1;  // without the record's terminator
      s.h_.row(index, s.row_line_, s.bytes_.substr(s.row_start_, raw_end - s.row_start_));
    } catch (...) {
      s.failure_ = std::current_exception();
    }
  }

  std::string_view bytes_;
  csv_handle parser_;
  Handler& h_;
  std::uint64_t from_row_ = 0;
  std::uint64_t row_ = 0;
  std::uint64_t line_ = 1;
  std::size_t row_start_ = 0;
  std::uint64_t row_line_ = 1;
  std::size_t piece_end_ = 0;
  std::exception_ptr failure_;
};

/// Collects the first row's fields: a CSV file's header.
struct csv_header_reader {
  std::vector<std::string> names;
  std::uint64_t line = 1;
  void field(std::string_view f) { names.emplace_back(f); }
  void row(std::uint64_t, std::uint64_t l, std::string_view) { line = l; }
};

/// What FileSource's CSV decoding needs of its options.
struct csv_decode_options {
  char delimiter = ',';
  bool header = true;
  bool rescue = false;
  bool rescue_unknown = false;
  std::string_view rescued_column;
};

/// Per column of Row: parse a field into it, reset it.
template <class Row>
struct csv_columns {
  using S = schema_of<Row>;
  using setter = std::string (*)(std::string_view, Row&);
  using resetter = void (*)(Row&);

  template <class Col>
  static std::string set(std::string_view text, Row& r) {
    return parse_text(text, Col::get(r));
  }
  template <class Col>
  static void reset(Row& r) {
    Col::get(r) = typename Col::value_type{};
  }
  template <class Col>
  static constexpr bool optional_column() {
    return is_optional_v<typename Col::value_type>;
  }
  template <class... Cols>
  static constexpr std::array<setter, sizeof...(Cols)> setters_of(type_list<Cols...>) {
    return {&set<Cols>...};
  }
  template <class... Cols>
  static constexpr std::array<resetter, sizeof...(Cols)> resetters_of(type_list<Cols...>) {
    return {&reset<Cols>...};
  }
  template <class... Cols>
  static constexpr std::array<bool, sizeof...(Cols)> optional_of(type_list<Cols...>) {
    return {optional_column<Cols>()...};
  }
  static constexpr auto setters = setters_of(typename S::columns{});
  static constexpr auto resetters = resetters_of(typename S::columns{});
  static constexpr auto optional = optional_of(typename S::columns{});
};

/// Decodes the records of one CSV file into rows (the handler of a
/// csv_scan): the mapping from the file's fields to Row's columns, made
/// once per file from its header (or from the schema's order without one).
template <class Row>
class csv_row_decoder {
  using C = csv_columns<Row>;
  using S = schema_of<Row>;
  static constexpr int unknown = -1;  // a field no column takes
  static constexpr int ignored = -2;  // a header field named like the rescued column

 public:
  /// `header`: the file's header names (empty without a header).
  /// `rescued_index`: the rescued column's schema index (S::size when no
  /// rescue). `set_rescued` stores the rescued column's text. Throws
  /// errc::malformed_record naming the file and the column for a column
  /// Row needs that the header lacks, or a name the header repeats.
  csv_row_decoder(std::string_view source, std::string_view file, const csv_decode_options& options,
                  std::vector<std::string> header, std::uint64_t header_line, std::size_t rescued_index,
                  void (*set_rescued)(Row&, std::string&&))
      : source_(source), file_(file), options_(options), header_(std::move(header)),
        rescued_index_(rescued_index), set_rescued_(set_rescued) {
    if (options_.header) {
      std::array<bool, S::size> seen{};
      for (const std::string& name : header_) {
        const std::size_t c = S::index_of(name);
        if (c == rescued_index_) {
          map_.push_back(ignored);
        } else if (c < S::size) {
          if (seen[c]) {
            throw error(errc::malformed_record, std::string(source_), name, "",
                        file_message({"file '", file_, "' line ", std::to_string(header_line),
                                      ": the header names this column twice"}));
          }
          seen[c] = true;
          map_.push_back(static_cast<int>(c));
        } else {
          map_.push_back(unknown);
        }
      }
      for (std::size_t c = 0; c < S::size; ++c) {
        if (seen[c] || c == rescued_index_ || C::optional[c]) continue;
        std::string names;
        for (const std::string& h : header_) {
          if (!names.empty()) names += ", ";
          names += h;
        }
        throw error(errc::malformed_record, std::string(source_), std::string(S::names[c]), "",
                    file_message({"file '", file_, "' line ", std::to_string(header_line),
                                  ": the header has no such column, and the column is not std::optional "
                                  "(the header's columns: ",
                                  names, "); no record of the file was read"}));
      }
    } else {
      for (std::size_t c = 0; c < S::size; ++c)
        if (c != rescued_index_) map_.push_back(static_cast<int>(c));
    }
  }

  /// Starts a scan whose rows go to `out` (a row a failed scan left
  /// half-read is forgotten).
  void start(std::vector<Row>& out) noexcept {
    out_ = &out;
    k_ = 0;
    bad_field_ = npos_field;
    rescued_.clear();
  }

  void field(std::string_view text) {
    if (k_ == 0) {
      out_->emplace_back();
      row_ = &out_->back();
    }
    const std::size_t k = k_++;
    if (k >= map_.size()) return;  // too many fields: reported at the row's end
    const int c = map_[k];
    if (c >= 0) {
      std::string why = C::setters[static_cast<std::size_t>(c)](text, *row_);
      if (why.empty()) return;
      if (options_.rescue) {
        C::resetters[static_cast<std::size_t>(c)](*row_);
        rescue(k, text);
      } else if (bad_field_ == npos_field) {
        bad_field_ = k;
        bad_reason_ = std::move(why);
        bad_value_.assign(text.substr(0, 80));
      }
    } else if (c == unknown && options_.rescue && options_.rescue_unknown) {
      rescue(k, text);
    }
  }

  void row(std::uint64_t, std::uint64_t line, std::string_view raw) {
    const std::size_t fields = k_;
    k_ = 0;
    if (fields != map_.size()) {
      if (!options_.rescue) {
        bad_field_ = npos_field;
        throw error(errc::malformed_record, std::string(source_), "", "",
                    where(line) + ": " + std::to_string(fields) + " field" + (fields == 1 ? "" : "s") +
                        " where " + (options_.header ? "the header has " : "the row type has ") +
                        std::to_string(map_.size()) + ", record " + quoted(raw));
      }
      *row_ = Row{};
      rescued_.clear();
      set_rescued_(*row_, raw_record_json(raw, file_, line));
      return;
    }
    if (bad_field_ != npos_field) {
      const std::size_t k = bad_field_;
      bad_field_ = npos_field;
      throw error(errc::malformed_record, std::string(source_), column_name(k), "",
                  where(line) + ": " + bad_reason_ + ", value " + quoted(bad_value_));
    }
    if (!rescued_.empty()) {
      rescued_ += '}';
      set_rescued_(*row_, std::move(rescued_));
      rescued_.clear();
    }
  }

 private:
  static constexpr std::size_t npos_field = static_cast<std::size_t>(-1);

  std::string where(std::uint64_t line) const {
    std::string w = "file '";
    w.append(file_);
    w += "' line ";
    w += std::to_string(line);
    return w;
  }
  static std::string quoted(std::string_view text) {
    std::string q = "'";
    q.append(text.substr(0, 80));
    if (text.size() > 80) q += "...";
    q += '\'';
    return q;
  }
  // The field's column name: the header's, or the schema's without one.
  std::string column_name(std::size_t k) const {
    if (options_.header) return header_[k];
    return std::string(S::names[static_cast<std::size_t>(map_[k])]);
  }
  void rescue(std::size_t k, std::string_view text) {
    rescued_ += rescued_.empty() ? '{' : ',';
    json_append_string(rescued_, column_name(k));
    rescued_ += ':';
    json_append_string(rescued_, text);
  }

  std::string_view source_;
  std::string_view file_;
  csv_decode_options options_;
  std::vector<std::string> header_;
  std::vector<int> map_;  // field index -> column index, unknown or ignored
  std::size_t rescued_index_;
  void (*set_rescued_)(Row&, std::string&&);
  std::vector<Row>* out_ = nullptr;
  Row* row_ = nullptr;
  std::size_t k_ = 0;  // fields of the current row so far
  std::size_t bad_field_ = npos_field;
  std::string bad_reason_;
  std::string bad_value_;
  std::string rescued_;  // the current row's rescued values so far
};

/// One CSV file of a FileSource, read batch by batch: open() reads its
/// header (with csv_header) and makes the mapping of its fields to Row's
/// columns; read() decodes a range of its records from a cursor.
template <class Row>
class csv_file_reader {
 public:
  /// Starts on file `file` (its name, which must outlive the reader's use
  /// of it), whose bytes are `bytes`; returns the cursor before its first
  /// record. Throws as csv_row_decoder's constructor.
  file_cursor open(std::string_view source, std::string_view file, std::string_view bytes,
                   const csv_decode_options& options, std::size_t rescued_index,
                   void (*set_rescued)(Row&, std::string&&)) {
    close();
    csv_header_reader header;
    file_cursor pos;
    std::uint64_t header_line = 1;
    if (options.header) {
      csv_scan<csv_header_reader> scan(bytes, options.delimiter, header);
      pos = scan.run(file_cursor{}, 0, 1);
      header_line = header.line;
    }
    decoder_.emplace(source, file, options, std::move(header.names), header_line, rescued_index,
                     set_rescued);
    source_ = source;
    delimiter_ = options.delimiter;
    header_rows_ = options.header ? 1 : 0;
    return pos;
  }

  /// Decodes records [at, stop) of the open file `e` into `out`, from
  /// `pos` (in the file, at or before `at`); returns the cursor after
  /// them. Throws errc::malformed_record for a record that does not
  /// decode, errc::source_data_lost when the file ends first.
  file_cursor read(const file_entry& e, std::string_view bytes, file_cursor pos, std::uint64_t at,
                   std::uint64_t stop, std::vector<Row>& out) {
    const std::uint64_t from_row = at - e.first + header_rows_;
    const std::uint64_t to_row = stop - e.first + header_rows_;
    decoder_->start(out);
    csv_scan<csv_row_decoder<Row>> scan(bytes, delimiter_, *decoder_);
    const file_cursor next = scan.run(pos, from_row, to_row);
    if (next.row != to_row) fewer_records(source_, e);
    return next;
  }

  void close() noexcept { decoder_.reset(); }

 private:
  std::optional<csv_row_decoder<Row>> decoder_;
  std::string_view source_;
  char delimiter_ = ',';
  std::uint64_t header_rows_ = 0;
};

}  // namespace flowlib::detail
