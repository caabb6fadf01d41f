// Transform stages against a reference computed without flowlib
// (R-STAGE-1 to R-STAGE-6 with R-EXACT-1): for many seeds, a chain of map,
// filter, flat_map and lookup stages with random parameters, over one or two
// MemorySources (a union), feeds every flow type that takes rows (an append
// into a StreamingTable, REPLACE USING, AUTO CDC SCD1 and SCD2, a
// foreach-batch sink) with random row limits, over rows appended across
// several updates while the lookup's dimension changes between updates. On
// the way: a map that throws std::runtime_error on a random row the first
// time it sees it, faults injected at every fault point, and after each
// failure either the same Pipeline or a new one over the same checkpoint
// (a MemoryCheckpoint, or for some seeds a FileCheckpoint in a temporary
// directory) updates again. After each seed every table must equal the
// reference: nothing lost, nothing twice, and every row enriched from the
// dimension as it was in the update that committed it.
#include <doctest/doctest.h>

#include <flowlib/checkpoint/file.hpp>
#include <flowlib/checkpoint/memory.hpp>
#include <flowlib/flowlib.hpp>
#include <flowlib/pipeline.hpp>
#include <flowlib/source/memory.hpp>
#include <flowlib/stage.hpp>

#include <support/auto_cdc_model.hpp>
#include <support/batches.hpp>
#include <support/reference_model.hpp>
#include <support/rows.hpp>
#include <support/temp_files.hpp>

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <ranges>
#include <set>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace runtime_stages_random {

namespace fl = flowlib;

struct Raw {
  std::int64_t id = 0;
  std::int64_t key = 0;
  std::int64_t seq = 0;
  std::int64_t val = 0;
  friend auto operator<=>(const Raw&, const Raw&) = default;
};
FLOWLIB_SCHEMA(Raw, id, key, seq, val);

struct Dim {
  std::int64_t key = 0;
  std::int64_t weight = 0;
  friend auto operator<=>(const Dim&, const Dim&) = default;
};
FLOWLIB_SCHEMA(Dim, key, weight);

using RawKey = fl::Key<&Raw::key>;
using RawSeq = fl::Seq<&Raw::seq>;
using Current = fl::ReplaceUsing<RawKey, RawSeq>;

constexpr std::int64_t kKeys = 6;

std::int64_t pmod(std::int64_t a, std::int64_t m) {
  const std::int64_t r = a % m;
  return r < 0 ? r + m : r;
}

// A seed's chain: the stages' functions are pure functions of the row and
// these parameters.
struct chain_params {
  bool map_on = true;
  std::int64_t mul = 1, add = 0, shift = 0;  // map: val = (val*mul + add) mod 1000, key += shift
  std::int64_t fmod = 0, frem = 0;           // filter: removes val mod fmod == frem (fmod 0: none)
  std::int64_t fan = 1;                      // flat_map: (val + id) mod (fan + 1) copies
};

struct Mapper {
  chain_params c;
  Raw operator()(Raw r) const {
    if (c.map_on) {
      r.val = pmod(r.val * c.mul + c.add, 1000);
      r.key = pmod(r.key + c.shift, kKeys);
    }
    return r;
  }
};
struct Keep {
  chain_params c;
  bool operator()(const Raw& r) const { return c.fmod == 0 || pmod(r.val, c.fmod) != c.frem; }
};
std::int64_t copies(const chain_params& c, const Raw& r) { return pmod(r.val + r.id, c.fan + 1); }
// Copy j of a row: ids and sequences stay unique (at most 4 copies).
Raw copy_of(const Raw& r, std::int64_t j) { return Raw{r.id * 4 + j, r.key, r.seq * 4 + j, r.val + j}; }
// flat_map returning a container, and one returning a std view.
struct FanVec {
  chain_params c;
  std::vector<Raw> operator()(const Raw& r) const {
    std::vector<Raw> out;
    for (std::int64_t j = 0; j < copies(c, r); ++j) out.push_back(copy_of(r, j));
    return out;
  }
};
struct FanView {
  chain_params c;
  auto operator()(Raw r) const {
    return std::views::iota(std::int64_t{0}, copies(c, r)) |
           std::views::transform([r](std::int64_t j) { return copy_of(r, j); });
  }
};
// A map that throws on the rows of `armed` the first time it sees each.
struct Thrower {
  std::set<std::int64_t>* armed;
  std::size_t* fired;
  Raw operator()(Raw r) const {
    if (armed->erase(r.id) != 0) {
      ++*fired;
      throw std::runtime_error("map failed on row " + std::to_string(r.id));
    }
    return r;
  }
};
model::Change to_change(const Raw& r) {
  model::Change c{static_cast<int>(r.key), std::nullopt, std::nullopt, model::upsert, r.seq};
  if (pmod(r.val, 4) == 0) {
    c.op = model::remove;
  } else {
    if (pmod(r.val, 7) != 0) c.name = "n" + std::to_string(pmod(r.val, 5));
    if (pmod(r.id, 3) != 0) c.city = "c" + std::to_string(pmod(r.val / 3, 3));
  }
  return c;
}

