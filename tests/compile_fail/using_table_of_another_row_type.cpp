// The target table's row type must be the flow's row type.
// expect-error: the target table's row type must be the flow's row type
#include <flowlib/flows/replace_using.hpp>
#include <flowlib/table.hpp>

#include <cstdint>
#include <vector>

struct Event {
  std::int64_t region_id;
  std::int64_t seq;
};
struct Click {
  std::int64_t region_id;
  std::int64_t seq;
};

int main() {
#ifdef FLOWLIB_CONTROL
  flowlib::StreamingTable<Event> t{"events"};
#else
  flowlib::StreamingTable<Click> t{"clicks"};
#endif
  flowlib::ReplaceUsing<flowlib::Key<&Event::region_id>, flowlib::Seq<&Event::seq>> flow{"f"};
  flow.apply(t, std::vector<Event>{{1, 1}});
}
