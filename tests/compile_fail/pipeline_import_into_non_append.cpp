// R-TABLE-4: IMPORT CHECKPOINT is allowed only on append flows.
// expect-error: IMPORT CHECKPOINT is allowed only on append flows
#include <flowlib/checkpoint/memory.hpp>
#include <flowlib/flows/append.hpp>
#include <flowlib/flows/replace_using.hpp>
#include <flowlib/pipeline.hpp>
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
  flowlib::MemoryCheckpoint ckpt;
  flowlib::MemoryCheckpoint stream;
  flowlib::Pipeline p{"p", ckpt};
#ifdef FLOWLIB_CONTROL
  p.flow("f").from(feed).import_checkpoint(stream, "s").into(t, flowlib::Append{"f"});
#else
  p.flow("f").from(feed).import_checkpoint(stream, "s").into(
      t, flowlib::ReplaceUsing<flowlib::Key<&Row::id>, flowlib::Seq<&Row::seq>>{"f"});
#endif
}
