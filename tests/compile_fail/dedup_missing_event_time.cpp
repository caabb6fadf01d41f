// R-DEDUP-5: the operator without an event-time column fails to compile.
// expect-error: EventTime<> needs the event-time column
#include <flowlib/ops/dedup_within_watermark.hpp>

#include <cstdint>
#include <vector>

struct Click {
  std::int64_t id;
  std::int64_t ts;
};

int main() {
#ifdef FLOWLIB_CONTROL
  flowlib::DedupWithinWatermark<flowlib::Key<&Click::id>, flowlib::EventTime<&Click::ts>> d{
      std::int64_t{10}};
  return static_cast<int>(d.process(std::vector<Click>{}).size());
#else
  flowlib::EventTime<> no_time;
  return static_cast<int>(sizeof(no_time));
#endif
}
