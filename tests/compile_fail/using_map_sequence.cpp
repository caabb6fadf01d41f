// R-USING-6: a map-typed SEQUENCE BY column is rejected at compile time.
// expect-error: key or sequence column is a map
#include <flowlib/flows/replace_using.hpp>

#include <cstdint>
#include <map>

struct Row {
  std::int64_t id;
  std::int64_t version;
  std::map<std::int64_t, std::int64_t> versions;
};

#ifdef FLOWLIB_CONTROL
using Flow = flowlib::ReplaceUsing<flowlib::Key<&Row::id>, flowlib::Seq<&Row::version>>;
#else
using Flow = flowlib::ReplaceUsing<flowlib::Key<&Row::id>, flowlib::Seq<&Row::versions>>;
#endif

int main() {
  [[maybe_unused]] Flow flow{"f"};
}
