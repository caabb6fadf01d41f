// tests/threads/random_pipeline.hpp
//
// Random pipelines for the tests of PipelineOptions::threads: a fixed menu
// of flows over one set of MemorySources and tables (world<Storage,
// Checkpoint>), of which a seed picks 2 to 6, in a random declaration order
// with random batch sizes, and a script of appends to the sources, one
// chunk before each update. The menu mixes flows that touch nothing in
// common with flows that do:
//
//   app0    s0 -> quarantine(q) -> APPEND into app         (s0 and q shared)
//   app1    s1 -> APPEND into app                          (two writers of app)
//   cur0    s0 -> REPLACE USING into cur0                  (s0 read by two flows)
//   cdc     s2 -> quarantine(q) -> AUTO CDC SCD1 into cdc  (q written by two flows)
//   down    TableSource{app} -> REPLACE USING into down    (reads what app0/app1 write)
//   dedup   s2 -> DedupWithinWatermark -> APPEND into dd   (s2 read by two flows)
//   cur1    s1 -> REPLACE USING into cur1
//   ind     s3 -> APPEND into ind                          (touches nothing shared)
//   hist    s4 -> AUTO CDC SCD2 into hist
//   down2   TableSource{dd} -> APPEND into down2           (reads what dedup writes)
//   totals  s5 -> query -> REPLACE WHERE into totals       (runs alone)
//
// What each flow touches is listed here too (touches()), so that tests can
// check the order of flows that share something from the fault hook's
// calls, independently of how the runtime computes it. Observations of a
// run (observed) gather what a program can see: the fault hook's and
// on_progress's calls, per flow, the event log's lines, per flow, and the
// update summaries; and whether two of those callbacks ever ran at the
// same time (the pipeline serialises them). run_script() runs a script on
// a new memory world, compare_runs() compares two runs.
#pragma once

#include <doctest/doctest.h>

#include <flowlib/checkpoint/file.hpp>
#include <flowlib/checkpoint/memory.hpp>
#include <flowlib/checkpoint/sqlite.hpp>
#include <flowlib/flowlib.hpp>
#include <flowlib/pipeline.hpp>
#include <flowlib/runtime/checkpoint_log.hpp>
#include <flowlib/source/memory.hpp>
#include <flowlib/source/table.hpp>
#include <flowlib/storage/file.hpp>
#include <flowlib/storage/sqlite.hpp>
#include <flowlib/where.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

