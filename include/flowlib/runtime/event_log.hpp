// flowlib/runtime/event_log.hpp
//
// flowlib::EventLog: what a pipeline did, as JSON lines, one event per line,
// for people and tools (jq) to read. docs/event-log.md describes every event
// and field.
//
// Format. Each event is one JSON object on one line ending in '\n', with
// snake_case keys; every event starts with `timestamp` (RFC 3339, UTC,
// milliseconds: "2026-12-05T07:15:03.123Z"), `pipeline`, `update_id` and
// `event_type`. The text is always valid JSON and valid UTF-8, whatever
// bytes a flow name or an error message holds: control characters are
// escaped and ill-formed UTF-8 is replaced by U+FFFD (detail/json.hpp), so
// one odd name never makes the rest of a log unreadable. Optional values
// that are absent are written null (a foreach-batch sink's `target`, a
// planning event's `reason`); `details` and `error` appear only on the
// events they belong to (a completed update, a failed update or flow).
//
// Sinks. A file, opened for appending (created when missing), so that the
// updates of one pipeline, run after run, make one log; each line is
// written with one write and flushed, so a reader following the file sees
// whole lines. Or a callback receiving each line without its '\n' (to a
// logging system, a test, a socket).
//
// Errors. Opening the file fails with flowlib::error (errc::invalid_argument)
// naming the path and what the system said. After that, writing an event
// throws only when the write itself fails (flowlib::error naming the file;
// the line may then be partly written) or when the callback throws (its
// exception propagates unchanged). Events are not buffered: an event whose
// call returned is in the file (or was given to the callback).
//
// Threads. Writes are serialised by a mutex: the pipeline's thread and a
// progress callback on another thread may write to one log; lines never
// interleave. One EventLog per file: two logs (or two processes) appending
// to one file may interleave long lines.
#pragma once

#include <flowlib/detail/config.hpp>
#include <flowlib/detail/json.hpp>
#include <flowlib/error.hpp>
#include <flowlib/stats.hpp>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

namespace flowlib {

/// @brief The state an update_progress event reports.
enum class update_state : std::uint8_t {
  started,    ///< "STARTED"
  completed,  ///< "COMPLETED": `details` is written
  failed,     ///< "FAILED": `error` is written
};

/// @brief The outcome of one flow's batch, in a flow_progress event.
enum class flow_status : std::uint8_t {
  /// "COMPLETED": the batch is committed, its counts are in the tables. An
  /// `error` is written too when the checkpoint store reported a failure
  /// after the commit record was stored (the batch still counts; the
  /// update fails).
  completed,
  failed,     ///< "FAILED": the batch was undone; `error` is written
  skipped,    ///< "SKIPPED": a ONCE flow that has already run
};

/// @brief An error in an event: `code` is flowlib's textual code
/// (to_string(errc), e.g. "CHECKPOINT_IO_ERROR"), `message` the sentence.
struct event_error {
  std::string code{};
  std::string message{};
};

/// @brief What a completed update did (its `details`).
struct update_details {
  std::uint64_t flows = 0;  ///< flows that ran
  std::uint64_t batches = 0;  ///< batches applied
  std::uint64_t rows = 0;  ///< rows read
};

/// @brief An update started, completed or failed.
struct update_progress_event {
  std::chrono::system_clock::time_point timestamp{};  ///< the update's logical clock
  std::string pipeline{};
  std::uint64_t update_id = 0;
  update_state state = update_state::started;
  update_details details{};  ///< written when state == completed
  event_error error{};  ///< written when state == failed
};

/// @brief The row counts of one flow's batch (its `metrics`).
using flow_metrics = FlowRowCounts;

/// @brief One flow ran (or failed, or skipped) one batch.
struct flow_progress_event {
  std::chrono::system_clock::time_point timestamp{};  ///< the update's logical clock
  std::string pipeline{};
  std::uint64_t update_id = 0;
  std::string flow{};
  std::string target{};  ///< empty for a foreach-batch sink: written null
  std::uint64_t batch_id = 0;
  flow_status status = flow_status::completed;
  std::string start_position{};  ///< source_position::to_string(), "0:12,1:40"
  std::string end_position{};
  double duration_ms = 0;
  flow_metrics metrics{};
  std::vector<ExpectationMetrics> expectations{};  ///< written as data_quality.expectations
  std::vector<StageMetrics> stages{};  ///< rows into and out of each stage, in order
  /// Written when status == failed, and on a completed batch whose commit
  /// was followed by a reported failure (code non-empty).
  event_error error{};
};

/// @brief How a flow's batch was planned (written by REPLACE WHERE; planned).
struct planning_information_event {
  std::chrono::system_clock::time_point timestamp{};  ///< the update's logical clock
  std::string pipeline{};
  std::uint64_t update_id = 0;
  std::string flow{};
  std::string technique{};  ///< e.g. "INCREMENTAL", "COMPLETE_RECOMPUTE"
  std::optional<std::string> reason{};  ///< null when absent
};

/// @brief "STARTED", "COMPLETED" or "FAILED".
constexpr std::string_view to_string(update_state s) noexcept {
  switch (s) {
    case update_state::started: return "STARTED";
    case update_state::completed: return "COMPLETED";
    case update_state::failed: return "FAILED";
  }
  return "UNKNOWN";
}

/// @brief "COMPLETED", "FAILED" or "SKIPPED".
constexpr std::string_view to_string(flow_status s) noexcept {
  switch (s) {
    case flow_status::completed: return "COMPLETED";
    case flow_status::failed: return "FAILED";
    case flow_status::skipped: return "SKIPPED";
  }
  return "UNKNOWN";
}

namespace detail {

/// The action of an expectation as the event log writes it. The default
/// branch names the one action beyond warn/drop/fail (quarantine).
constexpr std::string_view expectation_action_name(on_violation a) noexcept {
  switch (a) {
    case on_violation::warn: return "warn";
    case on_violation::drop: return "drop";
    case on_violation::fail: return "fail";
    default: return "quarantine";
  }
}

/// `t` as RFC 3339 in UTC with milliseconds (truncated):
/// "2026-12-05T07:15:03.123Z".
FLOWLIB_DECL std::string rfc3339_utc_ms(std::chrono::system_clock::time_point t);

}  // namespace detail

/// @brief The pipeline's event log: JSON lines to a file or a callback.
/// See the header comment. Movable; a moved-from log may only be assigned
/// to or destroyed.
class EventLog {
 public:
  /// @brief Appends to `file`, creating it when missing. Throws
  /// flowlib::error (errc::invalid_argument) naming the path and the
  /// system's reason when it cannot be opened.
  FLOWLIB_DECL explicit EventLog(std::filesystem::path file);

