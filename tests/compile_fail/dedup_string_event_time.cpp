// R-DEDUP-5: an event time must be an integer or a time point, not text.
// expect-error: the event-time column must be an integer
#include <flowlib/ops/dedup_within_watermark.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

struct Click {
  std::int64_t id;
  std::string ts_text;
  std::chrono::sys_seconds ts;
};

int main() {
#ifdef FLOWLIB_CONTROL
  flowlib::DedupWithinWatermark<flowlib::Key<&Click::id>, flowlib::EventTime<&Click::ts>> d{
      std::chrono::minutes(5)};
#else
  flowlib::DedupWithinWatermark<flowlib::Key<&Click::id>, flowlib::EventTime<&Click::ts_text>> d{
      std::chrono::minutes(5)};
#endif
  return static_cast<int>(d.process(std::vector<Click>{}).size());
}
