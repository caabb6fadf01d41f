// R-DEDUP-6: restoring a checkpoint of state whose identity has a column type
// the state format cannot read fails to compile with a message naming the
// types it can (writing one: dedup_checkpoint_unserialisable_key.cpp).
// expect-error: read_checkpoint: a key column's type cannot be serialised
#include "shared/dedup.hpp"

#ifdef FLOWLIB_CONTROL
using Dedup = PingByCode;
#else
using Dedup = PingByDevice;  // a DeviceId key: no byte encoding to read
#endif

int main() { return read_state<Dedup>(); }
