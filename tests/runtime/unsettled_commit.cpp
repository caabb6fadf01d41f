// A commit whose outcome the checkpoint store hides (R-EXACT-1): the commit
// record's write reports failure whether or not it landed (a file store's
// sync after its rename), and the store then fails every read, listing and
// removal, so the pipeline cannot tell whether the batch counts. The batch
// is left unsettled (its tables' journals open, the pipeline closed) and
// settled by the commit record once the store answers: at the next open of
// the same Pipeline, or when the Pipeline is destroyed. Either way each row
// is in the table exactly once.
#include <doctest/doctest.h>

#include <flowlib/checkpoint/memory.hpp>
#include <flowlib/flowlib.hpp>
#include <flowlib/pipeline.hpp>
#include <flowlib/source/memory.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace runtime_unsettled_commit {

namespace fl = flowlib;

struct Ev {
  std::int64_t id = 0;
  std::int64_t seq = 0;
  std::int64_t amount = 0;
  friend bool operator==(const Ev&, const Ev&) = default;
};
FLOWLIB_SCHEMA(Ev, id, seq, amount);

using Current = fl::ReplaceUsing<fl::Key<&Ev::id>, fl::Seq<&Ev::seq>>;

/// A memory checkpoint that can be told to fail: the next commit record's
/// write (landing first or not), then every call until healed.
class hiding_checkpoint final : public fl::checkpoint_store {
 public:
  enum class commit_write { ok, lands_then_fails, fails };
  commit_write next_commit = commit_write::ok;
  bool broken = false;  // after the commit write failed: every call fails

  void heal() { broken = false; }

  bool durable() const noexcept override { return false; }
  std::string describe() const override { return "hiding checkpoint"; }
  std::optional<std::string> read(std::string_view path) const override {
    check(path);
    return inner_.read(path);
  }
  void write(std::string_view path, std::string_view bytes) override {
    check(path);
    if (next_commit != commit_write::ok && path.find("/commits/") != std::string_view::npos) {
      const auto how = std::exchange(next_commit, commit_write::ok);
      if (how == commit_write::lands_then_fails) inner_.write(path, bytes);
      broken = true;
      throw fl::error(fl::errc::checkpoint_io, "", "", "", "sync failed");
    }
    inner_.write(path, bytes);
  }
  std::vector<std::string> list(std::string_view path) const override {
    check(path);
    return inner_.list(path);
  }
  void remove(std::string_view path) override {
    check(path);
    inner_.remove(path);
  }

 private:
  void check(std::string_view path) const {
    if (broken) throw fl::error(fl::errc::checkpoint_io, "", "", "", "I/O error on " + std::string(path));
  }
  fl::MemoryCheckpoint inner_;
};

struct setup {
  fl::MemorySource<Ev> feed{"feed"};
  fl::StreamingTable<Ev> current{"current"};
  fl::StreamingTable<Ev> log{"log"};
  hiding_checkpoint ck;

  std::unique_ptr<fl::Pipeline> pipeline(std::size_t threads) {
    fl::PipelineOptions o;
    o.threads = threads;
    auto p = std::make_unique<fl::Pipeline>("unsettled", ck, o);
    p->flow("current").from(feed).into(current, Current{"current"});
    p->flow("log").from(feed).into(log, fl::Append{"log"});
    return p;
  }
  void check_exactly_once() {
    CHECK(log.sorted_rows() == std::vector<Ev>{{1, 1, 10}, {1, 3, 30}, {1, 5, 50}, {2, 2, 20}, {2, 4, 40}});
    CHECK(current.sorted_rows() == std::vector<Ev>{{1, 5, 50}, {2, 4, 40}});
  }
};

TEST_CASE("R-EXACT-1: a commit record that landed while the store hid it is kept, at the next open or when the Pipeline goes") {
  for (std::size_t threads : {std::size_t{1}, std::size_t{2}}) {
    for (bool destroy : {false, true}) {
      for (auto how : {hiding_checkpoint::commit_write::lands_then_fails, hiding_checkpoint::commit_write::fails}) {
        CAPTURE(threads);
        CAPTURE(destroy);
        CAPTURE(static_cast<int>(how));
        setup s;
        auto p = s.pipeline(threads);
        s.feed.append(std::vector<Ev>{{1, 1, 10}, {2, 2, 20}});
        p->update();
        s.feed.append(std::vector<Ev>{{1, 3, 30}, {2, 4, 40}, {1, 5, 50}});
        s.ck.next_commit = how;
        CHECK_THROWS_AS(p->update(), fl::error);
        // The store answers nothing: another update fails before it runs a batch.
        CHECK_THROWS_AS(p->update(), fl::error);
        s.ck.heal();
        if (destroy) {
          p.reset();  // settled as the Pipeline goes
          p = s.pipeline(threads);
        }
        p->update();
        s.check_exactly_once();
        p->update();  // nothing new: nothing written twice
        s.check_exactly_once();
      }
    }
  }
}

}  // namespace runtime_unsettled_commit
