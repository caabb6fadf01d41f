// R-USING-6: key columns must be distinct.
// expect-error: a key column is listed twice
#include "shared/using.hpp"

#ifdef FLOWLIB_CONTROL
int main() { return declare<ReplaceUsing<Key<&Row::id, &Row::other>, Seq<&Row::seq>>>(); }
#else
int main() { return declare<ReplaceUsing<Key<&Row::id, &Row::other, &Row::id>, Seq<&Row::seq>>>(); }
#endif
