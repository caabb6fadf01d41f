// R-TABLE-2: a source column the table lacks is a compile error naming the
// column, unless it is dropped explicitly with DropColumns.
// expect-error: &Source::debug.*the source row has a column that the target row lacks
#include <flowlib/flows/append.hpp>

#include <cstdint>
#include <string>
#include <vector>

struct Target {
  std::int64_t id;
  std::string name;
};
FLOWLIB_SCHEMA(Target, id, name);
struct Source {
  std::int64_t id;
  std::string name;
  std::string debug;
};
FLOWLIB_SCHEMA(Source, id, name, debug);

int main() {
  flowlib::ManagedTable<Target> t{"t"};
#ifdef FLOWLIB_CONTROL
  flowlib::Append<flowlib::DropColumns<"debug">> flow{"f"};
#else
  flowlib::Append<> flow{"f"};
#endif
  flow.apply(t, std::vector<Source>{{1, "a", "x"}});
}