namespace threadtest {

namespace fl = flowlib;

using ms_time = std::chrono::sys_time<std::chrono::milliseconds>;

struct Ev {
  std::int64_t id = 0;
  std::int64_t seq = 0;
  ms_time ts{};
  std::chrono::sys_days day{};
  std::string v;
  std::int64_t amount = 0;
  friend bool operator==(const Ev&, const Ev&) = default;
};
FLOWLIB_SCHEMA(Ev, id, seq, ts, day, v, amount);

struct User1 {
  std::int64_t id = 0;
  std::string v;
  std::int64_t amount = 0;
  friend bool operator==(const User1&, const User1&) = default;
};
FLOWLIB_SCHEMA(User1, id, v, amount);

struct User2 {
  std::int64_t id = 0;
  std::string v;
  std::int64_t amount = 0;
  std::int64_t start_at = 0;
  std::optional<std::int64_t> end_at;
  friend bool operator==(const User2&, const User2&) = default;
};
FLOWLIB_SCHEMA(User2, id, v, amount, (start_at, "__START_AT"), (end_at, "__END_AT"));

struct DayTotal {
  std::chrono::sys_days day{};
  std::int64_t events = 0;
  std::int64_t amount = 0;
  friend bool operator==(const DayTotal&, const DayTotal&) = default;
};
FLOWLIB_SCHEMA(DayTotal, day, events, amount);

using Current = fl::ReplaceUsing<fl::Key<&Ev::id>, fl::Seq<&Ev::seq>>;
using Dedup = fl::DedupWithinWatermark<fl::Key<&Ev::id, &Ev::seq>, fl::EventTime<&Ev::ts>>;
using Scd1 = fl::AutoCdc<fl::Key<&Ev::id>, fl::Seq<&Ev::seq>, fl::Scd1, fl::except_column_list<"seq", "ts", "day">>;
using Scd2 = fl::AutoCdc<fl::Key<&Ev::id>, fl::Seq<&Ev::seq>, fl::Scd2<>, fl::except_column_list<"seq", "ts", "day">>;

/// `prefix` followed by `n` (not `"v" + std::to_string(n)`: a false
/// -Wrestrict of g++ 12).
inline std::string tagged(const char* prefix, std::int64_t n) {
  std::string s(prefix);
  s += std::to_string(n);
  return s;
}

/// The first day of the scripts' clock; update u runs at noon of day u.
inline const std::chrono::sys_days day0 = std::chrono::January / 1 / 2026;

inline fl::UpdateOptions at_update(std::size_t u) {
  fl::UpdateOptions o;
  o.now = std::chrono::system_clock::time_point(day0 + std::chrono::days(u)) + std::chrono::hours(12);
  return o;
}

// --- The menu ----------------------------------------------------------------------

enum flow_kind : int { app0, app1, cur0, cdc, down, dedup, cur1, ind, hist, down2, totals, kinds };

inline constexpr std::array<const char*, kinds> flow_names{
    "app0", "app1", "cur0", "cdc", "down", "dedup", "cur1", "ind", "hist", "down2", "totals"};

/// What each flow touches: its sources, the tables it reads and writes.
inline std::vector<std::string> touches(flow_kind k) {
  switch (k) {
    case app0: return {"s0", "q", "app"};
    case app1: return {"s1", "app"};
    case cur0: return {"s0", "cur0"};
    case cdc: return {"s2", "q", "cdc"};
    case down: return {"app", "down"};
    case dedup: return {"s2", "dd"};
    case cur1: return {"s1", "cur1"};
    case ind: return {"s3", "ind"};
    case hist: return {"s4", "hist"};
    case down2: return {"dd", "down2"};
    case totals: return {"s5", "totals"};
    case kinds: break;
  }
  return {};
}

inline flow_kind kind_of(std::string_view flow) {
  for (int k = 0; k < kinds; ++k)
    if (flow == flow_names[static_cast<std::size_t>(k)]) return static_cast<flow_kind>(k);
  FAIL("unknown flow " << flow);
  return kinds;
}

/// Whether two flows may not run at the same time: they share a source or
/// a table, or one is the REPLACE WHERE flow (it runs alone).
inline bool conflict(flow_kind a, flow_kind b) {
  if (a == b) return true;
  if (a == totals || b == totals) return true;
  const auto ta = touches(a);
  for (const auto& r : touches(b))
    if (std::find(ta.begin(), ta.end(), r) != ta.end()) return true;
  return false;
}

/// The tables a flow writes, and those it reads (TableSource).
inline std::vector<std::string> writes(flow_kind k) {
  switch (k) {
    case app0: return {"app", "q"};
    case cdc: return {"cdc", "q"};
    case down2: return {"down2"};
    case kinds: return {};
    default: return {touches(k).back()};
  }
}
inline std::vector<std::string> reads(flow_kind k) {
  if (k == down) return {"app"};
  if (k == down2) return {"dd"};
  return {};
}

/// One flow of a pipeline: which, and its max_rows_per_batch (0: the
/// pipeline's default).
struct flow_choice {
  flow_kind kind = app0;
  std::size_t max_rows = 0;
};

/// A pipeline: its flows in declaration order, and its options.
struct pipeline_spec {
  std::vector<flow_choice> flows;
  std::size_t default_max_rows = 0;
  std::uint64_t snapshot_interval = 1;

