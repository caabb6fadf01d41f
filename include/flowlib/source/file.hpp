// flowlib/source/file.hpp
//
// flowlib::FileSource<Row>: the files of a directory whose names match a
// pattern, JSON lines or CSV, each record read once, exactly once across
// restarts (R-SOURCE-1..4). It meets the `flowlib::source` concept
// (source/position.hpp). Link flowlib::files (simdjson, libcsv).
//
//   fl::FileSource<Order> orders{"orders", {.directory = "/data/orders", .pattern = "*.jsonl"}};
//   pipeline.flow("orders_bronze").from(orders).into(bronze, fl::Append{"orders_bronze"});
//
// Files and positions. latest() lists the directory: each file matching
// `pattern` (fnmatch on the name) that is not in the source's list yet is
// read once to count its records and compute its checksum, and is added to
// the end of the list; the files found by one listing are ordered among
// themselves by name, or by modification time then name. Names starting
// with '.' or '_' are never listed, nor is anything but a regular file
// (sub-directories are not entered). The source has one partition (0); its
// offset is a record number across the whole list: file 0's records, then
// file 1's, and so on, so a position names the same record for ever. A
// file that changed while it was being counted (a writer still at work)
// is left for a later listing.
//
// Writing files into the directory: write elsewhere, or under a name the
// pattern does not match (a leading '.', a ".tmp" suffix), then rename it
// into place: rename is atomic, so a listing sees the whole file or
// nothing. A file is never read again once listed: to add records, add a
// file.
//
// The list in the checkpoint. Through attach() (called by the pipeline when
// it opens) the list lives in the pipeline's checkpoint under
// "sources/<hex of the name>/files/" (source/detail/file_manifest.hpp): per file
// its name, size, modification time (ns), first record number, record
// count and XXH64 checksum; one record per listing that found files,
// written before latest() returns a position that counts them. At attach
// the checkpoint's list, if it has one, replaces the one in memory (the
// checkpoint's positions refer to it). Before any pipeline (unattached),
// the list is in memory only. The checkpoint must stay alive while the
// source is attached to it (a later pipeline attaches the source again;
// detach() ends it without one).
//
// Reading. read(from, to) decodes exactly the records between the
// positions, across files. When it starts on a file it loads the file
// whole, and checks it is the listed one (size, modification time,
// checksum); it keeps the bytes and a cursor (byte offset, record number,
// line) while batches go through the file, so consecutive batches of a
// large file do not parse it again from its beginning (a batch that starts
// elsewhere, a replay, parses from the file's start, skipping records
// without decoding them). A file is held in memory while it is read, and
// the buffer is kept for the next file (as large as the largest file read
// so far: fresh pages cost a fault each, which can cost more than the
// read itself): keep files to sizes that fit comfortably (split larger
// exports).
//
// Lost and changed files (R-SOURCE-3). A listed file that is gone, or
// whose size, modification time or checksum differs, when a batch needs
// records of it fails that batch with errc::source_data_lost naming the
// file; nothing is read and nothing is skipped. A file changed or removed
// after all its records were read is never read again. changed_files()
// reports every listed file that, at the last listing, was gone, no longer
// a regular file, or of another size or modification time than when it was
// listed, whether its records were read or not (recomputed at each
// listing; no checksum is computed for it).
//
// JSON lines. One JSON object per line, decoded through simdjson ondemand
// and detail::json_to_row (source/detail/json_lines.hpp, json_row.hpp:
// keys by FLOWLIB_SCHEMA column name). A batch's records are parsed as one document stream
// (iterate_many, in place) as long as each document is exactly its line;
// from a line that is not (two values, an object running over lines, a
// syntax error, a record that does not decode) the batch goes on line by
// line, so every message names its own line. Blank lines (spaces, tabs,
// CR only) are not records. A last line without '\n' is a record: files are
// complete when they are renamed in, so a missing final newline is a
// writer's habit, not a cut (a cut line fails to decode, loudly).
//
// CSV. Records as libcsv parses them (source/detail/csv_records.hpp: RFC 4180
// quoting, quoted delimiters, quotes and line breaks; CR, LF or CRLF;
// blank lines skipped; spaces around unquoted fields dropped). With
// csv_header (the default) the first record names the columns, matched
// exactly to the schema's names: unknown columns are ignored (or rescued);
// a column missing from the header is std::nullopt if it is a
// std::optional, else the file's first read fails naming the file and the
// column. Without a header, fields map to the schema's columns in order
// (the rescued column left out). Each field goes through detail::parse_text
// (source/detail/text_value.hpp): an empty field is std::nullopt for an optional,
// "" for a string, an error for anything else.
//
// Bad records (R-SOURCE-2). A record that cannot be decoded fails the
// batch with errc::malformed_record naming the source, the file, the line
// and the column (the batch is not committed and the position stays; the
// file cannot be fixed in place, since a changed file is lost data: the
// error repeats until the program changes course, for instance by turning
// rescue on, which keeps the record numbers). With options.rescue,
// the row type's rescued column (std::string or std::optional<std::string>)
// takes the values that could not be stored as a JSON object text
// {"<column>":<value>,...} (JSON values as written; CSV fields as strings),
// the columns themselves value-initialised; with rescue_unknown, unknown
// keys and columns too. A record that cannot be decoded at all (not JSON,
// not an object, a non-optional key missing, a CSV record with the wrong
// number of fields) becomes a row with value-initialised columns and the
// rescued text {"_raw":"<the record>","_file":"<name>","_line":<n>}. A JSON
// line is JSON only as a whole: a token that is not JSON under any key
// (one that names no column, or nested in a value, included) fails the
// record in strict mode and makes it a _raw row in rescue mode; only JSON
// values are rescued as written, so the rescued column always parses as
// JSON (source/detail/json_row.hpp). A
// program sends such rows to a quarantine table with a `.map(fn, table)`
// stage that throws flowlib::row_rejected for a row whose rescued column is
// set, or drops them with a `.filter` (docs/file-source.md).
//
// Threads. Every member may be called from any thread; one mutex guards the
// list and the cursor (a read holds it while it decodes). The source is
// neither copyable nor movable.
#pragma once

