// R-TABLE-3: PARTITIONED BY and CLUSTER BY cannot be combined.
// expect-error: PARTITIONED BY and CLUSTER BY cannot be combined
#include <flowlib/table.hpp>

#include <cstdint>
#include <string>

struct Event {
  std::int64_t id;
  std::string bucket;
};
FLOWLIB_SCHEMA(Event, id, bucket);

int main() {
#ifdef FLOWLIB_CONTROL
  flowlib::ManagedTable<Event> t{"events", flowlib::table_options<Event>().partitioned_by<"bucket">()};
#else
  flowlib::ManagedTable<Event> t{
      "events", flowlib::table_options<Event>().partitioned_by<"bucket">().cluster_by<"id">()};
#endif
  return static_cast<int>(t.size());
}
