// The rows and pieces of the REPLACE WHERE negative tests: events by date,
// the identity query, and a flow replacing the last three days.
#pragma once

#include <flowlib/checkpoint/memory.hpp>
#include <flowlib/expect.hpp>
#include <flowlib/flows/replace_where.hpp>
#include <flowlib/pipeline.hpp>
#include <flowlib/source/memory.hpp>
#include <flowlib/table.hpp>
#include <flowlib/where.hpp>

#include <chrono>
#include <cstdint>
#include <span>
#include <vector>

namespace fl = flowlib;
namespace w = flowlib::where;

struct Event {
  std::chrono::sys_days event_date;
  std::int64_t amount;
};
FLOWLIB_SCHEMA(Event, event_date, amount);

inline std::vector<Event> all_events(std::span<const Event> es) { return {es.begin(), es.end()}; }

inline auto last_three_days() {
  return fl::ReplaceWhere{w::col("event_date") >= w::current_date() - w::days(3)};
}

/// A pipeline, its checkpoint, a source of events and a target table.
template <class Table = fl::StreamingTable<Event>>
struct pipeline_rig {
  fl::MemorySource<Event> raw{"raw"};
  Table t{"t"};
  fl::MemoryCheckpoint ck;
  fl::Pipeline p{"p", ck};
};

/// An expectation on the events (a REPLACE WHERE flow takes none).
inline auto positive_amounts() {
  return fl::expectations(fl::expect("positive", [](const Event& e) { return e.amount > 0; }));
}
