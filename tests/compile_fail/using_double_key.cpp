// R-USING-6: a floating-point key column (double) is rejected at compile time.
// expect-error: a key or sequence column is floating point
#include "shared/using.hpp"

#ifdef FLOWLIB_CONTROL
using Flow = ReplaceUsing<Key<&Row::id>, Seq<&Row::seq>>;
#else
using Flow = ReplaceUsing<Key<&Row::id, &Row::price>, Seq<&Row::seq>>;
#endif

int main() { [[maybe_unused]] Flow flow{"f"}; }