  /// Index of `flow` in declaration order.
  std::size_t position(std::string_view flow) const {
    for (std::size_t i = 0; i < flows.size(); ++i)
      if (flow_names[static_cast<std::size_t>(flows[i].kind)] == flow) return i;
    FAIL("flow " << flow << " is not declared");
    return flows.size();
  }
  /// The order a pipeline runs the flows in (with one thread): passes over
  /// the declaration order, each taking the flows whose read tables no
  /// flow not taken yet writes. Index of each flow's name in it.
  std::map<std::string, std::size_t> run_order() const {
    std::map<std::string, std::size_t> out;
    std::vector<bool> done(flows.size(), false);
    while (out.size() < flows.size()) {
      for (std::size_t i = 0; i < flows.size(); ++i) {
        if (done[i]) continue;
        bool ready = true;
        for (std::size_t j = 0; j < flows.size(); ++j) {
          if (done[j] || j == i) continue;
          for (const auto& t : reads(flows[i].kind)) {
            const auto w = writes(flows[j].kind);
            if (std::find(w.begin(), w.end(), t) != w.end()) ready = false;
          }
        }
        if (ready) {
          done[i] = true;
          out[flow_names[static_cast<std::size_t>(flows[i].kind)]] = out.size();
        }
      }
    }
    return out;
  }
  bool has(flow_kind k) const {
    return std::any_of(flows.begin(), flows.end(), [&](const flow_choice& c) { return c.kind == k; });
  }
  std::string describe() const {
    std::string s;
    for (const auto& c : flows) {
      s += flow_names[static_cast<std::size_t>(c.kind)];
      s += "(max ";
      s += std::to_string(c.max_rows);
      s += ") ";
    }
    s += "default max ";
    s += std::to_string(default_max_rows);
    s += ", snapshot_interval ";
    s += std::to_string(snapshot_interval);
    return s;
  }
};

/// 2..6 flows of the menu; flows that share something are favoured, so
/// that most pipelines have both kinds of pairs. `with_totals`: the
/// REPLACE WHERE flow may be among them.
inline pipeline_spec random_spec(std::mt19937_64& rng, bool with_totals = true) {
  auto pick = [&](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
  pipeline_spec s;
  const std::size_t n = 2 + pick(5);
  std::vector<int> pool;
  for (int k = 0; k < kinds; ++k)
    if (k != totals || with_totals) pool.push_back(k);
  std::shuffle(pool.begin(), pool.end(), rng);
  // The REPLACE WHERE flow in about a quarter of the pipelines only.
  if (with_totals && pick(4) != 0) pool.erase(std::find(pool.begin(), pool.end(), static_cast<int>(totals)));
  pool.resize(std::min(n, pool.size()));
  for (int k : pool) {
    static constexpr std::array<std::size_t, 8> sizes{0, 1, 2, 3, 5, 7, 11, 0};
    s.flows.push_back({static_cast<flow_kind>(k), sizes[pick(sizes.size())]});
  }
  s.default_max_rows = std::array<std::size_t, 4>{0, 4, 9, 16}[pick(4)];
  s.snapshot_interval = 1 + pick(4);
  return s;
}

// --- Sources, tables, script ---------------------------------------------------------

/// The sources: they outlive pipelines and reopened tables (a program's
/// feeds).
struct sources {
  fl::MemorySource<Ev> s0{"s0", {.partitions = 2}};
  fl::MemorySource<Ev> s1{"s1"};
  fl::MemorySource<Ev> s2{"s2", {.partitions = 2, .guarantee = fl::delivery::at_least_once}};
  fl::MemorySource<Ev> s3{"s3"};
  fl::MemorySource<Ev> s4{"s4"};
  fl::MemorySource<Ev> s5{"s5"};
  fl::MemorySource<Ev>& at(std::size_t i) {
    std::array<fl::MemorySource<Ev>*, 6> all{&s0, &s1, &s2, &s3, &s4, &s5};
    return *all[i];
  }
};

/// The appends before one update: (source, partition, row).
struct chunk {
  std::vector<std::tuple<std::size_t, std::uint32_t, Ev>> rows;
};

/// `updates` chunks; ids repeat (REPLACE USING, AUTO CDC keys), s2 gets
/// redeliveries (dedup), some amounts are negative (quarantine).
inline std::vector<chunk> random_script(std::uint64_t seed, std::size_t updates, std::size_t max_rows = 24) {
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ULL + 1);
  auto pick = [&](std::int64_t n) { return static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(n)); };
  std::vector<chunk> out(updates);
  std::int64_t seq = 0;
  ms_time t{std::chrono::milliseconds(1'767'225'600'000)};
  std::vector<Ev> sent2;
  for (std::size_t u = 0; u < updates; ++u) {
    for (std::size_t src = 0; src < 6; ++src) {
      const std::int64_t n = pick(static_cast<std::int64_t>(max_rows) + 1);
      for (std::int64_t i = 0; i < n; ++i) {
        Ev e;
        if (src == 2 && !sent2.empty() && pick(6) == 0) {
          e = sent2[sent2.size() - 1 - static_cast<std::size_t>(pick(std::min<std::int64_t>(static_cast<std::int64_t>(sent2.size()), 6)))];
        } else {
          e.id = pick(10);
          e.seq = ++seq;
          t += std::chrono::milliseconds(100 + pick(3000));
          e.ts = t - std::chrono::milliseconds(pick(2000));
          e.day = day0 + std::chrono::days(static_cast<std::int64_t>(u) - pick(3));
          e.v = tagged("v", pick(5));
          e.amount = pick(12) == 0 ? -1 - pick(5) : pick(100);
          if (src == 2) sent2.push_back(e);
        }
        const std::uint32_t part = (src == 0 || src == 2) ? static_cast<std::uint32_t>(e.id % 2) : 0;
        out[u].rows.emplace_back(src, part, e);
      }
    }
  }
  return out;
}

