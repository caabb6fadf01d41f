// AUTO CDC, SCD type 1, against the reference model of support/auto_cdc_model.hpp
// (R-CDC-1, R-CDC-2, R-CDC-3, R-CDC-5, R-CDC-6).
#include <support/auto_cdc_model.hpp>
#include <support/storage_policies.hpp>

#include <chrono>

namespace flows_auto_cdc_random_scd1 {

using namespace model;

TEST_CASE("R-CDC-1 R-CDC-2 R-CDC-3 R-CDC-5: SCD1 against the reference, random orders and batches") {
  run_cases<model::Scd1>(kCases, 1000, /*truncates=*/true,
                         [](const auto& c) { return reference_scd1(c, false); });
}

TEST_CASE("R-CDC-1 R-CDC-6: SCD1 with ignore_null_updates against the reference") {
  run_cases<Scd1Ignore>(kVariantCases, 5000, /*truncates=*/true,
                        [](const auto& c) { return reference_scd1(c, true); });
}

TEST_CASE("R-CDC-5: SCD1 ties on key and sequence, source order kept, random batch splits") {
  run_cases<model::Scd1>(kVariantCases, 21000, /*truncates=*/true,
                         [](const auto& c) { return reference_scd1(c, false); }, /*ties=*/true);
}

TEST_CASE("R-CDC-5 R-CDC-6: SCD1 ignore_null_updates with ties, source order kept") {
  run_cases<Scd1Ignore>(kVariantCases, 23000, /*truncates=*/true,
                        [](const auto& c) { return reference_scd1(c, true); }, /*ties=*/true);
}

// --- The one-pass path against the planned path -----------------------------------
//
// A batch for a target the flow already maintains is applied in one pass
// over the changes (see flows/cdc/detail/scd1_one_pass.hpp); the first
// batch, batches with a truncate and input ranges that are not forward
// ranges are planned. Both must give the same target, flow state and
// metrics, batch after batch, and a failing batch must change nothing.

using Flow = fl::AutoCdc<K, S, fl::Scd1, fl::apply_as_deletes<onepass::CountingDelete>,
                         fl::apply_as_truncates<IsTruncate>, Cols>;

TEST_CASE_TEMPLATE("R-CDC-1 R-CDC-5 R-CDC-7: SCD1 one pass and planned agree on targets and metrics",
                   Storage, FLOWTEST_STORAGE_POLICIES) {
  using namespace onepass;
  using namespace std::chrono_literals;
  for (unsigned n = 0; n < 400; ++n) {
    std::mt19937 rng(40000 + n);
    std::uniform_int_distribution<int> pct(0, 99);
    fl::cdc_clock::time_point now{};
    fl::CdcOptions settings;
    if (n % 2 == 1) {  // every other case collects tombstones after 5 ticks
      settings.tombstone_gc_threshold = 5s;
      settings.clock = [&now] { return now; };
    }
    Flow fast{"random_cdc", settings};
    Flow planned{"random_cdc", settings};
    fl::StreamingTable<Row, Storage> a{"a"};
    fl::StreamingTable<Row, Storage> b{"b"};
    const bool truncates = n % 4 == 0;
    const auto checks = fl::expectations(
        fl::expect_or_drop("not_key_5", [](const Change& c) { return c.key != 5; }));
    for (int batch_no = 0; batch_no < 30; ++batch_no) {
      const std::vector<Change> batch = random_batch(rng, truncates);
      INFO("case " << n << ", batch " << batch_no << ": " << batch);
      // Some cases with expectations, some from a deque (no read-ahead).
      const auto [sa, sb] = n % 3 == 2 ? apply_both(fast, a, planned, b, batch, false, checks)
                                  : apply_both(fast, a, planned, b, batch, n % 5 == 1);
      require_same(sa, sb);
      REQUIRE(a.sorted_rows() == b.sorted_rows());
      REQUIRE(fast.key_count() == planned.key_count());
      REQUIRE(fast.tombstone_count() == planned.tombstone_count());
      REQUIRE(fast.truncate_floor() == planned.truncate_floor());
      now += std::chrono::seconds(pct(rng) % 3);
    }
  }
}

TEST_CASE_TEMPLATE("R-CDC-5: SCD1 one pass: a batch failing anywhere changes nothing", Storage,
                   FLOWTEST_STORAGE_POLICIES) {
  using namespace onepass;
  for (unsigned n = 0; n < 300; ++n) {
    std::mt19937 rng(70000 + n);
    CountingDelete pred;
    Flow flow{"random_cdc", fl::CdcOptions{}, fl::apply_as_deletes<CountingDelete>{pred},
              fl::apply_as_truncates<IsTruncate>{}, Cols{}};
    Flow planned{"random_cdc"};
    fl::StreamingTable<Row, Storage> t{"t"};
    fl::StreamingTable<Row, Storage> ref{"ref"};
    for (int batch_no = 0; batch_no < 12; ++batch_no) {
      const std::vector<Change> batch = random_batch(rng, /*truncates=*/false);
      INFO("case " << n << ", batch " << batch_no << ": " << batch);
      if (batch_no > 0) {
        // Fail the batch at a random change: the predicate throws, or the
        // change's sequence is null.
        const auto rows = t.sorted_rows();
        const std::size_t keys = flow.key_count(), tombs = flow.tombstone_count();
        if (std::uniform_int_distribution<int>(0, 1)(rng) == 0) {
          *pred.calls_left =
              std::uniform_int_distribution<int>(0, static_cast<int>(batch.size()) - 1)(rng);
          CHECK_THROWS_AS(flow.apply(t, batch), std::runtime_error);
          *pred.calls_left = -1;
        } else {
          CHECK_THROWS_AS(flow.apply(t, with_null_sequence(rng, batch)), fl::error);
        }
        REQUIRE(t.sorted_rows() == rows);
        REQUIRE(flow.key_count() == keys);
        REQUIRE(flow.tombstone_count() == tombs);
      }
      require_same_apply(flow, t, planned, ref, batch);
    }
  }
}

}  // namespace flows_auto_cdc_random_scd1
