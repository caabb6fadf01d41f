// R-USING-6: REPLACE USING needs at least one key column.
// expect-error: needs at least one key column
#include "shared/using.hpp"

#ifdef FLOWLIB_CONTROL
using Flow = ReplaceUsing<Key<&Row::id>, Seq<&Row::seq>>;
#else
using Flow = ReplaceUsing<Key<>, Seq<&Row::seq>>;
#endif

int main() { [[maybe_unused]] Flow flow{"f"}; }
