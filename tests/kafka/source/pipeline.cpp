// KafkaSource in pipelines, on the mock cluster: restarts over a
// FileCheckpoint and a SqliteCheckpoint with injected crashes apply every
// record once (R-SOURCE-1, R-SOURCE-5, R-EXACT-1); a batch with a record
// that does not decode fails and leaves the position (R-SOURCE-2); a
// committed position that retention removed fails with SOURCE_DATA_LOST
// and changes nothing (R-SOURCE-3); partitions read by separate pipelines
// with their own checkpoints and tables make a key-sharded deployment; the
// consumer group's offsets mirror the pipeline's committed positions.
#include <flowlib/checkpoint/file.hpp>
#include <flowlib/checkpoint/memory.hpp>
#include <flowlib/checkpoint/sqlite.hpp>
#include <flowlib/flowlib.hpp>
#include <flowlib/pipeline.hpp>
#include <flowlib/source/kafka.hpp>
#include <flowlib/storage/file.hpp>
#include <flowlib/storage/sqlite.hpp>

#include "source_support.hpp"
#include "support/errors.hpp"
#include "support/kafka_mock.hpp"
#include "support/rows.hpp"
#include "support/temp_files.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace kafka_source_pipeline {

namespace fl = flowlib;
using flowtest::contains;

struct Upd {
  std::int64_t k = 0;
  std::int64_t seq = 0;
  std::string v;
  friend bool operator==(const Upd&, const Upd&) = default;
  friend auto operator<=>(const Upd&, const Upd&) = default;
};
FLOWLIB_SCHEMA(Upd, k, seq, v);

using Current = fl::ReplaceUsing<fl::Key<&Upd::k>, fl::Seq<&Upd::seq>>;

namespace {

std::string json_of(const Upd& u) { return nlohmann::json{{"k", u.k}, {"seq", u.seq}, {"v", u.v}}.dump(); }

fl::KafkaSourceOptions<Upd> options(const flowtest::kafka_mock& mock, std::string topic,
                                    std::vector<std::int32_t> partitions = {}) {
  return kafka_source_support::source_options<Upd>(mock, std::move(topic), std::move(partitions));
}

// The latest row of each key (highest seq; REPLACE USING's rule).
std::vector<Upd> latest_per_key(const std::vector<Upd>& all) {
  std::map<std::int64_t, Upd> m;
  for (const auto& u : all) {
    auto [it, fresh] = m.try_emplace(u.k, u);
    if (!fresh && u.seq > it->second.seq) it->second = u;
  }
  std::vector<Upd> out;
  for (auto& [k, u] : m) out.push_back(u);
  return flowtest::sorted(out);
}

struct FileConfig {
  static constexpr const char* name = "file";
  using storage = fl::FileStorage;
  flowtest::memory_dir dir{"flowlib_kafka_file"};  // restarts, not power loss: no slow fsyncs
  std::unique_ptr<fl::checkpoint_store> open() const { return std::make_unique<fl::FileCheckpoint>(dir.path); }
};

struct SqliteConfig {
  static constexpr const char* name = "sqlite";
  using storage = fl::SqliteStorage;
  flowtest::temp_db db{"flowlib_kafka_sqlite"};
  std::unique_ptr<fl::checkpoint_store> open() const {
    return std::make_unique<fl::SqliteCheckpoint>(db.path, fl::SqliteOptions{.synchronous = fl::SqliteSync::off});
  }
};

template <class Storage>
struct Tables {
  fl::StreamingTable<Upd, Storage> log{"log"};
  fl::StreamingTable<Upd, Storage> current{"current"};
};

// Every record of a checkpoint but the offset log's (a batch's planned
// positions, which a memory checkpoint keeps after the batch failed, for
// its replay): path -> bytes.
void dump(const fl::checkpoint_store& store, const std::string& path, std::map<std::string, std::string>& out) {
  if (auto rec = path.empty() ? std::nullopt : store.read(path))
    if (!contains(path, "/offsets/")) out[path] = *rec;
  for (const auto& name : store.list(path)) dump(store, path.empty() ? name : path + "/" + name, out);
}
std::map<std::string, std::string> records_of(const fl::checkpoint_store& store) {
  std::map<std::string, std::string> out;
  dump(store, "", out);
  return out;
}

}  // namespace

