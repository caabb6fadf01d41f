// R-USING-6: key columns must be distinct.
// expect-error: a key column is listed twice
#include "shared/using.hpp"

#ifdef FLOWLIB_CONTROL
using Flow = ReplaceUsing<Key<&Row::id, &Row::other>, Seq<&Row::seq>>;
#else
using Flow = ReplaceUsing<Key<&Row::id, &Row::other, &Row::id>, Seq<&Row::seq>>;
#endif

int main() { [[maybe_unused]] Flow flow{"f"}; }
