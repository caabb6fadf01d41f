// A batch is an input range of the flow's own row type: a batch of another
// row type does not match apply() (the batch_of constraint names both types).
// expect-error: batch_of<R, 
#include "shared/row.hpp"

int main() {
  flowlib::StreamingTable<Row> t{"rows"};
  RowUsing flow{"f"};
#ifdef FLOWLIB_CONTROL
  flow.apply(t, std::vector<Row>{{1, 1}});
#else
  flow.apply(t, std::vector<Other>{{1, 1}});
#endif
}