inline void feed(sources& s, const chunk& c) {
  for (const auto& [src, part, e] : c.rows) s.at(src).append_to(part, e);
}

/// The tables and the checkpoint of one process. The checkpoint is the
/// first member, so that it goes after the tables attached to it.
template <class Storage, class Checkpoint>
struct world {
  template <class... A>
    requires std::constructible_from<Checkpoint, A...>
  explicit world(A&&... checkpoint_args) : checkpoint(std::forward<A>(checkpoint_args)...) {}
  world(const world&) = delete;
  world& operator=(const world&) = delete;

  Checkpoint checkpoint;
  fl::StreamingTable<Ev, Storage> app{"app"};
  fl::StreamingTable<fl::Quarantined<Ev>, Storage> q{"q"};
  fl::StreamingTable<Ev, Storage> cur0{"cur0"};
  fl::StreamingTable<User1, Storage> cdc{"cdc"};
  fl::StreamingTable<Ev, Storage> down{"down"};
  fl::StreamingTable<Ev, Storage> dd{"dd"};
  fl::StreamingTable<Ev, Storage> cur1{"cur1"};
  fl::StreamingTable<Ev, Storage> ind{"ind"};
  fl::StreamingTable<User2, Storage> hist{"hist"};
  fl::StreamingTable<Ev, Storage> down2{"down2"};
  fl::StreamingTable<DayTotal, Storage> totals{"totals"};
};

using memory_world = world<fl::MemoryStorage, fl::MemoryCheckpoint>;

/// Calls f(a's table, b's table, name) for every table of two worlds.
template <class A, class B, class F>
void for_each_table(A& a, B& b, F&& f) {
  f(a.app, b.app, "app");
  f(a.q, b.q, "q");
  f(a.cur0, b.cur0, "cur0");
  f(a.cdc, b.cdc, "cdc");
  f(a.down, b.down, "down");
  f(a.dd, b.dd, "dd");
  f(a.cur1, b.cur1, "cur1");
  f(a.ind, b.ind, "ind");
  f(a.hist, b.hist, "hist");
  f(a.down2, b.down2, "down2");
  f(a.totals, b.totals, "totals");
}

/// The REPLACE WHERE flow's query: events and amounts per day.
inline std::vector<DayTotal> daily_totals(std::span<const Ev> rows) {
  std::map<std::chrono::sys_days, DayTotal> by_day;
  for (const Ev& e : rows) {
    DayTotal& t = by_day[e.day];
    t.day = e.day;
    t.events += 1;
    t.amount += e.amount;
  }
  std::vector<DayTotal> out;
  for (const auto& [d, t] : by_day) out.push_back(t);
  return out;
}

inline bool non_negative(const Ev& e) { return e.amount >= 0; }

