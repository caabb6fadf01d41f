// The row of the table-option negative tests: an event with an id and a
// partitioning column.
#pragma once

#include <flowlib/table.hpp>

#include <cstdint>
#include <string>

struct Event {
  std::int64_t id;
  std::string bucket;
};
FLOWLIB_SCHEMA(Event, id, bucket);
