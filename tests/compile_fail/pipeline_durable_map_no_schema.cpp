// A durable table stores its columns by name: a map into a row type without
// FLOWLIB_SCHEMA cannot write one (R-STAGE-1).
// expect-error: a durable table's row type needs FLOWLIB_SCHEMA
#include "shared/row.hpp"

#include <flowlib/storage/sqlite.hpp>

#include <cstdint>

#ifdef FLOWLIB_CONTROL
struct Bare {
  std::int64_t id;
  std::int64_t seq;
};
FLOWLIB_SCHEMA(Bare, id, seq);
#else
struct Bare {  // no FLOWLIB_SCHEMA
  std::int64_t id;
  std::int64_t seq;
};
#endif
using BareUsing = flowlib::ReplaceUsing<flowlib::Key<&Bare::id>, flowlib::Seq<&Bare::seq>>;

int main() {
  flowlib::MemorySource<Row> feed{"feed"};
  flowlib::StreamingTable<Bare, flowlib::SqliteStorage> t{"t"};
  flowlib::MemoryCheckpoint ckpt;
  flowlib::Pipeline p{"p", ckpt};
  p.flow("f").from(feed).map([](const Row& r) { return Bare{r.id, r.seq}; }).into(t, BareUsing{"f"});
}
