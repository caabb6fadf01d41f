// R-WHERE-9: a REPLACE WHERE flow into a managed table fails to compile in a
// pipeline with the reference error code, naming REPLACE WHERE.
// expect-error: MANAGED_TABLE_DOES_NOT_SUPPORT_CDC.*REPLACE WHERE
#include "shared/where.hpp"

int main() {
  fl::MemorySource<Event> raw{"raw"};
#ifdef FLOWLIB_CONTROL
  fl::StreamingTable<Event> t{"t"};
#else
  fl::ManagedTable<Event> t{"t"};
#endif
  fl::MemoryCheckpoint ck;
  fl::Pipeline p{"p", ck};
  p.flow("f").from(raw).query(all_events).into(t, last_three_days());
}