#include <flowlib/checkpoint/store.hpp>
#include <flowlib/detail/type_traits.hpp>
#include <flowlib/error.hpp>
#include <flowlib/schema.hpp>
#include <flowlib/source/detail/csv_records.hpp>
#include <flowlib/source/detail/file_manifest.hpp>
#include <flowlib/source/detail/json_lines.hpp>
#include <flowlib/source/detail/text_value.hpp>
#include <flowlib/source/position.hpp>

#include <simdjson.h>

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_set>
#include <utility>
#include <vector>

namespace flowlib {

/// @brief The format of a FileSource's files.
enum class file_format : std::uint8_t {
  json_lines,  ///< one JSON object per line
  csv,         ///< RFC 4180 CSV, through libcsv
};

/// @brief The order of the files one listing finds (files found by earlier
/// listings always come first).
enum class file_order : std::uint8_t {
  name,                ///< by name (bytewise)
  modified_then_name,  ///< by modification time, then name
};

/// @brief Options of a FileSource.
struct FileSourceOptions {
  std::filesystem::path directory;          ///< the directory listed (not its sub-directories)
  std::string pattern = "*";                ///< fnmatch pattern on file names
  file_format format = file_format::json_lines;
  file_order order = file_order::name;
  /// Keep undecodable values and records in `rescued_column` instead of
  /// failing the batch (see the header comment).
  bool rescue = false;
  /// With rescue: unknown JSON keys and CSV columns are rescued too.
  bool rescue_unknown = false;
  /// The row's column (std::string or std::optional<std::string>) that
  /// takes rescued values.
  std::string rescued_column = "_rescued_data";
  char csv_delimiter = ',';  ///< CSV only
  bool csv_header = true;    ///< CSV only: the first record names the columns
};

/// @brief A file of a FileSource's list (see files()).
struct listed_file {
  std::string name;
  std::uint64_t size = 0;           ///< bytes, when listed
  std::int64_t mtime_ns = 0;        ///< modification time when listed, ns since 1970
  std::uint64_t first_record = 0;   ///< the offset of its first record
  std::uint64_t records = 0;
  std::uint64_t checksum = 0;       ///< XXH64 of its bytes
};

/// @brief How a listed file differs from what was listed.
enum class file_change : std::uint8_t { modified, removed };

/// @brief A listed file found changed or gone (see changed_files()).
struct changed_file {
  std::string name;
  file_change change = file_change::modified;
  std::uint64_t first_record = 0;
  std::uint64_t records = 0;
};

/// @brief The files of a directory as a source of rows; see the header
/// comment.
template <class Row>
class FileSource {
  static_assert(has_schema<Row>,
                "FileSource<Row>: Row needs FLOWLIB_SCHEMA(Row, columns...): records are decoded "
                "by column name");
  static_assert(std::default_initializable<Row> && std::move_constructible<Row>,
                "FileSource<Row>: Row must be default-constructible and movable (rows are "
                "value-initialised, then decoded in place)");