TEST_CASE_TEMPLATE("R-SOURCE-5, R-EXACT-1: restarts with crashes over a durable checkpoint apply every record once",
                   Config, FileConfig, SqliteConfig) {
  auto& mock = flowtest::shared_kafka_mock();
  for (std::uint32_t seed : {1u, 2u, 3u}) {
    CAPTURE(seed);
    std::mt19937 rng(seed);
    const std::string topic = std::string("pipeline0.") + Config::name + std::to_string(seed);
    mock.create_topic(topic, 3);
    Config config;
    std::vector<Upd> produced;  // every record with a value, in no particular order
    std::int64_t seq = 0;
    int crashes = 0;

    const auto run = [&](bool faults) {
      // A program run: checkpoint, tables, source and pipeline made anew.
      const auto checkpoint = config.open();
      Tables<typename Config::storage> t;
      fl::KafkaSource<Upd> src{"updates", options(mock, topic)};
      fl::PipelineOptions po;
      po.snapshot_interval = 1 + rng() % 4;
      if (faults) {
        const std::uint32_t crash_seed = static_cast<std::uint32_t>(rng());
        po.fault_hook = [r = std::mt19937(crash_seed)](fl::fault_point, std::string_view, std::uint64_t) mutable {
          if (r() % 9 == 0) throw std::runtime_error("injected crash");
        };
      }
      fl::Pipeline p{"kafka", *checkpoint, po};
      p.flow("log").from(src).max_rows_per_batch(1 + rng() % 25).into(t.log, fl::Append{"log"});
      p.flow("current").from(src).max_rows_per_batch(1 + rng() % 25).into(t.current, Current{"current"});
      try {
        p.update();
      } catch (const std::runtime_error& e) {
        CHECK(std::string(e.what()) == "injected crash");
        ++crashes;
      }
      return std::pair{t.log.sorted_rows(), t.current.sorted_rows()};
    };

    for (int step = 0; step < 8; ++step) {
      std::vector<flowtest::mock_record> recs;
      const int n = static_cast<int>(rng() % 40);
      for (int i = 0; i < n; ++i) {
        Upd u{static_cast<std::int64_t>(rng() % 15), ++seq, "v" + std::to_string(seq)};
        const auto p = static_cast<std::int32_t>(rng() % 3);
        if (rng() % 10 == 0) {
          recs.push_back({p, std::to_string(u.k), std::nullopt, {}, 0});  // a tombstone: skipped
        } else {
          recs.push_back({p, std::to_string(u.k), json_of(u), {}, 0});
          produced.push_back(u);
        }
      }
      mock.produce(topic, recs);
      run(true);
    }
    // A last run without faults: every record once, the latest of each key.
    const auto [log, current] = run(false);
    CHECK(log == flowtest::sorted(produced));
    CHECK(current == latest_per_key(produced));
    const auto [log2, current2] = run(false);  // nothing new
    CHECK(log2 == log);
    CHECK(current2 == current);
    CHECK(crashes > 0);  // the faults did happen
  }
}

