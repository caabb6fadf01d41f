// AUTO CDC, SCD type 2, against the reference model of support/auto_cdc_model.hpp
// (R-CDC-1, R-CDC-4, R-CDC-5, R-CDC-6).
#include <support/auto_cdc_model.hpp>
#include <support/storage_policies.hpp>

namespace flows_auto_cdc_random_scd2 {

using namespace model;

TEST_CASE("R-CDC-1 R-CDC-4 R-CDC-5: SCD2 against the reference, random orders and batches") {
  run_cases<model::Scd2>(kCases, 9000, /*truncates=*/false,
                         [](const auto& c) { return reference_scd2(c, true, false); });
}

TEST_CASE("R-CDC-1 R-CDC-4: SCD2 tracking all columns but city against the reference") {
  run_cases<Scd2NoCity>(kVariantCases, 13000, /*truncates=*/false,
                        [](const auto& c) { return reference_scd2(c, false, false); });
}

TEST_CASE("R-CDC-1 R-CDC-6: SCD2 with ignore_null_updates against the reference") {
  run_cases<Scd2Ignore>(kVariantCases, 17000, /*truncates=*/false,
                        [](const auto& c) { return reference_scd2(c, true, true); });
}

TEST_CASE("R-CDC-5: SCD2 ties on key and sequence, source order kept, random batch splits") {
  run_cases<model::Scd2>(kVariantCases, 25000, /*truncates=*/false,
                         [](const auto& c) { return reference_scd2(c, true, false); }, /*ties=*/true);
}

TEST_CASE("R-CDC-5 R-CDC-6: SCD2 ignore_null_updates with ties, source order kept") {
  run_cases<Scd2Ignore>(kVariantCases, 27000, /*truncates=*/false,
                        [](const auto& c) { return reference_scd2(c, true, true); }, /*ties=*/true);
}

// --- Deletes among ties: SCD2's current versions are SCD1's rows --------------------
//
// Ties merge in source order in SCD1 and SCD2 alike (R-CDC-5): for the same
// feed, cut into the same batches, the versions of an SCD2 target that are
// still open (null __END_AT) are the rows of an SCD1 target, after every
// batch, with ignore_null_updates (a delete among tied changes leaves
// nothing for a later tied upsert to inherit) and without it.

namespace ties {

using Scd1Plain = fl::AutoCdc<K, S, fl::Scd1, fl::apply_as_deletes<IsDelete>, Cols>;

inline std::vector<Row> current_versions(const std::vector<Version>& versions) {
  std::vector<Row> out;
  for (const Version& v : versions) {
    if (!v.end_at) out.push_back(Row{v.key, v.name, v.city});
  }
  std::sort(out.begin(), out.end());
  return out;
}

template <class Flow1, class Flow2>
void scd2_current_is_scd1(int cases, unsigned seed0, bool ignore_nulls) {
  for (int n = 0; n < cases; ++n) {
    const unsigned seed = seed0 + static_cast<unsigned>(n);
    std::mt19937 rng(seed);
    const std::vector<Change> changes = random_feed(rng, /*truncates=*/false, /*ties=*/true);
    INFO("case " << n << " (seed " << seed << "), changes: " << changes);
    // Every other case: the one-pass engines where the options allow them.
    fl::CdcOptions settings;
    if (n % 2 == 1) settings.tuning.scd2_one_pass_min_keys = 0;
    Flow1 scd1{"scd1", settings};
    Flow2 scd2{"scd2", settings};
    fl::StreamingTable<Row> t{"scd1"};
    fl::StreamingTable<Version> h{"scd2"};
    for (int round = 0; round < 2; ++round) {  // the feed twice, in other orders and splits
      const std::vector<Change> order = shuffle_keeping_ties(rng, changes);
      for (std::size_t i = 0; i < order.size();) {
        const std::size_t len =
            std::uniform_int_distribution<std::size_t>(1, order.size() - i)(rng);
        const std::vector<Change> batch(order.begin() + static_cast<std::ptrdiff_t>(i),
                                        order.begin() + static_cast<std::ptrdiff_t>(i + len));
        i += len;
        INFO("round " << round << ", batch " << batch);
        scd1.apply(t, batch);
        scd2.apply(h, batch);
        REQUIRE(current_versions(h.sorted_rows()) == t.sorted_rows());
      }
    }
    REQUIRE(t.sorted_rows() == reference_scd1(changes, ignore_nulls));
    REQUIRE(h.sorted_rows() == reference_scd2(changes, true, ignore_nulls));
  }
}

}  // namespace ties

TEST_CASE("R-CDC-5: deletes among ties: SCD2's current versions are SCD1's rows, batch after "
          "batch") {
  ties::scd2_current_is_scd1<ties::Scd1Plain, model::Scd2>(kVariantCases, 31000, false);
}

TEST_CASE("R-CDC-5 R-CDC-6: deletes among ties with ignore_null_updates: SCD2's current versions "
          "are SCD1's rows, batch after batch") {
  using Scd1IgnoreNoTruncate =
      fl::AutoCdc<K, S, fl::Scd1, fl::apply_as_deletes<IsDelete>, Cols, fl::ignore_null_updates>;
  ties::scd2_current_is_scd1<Scd1IgnoreNoTruncate, Scd2Ignore>(kVariantCases, 33000, true);
}

// --- The one-pass path against the planned path -----------------------------------
//
// With every column tracked, a batch for a target the flow already
// maintains is applied in one pass (here however few its keys:
// CdcEngineOptions::scd2_one_pass_min_keys) where each change follows its key's
// kept ones; a key's late or tied changes are set aside and planned after
// the pass (see flows/cdc/detail/scd2_one_pass.hpp). The outcome,
// the flow's state and every metric must be the planned path's, batch after
// batch, and a batch failing anywhere, in the pass or in planning the
// set-aside changes, must change nothing.


using Scd2Flow = fl::AutoCdc<K, S, fl::Scd2<>, fl::apply_as_deletes<onepass::CountingDelete>, Cols>;

// Cases per storage policy; fewer under the sanitizers (unoptimised, far
// slower), as kVariantCases, to keep the program within its time budget.
#if defined(__SANITIZE_ADDRESS__)
constexpr unsigned kAgreeCases = 100;
constexpr unsigned kFailCases = 60;
#else
constexpr unsigned kAgreeCases = 600;
constexpr unsigned kFailCases = 400;
#endif

/// How far the sequences of batch `batch_no` of case `n` start: all over
/// (mostly late changes and ties), in overlapping windows (some late), or
/// in disjoint rising windows (late only within a batch).
inline std::int64_t base_of(unsigned n, int batch_no) {
  switch (n % 3) {
    case 0: return 0;
    case 1: return 15 * static_cast<std::int64_t>(batch_no);
    default: return 41 * static_cast<std::int64_t>(batch_no);
  }
}

TEST_CASE_TEMPLATE(
    "R-CDC-1 R-CDC-4 R-CDC-5 R-CDC-7: SCD2 one pass and planned agree on targets and metrics",
    Storage, FLOWTEST_STORAGE_POLICIES) {
  using namespace onepass;
  for (unsigned n = 0; n < kAgreeCases; ++n) {
    std::mt19937 rng(50000 + n);
    fl::CdcOptions one_pass;
    one_pass.tuning.scd2_one_pass_min_keys = 0;  // however few keys
    Scd2Flow fast{"random_cdc", one_pass};
    Scd2Flow planned{"random_cdc"};
    fl::StreamingTable<Version, Storage> a{"a"};
    fl::StreamingTable<Version, Storage> b{"b"};
    const auto checks = fl::expectations(
        fl::expect_or_drop("not_key_5", [](const Change& c) { return c.key != 5; }),
        fl::expect("named", [](const Change& c) { return c.name.has_value(); }));
    for (int batch_no = 0; batch_no < 30; ++batch_no) {
      const std::vector<Change> batch = random_batch(rng, false, base_of(n, batch_no));
      INFO("case " << n << ", batch " << batch_no << ": " << batch);
      // Some cases with expectations, some from a deque (no read-ahead).
      const auto [sa, sb] = n % 4 == 3 ? apply_both(fast, a, planned, b, batch, false, checks)
                                  : apply_both(fast, a, planned, b, batch, n % 5 == 1);
      require_same(sa, sb);
      REQUIRE(sa == sb);  // and the rest, expectation metrics included
      REQUIRE(a.sorted_rows() == b.sorted_rows());
      REQUIRE(fast.key_count() == planned.key_count());
    }
  }
}

TEST_CASE_TEMPLATE("SCD2 one pass: a batch failing anywhere changes nothing", Storage,
                   FLOWTEST_STORAGE_POLICIES) {
  using namespace onepass;
  for (unsigned n = 0; n < kFailCases; ++n) {
    std::mt19937 rng(80000 + n);
    CountingDelete pred;
    fl::CdcOptions one_pass;
    one_pass.tuning.scd2_one_pass_min_keys = 0;
    Scd2Flow flow{"random_cdc", one_pass, fl::apply_as_deletes<CountingDelete>{pred}, Cols{}};
    Scd2Flow planned{"random_cdc"};
    fl::StreamingTable<Version, Storage> t{"t"};
    fl::StreamingTable<Version, Storage> ref{"ref"};
    for (int batch_no = 0; batch_no < 12; ++batch_no) {
      const std::vector<Change> batch = random_batch(rng, false, base_of(n, batch_no));
      INFO("case " << n << ", batch " << batch_no << ": " << batch);
      if (batch_no > 0) {
        // Fail the batch at a random change: the delete predicate throws
        // (in the pass, or in planning the set-aside changes, which
        // classifies them again), or the change's sequence is null.
        const auto rows = t.sorted_rows();
        const std::size_t keys = flow.key_count();
        if (std::uniform_int_distribution<int>(0, 1)(rng) == 0) {
          *pred.calls_left =
              std::uniform_int_distribution<int>(0, 2 * static_cast<int>(batch.size()) - 1)(rng);
          try {
            flow.apply(t, batch);
            // The predicate was called fewer times than that: the batch
            // went through; so it must on the reference.
            *pred.calls_left = -1;
            planned.apply(ref, input_only{&batch});
            REQUIRE(t.sorted_rows() == ref.sorted_rows());
            continue;
          } catch (const std::runtime_error&) {
          }
          *pred.calls_left = -1;
        } else {
          CHECK_THROWS_AS(flow.apply(t, with_null_sequence(rng, batch)), fl::error);
        }
        REQUIRE(t.sorted_rows() == rows);
        REQUIRE(flow.key_count() == keys);
      }
      require_same_apply(flow, t, planned, ref, batch);
    }
  }
}

}  // namespace flows_auto_cdc_random_scd2
