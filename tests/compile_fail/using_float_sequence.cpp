// R-USING-6: a floating-point SEQUENCE BY column is rejected at compile time.
// expect-error: a key or sequence column is floating point
#include "shared/using.hpp"

#ifdef FLOWLIB_CONTROL
int main() { return declare<ReplaceUsing<Key<&Row::id>, Seq<&Row::version>>>(); }
#else
int main() { return declare<ReplaceUsing<Key<&Row::id>, Seq<&Row::updated_at>>>(); }
#endif
