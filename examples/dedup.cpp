// Deduplicating an at-least-once click stream before it reaches a table.
//
// The clicks source redelivers records after a retry. Click sequence numbers
// are unique only within a session, so the identity is (session_id,
// click_seq_num); a click is remembered for 5 minutes of event time after it
// happened. The state survives a restart through a checkpoint.
#include <flowlib/ops/dedup_within_watermark.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace fl = flowlib;
using namespace std::chrono_literals;

struct Click {
  std::string session_id;
  std::int64_t click_seq_num;
  std::chrono::sys_time<std::chrono::milliseconds> click_ts;
  std::string ad;
};
FLOWLIB_SCHEMA(Click, session_id, click_seq_num, click_ts, ad);

using ClicksDeduped = fl::DedupWithinWatermark<fl::Key<&Click::session_id, &Click::click_seq_num>,
                                               fl::EventTime<&Click::click_ts>>;

int main() {
  const std::chrono::sys_time<std::chrono::milliseconds> t0{std::chrono::milliseconds(1'700'000'000'000)};
  ClicksDeduped dedup{5min, "clicks_deduped"};

  // Batch 1: the source delivers s1/2 twice. The same user clicking the same
  // ad twice (s1/1 and s1/3) is two events: both are kept.
  std::vector<Click> out = dedup.process(std::vector<Click>{{"s1", 1, t0, "ad-7"},
                                                            {"s1", 2, t0 + 2s, "ad-9"},
                                                            {"s1", 2, t0 + 2s, "ad-9"},
                                                            {"s1", 3, t0 + 4s, "ad-7"}});
  int failures = 0;
  const auto expect = [&](bool ok, const char* what) {
    if (!ok) {
      std::fprintf(stderr, "unexpected: %s\n", what);
      ++failures;
    }
  };
  expect(out.size() == 3, "batch 1 keeps 3 clicks");
  expect(dedup.last_stats().duplicate_rows == 1, "batch 1 drops 1 duplicate");

  // A checkpoint, a crash, and a restart: the new process restores the state.
  const std::string checkpoint = fl::checkpoint_snapshot(dedup);
  ClicksDeduped restarted{5min, "clicks_deduped"};
  restarted.read_checkpoint(fl::checkpoint_blobs::of_snapshot(checkpoint));

  // Batch 2, after the restart: the retried batch 1 arrives again, with one
  // click 10 minutes later that moves the watermark to t0 + 5min.
  std::vector<Click> retry{{"s1", 1, t0, "ad-7"}, {"s1", 2, t0 + 2s, "ad-9"}, {"s2", 1, t0 + 10min, "ad-1"}};
  out = restarted.process(retry);
  expect(out.size() == 1 && out[0].session_id == "s2", "batch 2 keeps only the new click");
  expect(restarted.last_stats().duplicate_rows == 2, "batch 2 drops the redelivered clicks");
  expect(restarted.watermark() == t0 + 5min, "watermark = max event time - delay");
  // s1/1 expires exactly at the watermark (t0 + 5min): evicted, eviction is
  // inclusive. s1/2 expires at t0 + 5min 2s: still held.
  expect(!restarted.contains({"s1", 1}) && restarted.contains({"s1", 2}), "eviction is inclusive");

  // Batch 3: a redelivery of s1/1 now is older than the watermark: late.
  out = restarted.process(std::vector<Click>{{"s1", 1, t0, "ad-7"}});
  expect(out.empty() && restarted.last_stats().late_rows == 1, "batch 3 drops a late row");

  const fl::DedupStats& total = restarted.total_stats();
  std::printf("after restart: %llu rows in, %llu emitted, %llu duplicates, %llu late, %llu held\n",
              static_cast<unsigned long long>(total.input_rows),
              static_cast<unsigned long long>(total.emitted_rows),
              static_cast<unsigned long long>(total.duplicate_rows),
              static_cast<unsigned long long>(total.late_rows),
              static_cast<unsigned long long>(total.state_keys));
  return failures == 0 ? 0 : 1;
}
