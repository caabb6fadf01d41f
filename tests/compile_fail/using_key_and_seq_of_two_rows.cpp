// The Key and the Seq of one ReplaceUsing must be columns of the same row type.
// expect-error: the key and the sequence must be columns of the same row type
#include <flowlib/flows/replace_using.hpp>

#include <cstdint>

struct Row {
  std::int64_t id;
  std::int64_t other;
  std::int64_t seq;
};
struct Other {
  std::int64_t seq;
};

#ifdef FLOWLIB_CONTROL
using Flow = flowlib::ReplaceUsing<flowlib::Key<&Row::id>, flowlib::Seq<&Row::seq>>;
#else
using Flow = flowlib::ReplaceUsing<flowlib::Key<&Row::id>, flowlib::Seq<&Other::seq>>;
#endif

int main() {
  [[maybe_unused]] Flow flow{"f"};
}