/// Declares the flows of `spec` on `p`.
template <class W>
void declare(fl::Pipeline& p, sources& s, W& w, const pipeline_spec& spec) {
  namespace wh = fl::where;
  for (const auto& c : spec.flows) {
    const std::string name = flow_names[static_cast<std::size_t>(c.kind)];
    switch (c.kind) {
      case app0:
        p.flow(name)
            .from(s.s0)
            .quarantine(w.q, fl::expectations(fl::expect_or_quarantine("non_negative", non_negative)))
            .max_rows_per_batch(c.max_rows)
            .into(w.app, fl::Append{name});
        break;
      case app1: p.flow(name).from(s.s1).max_rows_per_batch(c.max_rows).into(w.app, fl::Append{name}); break;
      case cur0: p.flow(name).from(s.s0).max_rows_per_batch(c.max_rows).into(w.cur0, Current{name}); break;
      case cdc:
        p.flow(name)
            .from(s.s2)
            .quarantine(w.q, fl::expectations(fl::expect_or_quarantine("non_negative", non_negative)))
            .max_rows_per_batch(c.max_rows)
            .into(w.cdc, Scd1{name});
        break;
      case down:
        p.flow(name).from(fl::TableSource{w.app}).max_rows_per_batch(c.max_rows).into(w.down, Current{name});
        break;
      case dedup:
        p.flow(name)
            .from(s.s2)
            .through(Dedup{std::chrono::seconds(20), "dedup"})
            .max_rows_per_batch(c.max_rows)
            .into(w.dd, fl::Append{name});
        break;
      case cur1: p.flow(name).from(s.s1).max_rows_per_batch(c.max_rows).into(w.cur1, Current{name}); break;
      case ind: p.flow(name).from(s.s3).max_rows_per_batch(c.max_rows).into(w.ind, fl::Append{name}); break;
      case hist: p.flow(name).from(s.s4).max_rows_per_batch(c.max_rows).into(w.hist, Scd2{name}); break;
      case down2:
        p.flow(name).from(fl::TableSource{w.dd}).max_rows_per_batch(c.max_rows).into(w.down2, fl::Append{name});
        break;
      case totals:
        p.flow(name)
            .from(s.s5)
            .query(daily_totals, "v1")
            .into(w.totals, fl::ReplaceWhere{wh::col("day") >= wh::current_date() - wh::days(1)});
        break;
      case kinds: break;
    }
  }
}

// --- What a run shows ----------------------------------------------------------------

/// Counts calls of callbacks that the pipeline must never run at the same
/// time (the fault hook, on_progress), and calls made on another thread
/// than the one that called update().
struct callback_guard {
  std::atomic<int> inside{0};
  std::atomic<std::size_t> overlaps{0};
  std::atomic<std::size_t> calls{0};
  std::atomic<std::size_t> foreign{0};
  std::thread::id updater{};
  struct scope {
    callback_guard& g;
    explicit scope(callback_guard& guard) : g(guard) {
      if (g.inside.fetch_add(1) != 0) ++g.overlaps;
      ++g.calls;
      if (std::this_thread::get_id() != g.updater) ++g.foreign;
      std::this_thread::yield();  // a wider window for an overlap to show
    }
    ~scope() { g.inside.fetch_sub(1); }
    scope(const scope&) = delete;
    scope& operator=(const scope&) = delete;
  };
};

/// A flow's summary in one update, comparable.
struct flow_summary {
  fl::FlowRowCounts counts;
  std::uint64_t batches = 0;
  bool skipped = false;
  friend bool operator==(const flow_summary&, const flow_summary&) = default;
};

/// What a program sees of a run, update by update.
struct observed {
  std::mutex m;  // the callbacks' own records (the guard checks they never overlap)
  callback_guard guard;
  // Per flow: (step, batch) of each fault-hook call, in order.
  std::map<std::string, std::vector<std::pair<std::string, std::uint64_t>>> hooks;
  // Per flow: (batches, rows, rows_planned) of each on_progress call.
  std::map<std::string, std::vector<std::tuple<std::uint64_t, std::uint64_t, std::uint64_t>>> progress;
  // Per update: the flows of the fault-hook calls, in call order.
  std::vector<std::vector<std::string>> trace;
  // The event log: per flow, its events (duration_ms removed); the others.
  std::map<std::string, std::vector<std::string>> flow_events;
  std::vector<std::string> other_events;
  // Per update: each flow's summary, and the order the summary lists them in.
  std::vector<std::map<std::string, flow_summary>> summaries;
  std::vector<std::vector<std::string>> summary_order;

  void hook(fl::fault_point at, std::string_view flow, std::uint64_t batch) {
    callback_guard::scope s(guard);
    std::lock_guard lock(m);
    hooks[std::string(flow)].emplace_back(fl::to_string(at), batch);
    if (!trace.empty()) trace.back().emplace_back(flow);
  }
  void on_progress(const fl::FlowProgress& p) {
    callback_guard::scope s(guard);
    std::lock_guard lock(m);
    progress[p.flow].emplace_back(p.batches, p.rows, p.rows_planned);
  }
  void event(std::string_view line) {
    auto j = nlohmann::json::parse(line);
    j.erase("duration_ms");
    std::lock_guard lock(m);
    if (j.contains("flow") && j["flow"].is_string()) {
      flow_events[j["flow"].get<std::string>()].push_back(j.dump());
    } else {
      other_events.push_back(j.dump());
    }
  }
  void summary(const fl::UpdateSummary& s) {
    std::map<std::string, flow_summary> m;
    std::vector<std::string> order;
    for (const auto& f : s.flows) {
      m[f.flow] = flow_summary{f, f.batches, f.skipped};
      order.push_back(f.flow);
    }
    summaries.push_back(std::move(m));
    summary_order.push_back(std::move(order));
  }
};

