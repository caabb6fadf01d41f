// flat_map(fn): fn returns a range of rows; one row out is map() (R-STAGE-3).
// expect-error: flat_map.fn.: fn must return a range of rows
#include "shared/row.hpp"

#include <vector>

int main() {
  pipeline_rig r;
#ifdef FLOWLIB_CONTROL
  r.p.flow("f").from(r.feed).flat_map([](const Row& x) { return std::vector<Row>{x, x}; }).into(r.t, RowUsing{"f"});
#else
  r.p.flow("f").from(r.feed).flat_map([](const Row& x) { return x; }).into(r.t, RowUsing{"f"});
#endif
}
