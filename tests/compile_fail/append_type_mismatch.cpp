// R-TABLE-2: same-named columns of different types are a compile error
// naming the column.
// expect-error: &Target::amount.*have different types
#include <flowlib/flows/append.hpp>

#include <cstdint>
#include <vector>

struct Target {
  std::int64_t id;
  std::int64_t amount;
};
FLOWLIB_SCHEMA(Target, id, amount);
struct Source {
  std::int64_t id;
#ifdef FLOWLIB_CONTROL
  std::int64_t amount;
#else
  std::int32_t amount;  // int32 into int64: convert in the query instead
#endif
};
FLOWLIB_SCHEMA(Source, id, amount);

int main() {
  flowlib::StreamingTable<Target> t{"t"};
  flowlib::Append<> flow{"f"};
  flow.apply(t, std::vector<Source>{{1, 2}});
}