// The reference: one update's source rows through the chain, with the
// dimension of that update (a std::map), in plain C++.
//   shape 0: map, filter, flat_map (vector), throwing map, inner lookup
//   shape 1: flat_map (view), throwing map, left lookup, filter, map
std::vector<Raw> reference_chain(int shape, const chain_params& c, const std::vector<Raw>& rows,
                                 const std::map<std::int64_t, std::int64_t>& dim) {
  std::vector<Raw> out;
  for (Raw r : rows) {
    if (shape == 0) {
      r = Mapper{c}(r);
      if (!Keep{c}(r)) continue;
      for (std::int64_t j = 0; j < copies(c, r); ++j) {
        Raw x = copy_of(r, j);
        const auto it = dim.find(x.key);
        if (it == dim.end()) continue;
        x.val += it->second;
        out.push_back(x);
      }
    } else {
      for (std::int64_t j = 0; j < copies(c, r); ++j) {
        Raw x = copy_of(r, j);
        const auto it = dim.find(x.key);
        x.val += it != dim.end() ? it->second : 1000;
        if (!Keep{c}(x)) continue;
        out.push_back(Mapper{c}(x));
      }
    }
  }
  return out;
}

struct injected {};

struct faults {
  std::mt19937_64 rng;
  double p = 0;
  std::map<std::string, std::size_t> by_point;
  std::size_t total = 0;
  bool roll(double prob) { return std::uniform_real_distribution<double>(0, 1)(rng) < prob; }
  void maybe(fl::fault_point at) {
    if (roll(p)) {
      ++by_point[fl::to_string(at)];
      ++total;
      throw injected{};
    }
  }
};

// What outlives a Pipeline.
struct world {
  fl::MemorySource<Raw> a{"a", {.partitions = 2}};
  fl::MemorySource<Raw> b{"b"};
  fl::StreamingTable<Dim> dim{"dim"};
  fl::StreamingTable<Raw> appended{"appended"};
  fl::StreamingTable<Raw> current{"current"};
  fl::StreamingTable<model::Row> scd1{"scd1"};
  fl::StreamingTable<model::Version> scd2{"scd2"};
  std::map<std::uint64_t, std::vector<Raw>> exported;  // the sink's store, by batch id
  std::size_t redelivered = 0;
  std::unique_ptr<flowtest::temp_dir> dir;
  std::unique_ptr<fl::checkpoint_store> checkpoint;
  std::array<std::set<std::int64_t>, 5> armed;  // the throwing map's rows, per flow
  std::size_t fired = 0;
  chain_params prm;
  std::array<std::size_t, 5> limits{};
  bool sink_only = false;  // a FileCheckpoint: the sink only (memory tables need a volatile one)
};

