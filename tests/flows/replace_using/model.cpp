// REPLACE USING against a reference model (tests/support/reference_model.hpp),
// on generated inputs.
//
//   - R-USING-4: thousands of generated inputs (key cardinalities 1, 3, 20
//     and 200; a single int key, a composite (int, string) key, a nullable
//     key, a nullable composite key; single and struct sequences; equal-
//     sequence ties, exact duplicate rows, late rows with lower sequences),
//     each split into batches at random and applied in several random
//     orders, and replayed: the final target must be the multiset "for each
//     key, all rows carrying the key's maximum sequence over the input".
//   - R-USING-1/2/3: the same inputs batch by batch against the model, with
//     the BatchStats of every batch, key_count() and sequence_of().
//   - R-USING-8 and R-USING-7 under the model: drop expectations and null
//     sequences.
//
// Every generator is a std::mt19937_64 with a fixed seed: a failure names
// the seed and the case, and reproduces.
#include <flowlib/flowlib.hpp>

#include <support/errors.hpp>
#include <support/reference_model.hpp>
#include <support/storage_policies.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <ostream>
#include <random>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

namespace flows_replace_using_model {

namespace fl = flowlib;

struct Row {
  int a = 0;
  std::string b;
  std::optional<int> c;
  std::optional<std::string> d;
  int seq = 0;
  int tie = 0;
  std::optional<int> oseq;  // a nullable sequence, for R-USING-7
  int uid = 0;              // tells rows apart (exact duplicates share it)
  friend auto operator<=>(const Row&, const Row&) = default;
  friend std::ostream& operator<<(std::ostream& os, const Row& r) {
    os << "{a=" << r.a << " b=" << r.b << " c=" << (r.c ? std::to_string(*r.c) : "null")
       << " d=" << (r.d ? *r.d : "null") << " seq=" << r.seq << " tie=" << r.tie
       << " oseq=" << (r.oseq ? std::to_string(*r.oseq) : "null") << " uid=" << r.uid << "}";
    return os;
  }
};
FLOWLIB_SCHEMA(Row, a, b, c, d, seq, tie, oseq, uid);

using KeyInt = fl::Key<&Row::a>;
using KeyIntString = fl::Key<&Row::a, &Row::b>;
using KeyNullable = fl::Key<&Row::c>;
using KeyNullablePair = fl::Key<&Row::c, &Row::d>;
using SeqOne = fl::Seq<&Row::seq>;
using SeqStruct = fl::Seq<&Row::seq, &Row::tie>;

/// Sets the key columns of `r` to the i-th key (injective in i).
template <class K>
void set_key(Row& r, int i);
template <>
void set_key<KeyInt>(Row& r, int i) {
  r.a = i;
}
template <>
void set_key<KeyIntString>(Row& r, int i) {
  r.a = i / 3;
  r.b = std::string(static_cast<std::size_t>(i % 3), 'k');  // "", "k", "kk"
}
template <>
void set_key<KeyNullable>(Row& r, int i) {
  r.c = i == 0 ? std::nullopt : std::optional<int>(i - 1);
}
template <>
void set_key<KeyNullablePair>(Row& r, int i) {
  const int q = i / 3;
  switch (i % 3) {
    case 0:  // (null, null) for i == 0, else (null, "q")
      r.c = std::nullopt;
      r.d = q == 0 ? std::nullopt : std::optional<std::string>(std::to_string(q));
      break;
    case 1:
      r.c = q;
      r.d = std::nullopt;
      break;
    default:
      r.c = q;
      r.d = std::to_string(q);
      break;
  }
}

struct Gen {
  std::mt19937_64 rng;
  int uid = 0;
  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); }
  bool chance(int one_in) { return pick(0, one_in - 1) == 0; }

  /// An input for key type K with `card` possible keys.
  template <class K>
  std::vector<Row> input(int card) {
    static constexpr int seq_ranges[] = {1, 2, 3, 8, 1000};
    const int seq_range = seq_ranges[pick(0, 4)];
    const int n = pick(0, std::min(3 * card + 12, 90));
    std::vector<Row> rows;
    rows.reserve(static_cast<std::size_t>(n) + static_cast<std::size_t>(n) / 4 + 1);
    for (int i = 0; i < n; ++i) {
      if (!rows.empty() && chance(16)) {  // an exact duplicate of an earlier row
        rows.push_back(rows[static_cast<std::size_t>(pick(0, static_cast<int>(rows.size()) - 1))]);
        continue;
      }
      Row r;
      // Non-key columns get noise; set_key overwrites the key columns.
      r.a = pick(0, 2);
      r.b = chance(2) ? "" : "p";
      r.c = chance(2) ? std::nullopt : std::optional<int>(pick(0, 2));
      r.d = chance(2) ? std::nullopt : std::optional<std::string>("q");
      set_key<K>(r, pick(0, card - 1));
      r.seq = pick(0, seq_range - 1);
      r.tie = pick(0, 1);
      r.oseq = r.seq;
      r.uid = ++uid;
      rows.push_back(std::move(r));
    }
    // Late rows: copies of earlier rows with a lower sequence, at the end.
    const int late = n == 0 ? 0 : pick(0, n / 6 + 1);
    for (int i = 0; i < late; ++i) {
      Row r = rows[static_cast<std::size_t>(pick(0, n - 1))];
      r.seq -= pick(1, 3);
      r.oseq = r.seq;
      r.uid = ++uid;
      rows.push_back(std::move(r));
    }
    return rows;
  }

  /// Splits `input` at random cut points (empty batches allowed).
  std::vector<std::vector<Row>> split(const std::vector<Row>& input) {
    const int n = static_cast<int>(input.size());
    const int m = pick(1, 1 + std::min(n, 7));
    std::vector<int> cuts{0, n};
    for (int i = 1; i < m; ++i) cuts.push_back(pick(0, n));
    std::sort(cuts.begin(), cuts.end());
    std::vector<std::vector<Row>> batches;
    for (std::size_t i = 0; i + 1 < cuts.size(); ++i) {
      batches.emplace_back(input.begin() + cuts[i], input.begin() + cuts[i + 1]);
    }
    return batches;
  }

  template <class T>
  void shuffle(std::vector<T>& v) {
    std::shuffle(v.begin(), v.end(), rng);
  }
};

