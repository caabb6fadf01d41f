// R-WHERE-9: a REPLACE WHERE flow into a managed table fails to compile in a
// pipeline with the reference error code, naming REPLACE WHERE.
// expect-error: MANAGED_TABLE_DOES_NOT_SUPPORT_CDC.*REPLACE WHERE
#include <flowlib/checkpoint/memory.hpp>
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

int main() {
  fl::MemorySource<Event> raw{"raw"};
#ifdef FLOWLIB_CONTROL
  fl::StreamingTable<Event> t{"t"};
#else
  fl::ManagedTable<Event> t{"t"};
#endif
  fl::MemoryCheckpoint ck;
  fl::Pipeline p{"p", ck};
  p.flow("f")
      .from(raw)
      .query([](std::span<const Event> es) { return std::vector<Event>(es.begin(), es.end()); })
      .into(t, fl::ReplaceWhere{w::col("event_date") >= w::current_date() - w::days(3)});
}
