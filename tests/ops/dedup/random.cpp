// DedupWithinWatermark against a reference model, and bounded state over a
// long stream (docs/semantics.md#deduplication-within-a-watermark).
#include <flowlib/columns.hpp>
#include <flowlib/ops/dedup_within_watermark.hpp>
#include <flowlib/ops/watermark.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace ops_dedup_random {

namespace fl = flowlib;

struct Row {
  std::int32_t a;
  std::optional<std::string> b;
  std::int64_t ts;
  std::int64_t payload;
  friend bool operator==(const Row&, const Row&) = default;
};
FLOWLIB_SCHEMA(Row, a, b, ts, payload);

using Identity = std::tuple<std::int32_t, std::optional<std::string>>;

/// docs/semantics.md#deduplication-within-a-watermark, written as plainly as possible.
struct Model {
  std::int64_t delay;
  fl::watermark_policy policy;
  std::vector<std::optional<std::int64_t>> inputs;
  std::optional<std::int64_t> watermark;
  std::map<Identity, std::int64_t> state;  // identity -> expires_at

  struct result {
    std::vector<Row> out;
    std::uint64_t late = 0, duplicates = 0, evicted = 0;
  };

  result process(std::size_t input, const std::vector<Row>& batch) {
    result r;
    std::optional<std::int64_t> max_et;
    for (const Row& row : batch) {
      max_et = max_et ? std::max(*max_et, row.ts) : row.ts;
      if (watermark && row.ts <= *watermark) {  // R-DEDUP-3: late
        ++r.late;
        continue;
      }
      const Identity id{row.a, row.b};
      if (state.count(id)) {  // R-DEDUP-3: duplicate; never extends (R-DEDUP-1)
        ++r.duplicates;
        continue;
      }
      state[id] = row.ts + delay;  // R-DEDUP-1
      r.out.push_back(row);
    }
    if (max_et) {  // R-DEDUP-2, per input
      const std::int64_t w = *max_et - delay;
      if (!inputs[input] || *inputs[input] < w) inputs[input] = w;
    }
    std::optional<std::int64_t> chosen;  // R-DEDUP-5
    for (const auto& w : inputs) {
      if (!w) continue;
      if (!chosen) {
        chosen = w;
      } else {
        chosen = policy == fl::watermark_policy::min ? std::min(*chosen, *w) : std::max(*chosen, *w);
      }
    }
    if (chosen && (!watermark || *watermark < *chosen)) watermark = chosen;
    if (watermark) {  // R-DEDUP-4
      for (auto it = state.begin(); it != state.end();) {
        if (it->second <= *watermark) {
          it = state.erase(it);
          ++r.evicted;
        } else {
          ++it;
        }
      }
    }
    return r;
  }
};

using Dedup = fl::DedupWithinWatermark<fl::Key<&Row::a, &Row::b>, fl::EventTime<&Row::ts>>;

struct Plain {
  std::int64_t id;
  std::int64_t ts;
};
FLOWLIB_SCHEMA(Plain, id, ts);

#if defined(__SANITIZE_ADDRESS__)
constexpr std::uint64_t random_seeds = 150;  // sanitizer builds are ~20x slower
#else
constexpr std::uint64_t random_seeds = 300;
#endif