/// The multiset of a range of rows as sorted uids. Rows that share a uid
/// are identical (exact duplicates), so this is the multiset of rows, at a
/// fraction of the cost of sorting whole rows; full rows are compared once
/// per run.
template <class Rows>
std::vector<int> uids(Rows&& rows) {
  std::vector<int> out;
  for (const Row& r : rows) out.push_back(r.uid);
  std::sort(out.begin(), out.end());
  return out;
}

/// uids(flowtest::final_state<K, S>(input)), without copying and sorting
/// whole rows.
template <class K, class S>
std::vector<int> final_uids(const std::vector<Row>& input) {
  std::map<typename K::value_type, typename S::value_type> max_seq;
  for (const Row& r : input) {
    const auto s = *S{}(r);
    auto [it, fresh] = max_seq.emplace(K{}(r), s);
    if (!fresh && it->second < s) it->second = s;
  }
  std::vector<int> out;
  for (const Row& r : input) {
    if (*S{}(r) == max_seq.at(K{}(r))) out.push_back(r.uid);
  }
  std::sort(out.begin(), out.end());
  return out;
}

template <class K, class S>
std::size_t distinct_keys(const std::vector<Row>& rows) {
  std::set<typename K::value_type> keys;
  for (const Row& r : rows) keys.insert(K{}(r));
  return keys.size();
}

template <class Storage, class K, class S>
struct Harness {
  using Flow = fl::ReplaceUsing<K, S>;
  fl::StreamingTable<Row, Storage> table{"model_target"};
  Flow flow{"model_flow"};

  /// Applies the batches in `order`; checks every batch's accounting.
  bool apply_all(const std::vector<std::vector<Row>>& batches, const std::vector<std::size_t>& order) {
    for (std::size_t i : order) {
      const fl::BatchStats s = flow.apply(table, batches[i]);
      if (!flowtest::rows_accounted(s) || s.input_rows != batches[i].size()) {
        FAIL_CHECK("BatchStats accounting broken on batch " << i);
        return false;
      }
    }
    return true;
  }
};

struct Totals {
  int cases = 0;
  int batches = 0;
  int rows = 0;
};

