// The target table's row type must be the flow's row type.
// expect-error: the target table's row type must be the flow's row type
#include "shared/row.hpp"

#ifdef FLOWLIB_CONTROL
using Target = flowlib::StreamingTable<Row>;
#else
using Target = flowlib::StreamingTable<Other>;  // the same columns, another type
#endif

int main() { return apply_one_row(Target{"others"}); }
