// FLOWLIB_SCHEMA: a column listed twice is rejected at compile time.
// expect-error: a column is listed twice
#include <flowlib/schema.hpp>

#include <cstdint>
#include <string>

struct Event {
  std::int64_t region_id;
  std::string device_type;
  std::int64_t seq;
};
#ifdef FLOWLIB_CONTROL
FLOWLIB_SCHEMA(Event, region_id, device_type, seq);
#else
FLOWLIB_SCHEMA(Event, region_id, device_type, seq, region_id);
#endif

int main() { return static_cast<int>(flowlib::schema_of<Event>::size) - 3; }
