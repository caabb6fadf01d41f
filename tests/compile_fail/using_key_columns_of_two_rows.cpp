// R-USING-6: the key columns of one Key must belong to one row type.
// expect-error: all key columns must be members of the same row type
#include "shared/using.hpp"

#ifdef FLOWLIB_CONTROL
using Flow = ReplaceUsing<Key<&Row::id, &Row::other>, Seq<&Row::seq>>;
#else
using Flow = ReplaceUsing<Key<&Row::id, &Other::id>, Seq<&Row::seq>>;
#endif

int main() { [[maybe_unused]] Flow flow{"f"}; }
