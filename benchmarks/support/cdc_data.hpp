// benchmarks/support/cdc_data.hpp
//
// Change feeds for the AUTO CDC benchmark (benchmarks/auto_cdc.cpp).
//
// A change is {int64 key, two short strings, an int64, an operation, an
// int64 sequence}. `cdc_pool` pre-generates, for one configuration, the rows
// that pre-populate a target (every key of [0, keys) inserted at sequence 1)
// and a pool of batches whose mix is 80% updates, 10% inserts and 10%
// deletes, of which 5% (all updates) are late: their sequence is below the
// current one of their key. Keys are drawn uniformly or Zipf(0.99) over
// [0, keys) (support/zipf.hpp).
//
// The pool is replayed in epochs: when it wraps, every sequence (and every
// amount, so that values stay unique) is raised above all earlier ones, so a
// target keeps receiving fresh changes. The generator keeps each epoch valid
// whatever state the previous epoch left, and free of the cases whose
// outcome depends on details the benchmark does not measure:
//   - the first change of a key within an epoch is an upsert;
//   - a delete only targets a key whose latest change in the epoch is an
//     upsert (so no delete is a no-op, and none is late);
//   - an insert targets a key deleted earlier in the epoch, or a key never
//     used before (keys >= `keys`);
//   - a late change picks a key changed earlier in the epoch and a sequence
//     strictly between that key's previous and current ones (or the epoch's
//     start), so it is late in every epoch;
//   - sequences are distinct (no ties, R-CDC-5) and amounts are distinct,
//     so consecutive versions of a key never have identical values.
// Under these rules SCD1's final table is, per key, the highest-sequence
// change when it is an upsert, and SCD2's is the replay of each key's
// changes in sequence order (see `expected_scd1` / `expected_scd2`).
#pragma once

#include "support/zipf.hpp"

#include <absl/container/flat_hash_set.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace flowlib_bench::cdc {

enum class op : std::uint8_t { insert, update, del };

/// One row of the change feed.
struct Change {
  std::int64_t key;
  std::string name;  // short: within the small-string buffer
  std::string city;  // short: within the small-string buffer
  std::int64_t amount;
  op operation;
  std::int64_t seq;
};

enum class dist { uniform, zipf };

struct config {
  std::int64_t keys;
  std::int64_t batch;
  dist keys_dist;
  friend bool operator==(const config&, const config&) = default;
};

inline std::string label(const config& c) {
  return "keys:" + std::to_string(c.keys) + "/batch:" + std::to_string(c.batch) +
         (c.keys_dist == dist::uniform ? "/uniform" : "/zipf0.99");
}

inline constexpr double zipf_exponent = 0.99;
inline constexpr double late_fraction = 0.05;
inline constexpr double insert_fraction = 0.10;
inline constexpr double delete_fraction = 0.10;
/// Sequence of the pre-populated rows.
inline constexpr std::int64_t initial_seq = 1;
/// Distance between consecutive on-time sequences; late ones fall between.
inline constexpr std::int64_t seq_spacing = 1024;

inline const std::array<const char*, 16>& names() {
  static const std::array<const char*, 16> n = {
      "Isabel", "Raul",  "Mercedes", "Lily",   "Ana",    "Pedro", "Lucia", "Jorge",
      "Sofia",  "Diego", "Valeria",  "Carlos", "Camila", "Mateo", "Elena", "Tomas"};
  return n;
}
inline const std::array<const char*, 16>& cities() {
  static const std::array<const char*, 16> c = {
      "Monterrey", "Oaxaca",  "Tijuana", "Cancun",   "Guadalajara", "Mexicali", "Chihuahua", "Puebla",
      "Merida",    "Leon",    "Toluca",  "Queretaro", "Morelia",    "Saltillo", "Durango",   "Hermosillo"};
  return c;
}

/// The pre-populating rows and the pool of batches of one configuration.
struct cdc_pool {
  config cfg;
  std::uint64_t id;                         // unique per pool
  std::vector<Change> initial;              // keys [0, keys) at initial_seq
  std::vector<std::vector<Change>> batches;
  std::int64_t epoch = 0;
  std::int64_t epoch_seq_span = 0;          // sequences of one epoch lie below this span
  std::int64_t epoch_amount_span = 0;
  // What the data contains (for the smoke checks).
  std::size_t late = 0, deletes = 0, inserts = 0, updates = 0;

