// R-USING-6: exactly one sequence; Seq<> names none.
// expect-error: needs exactly one sequence
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
using Flow = flowlib::ReplaceUsing<flowlib::Key<&Row::id>, flowlib::Seq<>>;
#endif

int main() {
  [[maybe_unused]] Flow flow{"f"};
}
