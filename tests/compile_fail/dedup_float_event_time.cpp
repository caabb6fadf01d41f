// R-DEDUP-5: an event-time column that is neither an integer nor a
// std::chrono::time_point (here: double) fails to compile.
// expect-error: the event-time column is floating point
#include <flowlib/ops/dedup_within_watermark.hpp>

#include <cstdint>
#include <vector>

struct Reading {
  std::int64_t id;
  double ts_seconds;
  std::int64_t ts_millis;
};

int main() {
#ifdef FLOWLIB_CONTROL
  flowlib::DedupWithinWatermark<flowlib::Key<&Reading::id>, flowlib::EventTime<&Reading::ts_millis>> d{
      std::int64_t{1000}};
#else
  flowlib::DedupWithinWatermark<flowlib::Key<&Reading::id>, flowlib::EventTime<&Reading::ts_seconds>> d{
      1.0};
#endif
  return static_cast<int>(d.process(std::vector<Reading>{}).size());
}
