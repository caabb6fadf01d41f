// Which failure an update with threads reports, and what the flows around
// it do (PipelineOptions::threads = 2). Three flows: "a" (s3 -> APPEND into
// ind, two batches) and "b" (s4 -> APPEND into dd) touch nothing in common,
// so they run at the same time; "c" reads ind through a TableSource, so it
// runs after "a". "a"'s expectation holds its first batch until "b" has
// failed (a gate, released by "b"'s expectation as it throws), so that the
// failure happens while "a" runs:
//   - "a" then succeeds: "b"'s error is reported, "a"'s batch is committed
//     (a flow already running finishes its batch), "c" never starts;
//   - "a" then fails too: "a"'s error is reported (the flow declared first
//     among those that failed), though "b" failed first; "c" never starts.
// Both times, another update without the failure ends with the tables of a
// threads = 1 run.
#include "random_pipeline.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace threads_failures {

using namespace threadtest;

struct a_error {};
struct b_error {};

/// Released by "b" as it fails; "a" waits for it (at most 10 s: if "a"
/// and "b" do not run at the same time, "b" cannot release it).
struct gate {
  std::mutex m;
  std::condition_variable cv;
  bool open = false;
  void release() {
    {
      std::lock_guard lock(m);
      open = true;
    }
    cv.notify_all();
  }
  bool wait() {
    std::unique_lock lock(m);
    return cv.wait_for(lock, std::chrono::seconds(10), [&] { return open; });
  }
};

struct scenario {
  bool b_fails = false;
  bool a_fails = false;  // after the gate
  gate g;
  std::atomic<bool> a_waited{false};
  std::atomic<bool> gate_timed_out{false};
  std::mutex m;
  std::map<std::string, std::size_t> hook_calls;
};

void declare_abc(fl::Pipeline& p, sources& s, memory_world& w, scenario* sc) {
  p.flow("a")
      .from(s.s3)
      .expect(fl::expectations(fl::expect("held", [sc](const Ev&) {
        if (sc != nullptr && sc->b_fails && !sc->a_waited.exchange(true)) {
          if (!sc->g.wait()) sc->gate_timed_out = true;
          if (sc->a_fails) throw a_error{};
        }
        return true;
      })))
      .max_rows_per_batch(3)
      .into(w.ind, fl::Append{"a"});
  p.flow("b")
      .from(s.s4)
      .expect(fl::expectations(fl::expect("fails", [sc](const Ev&) {
        if (sc != nullptr && sc->b_fails) {
          sc->g.release();
          throw b_error{};
        }
        return true;
      })))
      .into(w.dd, fl::Append{"b"});
  p.flow("c").from(fl::TableSource{w.ind}).into(w.down2, fl::Append{"c"});
}

void fill(sources& s) {
  for (std::int64_t i = 0; i < 6; ++i) s.s3.append(Ev{i, i, {}, day0, tagged("a", i), i});
  for (std::int64_t i = 0; i < 4; ++i) s.s4.append(Ev{i, i, {}, day0, tagged("b", i), i});
}

/// The threads = 1 run without failures.
struct reference {
  sources s;
  memory_world w;
  reference() {
    fill(s);
    fl::PipelineOptions opt;
    opt.threads = 1;
    fl::Pipeline p{"abc", w.checkpoint, opt};
    declare_abc(p, s, w, nullptr);
    p.update();
  }
};

fl::PipelineOptions with_hook(scenario& sc) {
  fl::PipelineOptions opt;
  opt.threads = 2;
  opt.fault_hook = [&sc](fl::fault_point, std::string_view flow, std::uint64_t) {
    std::lock_guard lock(sc.m);
    ++sc.hook_calls[std::string(flow)];
  };
  return opt;
}

/// Which error an update reported: "a", "b" or "nothing".
std::string reported_by(fl::Pipeline& p) {
  try {
    p.update();
  } catch (const b_error&) {
    return "b";
  } catch (const a_error&) {
    return "a";
  }
  return "nothing";
}

/// A test's world: the threads = 1 run to compare with, the sources (filled),
/// the tables and checkpoint, and the failures of the scenario.
struct abc_case {
  reference ref;
  sources s;
  memory_world w;
  scenario sc;
  abc_case(bool a_fails, bool b_fails) {
    fill(s);
    sc.a_fails = a_fails;
    sc.b_fails = b_fails;
  }
  void declare(fl::Pipeline& p) { declare_abc(p, s, w, &sc); }
  /// Declares the flows in `p` and updates it with the scenario's failures:
  /// the error it reported.
  std::string failed_update(fl::Pipeline& p) {
    declare(p);
    const std::string reported = reported_by(p);
    CHECK_MESSAGE(!sc.gate_timed_out, "\"a\" and \"b\" did not run at the same time");
    return reported;
  }
};

void check_same_tables(memory_world& got, memory_world& want) {
  CHECK(got.ind.sorted_rows() == want.ind.sorted_rows());
  CHECK(got.dd.sorted_rows() == want.dd.sorted_rows());
  CHECK(got.down2.sorted_rows() == want.down2.sorted_rows());
  CHECK(want.down2.size() == 6);
}

TEST_CASE("R-EXACT-7, threads = 2: a flow failing while an independent flow runs: its error is reported, the running flow's batch is committed, a flow depending on the running one does not start") {
  abc_case t{false, true};
  auto& [ref, s, w, sc] = t;
  fl::Pipeline p{"abc", w.checkpoint, with_hook(sc)};
  CHECK(t.failed_update(p) == "b");
  const fl::detail::checkpoint_log log(w.checkpoint);
  const auto a = log.last_commit("a");
  REQUIRE_MESSAGE(a.has_value(), "the batch \"a\" was running when \"b\" failed was not committed");
  CHECK(w.ind.size() == 3 * (a->batch + 1));  // each committed batch, whole
  CHECK(!log.last_commit("b").has_value());
  CHECK(w.dd.empty());
  CHECK(sc.hook_calls["c"] == 0);
  CHECK(!log.last_commit("c").has_value());
  CHECK(w.down2.empty());

  sc.b_fails = false;
  p.update();
  check_same_tables(w, ref.w);
}

TEST_CASE("R-EXACT-7, threads = 2: two flows of one wave fail: the error of the one declared first is reported, though the other failed first; a flow depending on them does not start") {
  abc_case t{true, true};
  auto& [ref, s, w, sc] = t;
  {
    fl::Pipeline p{"abc", w.checkpoint, with_hook(sc)};
    CHECK(t.failed_update(p) == "a");
    const fl::detail::checkpoint_log log(w.checkpoint);
    CHECK(!log.last_commit("a").has_value());
    CHECK(!log.last_commit("b").has_value());
    CHECK(w.ind.empty());
    CHECK(w.dd.empty());
    CHECK(sc.hook_calls["c"] == 0);
    CHECK(w.down2.empty());
  }
  // A new Pipeline over the same tables and checkpoint, without failures.
  sc.b_fails = false;
  sc.a_fails = false;
  fl::Pipeline p{"abc", w.checkpoint, with_hook(sc)};
  t.declare(p);
  p.update();
  check_same_tables(w, ref.w);
}

}  // namespace threads_failures
