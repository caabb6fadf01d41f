// R-TABLE-3: PARTITIONED BY and CLUSTER BY cannot be combined.
// expect-error: PARTITIONED BY and CLUSTER BY cannot be combined
#include "shared/event.hpp"

int main() {
#ifdef FLOWLIB_CONTROL
  flowlib::ManagedTable<Event> t{"events", flowlib::table_options<Event>().partitioned_by<"bucket">()};
#else
  flowlib::ManagedTable<Event> t{
      "events", flowlib::table_options<Event>().partitioned_by<"bucket">().cluster_by<"id">()};
#endif
  return static_cast<int>(t.size());
}
