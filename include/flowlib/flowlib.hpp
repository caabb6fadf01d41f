// flowlib/flowlib.hpp
//
// Umbrella header: everything public in flowlib. Include the component
// headers instead to keep compile times down.
#pragma once

#include <flowlib/catalog.hpp>
#include <flowlib/columns.hpp>
#include <flowlib/error.hpp>
#include <flowlib/expect.hpp>
#include <flowlib/flows/append.hpp>
#include <flowlib/flows/auto_cdc.hpp>
#include <flowlib/flows/auto_cdc_snapshot.hpp>
#include <flowlib/flows/replace_using.hpp>
#include <flowlib/ops/dedup_within_watermark.hpp>
#include <flowlib/ops/watermark.hpp>
#include <flowlib/fwd.hpp>
#include <flowlib/schema.hpp>
#include <flowlib/stats.hpp>
#include <flowlib/storage/memory.hpp>
#include <flowlib/table.hpp>