/// Options of a pipeline over `spec` whose fault hook records into `o`.
inline fl::PipelineOptions options_for(const pipeline_spec& spec, std::size_t threads, observed& o) {
  fl::PipelineOptions opt;
  opt.threads = threads;
  opt.max_rows_per_batch = spec.default_max_rows;
  opt.snapshot_interval = spec.snapshot_interval;
  opt.retain_batches = 2;
  opt.fault_hook = [&o](fl::fault_point at, std::string_view flow, std::uint64_t batch) { o.hook(at, flow, batch); };
  return opt;
}

/// Checks, update by update, that flows which may not run at the same time
/// (conflict()) did not: the spans of their fault-hook calls are disjoint,
/// and in the order of the threads = 1 run `ref`.
inline void check_conflicting_flows_in_order(const observed& ref, const observed& got) {
  REQUIRE(ref.trace.size() == got.trace.size());
  for (std::size_t u = 0; u < got.trace.size(); ++u) {
    const auto spans = [](const std::vector<std::string>& t) {
      std::map<std::string, std::pair<std::size_t, std::size_t>> s;
      for (std::size_t i = 0; i < t.size(); ++i) {
        auto [it, fresh] = s.try_emplace(t[i], i, i);
        if (!fresh) it->second.second = i;
      }
      return s;
    };
    const auto rs = spans(ref.trace[u]);
    const auto gs = spans(got.trace[u]);
    for (const auto& [a, ga] : gs) {
      for (const auto& [b, gb] : gs) {
        if (a >= b || !conflict(kind_of(a), kind_of(b))) continue;
        CAPTURE(u);
        CAPTURE(a);
        CAPTURE(b);
        const bool disjoint = ga.second < gb.first || gb.second < ga.first;
        CHECK_MESSAGE(disjoint, "flows that share a source or a table (or REPLACE WHERE) ran at the same time");
        const auto ra = rs.find(a);
        const auto rb = rs.find(b);
        if (disjoint && ra != rs.end() && rb != rs.end()) {
          CHECK_MESSAGE((ga.second < gb.first) == (ra->second.second < rb->second.first),
                        "flows that share a source or a table ran in another order than with threads = 1");
        }
      }
    }
  }
}

/// Every record of a memory checkpoint: path -> stored bytes.
inline std::map<std::string, std::string> all_records(const fl::MemoryCheckpoint& ck) {
  std::map<std::string, std::string> out;
  std::vector<std::string> todo{""};
  while (!todo.empty()) {
    const std::string dir = todo.back();
    todo.pop_back();
    for (const auto& name : ck.list(dir)) {
      std::string path = dir;
      if (!path.empty()) path += "/";
      path += name;
      if (auto raw = ck.raw(path)) out.emplace(path, *raw);
      todo.push_back(path);
    }
  }
  return out;
}

/// A table's rows under their ids.
template <class Table>
std::map<fl::row_id, typename Table::row_type> by_id(const Table& t) {
  std::map<fl::row_id, typename Table::row_type> m;
  t.store().for_each_row([&](fl::row_id id, const auto& r) { m.emplace(id, r); });
  return m;
}

/// A table's append log: its offsets and rows.
template <class Table>
std::tuple<std::uint64_t, std::uint64_t, std::vector<typename Table::row_type>> append_log_of(const Table& t) {
  std::vector<typename Table::row_type> rows;
  const auto& log = t.append_log();
  log.read(log.begin_offset(), log.end_offset(), rows);
  return {log.begin_offset(), log.end_offset(), std::move(rows)};
}

/// splitmix64: a hash of a few numbers, for fault decisions that do not
/// depend on the order the hook is called in.
inline std::uint64_t mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

// --- A run, compared with another ----------------------------------------------------

