// AUTO CDC, SCD type 2, against the reference model of auto_cdc_random_model.hpp
// (R-CDC-1, R-CDC-4, R-CDC-5, R-CDC-6).
#include "auto_cdc_random_model.hpp"

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
