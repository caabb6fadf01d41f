// R-USING-6: exactly one sequence; Seq<> names none.
// expect-error: needs exactly one sequence
#include "shared/using.hpp"

#ifdef FLOWLIB_CONTROL
using Flow = ReplaceUsing<Key<&Row::id>, Seq<&Row::seq>>;
#else
using Flow = ReplaceUsing<Key<&Row::id>, Seq<>>;
#endif

int main() { [[maybe_unused]] Flow flow{"f"}; }
