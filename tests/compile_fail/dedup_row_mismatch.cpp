// The identity and the event time must be columns of the same row type.
// expect-error: must be columns of the same row type
#include "shared/dedup.hpp"

struct View {
  std::int64_t id;
  std::int64_t ts;
};

int main() {
#ifdef FLOWLIB_CONTROL
  ClickDedup d{std::int64_t{10}};
#else
  flowlib::DedupWithinWatermark<flowlib::Key<&Click::id>, flowlib::EventTime<&View::ts>> d{
      std::int64_t{10}};
#endif
  return static_cast<int>(d.state_size());
}
