// R-USING-6: VARIANT is not a key type.
// expect-error: key or sequence column is a std::variant
#include "shared/using.hpp"

#ifdef FLOWLIB_CONTROL
int main() { return declare<ReplaceUsing<Key<&Row::id>, Seq<&Row::seq>>>(); }
#else
int main() { return declare<ReplaceUsing<Key<&Row::payload>, Seq<&Row::seq>>>(); }
#endif
