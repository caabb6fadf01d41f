// A sink takes the rows of the flow's last stage (ForeachBatch<Row>, KafkaSink<Row>).
// expect-error: a sink's Row .ForeachBatch<Row>, KafkaSink<Row>. must be the rows of the flow's last stage
#include "shared/row.hpp"

#include <cstdint>
#include <span>
#include <string>

#ifdef FLOWLIB_CONTROL
using Sunk = Row;
#else
using Sunk = std::string;
#endif

int main() {
  pipeline_rig r;
  r.p.flow("f").from(r.feed).into(flowlib::ForeachBatch<Sunk>{[](std::uint64_t, std::span<const Sunk>) {}});
}
