// A quarantine table holds flowlib::Quarantined<Row> rows.
// expect-error: a quarantine table holds flowlib::Quarantined<Row> rows
#include <flowlib/checkpoint/memory.hpp>
#include <flowlib/flows/append.hpp>
#include <flowlib/pipeline.hpp>
#include <flowlib/quarantine.hpp>
#include <flowlib/source/memory.hpp>

#include <cstdint>

struct Row {
  std::int64_t id;
  std::int64_t seq;
};
FLOWLIB_SCHEMA(Row, id, seq);

int main() {
  flowlib::MemorySource<Row> feed{"feed"};
  flowlib::StreamingTable<Row> t{"t"};
#ifdef FLOWLIB_CONTROL
  flowlib::StreamingTable<flowlib::Quarantined<Row>> q{"q"};
#else
  flowlib::StreamingTable<Row> q{"q"};
#endif
  flowlib::MemoryCheckpoint ckpt;
  flowlib::Pipeline p{"p", ckpt};
  p.flow("f")
      .from(feed)
      .quarantine(q, flowlib::expectations(flowlib::expect_or_quarantine("pos", [](const Row& r) { return r.id > 0; })))
      .into(t, flowlib::Append{"f"});
}
