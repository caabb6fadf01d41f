// A downstream program that links flowlib::files: a FileSource of JSON lines
// read by a pipeline.
#include <flowlib/checkpoint/memory.hpp>
#include <flowlib/flowlib.hpp>
#include <flowlib/source/file.hpp>

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

namespace shop {
struct Order {
  std::int64_t id = 0;
  std::string status;
};
FLOWLIB_SCHEMA(Order, id, status);
}  // namespace shop

int main() {
  namespace fl = flowlib;
  const auto dir = std::filesystem::temp_directory_path() /
                   ("flowlib_files_consumer_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  {
    std::ofstream out(dir / ".orders-1.jsonl");  // written under a hidden name...
    out << R"({"id":1,"status":"placed"})" << '\n' << R"({"id":2,"status":"paid"})" << '\n';
  }
  std::filesystem::rename(dir / ".orders-1.jsonl", dir / "orders-1.jsonl");  // ...then renamed in
  bool ok = false;
  {
    fl::FileSource<shop::Order> orders{"orders", {.directory = dir, .pattern = "*.jsonl"}};
    fl::MemoryCheckpoint checkpoint;
    fl::StreamingTable<shop::Order> log{"order_log"};
    fl::Pipeline pipeline{"shop", checkpoint};
    pipeline.flow("order_log").from(orders).into(log, fl::Append{"order_log"});
    pipeline.update();
    const auto rows = log.sorted_rows();
    ok = rows.size() == 2 && rows[0].status == "placed" && rows[1].status == "paid";
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  std::puts(ok ? "files consumer ok" : "files consumer FAILED");
  return ok ? 0 : 1;
}
