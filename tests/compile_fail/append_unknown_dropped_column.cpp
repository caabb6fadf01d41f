// R-TABLE-2: every dropped column must be a source column (a misspelt drop
// would otherwise drop nothing).
// expect-error: fixed_string<6>\{.dbeug.\}.*a dropped column name .* is not a column of the source row
#include <flowlib/flows/append.hpp>

#include <cstdint>
#include <string>
#include <vector>

struct Target {
  std::int64_t id;
};
FLOWLIB_SCHEMA(Target, id);
struct Source {
  std::int64_t id;
  std::string debug;
};
FLOWLIB_SCHEMA(Source, id, debug);

int main() {
  flowlib::ManagedTable<Target> t{"t"};
#ifdef FLOWLIB_CONTROL
  flowlib::Append<flowlib::DropColumns<"debug">> flow{"f"};
#else
  flowlib::Append<flowlib::DropColumns<"debug", "dbeug">> flow{"f"};
#endif
  flow.apply(t, std::vector<Source>{{1, "x"}});
}
