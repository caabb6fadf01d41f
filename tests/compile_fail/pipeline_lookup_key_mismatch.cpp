// lookup(): the row's key and the dimension's key have the same type
// (R-STAGE-6); here an integer and a string.
// expect-error: the row's key and the dimension's key must have the same type
#include "shared/row.hpp"

#include <flowlib/stage.hpp>

#include <cstdint>
#include <string>

struct Dim {
  std::int64_t id;
  std::string code;
};
FLOWLIB_SCHEMA(Dim, id, code);

int main() {
  flowlib::MemorySource<Row> feed{"feed"};
  flowlib::StreamingTable<Row> t{"t"};
  flowlib::StreamingTable<Dim> dim{"dim"};
  flowlib::MemoryCheckpoint ckpt;
  flowlib::Pipeline p{"p", ckpt};
  const auto combine = [](Row r, const Dim&) { return r; };
#ifdef FLOWLIB_CONTROL
  p.flow("f").from(feed).lookup(dim, flowlib::join_on(&Row::id, &Dim::id), combine).into(t, RowUsing{"f"});
#else
  p.flow("f").from(feed).lookup(dim, flowlib::join_on(&Row::id, &Dim::code), combine).into(t, RowUsing{"f"});
#endif
}