TEST_CASE("R-SOURCE-2: a batch with a record the deserializer rejects fails and leaves the position; fixed, it reads every record once") {
  auto& mock = flowtest::shared_kafka_mock();
  mock.create_topic("pipeline1", 2);
  std::vector<flowtest::mock_record> recs;
  std::vector<Upd> produced;
  for (int i = 0; i < 12; ++i) {
    const Upd u{i, i, "v" + std::to_string(i)};
    recs.push_back({i % 2, std::nullopt, json_of(u), {}, 0});
    produced.push_back(u);
  }
  mock.produce("pipeline1", recs);

  bool reject = true;
  auto o = options(mock, "pipeline1");
  o.deserialize = [&](const fl::KafkaRecord& r) -> std::optional<Upd> {
    // Partition 1 offset 4 is record 9, in the third batch of four.
    if (reject && r.partition == 1 && r.offset == 4) throw std::invalid_argument("no good");
    Upd u;
    const std::string v(*r.value);
    u.k = std::stoll(v.substr(5));
    u.seq = u.k;
    u.v = "v" + std::to_string(u.k);
    return u;
  };
  fl::KafkaSource<Upd> src{"pipeline1", o};
  fl::MemoryCheckpoint ckpt;
  fl::StreamingTable<Upd> log{"log"};
  fl::Pipeline p{"p", ckpt};
  p.flow("log").from(src).max_rows_per_batch(4).into(log, fl::Append{"log"});

  for (int attempt = 0; attempt < 2; ++attempt) {
    const auto msg = flowtest::message_of(fl::errc::malformed_record, [&] { p.update(); });
    CHECK(contains(msg, "partition 1 offset 4: options.deserialize threw: no good"));
    // Batches of two offsets per partition: the first two (records 0-7) are
    // committed, nothing of the third.
    CHECK(log.sorted_rows() == flowtest::sorted(std::vector<Upd>(produced.begin(), produced.begin() + 8)));
  }
  reject = false;
  p.update();
  CHECK(log.sorted_rows() == flowtest::sorted(produced));
  CHECK(p.update().batches() == 0);
}

TEST_CASE("R-SOURCE-3: a committed position that retention removed fails with SOURCE_DATA_LOST naming partition and offsets; nothing is committed") {
  auto& mock = flowtest::shared_kafka_mock();
  mock.create_topic("pipeline2", 2);
  fl::MemoryCheckpoint ckpt;
  fl::StreamingTable<Upd> log{"log"};
  std::vector<Upd> produced;
  std::int64_t n = 0;
  const auto produce = [&](std::int32_t partition, int count, std::size_t pad) {
    std::vector<flowtest::mock_record> recs;
    for (int i = 0; i < count; ++i, ++n) {
      const Upd u{n, n, std::string(pad, 'x')};
      recs.push_back({partition, std::nullopt, json_of(u), {}, 0});
      produced.push_back(u);
    }
    mock.produce("pipeline2", recs);
  };
  produce(0, 50, 10);
  produce(1, 5, 10);
  {
    fl::KafkaSource<Upd> src{"pipeline2", options(mock, "pipeline2")};
    fl::Pipeline p{"p", ckpt};
    p.flow("log").from(src).into(log, fl::Append{"log"});
    p.update();
    CHECK(log.size() == 55);
  }
  // More than the mock keeps of a partition (5 MiB): the oldest go.
  produce(0, 6000, 1000);
  produce(1, 5, 10);
  fl::KafkaSource<Upd> src{"pipeline2", options(mock, "pipeline2")};
  const auto low = src.start().offset(0);
  REQUIRE(low > 50);  // the committed position, offset 50, is gone
  const auto records = records_of(ckpt);
  fl::Pipeline p{"p", ckpt};
  p.flow("log").from(src).max_rows_per_batch(100).into(log, fl::Append{"log"});
  for (int attempt = 0; attempt < 2; ++attempt) {
    const auto msg = flowtest::message_of(fl::errc::source_data_lost, [&] { p.update(); });
    CHECK(contains(msg, "topic 'pipeline2' partition 0"));
    CHECK(contains(msg, "from offset 50 to " + std::to_string(low - 1)));
    CHECK(contains(msg, "retention"));
    CHECK(log.size() == 55);
    CHECK(records_of(ckpt) == records);  // no commit, no state, no table record
  }
  // A pipeline that starts now reads from the start: the records held.
  fl::MemoryCheckpoint fresh;
  fl::StreamingTable<Upd> log2{"log"};
  fl::Pipeline q{"q", fresh};
  q.flow("log").from(src).max_rows_per_batch(2000).into(log2, fl::Append{"log"});
  q.update();
  std::vector<Upd> held;
  for (const auto& u : produced) {
    const bool part0 = u.k < 50 || (u.k >= 55 && u.k < 6055);
    const std::int64_t offset0 = u.k < 50 ? u.k : u.k - 5;
    if (!part0 || offset0 >= static_cast<std::int64_t>(low)) held.push_back(u);
  }
  CHECK(log2.size() == held.size());
  CHECK(log2.sorted_rows() == flowtest::sorted(held));
}

