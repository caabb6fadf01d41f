// R-WHERE-9: expectations on a REPLACE WHERE flow fail to compile.
// expect-error: a REPLACE WHERE flow takes no expectations \(R-WHERE-9\)
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

int main() {
  fl::MemorySource<Event> raw{"raw"};
  fl::StreamingTable<Event> t{"t"};
  fl::MemoryCheckpoint ck;
  fl::Pipeline p{"p", ck};
  const auto query = [](std::span<const Event> es) { return std::vector<Event>(es.begin(), es.end()); };
  const auto flow = [] { return fl::ReplaceWhere{w::col("event_date") >= w::current_date() - w::days(3)}; };
#ifdef FLOWLIB_CONTROL
  p.flow("f").from(raw).query(query).into(t, flow());
#else
  p.flow("f")
      .from(raw)
      .expect(fl::expectations(fl::expect("positive", [](const Event& e) { return e.amount > 0; })))
      .query(query)
      .into(t, flow());
#endif
}
