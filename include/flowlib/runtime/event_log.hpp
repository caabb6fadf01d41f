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
inline std::string rfc3339_utc_ms(std::chrono::system_clock::time_point t) {
  using namespace std::chrono;
  const auto ms = floor<milliseconds>(t);
  const auto day = floor<days>(ms);
  const year_month_day ymd{day};
  const hh_mm_ss<milliseconds> tod{ms - day};
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02u-%02uT%02d:%02d:%02d.%03dZ", static_cast<int>(ymd.year()),
                static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()),
                static_cast<int>(tod.hours().count()), static_cast<int>(tod.minutes().count()),
                static_cast<int>(tod.seconds().count()),
                static_cast<int>(tod.subseconds().count()));
  return buf;
}

}  // namespace detail

/// @brief The pipeline's event log: JSON lines to a file or a callback.
/// See the header comment. Movable; a moved-from log may only be assigned
/// to or destroyed.
class EventLog {
 public:
  /// @brief Appends to `file`, creating it when missing. Throws
  /// flowlib::error (errc::invalid_argument) naming the path and the
  /// system's reason when it cannot be opened.
  explicit EventLog(std::filesystem::path file) : state_(std::make_unique<state>()) {
    state_->path = std::move(file);
    errno = 0;
    state_->file.reset(std::fopen(state_->path.string().c_str(), "ab"));
    if (!state_->file) {
      const int err = errno;
      throw error(errc::invalid_argument, "event log", "", "",
                  "cannot open '" + state_->path.string() + "' for appending: " +
                      (err ? std::error_code(err, std::generic_category()).message()
                           : std::string("unknown error")));
    }
  }

  /// @brief Gives each line, without its trailing '\n', to `sink`. The
  /// sink's exceptions propagate out of the call that wrote the event; an
  /// empty `sink` is refused (errc::invalid_argument).
  explicit EventLog(std::function<void(std::string_view line)> sink)
      : state_(std::make_unique<state>()) {
    if (!sink)
      throw error(errc::invalid_argument, "event log", "", "",
                  "the line sink is empty: pass a callable that takes each line");
    state_->sink = std::move(sink);
  }

  /// @brief Writes an update_progress event.
  void update_progress(const update_progress_event& e) {
    detail::json_writer w = begin(e, "update_progress");
    w.key("state").value(to_string(e.state));
    if (e.state == update_state::completed) {
      w.key("details").begin_object();
      w.key("flows").value(e.details.flows);
      w.key("batches").value(e.details.batches);
      w.key("rows").value(e.details.rows);
      w.end_object();
    } else if (e.state == update_state::failed) {
      write_error(w, e.error);
    }
    end(w);
  }

  /// @brief Writes a flow_progress event.
  void flow_progress(const flow_progress_event& e) {
    detail::json_writer w = begin(e, "flow_progress");
    w.key("flow").value(e.flow);
    w.key("target").value_or_null(e.target.empty() ? std::nullopt
                                                   : std::optional<std::string_view>(e.target));
    w.key("batch_id").value(e.batch_id);
    w.key("status").value(to_string(e.status));
    w.key("start_position").value(e.start_position);
    w.key("end_position").value(e.end_position);
    w.key("duration_ms").value(e.duration_ms);
    const auto& m = e.metrics;
    w.key("metrics").begin_object();
    w.key("num_input_rows").value(m.input_rows);
    w.key("num_output_rows").value(m.output_rows);
    w.key("num_upserted_rows").value(m.upserted_rows);
    w.key("num_deleted_rows").value(m.deleted_rows);
    w.key("num_dropped_rows").value(m.dropped_rows);
    w.key("num_quarantined_rows").value(m.quarantined_rows);
    w.key("num_deduplicated_rows").value(m.deduplicated_rows);
    w.key("num_late_rows").value(m.late_rows);
    w.key("num_filtered_rows").value(m.filtered_rows);
    w.key("num_unmatched_rows").value(m.unmatched_rows);
    w.end_object();
    w.key("stages").begin_array();
    for (const auto& st : e.stages) {
      w.begin_object();
      w.key("stage").value(st.stage);
      w.key("num_input_rows").value(st.input_rows);
      w.key("num_output_rows").value(st.output_rows);
      w.end_object();
    }
    w.end_array();
    w.key("data_quality").begin_object();
    w.key("expectations").begin_array();
    for (const auto& x : e.expectations) {
      w.begin_object();
      w.key("name").value(x.name);
      w.key("action").value(detail::expectation_action_name(x.action));
      w.key("passed_records").value(x.passed);
      w.key("failed_records").value(x.failed);
      w.end_object();
    }
    w.end_array();
    w.end_object();
    if (e.status == flow_status::failed || !e.error.code.empty()) write_error(w, e.error);
    end(w);
  }

  /// @brief Writes a planning_information event.
  void planning_information(const planning_information_event& e) {
    detail::json_writer w = begin(e, "planning_information");
    w.key("flow").value(e.flow);
    w.key("technique").value(e.technique);
    w.key("reason").value_or_null(e.reason);
    end(w);
  }

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
  void end(detail::json_writer& w) {
    w.end_object();
    emit(w.take());
  }

  static void write_error(detail::json_writer& w, const event_error& e) {
    w.key("error").begin_object();
    w.key("code").value(e.code);
    w.key("message").value(e.message);
    w.end_object();
  }

  void emit(std::string line) {
    std::lock_guard lock(state_->mutex);
    if (!state_->file) {
      state_->sink(std::string_view(line));
    } else {
      line += '\n';
      std::FILE* f = state_->file.get();
      errno = 0;
      const bool ok = std::fwrite(line.data(), 1, line.size(), f) == line.size() &&
                      std::fflush(f) == 0;
      if (!ok) {
        const int err = errno;
        std::clearerr(f);
        throw error(errc::invalid_argument, "event log", "", "",
                    "cannot write to '" + state_->path.string() + "': " +
                        (err ? std::error_code(err, std::generic_category()).message()
                             : std::string("unknown error")));
      }
    }
    state_->written.fetch_add(1, std::memory_order_relaxed);
  }

  std::unique_ptr<state> state_;
};

}  // namespace flowlib