TEST_CASE("R-DEDUP-1..6: randomised streams agree with the reference model") {
  const std::vector<std::optional<std::string>> bs{std::nullopt, "x", "yy",
                                                   "a-string-longer-than-the-small-buffer"};
  std::uint64_t total_late = 0, total_dups = 0, total_evicted = 0, restores = 0;
  for (std::uint64_t seed = 1; seed <= random_seeds; ++seed) {
    CAPTURE(seed);
    std::mt19937_64 g(seed);
    const std::int64_t delays[] = {0, 1, 5, 20, 64, 1000};
    const std::int64_t delay = delays[g() % 6];
    const std::size_t inputs = 1 + g() % 3;
    const auto policy = g() % 2 ? fl::watermark_policy::min : fl::watermark_policy::max;
    const std::int32_t key_space = static_cast<std::int32_t>(1 + g() % 40);
    Model model{delay, policy, std::vector<std::optional<std::int64_t>>(inputs), std::nullopt, {}};
    Dedup d{delay, "random", fl::DedupOptions{.inputs = inputs, .policy = policy}};
    std::vector<std::int64_t> base(inputs, static_cast<std::int64_t>(g() % 100) - 50);
    const std::size_t batches = 5 + g() % 40;
    std::int64_t payload = 0;
    for (std::size_t n = 0; n < batches; ++n) {
      CAPTURE(n);
      const std::size_t input = g() % inputs;
      base[input] += static_cast<std::int64_t>(g() % (static_cast<std::uint64_t>(delay) + 3));
      std::vector<Row> batch(g() % 60);
      const std::int64_t spread = 2 * delay + 4;
      for (Row& r : batch) {
        r.a = static_cast<std::int32_t>(g() % static_cast<std::uint64_t>(key_space));
        r.b = bs[g() % bs.size()];
        r.ts = base[input] + static_cast<std::int64_t>(g() % static_cast<std::uint64_t>(spread)) - spread / 2 - delay;
        r.payload = payload++;
      }
      const Model::result want = model.process(input, batch);
      const std::vector<Row> got = d.process(input, batch);
      REQUIRE(got == want.out);
      const fl::DedupStats& s = d.last_stats();
      CHECK(s.late_rows == want.late);
      CHECK(s.duplicate_rows == want.duplicates);
      CHECK(s.evicted_keys == want.evicted);
      CHECK(s.emitted_rows == want.out.size());
      CHECK(s.state_keys == model.state.size());
      CHECK(d.watermark() == model.watermark);
      for (std::size_t i = 0; i < inputs; ++i) CHECK(d.input_watermark(i) == model.inputs[i]);
      std::vector<Identity> keys;
      for (const auto& [k, exp] : model.state) keys.push_back(k);
      REQUIRE(d.state_keys() == keys);
      for (const auto& [k, exp] : model.state) CHECK(d.expires_at(k) == exp);
      total_late += want.late;
      total_dups += want.duplicates;
      total_evicted += want.evicted;
      if (g() % 8 == 0) {  // a checkpoint and a restart (R-DEDUP-6)
        Dedup restarted{delay, "restarted", fl::DedupOptions{.inputs = inputs, .policy = policy}};
        restarted.read_checkpoint(fl::checkpoint_blobs::of_snapshot(fl::checkpoint_snapshot(d)));
        d = std::move(restarted);
        ++restores;
      }
    }
  }
  // The data exercises every rule.
  CHECK(total_late > 500);
  CHECK(total_dups > 500);
  CHECK(total_evicted > 500);
  CHECK(restores > 50);
}

TEST_CASE("R-DEDUP-4: state stays bounded by the identities within the delay over a long stream") {
#if defined(__SANITIZE_ADDRESS__)
  constexpr std::int64_t total_rows = 500'000;  // sanitizer builds are ~20x slower
#else
  constexpr std::int64_t total_rows = 5'000'000;
#endif
  constexpr std::int64_t delay = 1000;
  constexpr std::int64_t batch_rows = 10'000;
  fl::DedupWithinWatermark<fl::Key<&Plain::id>, fl::EventTime<&Plain::ts>> d{delay};
  std::vector<Plain> batch(batch_rows);
  std::vector<Plain> out;
  std::size_t max_state = 0;
  std::uint64_t emitted = 0;
  std::size_t memory_at_warmup = 0;
  for (std::int64_t first = 0; first < total_rows; first += batch_rows) {
    // Identity = event time = position in the stream; every 10th row
    // redelivers the row 3 positions back, 3 ticks later (a duplicate).
    for (std::int64_t i = 0; i < batch_rows; ++i) {
      const std::int64_t pos = first + i;
      batch[static_cast<std::size_t>(i)] = (i % 10 == 9) ? Plain{pos - 3, pos} : Plain{pos, pos};
    }
    out.clear();
    d.process_into(batch, out);
    emitted += out.size();
    const std::int64_t max_et = first + batch_rows - 1;
    REQUIRE(d.watermark() == max_et - delay);
    // Held: identities whose expiry (event time + delay) is above the
    // watermark, i.e. first seen within one delay before it or after it.
    REQUIRE(d.state_size() <= static_cast<std::size_t>(2 * delay));
    REQUIRE(d.last_stats().duplicate_rows == static_cast<std::uint64_t>(batch_rows / 10));
    max_state = std::max(max_state, d.state_size());
    if (first == 20 * batch_rows) memory_at_warmup = d.state_memory_bytes();
  }
  CHECK(max_state > static_cast<std::size_t>(delay));
  CHECK(d.total_stats().emitted_rows == emitted);
  CHECK(d.total_stats().evicted_keys + d.state_size() == emitted);
  CHECK(d.total_stats().input_rows == static_cast<std::uint64_t>(total_rows));
  // No growth once warm: the memory is that of the bounded state (bucket
  // vectors are recycled, so it may move by a few bytes).
  CHECK(d.state_memory_bytes() <= memory_at_warmup + memory_at_warmup / 10);
}

}  // namespace ops_dedup_random
