// R-WHERE-9: a REPLACE WHERE flow into a managed table fails to compile in a
// pipeline with the reference error code, naming REPLACE WHERE.
// expect-error: MANAGED_TABLE_DOES_NOT_SUPPORT_CDC.*REPLACE WHERE
#include "shared/where.hpp"

#ifdef FLOWLIB_CONTROL
using Rig = pipeline_rig<fl::StreamingTable<Event>>;
#else
using Rig = pipeline_rig<fl::ManagedTable<Event>>;
#endif

int main() {
  Rig r;
  r.p.flow("f").from(r.raw).query(all_events).into(r.t, last_three_days());
}
