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
  pipeline_rig r;
  flowlib::StreamingTable<Dim> dim{"dim"};
  const auto combine = [](Row x, const Dim&) { return x; };
#ifdef FLOWLIB_CONTROL
  r.p.flow("f").from(r.feed).lookup(dim, flowlib::join_on(&Row::id, &Dim::id), combine).into(r.t, RowUsing{"f"});
#else
  r.p.flow("f").from(r.feed).lookup(dim, flowlib::join_on(&Row::id, &Dim::code), combine).into(r.t, RowUsing{"f"});
#endif
}
