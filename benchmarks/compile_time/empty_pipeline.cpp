// Compile-time table (scripts/compile_times): a Pipeline with no flow, opened
// and updated over a checkpoint in memory (the runtime: opening, the batch
// protocol, the checkpoint log, the event log).
#include <flowlib/checkpoint/memory.hpp>
#include <flowlib/pipeline.hpp>

int main() {
  flowlib::MemoryCheckpoint checkpoint;
  flowlib::Pipeline pipeline{"empty", checkpoint};
  pipeline.update();
  return 0;
}
