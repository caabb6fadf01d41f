// R-USING-6: a floating-point key column (std::optional<double>) is rejected at compile time.
// expect-error: a key or sequence column is floating point
#include "shared/using.hpp"

#ifdef FLOWLIB_CONTROL
int main() { return declare<ReplaceUsing<Key<&Row::id>, Seq<&Row::seq>>>(); }
#else
int main() { return declare<ReplaceUsing<Key<&Row::id, &Row::price_or_null>, Seq<&Row::seq>>>(); }
#endif
