// tests/support/event_json.hpp
//
// An event log read back as JSON by nlohmann::json, a parser independent of
// flowlib's writer (programs that include this link nlohmann_json):
//
//   flowtest::json_events captured;                   // every event
//   flowtest::json_events plans{"planning_information"};  // one event_type
//   pipeline.event_log(captured.log);
//   CHECK(captured.events[0]["state"] == "STARTED");
#pragma once

#include <flowlib/event_log.hpp>

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace flowtest {

struct json_events {
  explicit json_events(std::string event_type = {}) : type(std::move(event_type)) {}
  json_events(const json_events&) = delete;  // the log refers to this object
  json_events& operator=(const json_events&) = delete;

  std::string type;                   // the event_type kept; empty: every event
  std::vector<nlohmann::json> events;  // in the order they were written
  flowlib::EventLog log{[this](std::string_view line) {
    auto j = nlohmann::json::parse(line);
    if (type.empty() || j["event_type"] == type) events.push_back(std::move(j));
  }};
};

}  // namespace flowtest