  cdc_pool(const config& c, std::size_t pool_size, std::uint64_t pool_id) : cfg(c), id(pool_id) {
    std::mt19937_64 g(0xcdc00000u + static_cast<std::uint64_t>(c.keys) * 31 +
                      static_cast<std::uint64_t>(c.batch) * 7 + static_cast<unsigned>(c.keys_dist));
    const auto pick = [&](const auto& list) { return std::string(list[g() % list.size()]); };
    const auto n = static_cast<std::size_t>(c.keys);
    initial.reserve(n);
    for (std::size_t k = 0; k < n; ++k) {
      initial.push_back(Change{static_cast<std::int64_t>(k), pick(names()), pick(cities()),
                               -static_cast<std::int64_t>(k) - 1, op::insert, initial_seq});
    }

    const std::size_t total = pool_size * static_cast<std::size_t>(c.batch);
    const std::int64_t base = initial_seq + seq_spacing;  // the epoch's start
    epoch_seq_span = base + static_cast<std::int64_t>(total + 2) * seq_spacing;
    epoch_amount_span = static_cast<std::int64_t>(total + 1);

    // Per key, within the epoch: 0 untouched, 1 live (latest change an
    // upsert), 2 deleted; the sequences of its latest two on-time changes.
    const std::size_t universe = n + total;
    std::vector<std::uint8_t> status(universe, 0);
    std::vector<std::int64_t> cur(universe, 0), prev(universe, 0);
    std::vector<std::int64_t> touched;  // keys of on-time changes, in order
    std::vector<std::int64_t> dead;     // candidates for inserts (may be stale)
    touched.reserve(total);
    absl::flat_hash_set<std::int64_t> late_seqs;
    std::int64_t next_fresh = c.keys;

    std::uniform_int_distribution<std::int64_t> uniform(0, c.keys - 1);
    std::optional<permuted_zipf> zipf;
    if (c.keys_dist == dist::zipf) zipf.emplace(static_cast<std::uint64_t>(c.keys), zipf_exponent, g());
    const auto draw = [&]() -> std::int64_t {
      return zipf ? static_cast<std::int64_t>((*zipf)(g)) : uniform(g);
    };
    const auto from_touched = [&]() { return touched[g() % touched.size()]; };
    std::uniform_real_distribution<double> unit(0.0, 1.0);

    std::vector<Change> all;
    all.reserve(total);
    std::int64_t position = 0;  // on-time changes so far
    for (std::size_t i = 0; i < total; ++i) {
      const std::int64_t amount = static_cast<std::int64_t>(i) + 1;
      const double u = unit(g);
      // A late update: a key changed earlier in the epoch, below its current sequence.
      if (u < late_fraction && !touched.empty()) {
        bool made = false;
        for (int attempt = 0; attempt < 8 && !made; ++attempt) {
          const std::int64_t k = from_touched();
          const auto ku = static_cast<std::size_t>(k);
          const std::int64_t lo = prev[ku] != 0 ? prev[ku] : base;
          const std::int64_t hi = cur[ku];
          if (hi - lo < 2) continue;
          std::uniform_int_distribution<std::int64_t> in(lo + 1, hi - 1);
          const std::int64_t s = in(g);
          if (s % seq_spacing == 0 || !late_seqs.insert(s).second) continue;
          all.push_back(Change{k, pick(names()), pick(cities()), amount, op::update, s});
          made = true;
        }
        if (made) {
          ++late;
          continue;
        }
      }
      // An on-time change: 80% updates, 10% inserts, 10% deletes overall.
      const double v = unit(g) * (1.0 - late_fraction);
      op o = v < insert_fraction ? op::insert : v < insert_fraction + delete_fraction ? op::del : op::update;
      std::int64_t k = -1;
      if (o == op::del) {
        for (int attempt = 0; attempt < 4 && k < 0; ++attempt) {
          const std::int64_t d = draw();
          if (status[static_cast<std::size_t>(d)] == 1) k = d;
        }
        for (int attempt = 0; attempt < 16 && k < 0 && !touched.empty(); ++attempt) {
          const std::int64_t d = from_touched();
          if (status[static_cast<std::size_t>(d)] == 1) k = d;
        }
        if (k < 0) o = op::update;  // nothing to delete yet
      } else if (o == op::insert) {
        while (!dead.empty() && k < 0) {
          const std::size_t j = g() % dead.size();
          const std::int64_t d = dead[j];
          dead[j] = dead.back();
          dead.pop_back();
          if (status[static_cast<std::size_t>(d)] == 2) k = d;
        }
        if (k < 0) k = next_fresh++;
      }
      if (o == op::update) k = draw();
      const auto ku = static_cast<std::size_t>(k);
      const std::int64_t s = base + (++position) * seq_spacing;
      prev[ku] = cur[ku];
      cur[ku] = s;
      status[ku] = o == op::del ? 2 : 1;
      if (o == op::del) dead.push_back(k);
      touched.push_back(k);
      (o == op::del ? deletes : o == op::insert ? inserts : updates) += 1;
      if (o == op::del) {
        all.push_back(Change{k, std::string(), std::string(), 0, op::del, s});
      } else {
        all.push_back(Change{k, pick(names()), pick(cities()), amount, o, s});
      }
    }

    batches.resize(pool_size);
    for (std::size_t p = 0; p < pool_size; ++p) {
      const auto first = all.begin() + static_cast<std::ptrdiff_t>(p * static_cast<std::size_t>(c.batch));
      batches[p].assign(std::make_move_iterator(first),
                        std::make_move_iterator(first + static_cast<std::ptrdiff_t>(c.batch)));
    }
  }

