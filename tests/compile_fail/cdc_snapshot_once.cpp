// AUTO CDC FROM SNAPSHOT reads its source until it returns nothing; ONCE
// (flowlib::Once) is an option of change-feed flows only.
// expect-error: Once are options of AutoCdc
#include <flowlib/flows/auto_cdc_snapshot.hpp>
#include <flowlib/table.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace fl = flowlib;

struct Item {
  std::int64_t id;
  std::string a;
};
FLOWLIB_SCHEMA(Item, id, a);

#ifdef FLOWLIB_CONTROL
using Flow = fl::AutoCdcFromSnapshot<fl::Key<&Item::id>, fl::Scd1>;
#else
using Flow = fl::AutoCdcFromSnapshot<fl::Key<&Item::id>, fl::Scd1, fl::Once>;
#endif

int main() {
  fl::StreamingTable<Item> t{"items"};
  Flow flow{"items_cdc"};
  flow.apply_snapshot(t, std::vector<Item>{{1, "x"}}, std::int64_t{1});
}
