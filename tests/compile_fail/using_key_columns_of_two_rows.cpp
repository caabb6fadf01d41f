// R-USING-6: the key columns of one Key must belong to one row type.
// expect-error: all key columns must be members of the same row type
#include <flowlib/flows/replace_using.hpp>

#include <cstdint>

struct Row {
  std::int64_t id;
  std::int64_t other;
  std::int64_t seq;
};
struct Other {
  std::int64_t id;
};

#ifdef FLOWLIB_CONTROL
using Flow = flowlib::ReplaceUsing<flowlib::Key<&Row::id, &Row::other>, flowlib::Seq<&Row::seq>>;
#else
using Flow = flowlib::ReplaceUsing<flowlib::Key<&Row::id, &Other::id>, flowlib::Seq<&Row::seq>>;
#endif

int main() {
  [[maybe_unused]] Flow flow{"f"};
}
