// A flow policy takes the rows of its source: REPLACE USING its Key/Seq row
// type (here a source of another row type).
// expect-error: the flow policy does not take the source's rows
#include <flowlib/checkpoint/memory.hpp>
#include <flowlib/flows/replace_using.hpp>
#include <flowlib/pipeline.hpp>
#include <flowlib/source/memory.hpp>

#include <cstdint>

struct Row {
  std::int64_t id;
  std::int64_t seq;
};
FLOWLIB_SCHEMA(Row, id, seq);
struct Other {
  std::int64_t id;
  std::int64_t seq;
};
FLOWLIB_SCHEMA(Other, id, seq);

int main() {
#ifdef FLOWLIB_CONTROL
  flowlib::MemorySource<Row> feed{"feed"};
#else
  flowlib::MemorySource<Other> feed{"feed"};
#endif
  flowlib::StreamingTable<Row> t{"t"};
  flowlib::MemoryCheckpoint ckpt;
  flowlib::Pipeline p{"p", ckpt};
  p.flow("f").from(feed).into(t, flowlib::ReplaceUsing<flowlib::Key<&Row::id>, flowlib::Seq<&Row::seq>>{"f"});
}