TEST_CASE("Scaling by partitions: pipelines over disjoint partition subsets, keyed by the flow's key, make the one-pipeline table between them") {
  auto& mock = flowtest::shared_kafka_mock();
  for (std::uint32_t seed : {1u, 2u, 3u}) {
    CAPTURE(seed);
    std::mt19937 rng(seed);
    const std::string topic = "pipeline3." + std::to_string(seed);
    mock.create_topic(topic, 4);
    struct Shard {
      std::vector<std::int32_t> partitions;
      fl::MemoryCheckpoint ckpt;
      fl::StreamingTable<Upd> current{"current"};
    };
    Shard a{{0, 2}, {}, {}}, b{{1, 3}, {}, {}}, whole{{}, {}, {}};
    std::vector<Upd> produced;
    std::int64_t seq = 0;
    for (int step = 0; step < 5; ++step) {
      std::vector<flowtest::mock_record> recs;
      const int n = 20 + static_cast<int>(rng() % 60);
      for (int i = 0; i < n; ++i) {
        // Sequences out of order within a key: REPLACE USING keeps the highest.
        Upd u{static_cast<std::int64_t>(rng() % 30), static_cast<std::int64_t>(rng() % 1000), "s" + std::to_string(++seq)};
        u.seq = u.seq * 1000 + seq;  // unique
        // The producer's partitioner places each key on one partition.
        recs.push_back({RD_KAFKA_PARTITION_UA, "key" + std::to_string(u.k), json_of(u), {}, 0});
        produced.push_back(u);
      }
      mock.produce(topic, recs);
      for (Shard* s : {&a, &b, &whole}) {
        // Each update runs in a "process" of its own: a new source and pipeline.
        fl::KafkaSource<Upd> src{"updates", options(mock, topic, s->partitions)};
        fl::Pipeline p{"shard", s->ckpt};
        p.flow("current").from(src).max_rows_per_batch(1 + rng() % 40).into(s->current, Current{"current"});
        p.update();
      }
    }
    const auto ra = a.current.sorted_rows();
    const auto rb = b.current.sorted_rows();
    CHECK(!ra.empty());
    CHECK(!rb.empty());
    std::set<std::int64_t> keys_a, keys_b;
    for (const auto& u : ra) keys_a.insert(u.k);
    for (const auto& u : rb) {
      CHECK(keys_a.count(u.k) == 0);  // disjoint keys
      keys_b.insert(u.k);
    }
    std::vector<Upd> both = ra;
    both.insert(both.end(), rb.begin(), rb.end());
    CHECK(flowtest::sorted(both) == whole.current.sorted_rows());
    CHECK(whole.current.sorted_rows() == latest_per_key(produced));
  }
}

