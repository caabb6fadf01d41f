// R-TABLE-3: partitioning (and clustering) columns are schema names checked
// at compile time; the diagnostic names the unknown column.
// expect-error: fixed_string<7>\{.bukket.\}.*is not a column of the table's row
#include "shared/event.hpp"

int main() {
#ifdef FLOWLIB_CONTROL
  flowlib::StreamingTable<Event> t{"events", flowlib::table_options<Event>().partitioned_by<"bucket">()};
#else
  flowlib::StreamingTable<Event> t{"events", flowlib::table_options<Event>().partitioned_by<"bukket">()};
#endif
  return static_cast<int>(t.size());
}