  template <class... Cols>
  static constexpr bool all_parsable(detail::type_list<Cols...>) {
    return (detail::text_parsable<typename Cols::value_type> && ...);
  }
  static_assert(all_parsable(typename schema_of<Row>::columns{}),
                "FileSource<Row>: every FLOWLIB_SCHEMA column must be bool, an integer, an enum, "
                "float, double, std::string, std::chrono::sys_days, a system_clock time point with "
                "an integral count, or std::optional of one of them; leave other members out of "
                "the schema");

  using S = schema_of<Row>;

 public:
  using row_type = Row;

  /// @brief A source called `name` (messages, the event log, and its
  /// records in the checkpoint) reading `options.directory`. Throws
  /// flowlib::error (errc::invalid_argument) for an empty directory or
  /// pattern, a CSV delimiter that cannot be one, or, with rescue, a
  /// rescued column Row does not have as a string column.
  FileSource(std::string name, FileSourceOptions options)
      : name_(std::move(name)), options_(std::move(options)) {
    if (options_.directory.empty()) fail("options.directory is empty");
    if (options_.pattern.empty()) fail("options.pattern is empty (\"*\" matches every name)");
    const char d = options_.csv_delimiter;
    if (d == '"' || d == '\r' || d == '\n' || d == ' ' || d == '\0')
      fail("options.csv_delimiter cannot be a quote, a space, a line break or NUL");
    if (options_.rescue) find_rescued_column();
    format_.format = options_.format == file_format::csv ? 1 : 0;
    format_.csv_header = options_.csv_header;
    format_.delimiter = options_.csv_delimiter;
  }

  FileSource(const FileSource&) = delete;
  FileSource& operator=(const FileSource&) = delete;

  /// @brief The position before the first record: offset 0.
  source_position start() const { return source_position::at(0); }

  /// @brief Lists the directory (new files are counted and added to the
  /// list, which is written to the attached checkpoint) and returns the
  /// position after the last listed record. Throws errc::source_io when the
  /// directory or a new file cannot be read, errc::checkpoint_io when the
  /// list cannot be written (nothing new is then returned).
  source_position latest() const {
    std::lock_guard lock(mutex_);
    list_locked();
    persist_locked();
    return source_position::at(visible_end_locked());
  }

  /// @brief The end of the next batch from `from`: at most `limit` records
  /// (all when 0), up to the last listed record. Throws
  /// errc::invalid_argument for a position this source cannot have.
  source_position plan(const source_position& from, std::size_t limit) const {
    std::lock_guard lock(mutex_);
    const std::uint64_t end = visible_end_locked();
    const std::uint64_t f = checked_offset(from, end, "plan");
    return source_position::at(limit == 0 ? end : std::min<std::uint64_t>(end, f + limit));
  }

