// AUTO CDC, SCD type 1, against the reference model of auto_cdc_random_model.hpp
// (R-CDC-1, R-CDC-2, R-CDC-3, R-CDC-5, R-CDC-6).
#include "auto_cdc_random_model.hpp"

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
