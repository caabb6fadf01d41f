// R-WHERE-9: a standalone REPLACE WHERE flow applied to a managed table
// fails to compile with the reference error code.
// expect-error: MANAGED_TABLE_DOES_NOT_SUPPORT_CDC.*REPLACE WHERE
#include "shared/where.hpp"

int main() {
  fl::MemorySource<Event> raw{"raw"};
#ifdef FLOWLIB_CONTROL
  fl::StreamingTable<Event> t{"t"};
#else
  fl::ManagedTable<Event> t{"t"};
#endif
  auto flow = last_three_days();
  flow.apply(t, w::context{}, all_events, raw);
}
