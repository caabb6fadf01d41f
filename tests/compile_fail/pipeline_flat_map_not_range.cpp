// flat_map(fn): fn returns a range of rows; one row out is map() (R-STAGE-3).
// expect-error: flat_map.fn.: fn must return a range of rows
#include "shared/row.hpp"

#include <vector>

int main() {
  flowlib::MemorySource<Row> feed{"feed"};
  flowlib::StreamingTable<Row> t{"t"};
  flowlib::MemoryCheckpoint ckpt;
  flowlib::Pipeline p{"p", ckpt};
#ifdef FLOWLIB_CONTROL
  p.flow("f").from(feed).flat_map([](const Row& r) { return std::vector<Row>{r, r}; }).into(t, RowUsing{"f"});
#else
  p.flow("f").from(feed).flat_map([](const Row& r) { return r; }).into(t, RowUsing{"f"});
#endif
}
