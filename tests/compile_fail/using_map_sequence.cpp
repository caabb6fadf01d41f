// R-USING-6: a map-typed SEQUENCE BY column is rejected at compile time.
// expect-error: key or sequence column is a map
#include "shared/using.hpp"

#ifdef FLOWLIB_CONTROL
int main() { return declare<ReplaceUsing<Key<&Row::id>, Seq<&Row::version>>>(); }
#else
int main() { return declare<ReplaceUsing<Key<&Row::id>, Seq<&Row::versions>>>(); }
#endif
