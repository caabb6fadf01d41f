// R-DEDUP-6: writing a checkpoint of state whose identity has a column type
// the state format cannot write fails to compile with a message naming the
// types it can.
// expect-error: write_checkpoint: a key column's type cannot be serialised
#include "shared/dedup.hpp"

#ifdef FLOWLIB_CONTROL
int main() { return write_state<PingByCode>(); }
#else
int main() { return write_state<PingByDevice>(); }  // a DeviceId key: no byte encoding to write
#endif
