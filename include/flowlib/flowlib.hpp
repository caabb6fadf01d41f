// flowlib/flowlib.hpp
//
// Umbrella header: everything public in flowlib. Include the component
// headers instead to keep compile times down.
#pragma once

#include <flowlib/catalog.hpp>
#include <flowlib/checkpoint/file.hpp>
#include <flowlib/checkpoint/memory.hpp>
#include <flowlib/checkpoint/store.hpp>
#include <flowlib/columns.hpp>
#include <flowlib/error.hpp>
#include <flowlib/event_log.hpp>
#include <flowlib/expect.hpp>
#include <flowlib/flows/append.hpp>
#include <flowlib/flows/auto_cdc.hpp>
#include <flowlib/flows/auto_cdc_snapshot.hpp>
#include <flowlib/flows/replace_using.hpp>
#include <flowlib/flows/replace_where.hpp>
#include <flowlib/ops/dedup_within_watermark.hpp>
#include <flowlib/ops/watermark.hpp>
#include <flowlib/fwd.hpp>
#include <flowlib/pipeline.hpp>
#include <flowlib/quarantine.hpp>
#include <flowlib/schema.hpp>
#include <flowlib/sink/foreach_batch.hpp>
#include <flowlib/source/memory.hpp>
#include <flowlib/source/position.hpp>
#include <flowlib/source/snapshot.hpp>
#include <flowlib/source/table.hpp>
#include <flowlib/source/union.hpp>
#include <flowlib/stage.hpp>
#include <flowlib/stats.hpp>
#include <flowlib/stream.hpp>
#include <flowlib/storage/memory.hpp>
#include <flowlib/table.hpp>
#include <flowlib/where.hpp>