  /// @brief Gives each line, without its trailing '\n', to `sink`. The
  /// sink's exceptions propagate out of the call that wrote the event; an
  /// empty `sink` is refused (errc::invalid_argument).
  FLOWLIB_DECL explicit EventLog(std::function<void(std::string_view line)> sink);

  /// @brief Writes an update_progress event.
  FLOWLIB_DECL void update_progress(const update_progress_event& e);

  /// @brief Writes a flow_progress event.
  FLOWLIB_DECL void flow_progress(const flow_progress_event& e);

  /// @brief Writes a planning_information event.
  FLOWLIB_DECL void planning_information(const planning_information_event& e);

  /// @brief Events written so far by this object (a failed write is not
  /// counted).
  std::uint64_t events_written() const noexcept {
    return state_ ? state_->written.load(std::memory_order_relaxed) : 0;
  }

 private:
  struct file_closer {
    void operator()(std::FILE* f) const noexcept { std::fclose(f); }
  };
  // Behind a pointer so that the log is movable (the mutex is not).
  struct state {
    std::mutex mutex;
    std::filesystem::path path;
    std::unique_ptr<std::FILE, file_closer> file;  // null with a callback sink
    std::function<void(std::string_view)> sink;
    std::atomic<std::uint64_t> written{0};
  };

  // An event's line: its object opened with the fields every event has...
  template <class Event>
  static detail::json_writer begin(const Event& e, std::string_view event_type) {
    detail::json_writer w;
    w.begin_object();
    w.key("timestamp").value(detail::rfc3339_utc_ms(e.timestamp));
    w.key("pipeline").value(e.pipeline);
    w.key("update_id").value(e.update_id);
    w.key("event_type").value(event_type);
    return w;
  }
  // ...and closed and written.
  FLOWLIB_DECL void end(detail::json_writer& w);

  FLOWLIB_DECL static void write_error(detail::json_writer& w, const event_error& e);

  FLOWLIB_DECL void emit(std::string line);

  std::unique_ptr<state> state_;
};

}  // namespace flowlib

#if !defined(FLOWLIB_SEPARATE_COMPILATION)
#include <flowlib/runtime/impl/event_log.ipp>
#endif
