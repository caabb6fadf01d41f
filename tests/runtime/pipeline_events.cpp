// The event log a pipeline writes, read back by an independent JSON parser
// (nlohmann::json): update_progress and flow_progress with their metrics and
// expectations, errors, and names and messages holding quotes, control
// characters and non-ASCII text.
#include <doctest/doctest.h>

#include <flowlib/checkpoint/memory.hpp>
#include <flowlib/event_log.hpp>
#include <flowlib/flowlib.hpp>
#include <flowlib/pipeline.hpp>
#include <flowlib/source/memory.hpp>

#include <nlohmann/json.hpp>

#include <support/event_json.hpp>

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace runtime_pipeline_events {

namespace fl = flowlib;
using json = nlohmann::json;

using ms_time = std::chrono::sys_time<std::chrono::milliseconds>;

struct Order {
  std::int64_t id = 0;
  std::string note;
  std::int64_t amount = 0;
  std::int64_t seq = 0;
  ms_time at{};
  friend bool operator==(const Order&, const Order&) = default;
};
FLOWLIB_SCHEMA(Order, id, note, amount, seq, at);

using Current = fl::ReplaceUsing<fl::Key<&Order::id>, fl::Seq<&Order::seq>>;
using Dedup = fl::DedupWithinWatermark<fl::Key<&Order::id, &Order::seq>, fl::EventTime<&Order::at>>;

const ms_time t0{std::chrono::milliseconds(1'700'000'000'000)};
Order o(std::int64_t id, std::string note, std::int64_t amount, std::int64_t seq) {
  return {id, std::move(note), amount, seq, t0 + std::chrono::seconds(seq)};
}

TEST_CASE("Event log: a pipeline's update_progress and flow_progress events, parsed by a JSON parser (R-EXPECT-2)") {
  // A flow name with a quote, a backslash, a tab, a newline, Japanese,
  // Indonesian with diacritics and an emoji.
  const std::string flow = "pesanan \"terkini\"\\\t\n注文_é_😀";
  fl::MemorySource<Order> feed{"orders"};
  fl::StreamingTable<Order> current{"current \x01 テーブル"};
  fl::StreamingTable<fl::Quarantined<Order>> rejected{"rejected"};
  fl::MemoryCheckpoint ckpt;
  flowtest::json_events captured;
  auto& [type, events, log] = captured;
  fl::Pipeline p{"toko", ckpt};
  p.event_log(log);
  p.flow(flow)
      .from(feed)
      .through(Dedup{std::chrono::minutes(5), "dedup"})
      .quarantine(rejected, fl::expectations(fl::expect_or_quarantine(
                                "non_negative", [](const Order& x) { return x.amount >= 0; })))
      .expect(fl::expectations(fl::expect_or_drop("has_note", [](const Order& x) { return !x.note.empty(); }),
                               fl::expect("small", [](const Order& x) { return x.amount < 100; })))
      .max_rows_per_batch(3)
      .into(current, Current{"current"});
  feed.append(o(1, "a", 5, 1));
  feed.append(o(1, "a", 5, 1));    // a duplicate: removed by dedup
  feed.append(o(2, "", 5, 1));     // dropped: has_note
  feed.append(o(3, "c", -1, 1));   // quarantined
  feed.append(o(4, "d", 500, 1));  // warned: small
  fl::UpdateOptions opt;
  opt.now = std::chrono::sys_days{std::chrono::year{2026} / 12 / 5} + std::chrono::hours(7);
  const auto summary = p.update(opt);

  REQUIRE(events.size() == 4);  // started, 2 batches, completed
  CHECK(events[0]["event_type"] == "update_progress");
  CHECK(events[0]["state"] == "STARTED");
  CHECK(events[0]["pipeline"] == "toko");
  CHECK(events[0]["timestamp"] == "2026-12-05T07:00:00.000Z");
  const json& b0 = events[1];
  CHECK(b0["event_type"] == "flow_progress");
  CHECK(b0["flow"].get<std::string>() == flow);
  CHECK(b0["target"].get<std::string>() == "current \x01 テーブル");
  CHECK(b0["batch_id"] == 0);
  CHECK(b0["status"] == "COMPLETED");
  CHECK(b0["start_position"] == "0:0");
  CHECK(b0["end_position"] == "0:3");
  CHECK(b0["metrics"]["num_input_rows"] == 3);
  CHECK(b0["metrics"]["num_deduplicated_rows"] == 1);
  CHECK(b0["metrics"]["num_dropped_rows"] == 1);
  CHECK(b0["metrics"]["num_output_rows"] == 1);
  const json& b1 = events[2];
  CHECK(b1["batch_id"] == 1);
  CHECK(b1["metrics"]["num_input_rows"] == 2);
  CHECK(b1["metrics"]["num_quarantined_rows"] == 1);
  const json& dq = b1["data_quality"]["expectations"];
  REQUIRE(dq.size() == 3);
  CHECK(dq[0]["name"] == "non_negative");
  CHECK(dq[0]["action"] == "quarantine");
  CHECK(dq[0]["failed_records"] == 1);
  CHECK(dq[1]["name"] == "has_note");
  CHECK(dq[1]["action"] == "drop");
  CHECK(dq[2]["name"] == "small");
  CHECK(dq[2]["action"] == "warn");
  CHECK(dq[2]["failed_records"] == 1);
  CHECK(dq[2]["passed_records"] == 0);
  CHECK(b1["duration_ms"].is_number());
  CHECK(events[3]["state"] == "COMPLETED");
  CHECK(events[3]["details"]["batches"] == 2);
  CHECK(events[3]["details"]["rows"] == 5);
  CHECK(summary.batches() == 2);

  // The update's summary is its batches' metrics summed, count by count.
  REQUIRE(summary.flows.size() == 1);
  const fl::FlowRowCounts& total = summary.flows[0];
  const auto summed = [&](const char* count) {
    return b0["metrics"][count].get<std::uint64_t>() + b1["metrics"][count].get<std::uint64_t>();
  };
  CHECK(total.input_rows == summed("num_input_rows"));
  CHECK(total.output_rows == summed("num_output_rows"));
  CHECK(total.upserted_rows == summed("num_upserted_rows"));
  CHECK(total.deleted_rows == summed("num_deleted_rows"));
  CHECK(total.dropped_rows == summed("num_dropped_rows"));
  CHECK(total.quarantined_rows == summed("num_quarantined_rows"));
  CHECK(total.deduplicated_rows == summed("num_deduplicated_rows"));
  CHECK(total.late_rows == summed("num_late_rows"));
  CHECK(total.input_rows == 5);
}

// The orders, the table "current", a checkpoint and every event captured.
struct toko {
  fl::MemorySource<Order> feed{"orders"};
  fl::StreamingTable<Order> current{"current"};
  fl::MemoryCheckpoint ckpt;
  flowtest::json_events captured;
  std::vector<json>& events = captured.events;
  fl::EventLog& log = captured.log;
};

TEST_CASE_FIXTURE(toko, "Event log: a failed batch writes FAILED events with the error's code and message (R-EXPECT-1)") {
  fl::Pipeline p{"toko", ckpt};
  p.event_log(log);
  p.flow("orders")
      .from(feed)
      .expect(fl::expectations(fl::expect_or_fail("positive \"amount\"\n", [](const Order& x) { return x.amount > 0; })))
      .into(current, Current{"current"});
  feed.append(o(7, "ünïcödé \x1f", -3, 1));
  CHECK_THROWS_AS(p.update(), fl::error);
  REQUIRE(events.size() == 3);
  CHECK(events[1]["status"] == "FAILED");
  CHECK(events[1]["error"]["code"] == "EXPECTATION_VIOLATION");
  const std::string message = events[1]["error"]["message"];
  CHECK(message.find("positive \"amount\"\n") != std::string::npos);
  CHECK(message.find("id=7") != std::string::npos);
  CHECK(events[2]["state"] == "FAILED");
  CHECK(events[2]["error"]["code"] == "EXPECTATION_VIOLATION");
  CHECK(current.empty());
}

TEST_CASE_FIXTURE(toko, "Event log: a fault at positions_recorded writes a FAILED flow_progress event that counts no row read (R-EXACT-1)") {
  bool armed = false;
  fl::PipelineOptions options;
  options.threads = 1;
  options.fault_hook = [&armed](fl::fault_point at, std::string_view, std::uint64_t) {
    if (armed && at == fl::fault_point::positions_recorded) throw std::runtime_error("fault");
  };
  fl::Pipeline p{"toko", ckpt, options};
  p.event_log(log);
  p.flow("orders").from(feed).into(current, Current{"current"});
  feed.append(std::vector<Order>{o(1, "a", 5, 1), o(2, "b", 5, 2), o(3, "c", 5, 3)});
  p.update();  // batch 0 reads 3 rows
  feed.append(o(4, "d", 5, 4));
  armed = true;
  const std::size_t before = events.size();
  CHECK_THROWS_AS(p.update(), std::runtime_error);
  REQUIRE(events.size() == before + 3);  // update STARTED, the batch FAILED, update FAILED
  const auto& ev = events[before + 1];
  CHECK(ev["event_type"] == "flow_progress");
  CHECK(ev["status"] == "FAILED");
  CHECK(ev["batch_id"] == 1);
  CHECK(ev["metrics"]["num_input_rows"] == 0);  // nothing read yet (not the last batch's 3)
  CHECK(ev["error"]["code"] == "EXCEPTION");
  armed = false;
  p.update();
  CHECK(current.size() == 4);
}

TEST_CASE_FIXTURE(toko, "Event log: update ids go on increasing across a restart over the same checkpoint") {
  for (int restart = 0; restart < 3; ++restart) {
    fl::Pipeline p{"toko", ckpt};
    p.event_log(log);
    p.flow("orders").from(feed).into(current, Current{"orders"});
    feed.append(o(restart, "x", 1, 1));
    p.update();
  }
  REQUIRE(events.size() == 9);
  CHECK(events[0]["update_id"] == 1);
  CHECK(events[3]["update_id"] == 2);
  CHECK(events[6]["update_id"] == 3);
}

/// A MemoryCheckpoint whose write() stores a commit record and then throws
/// checkpoint_io, once (FileCheckpoint's case of a failed directory fsync
/// after the rename).
class fails_after_commit final : public fl::checkpoint_store {
 public:
  bool durable() const noexcept override { return inner.durable(); }
  std::string describe() const override { return inner.describe(); }
  std::optional<std::string> read(std::string_view path) const override { return inner.read(path); }
  void write(std::string_view path, std::string_view bytes) override {
    inner.write(path, bytes);
    if (armed && path.find("/commits/") != std::string_view::npos) {
      armed = false;
      throw fl::error(fl::errc::checkpoint_io, "checkpoint", "", "", "fsync of the directory failed");
    }
  }
  std::vector<std::string> list(std::string_view path) const override { return inner.list(path); }
  void remove(std::string_view path) override { inner.remove(path); }

  fl::MemoryCheckpoint inner;
  bool armed = true;
};

TEST_CASE("Event log: a batch committed before the store reported an error is COMPLETED, with the error (R-EXACT-1)") {
  fl::MemorySource<Order> feed{"orders"};
  fl::StreamingTable<Order> all{"all"};
  fails_after_commit ckpt;
  flowtest::json_events captured;
  auto& [type, events, log] = captured;
  feed.append(o(1, "a", 1, 1));
  feed.append(o(2, "b", 2, 1));
  feed.append(o(3, "c", 3, 1));
  {
    fl::Pipeline p{"toko", ckpt};
    p.event_log(log);
    p.flow("copy").from(feed).into(all, fl::Append{});
    CHECK_THROWS_AS(p.update(), fl::error);
    CHECK(all.size() == 3);  // committed: the rows stay
    p.update();              // nothing left to do
    CHECK(all.size() == 3);
  }
  std::uint64_t committed_rows = 0;
  int completed = 0;
  int failed = 0;
  for (const json& e : events) {
    if (e["event_type"] != "flow_progress") continue;
    if (e["status"] == "COMPLETED") {
      ++completed;
      committed_rows += e["metrics"]["num_output_rows"].get<std::uint64_t>();
      CHECK(e["metrics"]["num_input_rows"] == 3);
      REQUIRE(e.contains("error"));
      CHECK(e["error"]["code"] == "CHECKPOINT_IO_ERROR");
    }
    if (e["status"] == "FAILED") ++failed;
  }
  CHECK(completed == 1);
  CHECK(failed == 0);
  CHECK(committed_rows == all.size());
  // The update itself failed: its update_progress event says so.
  int failed_updates = 0;
  for (const json& e : events)
    if (e["event_type"] == "update_progress" && e["state"] == "FAILED") ++failed_updates;
  CHECK(failed_updates == 1);
}

}  // namespace runtime_pipeline_events
