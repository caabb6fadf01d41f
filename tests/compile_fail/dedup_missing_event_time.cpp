// R-DEDUP-5: the operator without an event-time column fails to compile.
// expect-error: EventTime<> needs the event-time column
#include "shared/dedup.hpp"

int main() {
#ifdef FLOWLIB_CONTROL
  ClickDedup d{std::int64_t{10}};
  return static_cast<int>(d.process(std::vector<Click>{}).size());
#else
  flowlib::EventTime<> no_time;
  return static_cast<int>(sizeof(no_time));
#endif
}
