// R-USING-6: a map-typed SEQUENCE BY column is rejected at compile time.
// expect-error: key or sequence column is a map
#include "shared/using.hpp"

#ifdef FLOWLIB_CONTROL
using Flow = ReplaceUsing<Key<&Row::id>, Seq<&Row::version>>;
#else
using Flow = ReplaceUsing<Key<&Row::id>, Seq<&Row::versions>>;
#endif

int main() { [[maybe_unused]] Flow flow{"f"}; }
