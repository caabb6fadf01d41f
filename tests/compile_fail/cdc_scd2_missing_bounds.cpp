// R-CDC-4: an SCD type 2 target needs __START_AT and __END_AT columns.
// expect-error: SCD2_TARGET_NEEDS_START_AT_END_AT
#include "shared/cdc.hpp"

// A row of its own (FLOWLIB_SCHEMA is found by argument-dependent lookup, so
// it is declared beside its row).
struct Target {
  std::int64_t id;
  std::optional<std::string> name;
  std::optional<std::string> city;
  std::int64_t start_at;
  std::optional<std::int64_t> end_at;
};
#ifdef FLOWLIB_CONTROL
FLOWLIB_SCHEMA(Target, id, name, city, (start_at, "__START_AT"), (end_at, "__END_AT"));
#else
FLOWLIB_SCHEMA(Target, id, name, city, (start_at, "__START_AT"), (end_at, "END_AT"));
#endif

int main() {
  fl::StreamingTable<Target> t{"t"};
  apply_nothing<CdcFlow<fl::Scd2<>, NotStored>>(t);
}
