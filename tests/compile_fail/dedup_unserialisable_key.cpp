// R-DEDUP-6: restoring a checkpoint of state whose identity has a column type
// the state format cannot read fails to compile with a message naming the
// types it can (writing one: dedup_checkpoint_unserialisable_key.cpp).
// expect-error: read_checkpoint: a key column's type cannot be serialised
#include "shared/dedup.hpp"

int main() {
#ifdef FLOWLIB_CONTROL
  PingByCode d{std::int64_t{10}};
#else
  PingByDevice d{std::int64_t{10}};
#endif
  d.read_checkpoint(flowlib::checkpoint_blobs{});
  return static_cast<int>(d.state_size());
}