  /// @brief Appends to `out` the records between `from` and `to` (see the
  /// header comment). Throws errc::malformed_record, errc::source_data_lost,
  /// errc::source_io (see the header comment) or errc::invalid_argument for
  /// positions this source cannot have; `out` is then as it was.
  void read(const source_position& from, const source_position& to, std::vector<Row>& out) const {
    std::lock_guard lock(mutex_);
    const std::uint64_t end = visible_end_locked();
    const std::uint64_t f = checked_offset(from, end, "read");
    const std::uint64_t t = checked_offset(to, end, "read");
    if (t < f) fail(detail::file_message({"read: position ", to.to_string(), " is before ", from.to_string()}));
    if (f == t) return;
    const std::size_t before = out.size();
    out.reserve(before + static_cast<std::size_t>(t - f));
    try {
      std::uint64_t at = f;
      // The first file holding record `at` (files without records are skipped).
      auto it = std::partition_point(files_.begin(), files_.end(),
                                     [&](const detail::file_entry& e) { return e.end() <= at; });
      for (auto i = static_cast<std::size_t>(it - files_.begin()); at < t; ++i) {
        const detail::file_entry& e = files_[i];
        if (e.count == 0) continue;
        const std::uint64_t stop = std::min(t, e.end());
        read_file(i, at, stop, out);
        at = stop;
      }
    } catch (...) {
      out.erase(out.begin() + static_cast<std::ptrdiff_t>(before), out.end());
      throw;
    }
  }

  /// @brief exactly_once: each record is read once (R-EXACT-3).
  flowlib::delivery delivery() const noexcept { return delivery::exactly_once; }
  /// @brief The source's name.
  const std::string& name() const noexcept { return name_; }
  /// @brief The options it was made with.
  const FileSourceOptions& options() const noexcept { return options_; }

  /// @brief Called by the pipeline when it opens: loads the list from
  /// `store` (when it holds one) and writes later listings there (see the
  /// header comment). Throws errc::checkpoint_corrupt for a list that does
  /// not decode or does not add up, errc::checkpoint_mismatch for a list
  /// made for another format.
  void attach(checkpoint_store& store) const {
    std::lock_guard lock(mutex_);
    const std::string dir = detail::manifest_dir(name_);
    std::vector<detail::file_entry> loaded;
    for (const std::string& rec : store.list(dir)) {
      const std::string path = dir + "/" + rec;
      const std::string where = detail::checkpoint_where(path, store.describe());
      if (!detail::manifest_record_index(rec)) corrupt(where, "not a file list record");
      const auto payload = store.read(path);
      if (!payload) continue;
      detail::manifest_chunk c = detail::decode_manifest(*payload, where);
      if (!(c.format == format_)) {
        throw error(errc::checkpoint_mismatch, name_, "", "",
                    detail::file_message({"the ", store.describe(), " holds this source's file list made for ",
                                          describe(c.format), ", but the source reads ", describe(format_),
                                          ": its record numbers would name other records; keep the "
                                          "format, or give the source another name"}));
      }
      if (c.first_index != loaded.size()) corrupt(where, "the file list has a gap");
      for (detail::file_entry& e : c.files) {
        const std::uint64_t expected = loaded.empty() ? 0 : loaded.back().end();
        if (e.first != expected) corrupt(where, "the file list's record numbers do not add up");
        loaded.push_back(std::move(e));
      }
    }
    if (!loaded.empty()) {
      files_ = std::move(loaded);
      names_.clear();
      for (const auto& e : files_) names_.insert(e.name);
      persisted_ = files_.size();
      changed_.clear();
      close_file();
    } else {
      persisted_ = 0;  // the list in memory goes to the store at the next listing
    }
    store_ = &store;
  }

  /// @brief Stops writing the list to the checkpoint given to attach() (the
  /// list stays in memory).
  void detach() const noexcept {
    std::lock_guard lock(mutex_);
    store_ = nullptr;
  }

  /// @brief The listed files, in record order.
  std::vector<listed_file> files() const {
    std::lock_guard lock(mutex_);
    std::vector<listed_file> out;
    out.reserve(files_.size());
    for (const auto& e : files_)
      out.push_back(listed_file{e.name, e.size, e.mtime_ns, e.first, e.count, e.checksum});
    return out;
  }

  /// @brief The listed files that, at the last listing, were gone or
  /// differed in size or modification time from when they were listed (see
  /// the header comment), in record order.
  std::vector<changed_file> changed_files() const {
    std::lock_guard lock(mutex_);
    return changed_;
  }

