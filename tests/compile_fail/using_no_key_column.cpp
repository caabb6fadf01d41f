// R-USING-6: REPLACE USING needs at least one key column.
// expect-error: needs at least one key column
#include <flowlib/flows/replace_using.hpp>

#include <cstdint>

struct Row {
  std::int64_t id;
  std::int64_t other;
  std::int64_t seq;
};

#ifdef FLOWLIB_CONTROL
using Flow = flowlib::ReplaceUsing<flowlib::Key<&Row::id>, flowlib::Seq<&Row::seq>>;
#else
using Flow = flowlib::ReplaceUsing<flowlib::Key<>, flowlib::Seq<&Row::seq>>;
#endif

int main() {
  [[maybe_unused]] Flow flow{"f"};
}
