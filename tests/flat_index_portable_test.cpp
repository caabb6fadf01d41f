// The flat_index tests again, with its portable group matching (64-bit
// words) instead of SSE2, so that both are run on x86-64.
#define FLOWLIB_FLAT_INDEX_PORTABLE
#include "flat_index_test.cpp"  // NOLINT(bugprone-suspicious-include)
