// R-USING-6: VARIANT is not a key type.
// expect-error: key or sequence column is a std::variant
#include <flowlib/flows/replace_using.hpp>

#include <cstdint>
#include <string>
#include <variant>

struct Row {
  std::int64_t id;
  std::variant<std::int64_t, std::string> payload;
  std::int64_t seq;
};

#ifdef FLOWLIB_CONTROL
using Flow = flowlib::ReplaceUsing<flowlib::Key<&Row::id>, flowlib::Seq<&Row::seq>>;
#else
using Flow = flowlib::ReplaceUsing<flowlib::Key<&Row::payload>, flowlib::Seq<&Row::seq>>;
#endif

int main() {
  [[maybe_unused]] Flow flow{"f"};
}
