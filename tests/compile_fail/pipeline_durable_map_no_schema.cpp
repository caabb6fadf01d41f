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
  pipeline_rig<Row, flowlib::StreamingTable<Bare, flowlib::SqliteStorage>> r;
  r.p.flow("f").from(r.feed).map([](const Row& x) { return Bare{x.id, x.seq}; }).into(r.t, BareUsing{"f"});
}
