// A sink takes the rows of the flow's last stage (ForeachBatch<Row>, KafkaSink<Row>).
// expect-error: a sink's Row .ForeachBatch<Row>, KafkaSink<Row>. must be the rows of the flow's last stage
#include "shared/row.hpp"

#include <cstdint>
#include <span>
#include <string>

int main() {
  flowlib::MemorySource<Row> feed{"feed"};
  flowlib::MemoryCheckpoint ckpt;
  flowlib::Pipeline p{"p", ckpt};
#ifdef FLOWLIB_CONTROL
  p.flow("f").from(feed).into(flowlib::ForeachBatch<Row>{[](std::uint64_t, std::span<const Row>) {}});
#else
  p.flow("f").from(feed).into(
      flowlib::ForeachBatch<std::string>{[](std::uint64_t, std::span<const std::string>) {}});
#endif
}
