// R-DEDUP-5: the operator takes a stream's batch of its own row type; a
// single row (or another row type) is not a batch.
// expect-error: process takes a batch
#include "shared/dedup.hpp"

int main() {
  ClickDedup d{std::int64_t{10}};
  const Click one{1, 2};
#ifdef FLOWLIB_CONTROL
  return static_cast<int>(d.process(std::vector<Click>{one}).size());
#else
  return static_cast<int>(d.process(one).size());
#endif
}
