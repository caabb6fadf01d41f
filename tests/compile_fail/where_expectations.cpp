// R-WHERE-9: expectations on a REPLACE WHERE flow fail to compile.
// expect-error: a REPLACE WHERE flow takes no expectations \(R-WHERE-9\)
#include "shared/where.hpp"

int main() {
  fl::MemorySource<Event> raw{"raw"};
  fl::StreamingTable<Event> t{"t"};
  fl::MemoryCheckpoint ck;
  fl::Pipeline p{"p", ck};
#ifdef FLOWLIB_CONTROL
  p.flow("f").from(raw).query(all_events).into(t, last_three_days());
#else
  p.flow("f").from(raw).expect(positive_amounts()).query(all_events).into(t, last_three_days());
#endif
}
