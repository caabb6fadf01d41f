// FLOWLIB_SCHEMA: every column must be a data member declared in Row itself
// (a base class's member has the base's member-pointer type).
// expect-error: every column must be a data member declared in Row itself
#include <flowlib/schema.hpp>

#include <cstdint>

struct Base {
  std::int64_t id;
};
struct Event : Base {
  std::int64_t seq;
};
#ifdef FLOWLIB_CONTROL
FLOWLIB_SCHEMA(Event, seq);
#else
FLOWLIB_SCHEMA(Event, id, seq);
#endif

int main() { return static_cast<int>(flowlib::schema_of<Event>::size) - 1; }
