// AUTO CDC checkpoints: a flow whose key type has no byte encoding cannot
// write (or read) a checkpoint; the message names the types that can.
// expect-error: flowlib::AutoCdc checkpoints: the key type has no byte encoding
#include "shared/device_id.hpp"

#include <flowlib/flows/auto_cdc.hpp>
#include <flowlib/table.hpp>

#include <cstdint>
#include <optional>
#include <string>

struct Change {
  DeviceId device;
  std::int64_t device_code;
  std::optional<std::string> name;
  std::int64_t seq;
};
FLOWLIB_SCHEMA(Change, device, device_code, name, seq);

struct Row {
  std::int64_t device_code;
  std::optional<std::string> name;
};
FLOWLIB_SCHEMA(Row, device_code, name);

int main() {
#ifdef FLOWLIB_CONTROL
  flowlib::AutoCdc<flowlib::Key<&Change::device_code>, flowlib::Seq<&Change::seq>, flowlib::Scd1,
                   flowlib::column_list<"device_code", "name">>
      flow{"devices_cdc"};
#else
  flowlib::AutoCdc<flowlib::Key<&Change::device>, flowlib::Seq<&Change::seq>, flowlib::Scd1,
                   flowlib::column_list<"device_code", "name">>
      flow{"devices_cdc"};
#endif
  std::string out;
  flowlib::detail::byte_writer w{out};
  flow.write_checkpoint(w, flowlib::checkpoint_scope::delta);
  return static_cast<int>(out.size());
}
