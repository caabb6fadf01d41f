// The rows of the pipeline and REPLACE USING negative tests: a row with a
// key and a sequence, another row type with the same columns, and REPLACE
// USING over the first.
#pragma once

#include <flowlib/checkpoint/memory.hpp>
#include <flowlib/flows/append.hpp>
#include <flowlib/flows/replace_using.hpp>
#include <flowlib/pipeline.hpp>
#include <flowlib/quarantine.hpp>
#include <flowlib/source/memory.hpp>
#include <flowlib/table.hpp>

#include <cstdint>
#include <vector>

struct Row {
  std::int64_t id;
  std::int64_t seq;
};
FLOWLIB_SCHEMA(Row, id, seq);

/// The same columns, another row type.
struct Other {
  std::int64_t id;
  std::int64_t seq;
};
FLOWLIB_SCHEMA(Other, id, seq);

using RowUsing = flowlib::ReplaceUsing<flowlib::Key<&Row::id>, flowlib::Seq<&Row::seq>>;