/// One generated case: R-USING-4 under several orders and a replay, and the
/// batch-by-batch model of R-USING-1/2/3. Returns false after a failure.
template <class Storage, class K, class S>
bool run_case(Gen& gen, int card, Totals& totals) {
  const std::vector<Row> input = gen.template input<K>(card);
  const std::vector<std::vector<Row>> batches = gen.split(input);
  const std::vector<Row> expected = flowtest::final_state<K, S>(input);
  const std::size_t keys = distinct_keys<K, S>(input);
  ++totals.cases;
  totals.rows += static_cast<int>(input.size());
  totals.batches += static_cast<int>(batches.size());
  std::vector<std::size_t> order(batches.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;

  // R-USING-1/2/3 batch by batch, in source order.
  {
    Harness<Storage, K, S> h;
    flowtest::ReplaceUsingModel<K, S> m;
    for (std::size_t i = 0; i < batches.size(); ++i) {
      const fl::BatchStats got = h.flow.apply(h.table, batches[i]);
      const fl::BatchStats want = m.apply(batches[i]);
      CAPTURE(i);
      if (!(got == want)) {
        CHECK(flowtest::counts_of(got) == flowtest::counts_of(want));
        return false;
      }
      if (!flowtest::rows_accounted(got)) {
        FAIL_CHECK("input_rows != dropped + superseded + ignored_late + applied");
        return false;
      }
      std::vector<int> model_uids;
      for (const auto& [k, e] : m.keys()) {
        for (const Row& r : e.rows) model_uids.push_back(r.uid);
      }
      std::sort(model_uids.begin(), model_uids.end());
      if (uids(h.table.rows()) != model_uids || h.flow.key_count() != m.key_count() ||
          h.table.size() != model_uids.size()) {
        CHECK(h.table.sorted_rows() == m.sorted_rows());
        CHECK(h.flow.key_count() == m.key_count());
        return false;
      }
      for (const Row& r : batches[i]) {  // the keys this batch touched
        if (h.flow.sequence_of(K{}(r)) != m.sequence_of(K{}(r))) {
          FAIL_CHECK("sequence_of() differs from the model");
          return false;
        }
      }
    }
    if (h.table.sorted_rows() != expected || h.flow.key_count() != keys) {
      CHECK(h.table.sorted_rows() == expected);
      CHECK(h.flow.key_count() == keys);
      return false;
    }
  }

  // R-USING-4: the same final multiset under random batch orders (with the
  // source order above and the replay's order below, three orders a case).
  const std::vector<int> expected_uids = uids(expected);
  for (int round = 0; round < 1; ++round) {
    gen.shuffle(order);
    Harness<Storage, K, S> h;
    if (!h.apply_all(batches, order)) return false;
    if (uids(h.table.rows()) != expected_uids || h.flow.key_count() != keys) {
      CAPTURE(round);
      CHECK(h.table.sorted_rows() == expected);
      CHECK(h.flow.key_count() == keys);
      return false;
    }
  }

  // Replays: the input applied in full, then some batches again (or the
  // whole input twice). A replay is more input: the target must be the
  // reference over input + replayed rows. Rows at a key's maximum sequence
  // are appended again (R-USING-2, s == t); older replayed rows are ignored.
  {
    gen.shuffle(order);
    std::vector<std::size_t> replay;
    const bool twice = gen.chance(4);
    for (std::size_t i = 0; i < batches.size(); ++i) {
      if (twice || gen.chance(3)) replay.push_back(i);
    }
    gen.shuffle(replay);
    std::vector<Row> all = input;
    for (std::size_t i : replay) all.insert(all.end(), batches[i].begin(), batches[i].end());
    Harness<Storage, K, S> h;
    if (!h.apply_all(batches, order) || !h.apply_all(batches, replay)) return false;
    const std::vector<int> want = final_uids<K, S>(all);
    if (uids(h.table.rows()) != want) {
      CHECK(h.table.sorted_rows() == flowtest::final_state<K, S>(all));
      return false;
    }
    // Replaying only batches whose rows are all below their key's maximum
    // changes nothing: check it on a replay of rows strictly older.
    if (!gen.chance(3)) return true;
    std::vector<Row> older;
    for (const Row& r : input) {
      Row o = r;
      o.seq -= 1000000;
      older.push_back(std::move(o));
    }
    const fl::BatchStats s = h.flow.apply(h.table, older);
    if (uids(h.table.rows()) != want || s.applied_rows != 0 ||
        s.ignored_late_rows + s.superseded_rows != older.size()) {
      FAIL_CHECK("an older replay changed the target");
      return false;
    }
  }
  return true;
}

template <class Storage, class K, class S>
void run_combo(std::uint64_t seed, int card, int cases, Totals& totals) {
  Gen gen{std::mt19937_64(seed)};
  for (int i = 0; i < cases; ++i) {
    CAPTURE(seed);
    CAPTURE(card);
    CAPTURE(i);
    if (!run_case<Storage, K, S>(gen, card, totals)) return;
  }
}

constexpr int cardinalities[] = {1, 3, 20, 200};

/// Generated cases per (key shape, cardinality) for each storage policy:
/// 2,000 cases on the default storage, and 200 on the
/// test-only one (the semantic suites already run on both).
template <class Storage>
constexpr int cases_per_combo = std::is_same_v<Storage, fl::MemoryStorage> ? 100 : 10;

TEST_CASE_TEMPLATE("R-USING-4 R-USING-1 R-USING-2 R-USING-3: generated inputs, any split, any order, "
                   "replays, against the reference model",
                   Storage, FLOWTEST_STORAGE_POLICIES) {
  Totals totals;
  std::uint64_t seed = 0x5eed0001;
  for (const int card : cardinalities) {
    // 4 key shapes x 4 cardinalities; the sequence alternates between a
    // single column and a struct sequence.
    const int cases = cases_per_combo<Storage>;
    run_combo<Storage, KeyInt, SeqOne>(++seed, card, cases, totals);
    run_combo<Storage, KeyIntString, SeqStruct>(++seed, card, cases, totals);
    run_combo<Storage, KeyNullable, SeqOne>(++seed, card, cases, totals);
    run_combo<Storage, KeyNullablePair, SeqStruct>(++seed, card, cases, totals);
    run_combo<Storage, KeyInt, SeqStruct>(++seed, card, cases / 2, totals);
    run_combo<Storage, KeyNullablePair, SeqOne>(++seed, card, cases / 2, totals);
  }
  MESSAGE("generated cases: " << totals.cases << ", batches: " << totals.batches
                              << ", rows: " << totals.rows);
  CHECK(totals.cases == 20 * cases_per_combo<Storage>);
  if (std::is_same_v<Storage, fl::MemoryStorage>) CHECK(totals.cases >= 2000);
}

TEST_CASE_TEMPLATE("R-USING-8: generated inputs with a drop expectation, against the reference model",
                   Storage, FLOWTEST_STORAGE_POLICIES) {
  Gen gen{std::mt19937_64(0xd7090001)};
  const auto keep = [](const Row& r) { return r.uid % 4 != 0; };
  const auto checks = fl::expectations(fl::expect_or_drop("uid_not_multiple_of_4", keep));
  int cases = 0;
  for (const int card : cardinalities) {
    for (int i = 0; i < 30; ++i, ++cases) {
      CAPTURE(card);
      CAPTURE(i);
      const auto input = gen.input<KeyNullablePair>(card);
      const auto batches = gen.split(input);
      fl::StreamingTable<Row, Storage> t{"t"};
      fl::ReplaceUsing<KeyNullablePair, SeqOne> flow{"f"};
      flowtest::ReplaceUsingModel<KeyNullablePair, SeqOne> m;
      std::uint64_t dropped = 0;
      for (const auto& batch : batches) {
        fl::BatchStats got = flow.apply(t, batch, checks);
        REQUIRE(got.expectations.size() == 1);
        CHECK(got.expectations[0].failed == got.dropped_rows);
        CHECK(got.expectations[0].passed + got.expectations[0].failed == got.input_rows);
        dropped += got.dropped_rows;
        got.expectations.clear();
        const fl::BatchStats want = m.apply(batch, keep);
        REQUIRE(got == want);
        REQUIRE(t.sorted_rows() == m.sorted_rows());
      }
      // R-USING-4 over the rows that survive the expectation.
      std::vector<Row> kept;
      for (const Row& r : input) {
        if (keep(r)) kept.push_back(r);
      }
      CHECK(dropped == input.size() - kept.size());
      REQUIRE(t.sorted_rows() == flowtest::final_state<KeyNullablePair, SeqOne>(kept));
    }
  }
  CHECK(cases == 120);
}

TEST_CASE_TEMPLATE("R-USING-7: generated batches with null sequences fail whole, against the model",
                   Storage, FLOWTEST_STORAGE_POLICIES) {
  Gen gen{std::mt19937_64(0x7001)};
  using NullableSeq = fl::Seq<&Row::oseq>;
  int failed_batches = 0;
  int applied_batches = 0;
  for (const int card : cardinalities) {
    for (int i = 0; i < 20; ++i) {
      CAPTURE(card);
      CAPTURE(i);
      auto input = gen.input<KeyIntString>(card);
      for (Row& r : input) {
        if (gen.chance(40)) r.oseq = std::nullopt;
      }
      const auto batches = gen.split(input);
      fl::StreamingTable<Row, Storage> t{"t"};
      fl::ReplaceUsing<KeyIntString, NullableSeq> flow{"nullable_seq_flow"};
      flowtest::ReplaceUsingModel<KeyIntString, NullableSeq> m;
      for (const auto& batch : batches) {
        bool model_failed = false;
        fl::BatchStats want;
        try {
          want = m.apply(batch);
        } catch (const flowtest::model_null_sequence&) {
          model_failed = true;
        }
        const auto before = t.sorted_rows();
        const auto keys_before = flow.key_count();
        if (model_failed) {
          ++failed_batches;
          const fl::error e = flowtest::error_of([&] { flow.apply(t, batch); });
          CHECK(e.code() == fl::errc::null_sequence);
          CHECK(e.column() == "oseq");
          REQUIRE(t.sorted_rows() == before);
          REQUIRE(flow.key_count() == keys_before);
        } else {
          ++applied_batches;
          REQUIRE(flow.apply(t, batch) == want);
        }
        REQUIRE(t.sorted_rows() == m.sorted_rows());
      }
    }
  }
  MESSAGE("null-sequence batches: " << failed_batches << " failed, " << applied_batches << " applied");
  CHECK(failed_batches > 0);
  CHECK(applied_batches > 0);
}

}  // namespace flows_replace_using_model
