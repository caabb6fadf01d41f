// R-USING-6: exactly one sequence; Seq<> names none.
// expect-error: needs exactly one sequence
#include "shared/using.hpp"

#ifdef FLOWLIB_CONTROL
int main() { return declare<ReplaceUsing<Key<&Row::id>, Seq<&Row::seq>>>(); }
#else
int main() { return declare<ReplaceUsing<Key<&Row::id>, Seq<>>>(); }
#endif
