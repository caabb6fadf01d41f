// R-USING-6: a floating-point SEQUENCE BY column is rejected at compile time.
// expect-error: a key or sequence column is floating point
#include <flowlib/flows/replace_using.hpp>

#include <cstdint>

struct Row {
  std::int64_t id;
  std::int64_t version;
  double updated_at;
};

#ifdef FLOWLIB_CONTROL
using Flow = flowlib::ReplaceUsing<flowlib::Key<&Row::id>, flowlib::Seq<&Row::version>>;
#else
using Flow = flowlib::ReplaceUsing<flowlib::Key<&Row::id>, flowlib::Seq<&Row::updated_at>>;
#endif

int main() {
  [[maybe_unused]] Flow flow{"f"};
}
