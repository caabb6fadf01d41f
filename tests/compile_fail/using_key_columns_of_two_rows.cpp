// R-USING-6: the key columns of one Key must belong to one row type.
// expect-error: all key columns must be members of the same row type
#include "shared/using.hpp"

#ifdef FLOWLIB_CONTROL
int main() { return declare<ReplaceUsing<Key<&Row::id, &Row::other>, Seq<&Row::seq>>>(); }
#else
int main() { return declare<ReplaceUsing<Key<&Row::id, &Other::id>, Seq<&Row::seq>>>(); }
#endif