/// One run of `spec` over `script` with `threads`: a new world and
/// sources, one update per chunk, then one with nothing new.
struct run_result {
  memory_world w;
  observed o;
};

inline std::unique_ptr<run_result> run_script(const pipeline_spec& spec, const std::vector<chunk>& script, std::size_t threads) {
  auto r = std::make_unique<run_result>();
  sources s;
  r->o.guard.updater = std::this_thread::get_id();
  fl::EventLog log{[&r](std::string_view line) { r->o.event(line); }};
  fl::Pipeline p{"threads", r->w.checkpoint, options_for(spec, threads, r->o)};
  p.event_log(log);
  declare(p, s, r->w, spec);
  for (std::size_t u = 0; u <= script.size(); ++u) {
    if (u < script.size()) feed(s, script[u]);
    auto options = at_update(u);
    options.on_progress = [&r](const fl::FlowProgress& fp) { r->o.on_progress(fp); };
    r->o.trace.emplace_back();
    const auto summary = p.update(options);
    r->o.summary(summary);
    if (u == script.size()) {  // R-EXACT-2 (REPLACE WHERE recomputes its window every time)
      for (const auto& f : summary.flows)
        if (f.flow != "totals") CHECK(f.batches == 0);
    }
  }
  return r;
}

/// Compares a run with the threads = 1 run `ref` of the same script: every
/// table's rows under their ids and its append log, every checkpoint
/// record, the committed ends, the summaries (and their order), each
/// flow's events, progress calls and fault-hook steps, the callbacks' overlaps
/// and the order of flows that share something.
inline void compare_runs(run_result& ref, run_result& got) {
  for_each_table(ref.w, got.w, [](const auto& a, const auto& b, const char* name) {
    INFO("table " << std::string(name));
    CHECK(by_id(a) == by_id(b));
    CHECK(append_log_of(a) == append_log_of(b));
  });
  // Every record: committed positions, planned offsets, state, definitions.
  const auto ra = all_records(ref.w.checkpoint);
  const auto rb = all_records(got.w.checkpoint);
  CHECK(ra.size() == rb.size());
  for (const auto& [path, bytes] : ra) {
    const auto it = rb.find(path);
    CHECK_MESSAGE(it != rb.end(), "checkpoint record " << path << " missing");
    if (it != rb.end()) CHECK_MESSAGE(it->second == bytes, "checkpoint record " << path << " differs");
  }
  const fl::detail::checkpoint_log la(ref.w.checkpoint);
  const fl::detail::checkpoint_log lb(got.w.checkpoint);
  for (const auto& [flow, calls] : ref.o.hooks) {
    INFO("flow " << std::string(flow));
    const auto ca = la.last_commit(flow);
    const auto cb = lb.last_commit(flow);
    REQUIRE(ca.has_value() == cb.has_value());
    if (ca) {
      CHECK(ca->batch == cb->batch);
      CHECK(ca->end == cb->end);
      CHECK(ca->update_id == cb->update_id);
    }
  }
  REQUIRE(ref.o.summaries.size() == got.o.summaries.size());
  for (std::size_t u = 0; u < ref.o.summaries.size(); ++u) {
    CAPTURE(u);
    CHECK(ref.o.summaries[u] == got.o.summaries[u]);
    CHECK(ref.o.summary_order[u] == got.o.summary_order[u]);  // dependency order either way
  }
  CHECK(ref.o.flow_events == got.o.flow_events);
  CHECK(ref.o.other_events == got.o.other_events);
  CHECK(ref.o.progress == got.o.progress);
  // Each flow reaches the same steps of the same batches (with threads, a
  // flow into tables reaches positions_recorded after its table steps:
  // runtime/batch_protocol.hpp; the order of one flow's steps is not
  // compared).
  for (const auto& [flow, calls] : ref.o.hooks) {
    INFO("flow " << flow);
    const auto it = got.o.hooks.find(flow);
    REQUIRE(it != got.o.hooks.end());
    auto want = calls;
    auto have = it->second;
    std::sort(want.begin(), want.end());
    std::sort(have.begin(), have.end());
    CHECK(want == have);
  }
  CHECK(ref.o.hooks.size() == got.o.hooks.size());
  CHECK(got.o.guard.overlaps == 0);
  check_conflicting_flows_in_order(ref.o, got.o);
}

}  // namespace threadtest
