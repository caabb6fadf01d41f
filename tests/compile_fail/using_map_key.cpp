// R-USING-6: MAP is not a key type.
// expect-error: key or sequence column is a map
#include <flowlib/flows/replace_using.hpp>

#include <cstdint>
#include <map>
#include <string>

struct Row {
  std::int64_t id;
  std::map<std::string, std::int64_t> tags;
  std::int64_t seq;
};

#ifdef FLOWLIB_CONTROL
using Flow = flowlib::ReplaceUsing<flowlib::Key<&Row::id>, flowlib::Seq<&Row::seq>>;
#else
using Flow = flowlib::ReplaceUsing<flowlib::Key<&Row::tags>, flowlib::Seq<&Row::seq>>;
#endif

int main() {
  [[maybe_unused]] Flow flow{"f"};
}
