// A snapshot flow whose version type has no byte encoding cannot write or
// read checkpoints: write_checkpoint fails to compile with a message naming
// the types it can encode.
// expect-error: the snapshot version type has no byte encoding
#include <flowlib/flows/auto_cdc_snapshot.hpp>
#include <flowlib/table.hpp>

#include <cstdint>
#include <string>

struct Item {
  std::int64_t id;
  std::string a;
};
FLOWLIB_SCHEMA(Item, id, a);

int main() {
#ifdef FLOWLIB_CONTROL
  using Version = std::int64_t;
#else
  using Version = double;  // ordered, so a valid version, but not encodable
#endif
  flowlib::AutoCdcFromSnapshot<flowlib::Key<&Item::id>, flowlib::Scd1,
                               flowlib::snapshot_version<Version>>
      flow{"items"};
  std::string out;
  flowlib::detail::byte_writer w{out};
  flow.write_checkpoint(w, flowlib::checkpoint_scope::delta);
  return static_cast<int>(out.size());
}
