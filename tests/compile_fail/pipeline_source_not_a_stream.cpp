// R-USING-9: a pipeline flow reads a stream, a source with positions; a
// container of rows is not one.
// expect-error: a flow reads a stream, a source with positions
#include <flowlib/checkpoint/memory.hpp>
#include <flowlib/flows/replace_using.hpp>
#include <flowlib/pipeline.hpp>
#include <flowlib/source/memory.hpp>

#include <cstdint>
#include <vector>

struct Row {
  std::int64_t id;
  std::int64_t seq;
};
FLOWLIB_SCHEMA(Row, id, seq);

int main() {
#ifdef FLOWLIB_CONTROL
  flowlib::MemorySource<Row> feed{"feed"};
#else
  std::vector<Row> feed{{1, 1}};
#endif
  flowlib::StreamingTable<Row> t{"t"};
  flowlib::MemoryCheckpoint ckpt;
  flowlib::Pipeline p{"p", ckpt};
  p.flow("f").from(feed).into(t, flowlib::ReplaceUsing<flowlib::Key<&Row::id>, flowlib::Seq<&Row::seq>>{"f"});
}
