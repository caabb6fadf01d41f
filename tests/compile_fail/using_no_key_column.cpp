// R-USING-6: REPLACE USING needs at least one key column.
// expect-error: needs at least one key column
#include "shared/using.hpp"

#ifdef FLOWLIB_CONTROL
int main() { return declare<ReplaceUsing<Key<&Row::id>, Seq<&Row::seq>>>(); }
#else
int main() { return declare<ReplaceUsing<Key<>, Seq<&Row::seq>>>(); }
#endif
