// R-DEDUP-6: writing a checkpoint of state whose identity has a column type
// the state format cannot write fails to compile with a message naming the
// types it can.
// expect-error: write_checkpoint: a key column's type cannot be serialised
#include "shared/dedup.hpp"

int main() {
#ifdef FLOWLIB_CONTROL
  PingByCode d{std::int64_t{10}};
#else
  PingByDevice d{std::int64_t{10}};
#endif
  std::string out;
  flowlib::detail::byte_writer w{out};
  d.write_checkpoint(w, flowlib::checkpoint_scope::delta);
  return static_cast<int>(out.size());
}
