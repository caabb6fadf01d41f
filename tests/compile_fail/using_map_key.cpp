// R-USING-6: MAP is not a key type.
// expect-error: key or sequence column is a map
#include "shared/using.hpp"

#ifdef FLOWLIB_CONTROL
int main() { return declare<ReplaceUsing<Key<&Row::id>, Seq<&Row::seq>>>(); }
#else
int main() { return declare<ReplaceUsing<Key<&Row::tags>, Seq<&Row::seq>>>(); }
#endif
