// R-TABLE-2: a table column the source lacks must be std::optional (it is
// filled with null); a non-nullable one is a compile error naming it.
// expect-error: &Target::region.*is missing from the source \(or dropped\) and is not nullable
#include <flowlib/flows/append.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

struct Target {
  std::int64_t id;
#ifdef FLOWLIB_CONTROL
  std::optional<std::string> region;
#else
  std::string region;
#endif
};
FLOWLIB_SCHEMA(Target, id, region);
struct Source {
  std::int64_t id;
};
FLOWLIB_SCHEMA(Source, id);

int main() {
  flowlib::ManagedTable<Target> t{"t"};
  flowlib::Append<> flow{"f"};
  flow.apply(t, std::vector<Source>{{1}});
}
