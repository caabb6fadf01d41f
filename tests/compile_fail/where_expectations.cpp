// R-WHERE-9: expectations on a REPLACE WHERE flow fail to compile.
// expect-error: a REPLACE WHERE flow takes no expectations \(R-WHERE-9\)
#include "shared/where.hpp"

int main() {
  pipeline_rig<> r;
#ifdef FLOWLIB_CONTROL
  r.p.flow("f").from(r.raw).query(all_events).into(r.t, last_three_days());
#else
  r.p.flow("f").from(r.raw).expect(positive_amounts()).query(all_events).into(r.t,
                                                                          last_three_days());
#endif
}