template <int Shape>
std::unique_ptr<fl::Pipeline> make_pipeline(world& w, faults* f) {
  fl::PipelineOptions opt;
  opt.snapshot_interval = 3;
  opt.retain_batches = 2;
  if (f != nullptr) opt.fault_hook = [f](fl::fault_point at, std::string_view, std::uint64_t) { f->maybe(at); };
  auto p = std::make_unique<fl::Pipeline>("random_stages", *w.checkpoint, std::move(opt));
  const auto chain = [&](const char* name, std::size_t i) {
    auto start = [&] {
      if constexpr (Shape == 0) {
        return p->flow(name).from(w.a).from(w.b);
      } else {
        return p->flow(name).from(w.a);
      }
    }();
    const Thrower thrower{&w.armed[i], &w.fired};
    if constexpr (Shape == 0) {
      return std::move(start)
          .map(Mapper{w.prm})
          .filter(Keep{w.prm})
          .flat_map(FanVec{w.prm})
          .map(thrower)
          .lookup(w.dim, fl::join_on(&Raw::key, &Dim::key),
                  [](Raw r, const Dim& d) {
                    r.val += d.weight;
                    return r;
                  })
          .max_rows_per_batch(w.limits[i]);
    } else {
      return std::move(start)
          .flat_map(FanView{w.prm})
          .map(thrower)
          .lookup(
              w.dim, [](const auto& r) { return r.key; },
              [](Raw r, std::optional<Dim> d) {
                r.val += d ? d->weight : 1000;
                return r;
              },
              fl::left_join)
          .filter(Keep{w.prm})
          .map(Mapper{w.prm})
          .max_rows_per_batch(w.limits[i]);
    }
  };
  if (!w.sink_only) {
    chain("append", 0).into(w.appended, fl::Append{"append"});
    chain("current", 1).into(w.current, Current{"current"});
    chain("scd1", 2).map(to_change).into(w.scd1, model::Scd1{"scd1"});
    chain("scd2", 3).map(to_change).into(w.scd2, model::Scd2{"scd2"});
  }
  chain("export", 4).into(fl::ForeachBatch<Raw>{[&w](std::uint64_t id, std::span<const Raw> rows) {
    if (flowtest::record_batch(w.exported, id, rows)) ++w.redelivered;
  }});
  return p;
}

struct totals {
  std::size_t seeds = 0, file_seeds = 0, updates = 0, faults = 0, map_throws = 0, restarts = 0,
              retries = 0, redelivered = 0, rows = 0;
  std::map<std::string, std::size_t> by_point;
};

