// R-WHERE-9: a standalone REPLACE WHERE flow applied to a managed table
// fails to compile with the reference error code.
// expect-error: MANAGED_TABLE_DOES_NOT_SUPPORT_CDC.*REPLACE WHERE
#include <flowlib/flows/replace_where.hpp>
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
  fl::ReplaceWhere flow{w::col("event_date") >= w::current_date() - w::days(3)};
  flow.apply(t, w::context{}, [](std::span<const Event> es) { return std::vector<Event>(es.begin(), es.end()); },
             raw);
}