  /// Raises every sequence and amount of the batches to epoch `e`.
  void rebase(std::int64_t e) {
    const std::int64_t steps = e - epoch;
    for (auto& b : batches) {
      for (auto& r : b) {
        r.seq += steps * epoch_seq_span;
        if (r.operation != op::del) r.amount += steps * epoch_amount_span;
      }
    }
    epoch = e;
  }
};

// --- Expected final tables, computed independently of any implementation ----

/// A current row (SCD1).
struct current_row {
  std::int64_t key;
  std::string name;
  std::string city;
  std::int64_t amount;
  friend auto operator<=>(const current_row&, const current_row&) = default;
};

/// A version (SCD2); `end_at` is empty for the current version.
struct version_row {
  std::int64_t key;
  std::string name;
  std::string city;
  std::int64_t amount;
  std::int64_t start_at;
  std::optional<std::int64_t> end_at;
  friend auto operator<=>(const version_row&, const version_row&) = default;
};

using change_log = std::vector<const std::vector<Change>*>;

/// Each key's changes in sequence order (ties: later in source order last).
inline std::map<std::int64_t, std::vector<const Change*>> by_key(const change_log& log) {
  std::map<std::int64_t, std::vector<const Change*>> out;
  for (const auto* b : log)
    for (const Change& c : *b) out[c.key].push_back(&c);
  for (auto& [k, v] : out)
    std::stable_sort(v.begin(), v.end(), [](const Change* a, const Change* b) { return a->seq < b->seq; });
  return out;
}

/// SCD1 (R-CDC-2): per key, the last change in sequence order, if an upsert.
inline std::vector<current_row> expected_scd1(const change_log& log) {
  std::vector<current_row> out;
  for (const auto& [k, v] : by_key(log)) {
    const Change& c = *v.back();
    if (c.operation != op::del) out.push_back({k, c.name, c.city, c.amount});
  }
  return out;  // ordered by key, one row per key
}

/// SCD2 (R-CDC-4), every column tracked: replay each key's changes in
/// sequence order; an upsert with other values closes the current version
/// and opens one, a delete closes the current version.
inline std::vector<version_row> expected_scd2(const change_log& log) {
  std::vector<version_row> out;
  for (const auto& [k, v] : by_key(log)) {
    const std::size_t first = out.size();
    bool open = false;
    for (const Change* c : v) {
      if (c->operation == op::del) {
        if (open) out.back().end_at = c->seq;
        open = false;
        continue;
      }
      if (open) {
        const version_row& cur = out.back();
        if (cur.name == c->name && cur.city == c->city && cur.amount == c->amount) continue;
        out.back().end_at = c->seq;
      }
      out.push_back({k, c->name, c->city, c->amount, c->seq, std::nullopt});
      open = true;
    }
    std::sort(out.begin() + static_cast<std::ptrdiff_t>(first), out.end());
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace flowlib_bench::cdc
