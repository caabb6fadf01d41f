// flowlib/runtime/impl/event_log.ipp
//
// The definitions runtime/event_log.hpp declares: inline in header-only mode,
// compiled once by src/flowlib.cpp under FLOWLIB_SEPARATE_COMPILATION
// (detail/config.hpp).
#pragma once

#include <flowlib/runtime/event_log.hpp>

namespace flowlib {

namespace detail {

FLOWLIB_DECL std::string rfc3339_utc_ms(std::chrono::system_clock::time_point t) {
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

FLOWLIB_DECL EventLog::EventLog(std::filesystem::path file)
    : state_(std::make_unique<state>()) {
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

FLOWLIB_DECL EventLog::EventLog(std::function<void(std::string_view line)> sink)
    : state_(std::make_unique<state>()) {
  if (!sink)
    throw error(errc::invalid_argument, "event log", "", "",
                "the line sink is empty: pass a callable that takes each line");
  state_->sink = std::move(sink);
}

FLOWLIB_DECL void EventLog::update_progress(const update_progress_event& e) {
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

FLOWLIB_DECL void EventLog::flow_progress(const flow_progress_event& e) {
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

FLOWLIB_DECL void EventLog::planning_information(const planning_information_event& e) {
  detail::json_writer w = begin(e, "planning_information");
  w.key("flow").value(e.flow);
  w.key("technique").value(e.technique);
  w.key("reason").value_or_null(e.reason);
  end(w);
}

FLOWLIB_DECL void EventLog::end(detail::json_writer& w) {
  w.end_object();
  emit(w.take());
}

FLOWLIB_DECL void EventLog::write_error(detail::json_writer& w, const event_error& e) {
  w.key("error").begin_object();
  w.key("code").value(e.code);
  w.key("message").value(e.message);
  w.end_object();
}

FLOWLIB_DECL void EventLog::emit(std::string line) {
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

}  // namespace flowlib
