// R-USING-6: VARIANT is not a key type.
// expect-error: key or sequence column is a std::variant
#include "shared/using.hpp"

#ifdef FLOWLIB_CONTROL
using Flow = ReplaceUsing<Key<&Row::id>, Seq<&Row::seq>>;
#else
using Flow = ReplaceUsing<Key<&Row::payload>, Seq<&Row::seq>>;
#endif

int main() { [[maybe_unused]] Flow flow{"f"}; }
