// The rows of the pipeline and REPLACE USING negative tests: a row with a
// key and a sequence, another row type with the same columns, REPLACE
// USING over the first, a pipeline with a source and a target, and REPLACE
// USING applied to a table.
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

/// A pipeline, its checkpoint, a source of SourceRow and a target table.
template <class SourceRow = Row, class Table = flowlib::StreamingTable<Row>>
struct pipeline_rig {
  flowlib::MemorySource<SourceRow> feed{"feed"};
  Table t{"t"};
  flowlib::MemoryCheckpoint ckpt;
  flowlib::Pipeline p{"p", ckpt};
};

/// Applies REPLACE USING to one row: instantiates everything apply() checks.
template <class Table>
int apply_one_row(Table&& t) {
  RowUsing flow{"f"};
  flow.apply(t, std::vector<Row>{{1, 1}});
  return 0;
}
