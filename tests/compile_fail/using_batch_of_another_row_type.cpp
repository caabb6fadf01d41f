// A batch is an input range of the flow's own row type: a batch of another
// row type does not match apply() (the batch_of constraint names both types).
// expect-error: batch_of<R, 
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
  flowlib::StreamingTable<Event> t{"events"};
  flowlib::ReplaceUsing<flowlib::Key<&Event::region_id>, flowlib::Seq<&Event::seq>> flow{"f"};
#ifdef FLOWLIB_CONTROL
  flow.apply(t, std::vector<Event>{{1, 1}});
#else
  flow.apply(t, std::vector<Click>{{1, 1}});
#endif
}
