// The reference model of the randomised AUTO CDC tests (tests/flows/auto_cdc/
// random/: scd1.cpp, scd2.cpp, checkpoint.cpp, allocation.cpp): random change feeds
// (inserts, updates, deletes, truncates, nulls) over a small key space, applied
// in random orders and random batch splits, and then applied a second time,
// must give the target that a plain replay of the changes sorted by sequence
// gives. Some batches carry a change with a null sequence: the batch must fail
// and change nothing (it is then retried without it), as a source would.
#pragma once

#include <flowlib/flows/auto_cdc.hpp>
#include <flowlib/table.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <iterator>
#include <map>
#include <memory>
#include <ostream>
#include <optional>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace fl = flowlib;

namespace model {

using ostr = std::optional<std::string>;
enum op : int { upsert = 0, remove = 1, truncate = 2 };

struct Change {
  int key;
  ostr name;
  ostr city;
  int op;
  std::optional<std::int64_t> seq;
};
FLOWLIB_SCHEMA(Change, key, name, city, op, seq);

struct Row {
  int key;
  ostr name;
  ostr city;
  friend bool operator==(const Row&, const Row&) = default;
  friend auto operator<=>(const Row&, const Row&) = default;
};
FLOWLIB_SCHEMA(Row, key, name, city);

struct Version {
  int key;
  ostr name;
  ostr city;
  std::int64_t start_at;
  std::optional<std::int64_t> end_at;
  friend bool operator==(const Version&, const Version&) = default;
  friend auto operator<=>(const Version&, const Version&) = default;
};
FLOWLIB_SCHEMA(Version, key, name, city, (start_at, "__START_AT"), (end_at, "__END_AT"));

inline std::ostream& operator<<(std::ostream& os, const ostr& v) { return os << (v ? *v : "null"); }
inline std::ostream& operator<<(std::ostream& os, const Row& r) {
  return os << '(' << r.key << ' ' << r.name << ' ' << r.city << ')';
}
inline std::ostream& operator<<(std::ostream& os, const Version& r) {
  os << '(' << r.key << ' ' << r.name << ' ' << r.city << ' ' << r.start_at << ' ';
  return (r.end_at ? os << *r.end_at : os << "null") << ')';
}
inline std::ostream& operator<<(std::ostream& os, const Change& c) {
  return os << '[' << c.key << ' ' << c.name << ' ' << c.city << " op" << c.op << " @"
            << (c.seq ? *c.seq : -1) << ']';
}
template <class T>
std::ostream& operator<<(std::ostream& os, const std::vector<T>& v) {
  for (const auto& x : v) os << x << ' ';
  return os;
}

struct IsDelete {
  bool operator()(const Change& c) const { return c.op == remove; }
};
struct IsTruncate {
  bool operator()(const Change& c) const { return c.op == truncate; }
};

using K = fl::Key<&Change::key>;
using S = fl::Seq<&Change::seq>;
using Cols = fl::except_column_list<"op", "seq">;

using Scd1 = fl::AutoCdc<K, S, fl::Scd1, fl::apply_as_deletes<IsDelete>,
                         fl::apply_as_truncates<IsTruncate>, Cols>;
using Scd1Ignore = fl::AutoCdc<K, S, fl::Scd1, fl::apply_as_deletes<IsDelete>,
                               fl::apply_as_truncates<IsTruncate>, Cols, fl::ignore_null_updates>;
using Scd2 = fl::AutoCdc<K, S, fl::Scd2<>, fl::apply_as_deletes<IsDelete>, Cols>;
using Scd2NoCity = fl::AutoCdc<K, S, fl::Scd2<fl::track_history_except_column_list<"city">>,
                               fl::apply_as_deletes<IsDelete>, Cols>;
using Scd2Ignore =
    fl::AutoCdc<K, S, fl::Scd2<>, fl::apply_as_deletes<IsDelete>, Cols, fl::ignore_null_updates>;

// --- the reference: sort by sequence, replay -----------------------------------

// Changes per key by sequence; among equal sequences (ties, R-CDC-5) in
// source order.
inline std::map<int, std::vector<Change>> by_key_sorted(const std::vector<Change>& changes,
                                                        std::optional<std::int64_t> floor) {
  std::map<int, std::vector<Change>> out;
  for (const Change& c : changes) {
    if (c.op == truncate) continue;
    if (floor && *c.seq < *floor) continue;  // removed by a later truncate
    out[c.key].push_back(c);
  }
  for (auto& [k, v] : out) {
    std::stable_sort(v.begin(), v.end(),
                     [](const Change& a, const Change& b) { return *a.seq < *b.seq; });
  }
  return out;
}

// One change replayed onto a key's row as SCD1 applies it (R-CDC-2, R-CDC-6).
inline void replay_scd1(std::optional<Row>& row, const Change& c, bool ignore_nulls) {
  if (c.op == remove) {
    row.reset();
  } else if (ignore_nulls && row) {
    if (c.name) row->name = c.name;
    if (c.city) row->city = c.city;
  } else {
    row = Row{c.key, c.name, c.city};
  }
}

inline std::optional<std::int64_t> truncate_floor(const std::vector<Change>& changes) {
  std::optional<std::int64_t> f;
  for (const Change& c : changes)
    if (c.op == truncate && (!f || *f < *c.seq)) f = c.seq;
  return f;
}

inline std::vector<Row> reference_scd1(const std::vector<Change>& changes, bool ignore_nulls) {
  std::vector<Row> out;
  for (const auto& [k, events] : by_key_sorted(changes, truncate_floor(changes))) {
    std::optional<Row> row;
    for (const Change& c : events) replay_scd1(row, c, ignore_nulls);
    if (row) out.push_back(*row);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// SCD2: the changes of one sequence (a tie, R-CDC-5) act as one change,
// the outcome of replaying them in source order onto the open version as
// SCD1 does: a delete if the last is a delete, else an upsert of the row
// the replay leaves (with ignore_null_updates, a null keeps the value
// before it, but after a delete among them there is none to keep).
inline std::vector<Version> reference_scd2(const std::vector<Change>& changes, bool track_city,
                                    bool ignore_nulls) {
  std::vector<Version> out;
  for (const auto& [k, events] : by_key_sorted(changes, std::nullopt)) {
    // The open version: its index into out, or none (a plain index: at -O1
    // g++ warns, falsely, that an optional index may be used uninitialized).
    constexpr std::size_t none = static_cast<std::size_t>(-1);
    std::size_t open = none;
    for (std::size_t i = 0; i < events.size();) {
      const std::int64_t s = *events[i].seq;
      std::optional<Row> row;
      if (open != none) row = Row{k, out[open].name, out[open].city};
      for (; i < events.size() && *events[i].seq == s; ++i) replay_scd1(row, events[i], ignore_nulls);
      if (!row) {
        if (open != none) out[open].end_at = s;
        open = none;
        continue;
      }
      Version v{k, row->name, row->city, s, std::nullopt};
      if (open != none && out[open].name == v.name && (!track_city || out[open].city == v.city)) {
        out[open].name = v.name;  // untracked columns in place
        out[open].city = v.city;
        continue;
      }
      if (open != none) out[open].end_at = s;
      out.push_back(v);
      open = out.size() - 1;
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

// --- random feeds ----------------------------------------------------------------

inline std::vector<Change> random_feed(std::mt19937& rng, bool with_truncates, bool ties = false) {
  // (Long ones too: beyond a string's small buffer, a stored value is
  // given room before it is written; see cdc_assign_prep.)
  static const char* names[] = {"Ana", "Raul", "Maria de los Angeles Lopez"};
  static const char* cities[] = {"Oaxaca", "Cancun", "San Cristobal de las Casas"};
  const int n = std::uniform_int_distribution<int>(1, 24)(rng);
  std::set<std::pair<int, std::int64_t>> used;  // (key, seq) pairs are unique
  std::vector<Change> out;
  std::uniform_int_distribution<int> key(0, 3), pick(0, 2), pct(0, 99);
  std::uniform_int_distribution<std::int64_t> seq(1, 30);
  for (int i = 0; i < n; ++i) {
    Change c;
    const int p = pct(rng);
    c.op = with_truncates && p < 4 ? truncate : p < 30 ? remove : upsert;
    c.key = c.op == truncate ? -1 : key(rng);
    std::int64_t s;
    if (ties && !out.empty() && pct(rng) < 40) {
      // A tie: an earlier change's key and sequence, so that a key's tied
      // changes mix upserts and deletes, in every order (R-CDC-5).
      const Change& e =
          out[std::uniform_int_distribution<std::size_t>(0, out.size() - 1)(rng)];
      if (c.op != truncate && e.op != truncate) c.key = e.key;
      s = *e.seq;
    } else {
      do {
        s = seq(rng);
      } while (!used.insert({c.key, s}).second && !ties);
    }
    c.seq = s;
    if (c.op == upsert) {
      if (pct(rng) >= 20) c.name = names[pick(rng)];
      if (pct(rng) >= 20) c.city = cities[pick(rng)];
    }
    out.push_back(c);
  }
  return out;
}

// A random order of `changes` in which the changes of each key and sequence
// (ties) keep their source order: ties are resolved by source order
// (R-CDC-5), and any order of the rest gives the same target (R-CDC-1).
inline std::vector<Change> shuffle_keeping_ties(std::mt19937& rng,
                                                const std::vector<Change>& changes) {
  std::vector<std::size_t> perm(changes.size());
  for (std::size_t i = 0; i < perm.size(); ++i) perm[i] = i;
  std::shuffle(perm.begin(), perm.end(), rng);
  std::map<std::pair<int, std::int64_t>, std::vector<std::size_t>> slots;  // per tie: its places
  for (std::size_t i = 0; i < perm.size(); ++i) {
    const Change& c = changes[perm[i]];
    slots[{c.key, *c.seq}].push_back(i);
  }
  for (const auto& [tie, places] : slots) {
    std::vector<std::size_t> members;
    for (const std::size_t i : places) members.push_back(perm[i]);
    std::sort(members.begin(), members.end());
    for (std::size_t j = 0; j < places.size(); ++j) perm[places[j]] = members[j];
  }
  std::vector<Change> out;
  out.reserve(changes.size());
  for (const std::size_t i : perm) out.push_back(changes[i]);
  return out;
}

// Applies `changes` in a random order and random batches; with probability
// 1/5 a batch first carries a change with a null sequence, which must fail
// the batch without changing anything.
template <class Flow, class Table>
void apply_randomly(std::mt19937& rng, Flow& flow, Table& table, std::vector<Change> changes,
                    bool shuffle = true) {
  if (shuffle) std::shuffle(changes.begin(), changes.end(), rng);
  std::size_t i = 0;
  std::uniform_int_distribution<int> pct(0, 99);
  while (i < changes.size()) {
    const std::size_t len =
        std::uniform_int_distribution<std::size_t>(1, changes.size() - i)(rng);
    std::vector<Change> batch(changes.begin() + static_cast<std::ptrdiff_t>(i),
                              changes.begin() + static_cast<std::ptrdiff_t>(i + len));
    if (pct(rng) < 20) {
      auto poisoned = batch;
      const auto at = std::uniform_int_distribution<std::size_t>(0, poisoned.size())(rng);
      poisoned.insert(poisoned.begin() + static_cast<std::ptrdiff_t>(at),
                      Change{1, "X", "Y", upsert, std::nullopt});
      const auto before = table.sorted_rows();
      CHECK_THROWS_AS(flow.apply(table, poisoned), fl::error);
      REQUIRE(table.sorted_rows() == before);
    }
    flow.apply(table, batch);
    i += len;
  }
}

// With `ties`, changes may share key and sequence (deletes among them);
// those keep their source order, since the later one wins, in an order of
// the rest that is random too.
template <class Flow, class Expected>
void run_cases(int cases, unsigned seed0, bool truncates, Expected&& expected, bool ties = false) {
  int agreed = 0;  // cases whose target equals the reference, twice
  for (int n = 0; n < cases; ++n) {
    std::mt19937 rng(seed0 + static_cast<unsigned>(n));
    const std::vector<Change> changes = random_feed(rng, truncates, ties);
    const auto want = expected(changes);
    using Row = typename decltype(want)::value_type;
    fl::StreamingTable<Row> table{"target"};
    // Every other case takes the SCD2 one-pass path however few its keys
    // (the default keeps small targets on the planned path).
    fl::CdcOptions settings;
    if (n % 2 == 1) settings.tuning.scd2_one_pass_min_keys = 0;
    Flow flow{"random_cdc", settings};
    const auto apply = [&] {
      if (ties) {
        apply_randomly(rng, flow, table, shuffle_keeping_ties(rng, changes), false);
      } else {
        apply_randomly(rng, flow, table, changes);
      }
    };
    apply();
    const auto once = table.sorted_rows();
    apply();  // again, in another order and split
    const auto twice = table.sorted_rows();
    if (once != want || twice != want) {
      INFO("case " << n << " (seed " << seed0 + static_cast<unsigned>(n) << "), changes: "
                   << changes);
      CHECK(once == want);
      CHECK(twice == want);
      return;
    }
    ++agreed;
  }
  CHECK(agreed == cases);
}

// At least 2,000 cases per suite; the variants run fewer under the
// sanitizers (unoptimised, far slower) to keep each program within budget.
constexpr int kCases = 2000;
#if defined(__SANITIZE_ADDRESS__)
constexpr int kVariantCases = 400;
#else
constexpr int kVariantCases = 2000;
#endif

}  // namespace model

// --- The one-pass path against the planned path ------------------------------------
//
// A batch for a target the flow already maintains is applied in one pass
// over the changes where the flow allows it (see the one-pass paths in
// flows/cdc/detail/); an input range that is not a
// forward range is always planned, which gives the tests a reference run
// of the same flow type.

namespace onepass {

using namespace model;

/// The batch as an input range (not a forward range): always planned.
template <class C = Change>
struct input_only {
  const std::vector<C>* rows;
  struct iterator {
    using value_type = C;
    using difference_type = std::ptrdiff_t;
    using iterator_concept = std::input_iterator_tag;
    const C* p = nullptr;
    const C& operator*() const { return *p; }
    iterator& operator++() {
      ++p;
      return *this;
    }
    void operator++(int) { ++p; }
    bool operator==(const iterator&) const = default;
  };
  iterator begin() const { return {rows->data()}; }
  iterator end() const { return {rows->data() + rows->size()}; }
};
template <class C>
input_only(const std::vector<C>*) -> input_only<C>;
static_assert(std::ranges::input_range<input_only<>> && !std::ranges::forward_range<input_only<>>);

/// A delete predicate that throws at its n-th call (n < 0: never).
struct CountingDelete {
  std::shared_ptr<int> calls_left = std::make_shared<int>(-1);
  bool operator()(const Change& c) const {
    if (*calls_left >= 0 && (*calls_left)-- == 0) throw std::runtime_error("predicate failed");
    return c.op == model::remove;
  }
};

/// A batch over few keys and few sequences: ties, changes out of order,
/// deletes, re-inserts, sometimes a truncate. Sequences are drawn from
/// base + [1, 40]: a base that rises from batch to batch makes most changes
/// follow their key's kept ones, with some late.
inline std::vector<Change> random_batch(std::mt19937& rng, bool truncates, std::int64_t base = 0) {
  std::uniform_int_distribution<int> pct(0, 99);
  const std::size_t n = std::uniform_int_distribution<std::size_t>(1, 14)(rng);
  std::vector<Change> out;
  for (std::size_t i = 0; i < n; ++i) {
    Change c{std::uniform_int_distribution<int>(0, 5)(rng), std::nullopt, std::nullopt, upsert,
             base + std::uniform_int_distribution<std::int64_t>(1, 40)(rng)};
    const int p = pct(rng);
    if (truncates && p < 3) {
      c.op = model::truncate;
    } else if (p < 30) {
      c.op = model::remove;
    } else {
      if (pct(rng) >= 20) c.name = std::string(1, static_cast<char>('a' + pct(rng) % 4));
      if (pct(rng) >= 20) c.city = std::string(1, static_cast<char>('p' + pct(rng) % 4));
    }
    out.push_back(c);
  }
  return out;
}

/// `batch` with a change whose sequence is null inserted at a random place
/// (R-CDC-5: the whole batch must fail and change nothing).
inline std::vector<Change> with_null_sequence(std::mt19937& rng, std::vector<Change> batch) {
  const auto at = std::uniform_int_distribution<std::size_t>(0, batch.size())(rng);
  batch.insert(batch.begin() + static_cast<std::ptrdiff_t>(at),
               Change{1, "X", "Y", upsert, std::nullopt});
  return batch;
}

/// Applies `batch` to `a` through `fast`, from the vector, or with `deque`
/// from a copy in a std::deque (a forward range that is not contiguous: no
/// read-ahead), and to `b` through `planned`, from an input-only range
/// (always planned); both with `checks`, if any. Returns both metrics.
template <class Flow, class Table, class... Checks>
std::pair<fl::BatchStats, fl::BatchStats> apply_both(Flow& fast, Table& a, Flow& planned, Table& b,
                                                     const std::vector<Change>& batch, bool deque,
                                                     const Checks&... checks) {
  fl::BatchStats sa;
  if (deque) {
    const std::deque<Change> rows(batch.begin(), batch.end());
    sa = fast.apply(a, rows, checks...);
  } else {
    sa = fast.apply(a, batch, checks...);
  }
  return {sa, planned.apply(b, input_only{&batch}, checks...)};
}

inline void require_same(const fl::BatchStats& a, const fl::BatchStats& b) {
  REQUIRE(a.input_rows == b.input_rows);
  REQUIRE(a.dropped_rows == b.dropped_rows);
  REQUIRE(a.upserted_rows == b.upserted_rows);
  REQUIRE(a.deleted_rows == b.deleted_rows);
  REQUIRE(a.ignored_late_rows == b.ignored_late_rows);
  REQUIRE(a.tied_rows == b.tied_rows);
  REQUIRE(a.truncated_rows == b.truncated_rows);
}

/// Applies `batch` to `flow` over `t`, and to `planned` over `ref` through
/// an input-only range (always planned): the same counts and rows.
template <class Flow, class Planned, class Table>
void require_same_apply(Flow& flow, Table& t, Planned& planned, Table& ref, const std::vector<Change>& batch) {
  const fl::BatchStats s = flow.apply(t, batch);
  require_same(s, planned.apply(ref, input_only{&batch}));
  REQUIRE(t.sorted_rows() == ref.sorted_rows());
}

}  // namespace onepass
