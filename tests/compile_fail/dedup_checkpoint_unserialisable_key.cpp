// R-DEDUP-6: writing a checkpoint of state whose identity has a column type
// the state format cannot write fails to compile with a message naming the
// types it can.
// expect-error: write_checkpoint: a key column's type cannot be serialised
#include <flowlib/ops/dedup_within_watermark.hpp>

#include <compare>
#include <cstdint>
#include <string>

struct DeviceId {  // hashable and ordered, so a valid key, but opaque to the format
  std::uint64_t hi, lo;
  auto operator<=>(const DeviceId&) const = default;
  template <class H>
  friend H AbslHashValue(H h, const DeviceId& d) {
    return H::combine(std::move(h), d.hi, d.lo);
  }
};

struct Ping {
  DeviceId device;
  std::uint64_t device_code;
  std::int64_t ts;
};

int main() {
#ifdef FLOWLIB_CONTROL
  flowlib::DedupWithinWatermark<flowlib::Key<&Ping::device_code>, flowlib::EventTime<&Ping::ts>> d{
      std::int64_t{10}};
#else
  flowlib::DedupWithinWatermark<flowlib::Key<&Ping::device>, flowlib::EventTime<&Ping::ts>> d{
      std::int64_t{10}};
#endif
  std::string out;
  flowlib::detail::byte_writer w{out};
  d.write_checkpoint(w, flowlib::checkpoint_scope::delta);
  return static_cast<int>(out.size());
}