 private:
  using setter_fn = void (*)(Row&, std::string&&);

  [[noreturn]] void fail(const std::string& detail) const {
    throw error(errc::invalid_argument, name_, "", "", detail);
  }
  [[noreturn]] static void corrupt(const std::string& where, const std::string& what) {
    detail::checkpoint_corrupt(where, what);
  }
  static std::string describe(const detail::manifest_format& f) {
    if (f.format == 0) return "JSON lines";
    std::string s = "CSV with delimiter '";
    s += f.delimiter;
    s += f.csv_header ? "' and a header" : "' and no header";
    return s;
  }

  // The rescued column: its index and its setter, or an error.
  void find_rescued_column() {
    bool found = false;
    S::for_each([&](auto col) {
      using Col = decltype(col);
      using T = typename Col::value_type;
      if (Col::name != options_.rescued_column) return;
      found = true;
      if constexpr (std::is_same_v<T, std::string> || std::is_same_v<T, std::optional<std::string>>) {
        rescued_index_ = S::index_of(Col::name);
        set_rescued_ = [](Row& r, std::string&& text) { Col::get(r) = std::move(text); };
      }
    });
    if (!found)
      fail(detail::file_message({"options.rescue: the row type has no column '", options_.rescued_column,
                                 "' (options.rescued_column) to take rescued values; add a std::string "
                                 "or std::optional<std::string> column of that name to the row and its "
                                 "FLOWLIB_SCHEMA"}));
    if (set_rescued_ == nullptr)
      fail(detail::file_message({"options.rescue: column '", options_.rescued_column,
                                 "' must be a std::string or std::optional<std::string> to take "
                                 "rescued values"}));
  }

  // Partition 0's offset of `p`, checked: no other partition, not beyond `end`.
  std::uint64_t checked_offset(const source_position& p, std::uint64_t end, const char* what) const {
    for (const auto& [part, off] : p.partitions())
      if (part != 0 && off != 0)
        fail(std::string(what) + ": position " + p.to_string() +
             " names partition " + std::to_string(part) + "; a file source has partition 0 only");
    const std::uint64_t o = p.offset(0);
    if (o > end)
      fail(std::string(what) + ": position " + p.to_string() + " is beyond the last listed record (" +
           std::to_string(end) + " records in " + std::to_string(files_.size()) + " files)");
    return o;
  }

  // The end of the records a position may name: those of the files written
  // to the attached checkpoint (all, unattached).
  std::uint64_t visible_end_locked() const noexcept {
    const std::size_t n = store_ != nullptr ? persisted_ : files_.size();
    return n == 0 ? 0 : files_[n - 1].end();
  }

  // --- Listing ---------------------------------------------------------------------