template <int Shape>
void run_seed(std::uint64_t seed, bool file, totals& tot) {
  CAPTURE(seed);
  CAPTURE(Shape);
  CAPTURE(file);
  std::mt19937_64 rng(seed);
  const auto pick = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };
  auto w = std::make_unique<world>();
  w->prm.map_on = pick(0, 3) != 0;
  w->prm.mul = pick(1, 5);
  w->prm.add = pick(0, 99);
  w->prm.shift = pick(0, kKeys - 1);
  w->prm.fmod = pick(0, 4);
  w->prm.frem = w->prm.fmod == 0 ? 0 : pick(0, w->prm.fmod - 1);
  w->prm.fan = pick(0, 3);
  for (auto& l : w->limits) l = static_cast<std::size_t>(pick(0, 7));
  w->sink_only = file;
  if (file) {
    w->dir = std::make_unique<flowtest::temp_dir>("flowlib_stages_random");
    w->checkpoint = std::make_unique<fl::FileCheckpoint>(w->dir->path);
  } else {
    w->checkpoint = std::make_unique<fl::MemoryCheckpoint>();
  }
  faults f{std::mt19937_64(seed * 7919 + 1), file ? 0.05 : 0.02, {}, 0};

  std::vector<Raw> want;  // the chain's output over every update
  std::int64_t next_id = 1;
  auto p = make_pipeline<Shape>(*w, &f);
  const int chunks = static_cast<int>(pick(2, 4));
  for (int c = 0; c < chunks; ++c) {
    // The dimension of this update: some keys, random weights.
    std::map<std::int64_t, std::int64_t> dim;
    for (std::int64_t k = 0; k < kKeys; ++k)
      if (pick(0, 3) != 0) dim[k] = pick(0, 50);
    auto& store = w->dim.store();
    store.clear();
    store.reserve(dim.size());
    for (const auto& [k, weight] : dim) store.insert(Dim{k, weight});
    // The update's rows, in both sources.
    std::vector<Raw> rows;
    const std::int64_t na = pick(0, file ? 6 : 12);
    const std::int64_t nb = Shape == 0 ? pick(0, file ? 6 : 12) : 0;
    for (std::int64_t i = 0; i < na + nb; ++i) {
      const Raw r{next_id, pick(0, kKeys - 1), next_id, pick(0, 999)};
      ++next_id;
      if (i < na) {
        w->a.append_to(static_cast<std::uint32_t>(pick(0, 1)), r);
      } else {
        w->b.append(r);
      }
      rows.push_back(r);
    }
    // The throwing map: a row of this update, the first time each flow sees it.
    if (!rows.empty() && pick(0, 2) == 0) {
      const Raw& victim = rows[static_cast<std::size_t>(pick(0, static_cast<std::int64_t>(rows.size()) - 1))];
      for (auto& armed : w->armed) armed.insert(victim.id * 4);  // its first copy
    }
    const auto out = reference_chain(Shape, w->prm, rows, dim);
    want.insert(want.end(), out.begin(), out.end());
    tot.rows += rows.size();
    for (int attempt = 0;; ++attempt) {
      REQUIRE(attempt < 2000);
      ++tot.updates;
      try {
        p->update();
        break;
      } catch (const injected&) {
      } catch (const std::runtime_error& e) {
        REQUIRE(std::string(e.what()).rfind("map failed on row ", 0) == 0);
      }
      // Half the time the same pipeline updates again, half the time a new one.
      if (f.roll(0.5)) {
        ++tot.retries;
      } else {
        ++tot.restarts;
        p.reset();
        p = make_pipeline<Shape>(*w, &f);
      }
    }
  }

  const std::vector<Raw> want_sorted = flowtest::sorted(want);
  std::vector<Raw> exported;
  for (const auto& [id, rows] : w->exported) exported.insert(exported.end(), rows.begin(), rows.end());
  CHECK(flowtest::sorted(exported) == want_sorted);
  if (!file) {
    CHECK(w->appended.sorted_rows() == want_sorted);
    CHECK(w->current.sorted_rows() == flowtest::final_state<RawKey, RawSeq>(want));
    std::vector<model::Change> changes;
    for (const Raw& r : want) changes.push_back(to_change(r));
    CHECK(w->scd1.sorted_rows() == model::reference_scd1(changes, false));
    CHECK(w->scd2.sorted_rows() == model::reference_scd2(changes, true, false));
  }
  // R-EXACT-2: nothing left to do.
  p.reset();
  p = make_pipeline<Shape>(*w, nullptr);
  CHECK(p->update().batches() == 0);

  ++tot.seeds;
  tot.file_seeds += file ? 1 : 0;
  tot.faults += f.total;
  tot.map_throws += w->fired;
  tot.redelivered += w->redelivered;
  for (const auto& [k, v] : f.by_point) tot.by_point[k] += v;
}

#if defined(__SANITIZE_ADDRESS__)
constexpr std::uint64_t kSeeds = 300;
#else
constexpr std::uint64_t kSeeds = 1500;
#endif

TEST_CASE("R-STAGE-1..6 with R-EXACT-1: random stage chains into every flow type, with throwing maps, faults and restarts, equal a reference computed without flowlib") {
  totals tot;
  for (std::uint64_t seed = 1; seed <= kSeeds; ++seed) {
    const bool file = seed % 10 == 3;
    if (seed % 2 == 0) {
      run_seed<0>(seed, file, tot);
    } else {
      run_seed<1>(seed, file, tot);
    }
  }
  MESSAGE(tot.seeds << " seeds (" << tot.file_seeds << " over a FileCheckpoint), " << tot.rows
                    << " source rows, " << tot.updates << " update attempts; " << tot.faults
                    << " faults injected, " << tot.map_throws << " map exceptions; after a failure "
                    << tot.restarts << " times a new Pipeline, " << tot.retries
                    << " times the same one; " << tot.redelivered << " sink batches delivered again");
  CHECK(tot.seeds == kSeeds);
  CHECK(tot.map_throws > 0);
  for (const char* point : {"positions_recorded", "before_table_write", "between_table_writes",
                            "after_table_write", "state_saving", "before_commit", "after_commit"}) {
    CAPTURE(point);
    CHECK(tot.by_point[point] > 0);
  }
}

}  // namespace runtime_stages_random
