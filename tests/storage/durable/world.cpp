// The multi-hop pipeline of every table-writing flow type
// (support/durable_world.hpp) on each durable configuration, a new program
// (checkpoint, tables, pipeline) for every update: it ends with the memory
// run's rows, and every table comes back as the last program left it, row
// ids, id bound and append log included (R-EXACT-1, R-DURABLE-1).
#include <doctest/doctest.h>

#include <flowlib/flowlib.hpp>
#include <flowlib/pipeline.hpp>
#include <flowlib/source/memory.hpp>
#include <flowlib/storage/file.hpp>

#include <support/durable_configs.hpp>
#include <support/durable_world.hpp>

#include <map>
#include <sstream>
#include <string>

namespace storage_durable_world {

namespace fl = flowlib;
using flowtest::durable::Ev;
using flowtest::durable::feed_step;
using flowtest::durable::steps;
using flowtest::durable::world;
using flowtest::durable::world_rows;

/// A table as a program holds it: every row's bytes under its id, the id
/// bound, the append log's offsets.
template <class Table>
std::string fingerprint(const Table& t) {
  std::ostringstream out;
  for (const auto& [id, r] : flowtest::rows_by_id(t)) {
    std::string bytes;
    fl::detail::row_codec<typename Table::row_type>::write(bytes, r);
    out << id << ':' << bytes.size() << ':' << bytes << ';';
  }
  out << "bound " << t.store().id_bound() << " log " << t.append_log().begin_offset() << '-'
      << t.append_log().end_offset();
  return out.str();
}

TEST_CASE_TEMPLATE("R-EXACT-1, R-DURABLE-1, R-DURABLE-6 (FileStorage): reopening between updates (new checkpoint, tables and pipeline) gives the memory run's result; every row keeps its id, the id bound and the append log come back",
                   Config, FLOWTEST_DURABLE_CONFIGS) {
  const world_rows expected = flowtest::durable::uninterrupted();
  const typename Config::place at{"flowlib_durable_world"};
  fl::MemorySource<Ev> feed{"feed"};
  fl::PipelineOptions opt;
  opt.snapshot_interval = 2;
  // After each update: what the program held, table by table.
  std::map<std::string, std::string> held;
  world_rows last;
  for (int s = 0; s <= steps; ++s) {
    CAPTURE(s);
    const auto ck = Config::open(at);
    world<typename Config::storage> w;
    fl::Pipeline p{"main", *ck, opt};
    w.declare(p, feed);
    // Opening (an update with nothing new) loads every table as the last
    // program left it.
    CHECK(p.update().batches() == 0);
    w.for_each_table([&](const auto& t) {
      CAPTURE(t.name());
      if (s > 0) CHECK(fingerprint(t) == held[t.name()]);
      if (s == 0) CHECK(t.empty());
    });
    if (s == steps) {  // reopened once more with nothing new: same rows
      CHECK(w.rows() == last);
      break;
    }
    feed_step(feed, s);
    CHECK(p.update().batches() > 0);
    w.for_each_table([&](const auto& t) {
      Config::check_stored(at, *ck, t);  // rows, ids, id bound and append log as committed
      held[t.name()] = fingerprint(t);
    });
    last = w.rows();
  }
  CHECK(last.bronze.size() > 0);
  CHECK(last.users2.size() > last.users1.size());
  CHECK(last.rejected.size() > 0);
  CHECK(last == expected);
}

}  // namespace storage_durable_world