  void list_locked() const {
    std::vector<std::string> names = detail::matching_names(options_.directory, options_.pattern, name_);
    // Files already listed: gone or changed? (Each is looked at, whether
    // the pattern still matches it or not.)
    {
      changed_.clear();
      for (const auto& e : files_) {
        const auto id = detail::stat_file((options_.directory / e.name).string(), name_);
        if (!id) {
          changed_.push_back(changed_file{e.name, file_change::removed, e.first, e.count});
        } else if (id->size != e.size || id->mtime_ns != e.mtime_ns || !id->regular) {
          changed_.push_back(changed_file{e.name, file_change::modified, e.first, e.count});
        }
      }
    }
    std::vector<detail::file_entry> found;
    for (const std::string& n : names) {
      if (names_.count(n) != 0) continue;
      std::optional<detail::file_entry> e;
      if (options_.format == file_format::csv) {
        detail::csv_row_counter counter(options_.csv_delimiter, options_.csv_header);
        e = detail::count_file(options_.directory, n, counter, block_, name_);
      } else {
        detail::json_line_counter counter;
        e = detail::count_file(options_.directory, n, counter, block_, name_);
      }
      if (e) found.push_back(std::move(*e));
    }
    if (found.empty()) return;
    if (options_.order == file_order::name) {
      std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
    } else {
      std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) {
        return a.mtime_ns != b.mtime_ns ? a.mtime_ns < b.mtime_ns : a.name < b.name;
      });
    }
    std::uint64_t next = files_.empty() ? 0 : files_.back().end();
    files_.reserve(files_.size() + found.size());
    for (auto& e : found) {
      e.first = next;
      next += e.count;
      names_.insert(e.name);
      files_.push_back(std::move(e));
    }
  }

  // Writes the files listed since the last write to the attached checkpoint.
  void persist_locked() const {
    if (store_ == nullptr || persisted_ == files_.size()) return;
    const std::string dir = detail::manifest_dir(name_);
    store_->write(detail::manifest_record(dir, persisted_),
                  detail::encode_manifest(format_, persisted_, files_.data() + persisted_,
                                          files_.size() - persisted_));
    persisted_ = files_.size();
  }

  // --- Reading ---------------------------------------------------------------------

  // The file whose bytes are held, and where the cursor is in it: `pos.row`
  // counts the file's records before `pos.byte` (for CSV, libcsv's rows,
  // the header included).
  struct open_file {
    std::size_t index = static_cast<std::size_t>(-1);
    std::string name;
    detail::file_bytes bytes;
    detail::file_cursor pos;
    detail::csv_file_reader<Row> csv;  // CSV: the file's header and mapping
  };

  std::uint64_t header_rows() const noexcept {
    return options_.format == file_format::csv && options_.csv_header ? 1 : 0;
  }

  void close_file() const {
    cur_.csv.close();
    cur_.bytes.size = 0;  // the allocation stays, for the next file
    cur_.index = static_cast<std::size_t>(-1);
  }

  // Loads file i and places the cursor before its first record.
  void open_file_at(std::size_t i) const {
    close_file();
    const detail::file_entry& e = files_[i];
    detail::load_file(options_.directory, e, simdjson::SIMDJSON_PADDING, name_, cur_.bytes);
    cur_.name = e.name;
    cur_.pos = detail::file_cursor{};
    if (options_.format == file_format::csv) {
      detail::csv_decode_options o;
      o.delimiter = options_.csv_delimiter;
      o.header = options_.csv_header;
      o.rescue = options_.rescue;
      o.rescue_unknown = options_.rescue_unknown;
      o.rescued_column = options_.rescued_column;
      cur_.pos = cur_.csv.open(name_, cur_.name, cur_.bytes.view(), o,
                               options_.rescue ? rescued_index_ : S::size, set_rescued_);
    }
    cur_.index = i;
  }

  // Reads records [at, stop) of file i (all within it) into `out`.
  void read_file(std::size_t i, std::uint64_t at, std::uint64_t stop, std::vector<Row>& out) const {
    const detail::file_entry& e = files_[i];
    const std::uint64_t hr = header_rows();
    // The cursor serves when it is in this file at or before `at`.
    if (cur_.index != i || e.first + (cur_.pos.row - hr) > at) open_file_at(i);
    if (options_.format == file_format::csv) {
      cur_.pos = cur_.csv.read(e, cur_.bytes.view(), cur_.pos, at, stop, out);
    } else {
      detail::json_row_options o;
      o.rescue = options_.rescue;
      o.rescue_unknown = options_.rescue_unknown;
      o.rescued_column = options_.rescued_column;
      cur_.pos = json_.read(name_, e, cur_.bytes, cur_.pos, at, stop, o, set_rescued_, out);
    }
    if (stop == e.end()) close_file();  // done with it: free its bytes
  }

  std::string name_;
  FileSourceOptions options_;
  detail::manifest_format format_;
  std::size_t rescued_index_ = S::size;
  setter_fn set_rescued_ = nullptr;

  mutable std::mutex mutex_;
  mutable std::vector<detail::file_entry> files_;
  mutable std::unordered_set<std::string> names_;
  mutable std::size_t persisted_ = 0;  // files_ written to store_
  mutable checkpoint_store* store_ = nullptr;
  mutable std::vector<changed_file> changed_;
  mutable open_file cur_;
  mutable std::vector<char> block_;  // the counting pass's buffer
  mutable detail::json_lines_reader<Row> json_;  // JSON lines: the decoder, kept across batches
};

}  // namespace flowlib
