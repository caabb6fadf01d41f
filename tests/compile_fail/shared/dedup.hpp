// The rows of the DedupWithinWatermark negative tests: clicks identified by
// id, and pings identified by a device (see device_id.hpp) or its code.
#pragma once

#include "device_id.hpp"

#include <flowlib/ops/dedup_within_watermark.hpp>

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
