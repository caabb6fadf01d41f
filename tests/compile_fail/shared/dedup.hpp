// The rows of the DedupWithinWatermark negative tests: clicks identified by
// id, and pings identified by a device (see device_id.hpp) or its code; an
// operator's state written to a checkpoint and read back.
#pragma once

#include "device_id.hpp"

#include <flowlib/ops/dedup_within_watermark.hpp>
#include <flowlib/state.hpp>

#include <cstdint>
#include <string>
#include <vector>

struct Click {
  std::int64_t id;
  std::int64_t ts;
};

/// The operator every test that needs a correct one uses.
using ClickDedup =
    flowlib::DedupWithinWatermark<flowlib::Key<&Click::id>, flowlib::EventTime<&Click::ts>>;

struct Ping {
  DeviceId device;
  std::uint64_t device_code;
  std::int64_t ts;
};

/// By the device (not encodable), or by its code (encodable).
using PingByDevice =
    flowlib::DedupWithinWatermark<flowlib::Key<&Ping::device>, flowlib::EventTime<&Ping::ts>>;
using PingByCode =
    flowlib::DedupWithinWatermark<flowlib::Key<&Ping::device_code>, flowlib::EventTime<&Ping::ts>>;

/// Writes a Dedup's state as a checkpoint delta: instantiates write_checkpoint.
template <class Dedup>
int write_state() {
  Dedup d{std::int64_t{10}};
  std::string out;
  flowlib::detail::byte_writer w{out};
  d.write_checkpoint(w, flowlib::checkpoint_scope::delta);
  return static_cast<int>(out.size());
}

/// Reads a Dedup's state from a checkpoint: instantiates read_checkpoint.
template <class Dedup>
int read_state() {
  Dedup d{std::int64_t{10}};
  d.read_checkpoint(flowlib::checkpoint_blobs{});
  return static_cast<int>(d.state_size());
}
