// tests/support/durable_world.hpp
//
// The main scenario of the durable storage tests: a multi-hop pipeline of
// every table-writing flow type, world<Storage>, fed in `steps` steps:
//
//   ingest   feed -> dedup -> append into bronze
//   current  bronze (TableSource) -> REPLACE USING into current
//   users1   bronze (TableSource) -> AUTO CDC SCD1, with deletes, into users1
//   users2   bronze (TableSource) -> AUTO CDC SCD2, with deletes, into users2
//   log      feed -> quarantine (negative amounts into rejected) -> append into log
//
// A new world is a restarted program. uninterrupted() is the scenario on
// memory tables and a memory checkpoint: what every durable run must end
// with.
#pragma once

#include <flowlib/checkpoint/memory.hpp>
#include <flowlib/flowlib.hpp>
#include <flowlib/pipeline.hpp>
#include <flowlib/source/memory.hpp>
#include <flowlib/source/table.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace flowtest::durable {

namespace fl = flowlib;

using ms_time = std::chrono::sys_time<std::chrono::milliseconds>;
inline const ms_time t0{std::chrono::milliseconds(1'700'000'000'000)};

struct Ev {
  std::int64_t id = 0;
  std::string name;
  std::int64_t amount = 0;
  std::int64_t seq = 0;
  ms_time at{};
  bool del = false;
  friend bool operator==(const Ev&, const Ev&) = default;
  friend auto operator<=>(const Ev&, const Ev&) = default;
};
FLOWLIB_SCHEMA(Ev, id, name, amount, seq, at, del);

struct Cur {
  std::int64_t id = 0;
  std::string name;
  std::int64_t amount = 0;
  friend bool operator==(const Cur&, const Cur&) = default;
};
FLOWLIB_SCHEMA(Cur, id, name, amount);

struct Hist {
  std::int64_t id = 0;
  std::string name;
  std::int64_t amount = 0;
  std::int64_t start_at = 0;
  std::optional<std::int64_t> end_at;
  friend bool operator==(const Hist&, const Hist&) = default;
};
FLOWLIB_SCHEMA(Hist, id, name, amount, (start_at, "__START_AT"), (end_at, "__END_AT"));

struct IsDelete {
  bool operator()(const Ev& e) const { return e.del; }
};

using Current = fl::ReplaceUsing<fl::Key<&Ev::id>, fl::Seq<&Ev::seq>>;
using Cdc1 = fl::AutoCdc<fl::Key<&Ev::id>, fl::Seq<&Ev::seq>, fl::Scd1, fl::apply_as_deletes<IsDelete>,
                         fl::except_column_list<"seq", "at", "del">>;
using Cdc2 = fl::AutoCdc<fl::Key<&Ev::id>, fl::Seq<&Ev::seq>, fl::Scd2<>, fl::apply_as_deletes<IsDelete>,
                         fl::except_column_list<"seq", "at", "del">>;
using Dedup = fl::DedupWithinWatermark<fl::Key<&Ev::id, &Ev::seq>, fl::EventTime<&Ev::at>>;

/// The rows of the scenario's tables, sorted.
struct world_rows {
  std::vector<Ev> bronze, current, log;
  std::vector<Cur> users1;
  std::vector<Hist> users2;
  std::vector<fl::Quarantined<Ev>> rejected;
  friend bool operator==(const world_rows&, const world_rows&) = default;
};

template <class S>
struct world {
  fl::StreamingTable<Ev, S> bronze{"bronze"};
  fl::StreamingTable<Ev, S> current{"current"};
  fl::StreamingTable<Cur, S> users1{"users1"};
  fl::StreamingTable<Hist, S> users2{"users2"};
  fl::StreamingTable<Ev, S> log{"log"};
  fl::StreamingTable<fl::Quarantined<Ev>, S> rejected{"rejected"};

  void declare(fl::Pipeline& p, fl::MemorySource<Ev>& feed) {
    p.flow("ingest")
        .from(feed)
        .through(Dedup{std::chrono::seconds(30), "dedup"})
        .max_rows_per_batch(7)
        .into(bronze, fl::Append{"ingest"});
    p.flow("current").from(fl::TableSource{bronze}).max_rows_per_batch(5).into(current, Current{"current"});
    p.flow("users1").from(fl::TableSource{bronze}).max_rows_per_batch(6).into(users1, Cdc1{"users1"});
    p.flow("users2").from(fl::TableSource{bronze}).max_rows_per_batch(4).into(users2, Cdc2{"users2"});
    p.flow("log")
        .from(feed)
        .quarantine(rejected, fl::expectations(fl::expect_or_quarantine(
                                  "non_negative", [](const Ev& e) { return e.amount >= 0; })))
        .max_rows_per_batch(9)
        .into(log, fl::Append{"log"});
  }
  world_rows rows() const {
    return {bronze.sorted_rows(), current.sorted_rows(), log.sorted_rows(),
            users1.sorted_rows(), users2.sorted_rows(), rejected.sorted_rows()};
  }
  template <class F>
  void for_each_table(F&& f) const {
    f(bronze);
    f(current);
    f(users1);
    f(users2);
    f(log);
    f(rejected);
  }
};

/// The scenario's tables and pipeline over a checkpoint: one program (the
/// pipeline is destroyed first, then the tables; the checkpoint they use
/// must outlive both).
template <class S>
struct world_program {
  world<S> w;
  fl::Pipeline pipeline;
  world_program(fl::checkpoint_store& ck, fl::MemorySource<Ev>& feed, fl::PipelineOptions options = {})
      : pipeline("main", ck, std::move(options)) {
    w.declare(pipeline, feed);
  }
};

/// What a fault hook throws.
struct injected : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Step `s` of the feed: new events, some redelivered, some negative, some
/// deletes.
inline void feed_step(fl::MemorySource<Ev>& feed, int s) {
  for (int i = 0; i < 12; ++i) {
    const Ev e{(s * 7 + i) % 9, "n" + std::to_string(s) + "_" + std::to_string(i),
               i % 5 == 4 ? -1 : i, s * 100 + i, t0 + std::chrono::seconds(s * 20 + i), i % 6 == 5};
    feed.append(e);
    if (i % 4 == 1) feed.append(e);  // a redelivery: dedup drops it
  }
}

inline constexpr int steps = 4;

/// The scenario on memory tables and a memory checkpoint, without
/// interruption. With `together`, the steps after the first are fed at
/// once, to one update.
inline world_rows uninterrupted(bool together = false) {
  fl::MemorySource<Ev> feed{"feed"};
  fl::MemoryCheckpoint ck;
  world_program<fl::MemoryStorage> prog{ck, feed};
  for (int s = 0; s < steps; ++s) {
    feed_step(feed, s);
    if (!together || s == 0 || s == steps - 1) prog.pipeline.update();
  }
  return prog.w.rows();
}

}  // namespace flowtest::durable