TEST_CASE("R-SOURCE-5: a partition new to the pipeline's position is read from offset 0; dropping a partition it committed is refused (R-EXACT-6)") {
  auto& mock = flowtest::shared_kafka_mock();
  mock.create_topic("pipeline.subsets", 2);
  std::vector<Upd> p0, p1;
  std::int64_t n = 0;
  const auto produce = [&](int count) {
    std::vector<flowtest::mock_record> recs;
    for (int i = 0; i < count; ++i, ++n) {
      const Upd u{n, n, "x"};
      recs.push_back({static_cast<std::int32_t>(n % 2), std::nullopt, json_of(u), {}, 0});
      (n % 2 ? p1 : p0).push_back(u);
    }
    mock.produce("pipeline.subsets", recs);
  };
  fl::MemoryCheckpoint ckpt;
  fl::StreamingTable<Upd> log{"log"};
  const auto update = [&](std::vector<std::int32_t> partitions) {
    // A program whose source reads `partitions` (as when a topic gains a
    // partition, or a deployment's subset changes).
    fl::KafkaSource<Upd> src{"updates", options(mock, "pipeline.subsets", std::move(partitions))};
    fl::Pipeline p{"p", ckpt};
    p.flow("log").from(src).max_rows_per_batch(3).into(log, fl::Append{"log"});
    p.update();
  };
  produce(10);
  update({0});
  CHECK(log.sorted_rows() == flowtest::sorted(p0));
  produce(6);
  update({0, 1});  // partition 1 from its start; partition 0 from where it was
  std::vector<Upd> all = p0;
  all.insert(all.end(), p1.begin(), p1.end());
  CHECK(log.sorted_rows() == flowtest::sorted(all));
  produce(4);
  // A source that no longer reads partition 0 cannot vouch for the records
  // committed there: the pipeline refuses it and runs nothing.
  CHECK(contains(flowtest::message_of(fl::errc::checkpoint_mismatch, [&] { update({1}); }), "partition 0"));
  CHECK(log.size() == all.size());
  update({0, 1});  // both resume where they stopped: the 4 new records, once
  all = p0;
  all.insert(all.end(), p1.begin(), p1.end());
  CHECK(log.sorted_rows() == flowtest::sorted(all));
}

TEST_CASE("R-SOURCE-5: with commit_offsets_for_monitoring the group's offsets trail the pipeline's committed positions") {
  auto& mock = flowtest::shared_kafka_mock();
  mock.create_topic("pipeline4", 2);
  const auto committed = [&]() {
    // A separate consumer of the same group reads the committed offsets.
    flowlib::detail::kafka_context ctx{"probe", fl::errc::source_io};
    flowlib::detail::kafka_properties props{{"bootstrap.servers", mock.bootstraps()},
                                            {"group.id", "monitor"},
                                            {"log_level", "0"}};
    auto c = flowlib::detail::make_kafka_handle(RD_KAFKA_CONSUMER, flowlib::detail::make_kafka_conf(props, ctx), ctx);
    auto list = flowlib::detail::make_kafka_partitions(2);
    rd_kafka_topic_partition_list_add(list.get(), "pipeline4", 0);
    rd_kafka_topic_partition_list_add(list.get(), "pipeline4", 1);
    REQUIRE(rd_kafka_committed(c.get(), list.get(), 5000) == RD_KAFKA_RESP_ERR_NO_ERROR);
    return std::pair{list->elems[0].offset, list->elems[1].offset};
  };
  std::vector<flowtest::mock_record> recs;
  for (int i = 0; i < 10; ++i) recs.push_back({i % 2, std::nullopt, json_of({i, i, "x"}), {}, 0});
  mock.produce("pipeline4", recs);

  auto o = options(mock, "pipeline4");
  o.config.emplace_back("group.id", "monitor");
  o.commit_offsets_for_monitoring = true;
  fl::MemoryCheckpoint ckpt;
  fl::StreamingTable<Upd> log{"log"};
  {
    fl::KafkaSource<Upd> src{"pipeline4", o};
    fl::Pipeline p{"p", ckpt};
    p.flow("log").from(src).max_rows_per_batch(4).into(log, fl::Append{"log"});
    p.update();  // batches 0:2,1:2 / 0:4,1:4 / 0:5,1:5: reads start at 0:0, 0:2 and 0:4
  }  // the consumer is closed: its commits are done
  CHECK(log.size() == 10);
  CHECK(committed() == std::pair<std::int64_t, std::int64_t>{4, 4});
  mock.produce("pipeline4", {{0, std::nullopt, json_of({10, 10, "x"}), {}, 0}});
  {
    fl::KafkaSource<Upd> src{"pipeline4", o};
    fl::Pipeline p{"p", ckpt};
    p.flow("log").from(src).max_rows_per_batch(4).into(log, fl::Append{"log"});
    p.update();  // one batch from 0:5,1:5
  }
  CHECK(committed() == std::pair<std::int64_t, std::int64_t>{5, 5});
  CHECK(log.size() == 11);
}

}  // namespace kafka_source_pipeline
