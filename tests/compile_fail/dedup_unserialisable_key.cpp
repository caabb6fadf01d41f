// R-DEDUP-6: checkpointing state whose identity has a column type the state
// format cannot write fails to compile with a message naming the types it can.
// expect-error: a key column's type cannot be serialised
#include "shared/dedup.hpp"

int main() {
#ifdef FLOWLIB_CONTROL
  PingByCode d{std::int64_t{10}};
#else
  PingByDevice d{std::int64_t{10}};
#endif
  const std::string checkpoint = flowlib::checkpoint_snapshot(d);
  return static_cast<int>(checkpoint.size());
}
