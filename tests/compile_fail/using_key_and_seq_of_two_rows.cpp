// The Key and the Seq of one ReplaceUsing must be columns of the same row type.
// expect-error: the key and the sequence must be columns of the same row type
#include "shared/using.hpp"

#ifdef FLOWLIB_CONTROL
int main() { return declare<ReplaceUsing<Key<&Row::id>, Seq<&Row::seq>>>(); }
#else
int main() { return declare<ReplaceUsing<Key<&Row::id>, Seq<&Other::seq>>>(); }
#endif
