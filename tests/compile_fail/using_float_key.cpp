// R-USING-6: a floating-point key column (float) is rejected at compile time.
// expect-error: a key or sequence column is floating point
#include <flowlib/flows/replace_using.hpp>

#include <cstdint>

struct Row {
  std::int64_t id;
  float price;
  std::int64_t seq;
};

#ifdef FLOWLIB_CONTROL
using Flow = flowlib::ReplaceUsing<flowlib::Key<&Row::id>, flowlib::Seq<&Row::seq>>;
#else
using Flow = flowlib::ReplaceUsing<flowlib::Key<&Row::id, &Row::price>, flowlib::Seq<&Row::seq>>;
#endif

int main() {
  [[maybe_unused]] Flow flow{"f"};
}
