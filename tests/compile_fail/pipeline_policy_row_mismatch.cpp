// A flow policy takes the rows of its source: REPLACE USING its Key/Seq row
// type (here a source of another row type).
// expect-error: the flow policy does not take the rows
#include "shared/row.hpp"

#ifdef FLOWLIB_CONTROL
using Source = Row;
#else
using Source = Other;
#endif

int main() {
  pipeline_rig<Source> r;
  r.p.flow("f").from(r.feed).into(r.t, RowUsing{"f"});
}
