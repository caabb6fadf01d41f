// R-TABLE-1: a managed table accepts only append flows; REPLACE USING into
// one fails to compile with the reference error code.
// expect-error: MANAGED_TABLE_DOES_NOT_SUPPORT_CDC
#include <flowlib/flows/replace_using.hpp>

#include <cstdint>
#include <vector>

struct Event {
  std::int64_t region_id;
  std::int64_t seq;
};
FLOWLIB_SCHEMA(Event, region_id, seq);

int main() {
#ifdef FLOWLIB_CONTROL
  flowlib::StreamingTable<Event> t{"events"};
#else
  flowlib::ManagedTable<Event> t{"events"};
#endif
  flowlib::ReplaceUsing<flowlib::Key<&Event::region_id>, flowlib::Seq<&Event::seq>> flow{"f"};
  flow.apply(t, std::vector<Event>{{1, 1}});
}
