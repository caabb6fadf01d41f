// The target table's row type must be the flow's row type.
// expect-error: the target table's row type must be the flow's row type
#include "shared/row.hpp"

int main() {
#ifdef FLOWLIB_CONTROL
  flowlib::StreamingTable<Row> t{"rows"};
#else
  flowlib::StreamingTable<Other> t{"others"};
#endif
  RowUsing flow{"f"};
  flow.apply(t, std::vector<Row>{{1, 1}});
}
