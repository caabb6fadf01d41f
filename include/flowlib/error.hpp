// flowlib/error.hpp
//
// flowlib::error is the one exception type flowlib throws for bad input and
// misuse found at run time. Its message names the flow, the column and the
// row's key where they apply, and says what was (not) changed. Exceptions
// thrown by user code (predicates, copy constructors) are not wrapped: they
// propagate unchanged, with the same all-or-nothing guarantee.
//
// A message that cites a rule (`(R-USING-7)`) cites the rule of that id in
// the repository's docs/semantics.md, where each rule has an anchor of its
// own: R-USING-7 is docs/semantics.md#r-using-7.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace flowlib {

/// @brief Machine-readable reason carried by flowlib::error.
enum class errc {
  /// A row's sequence column is null: docs/semantics.md#r-using-7, #r-cdc-5.
  null_sequence,
  /// An expectation with action `fail` was violated: docs/semantics.md#r-expect-1.
  expectation_failed,
  /// strict_sequence: two different changes share key and sequence:
  /// docs/semantics.md#r-cdc-5.
  tied_sequence,
  /// A snapshot's version is not above the last one: docs/semantics.md#r-cdc-8.
  version_not_increasing,
  /// A flow/target combination the rules forbid: docs/semantics.md#r-using-9,
  /// #r-table-1.
  invalid_target,
  /// Any other invalid configuration or input (a refused full refresh:
  /// docs/semantics.md#r-exact-5).
  invalid_argument,
  /// A checkpoint file or record is corrupt, truncated or of an unknown
  /// format version; it is left as it was: docs/pipelines.md#checkpoints.
  checkpoint_corrupt,
  /// A checkpoint was made by another pipeline or flow definition, or does
  /// not suit the tables (durable against volatile); left as it was:
  /// docs/pipelines.md#checkpoints.
  checkpoint_mismatch,
  /// Reading or writing a checkpoint failed (the system's error is in the
  /// message); the batch was not committed: docs/pipelines.md#checkpoints.
  checkpoint_io,
  /// Reading or writing a durable table's storage failed (the database's
  /// error is in the message); the batch was not committed and the table
  /// was left as it was: docs/pipelines.md#checkpoints.
  storage_io,
  /// A source record could not be decoded into the row type (bad JSON or
  /// CSV, a value of the wrong type, a missing column); the message names
  /// the source, the record (file and line, or partition and offset) and
  /// the column. The batch was not committed and the source position did
  /// not advance: docs/semantics.md#r-source-2.
  malformed_record,
  /// Reading a source failed (a file could not be read, a broker did not
  /// answer); the batch was not committed: docs/semantics.md#r-source-1.
  source_io,
  /// Records a committed or planned position names are gone from the
  /// source (deleted by retention, a file removed or changed after it was
  /// read); nothing is skipped silently: docs/semantics.md#r-source-3.
  source_data_lost,
  /// Writing to a sink's system failed (a Kafka produce); the batch was not
  /// committed and is delivered again: docs/semantics.md#r-sink-1.
  sink_io,
};

/// @brief Textual code of an errc, as it appears in messages and event logs.
constexpr std::string_view to_string(errc e) noexcept {
  switch (e) {
    case errc::null_sequence: return "NULL_SEQUENCE";
    case errc::expectation_failed: return "EXPECTATION_VIOLATION";
    case errc::tied_sequence: return "DUPLICATE_KEY_AND_SEQUENCE";
    case errc::version_not_increasing: return "SNAPSHOT_VERSION_NOT_INCREASING";
    case errc::invalid_target: return "INVALID_FLOW_TARGET";
    case errc::invalid_argument: return "INVALID_ARGUMENT";
    case errc::checkpoint_corrupt: return "CHECKPOINT_CORRUPT";
    case errc::checkpoint_mismatch: return "CHECKPOINT_MISMATCH";
    case errc::checkpoint_io: return "CHECKPOINT_IO_ERROR";
    case errc::storage_io: return "STORAGE_IO_ERROR";
    case errc::malformed_record: return "MALFORMED_RECORD";
    case errc::source_io: return "SOURCE_IO_ERROR";
    case errc::source_data_lost: return "SOURCE_DATA_LOST";
    case errc::sink_io: return "SINK_IO_ERROR";
  }
  return "UNKNOWN";
}

/// @brief The exception flowlib throws. what() is a complete sentence; the
/// parts are also available separately for programs that react to them.
class error : public std::runtime_error {
 public:
  error(errc code, std::string flow, std::string column, std::string key,
        std::string detail)
      : std::runtime_error(compose(code, flow, column, key, detail)),
        code_(code),
        flow_(std::move(flow)),
        column_(std::move(column)),
        key_(std::move(key)) {}

  errc code() const noexcept { return code_; }
  /// Name of the flow (or operator, or table) that rejected the input.
  const std::string& flow() const noexcept { return flow_; }
  /// Column or expectation concerned; empty when none applies.
  const std::string& column() const noexcept { return column_; }
  /// The offending row's key, rendered as `col=value, ...`; empty when none.
  const std::string& key() const noexcept { return key_; }

 private:
  static std::string compose(errc code, const std::string& flow,
                             const std::string& column, const std::string& key,
                             const std::string& detail) {
    std::string m = "flowlib: flow '" + flow + "': " + std::string(to_string(code));
    if (!column.empty()) m += ": column '" + column + "'";
    if (!key.empty()) m += " (row key " + key + ")";
    if (!detail.empty()) m += ": " + detail;
    return m;
  }

  errc code_;
  std::string flow_;
  std::string column_;
  std::string key_;
};

}  // namespace flowlib
