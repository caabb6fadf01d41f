// R-TABLE-1: in a typed pipeline, a flow other than an append flow into a
// managed table fails to compile with the reference code.
// expect-error: MANAGED_TABLE_DOES_NOT_SUPPORT_CDC
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
  flowlib::ManagedTable<Row> t{"t"};
  flowlib::MemoryCheckpoint ckpt;
  flowlib::Pipeline p{"p", ckpt};
#ifdef FLOWLIB_CONTROL
  p.flow("f").from(feed).into(t, flowlib::Append{"f"});
#else
  p.flow("f").from(feed).into(t, flowlib::ReplaceUsing<flowlib::Key<&Row::id>, flowlib::Seq<&Row::seq>>{"f"});
#endif
}
