// REPLACE WHERE's plans against a reference planner (R-WHERE-7, R-WHERE-8,
// R-WHERE-10), on random histories in which the flow's predicate changes
// between runs (narrower, wider, moved; relative or fixed bounds; now and
// then not a single range, or not deterministic), overrides run, rows are
// inserted directly, and the query's version and the incremental option
// change. The reference knows a window only as a range of day numbers and
// decides each update from the windows processed and the rows inserted,
// never from a predicate's text. Every update also runs in a twin pipeline
// whose flow always recomputes its window: the two targets must be equal
// after every update.
#include <flows/replace_where/world.hpp>

#include <doctest/doctest.h>

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace flows_replace_where_planner_model {

using namespace flows_replace_where;

// --- The reference ----------------------------------------------------------------------------

constexpr int unbounded_below = std::numeric_limits<int>::min();
constexpr int unbounded_above = std::numeric_limits<int>::max();

/// A range of day numbers, both ends included.
struct day_range {
  int lo = unbounded_below;
  int hi = unbounded_above;
  bool contains(int d) const { return lo <= d && d <= hi; }
  /// Every day of `other` lies in this range.
  bool covers(const day_range& other) const { return lo <= other.lo && other.hi <= hi; }
};

/// A predicate on event_date as the test builds it: a lower bound (relative
/// to the update's day, or a fixed day), an upper bound relative to the
/// update's day or none; `rand() < 2.0` added (keeps every row, not
/// deterministic), or an `OR event_date = extra` (not a single range).
struct predicate_spec {
  std::optional<int> lower_back;   // lower bound: today - lower_back
  std::optional<int> lower_fixed;  // lower bound: this day
  std::optional<int> upper_ahead;  // upper bound: today + upper_ahead
  bool nondeterministic = false;
  std::optional<int> or_day;

  /// The expression (at least one bound is given).
  w::expr build() const {
    const w::expr c = w::col("event_date");
    std::optional<w::expr> e;
    const auto conj = [&](w::expr x) { e = e ? (*e && x) : x; };
    if (lower_back) conj(c >= w::current_date() - w::days(*lower_back));
    if (lower_fixed) conj(c >= w::lit(day(*lower_fixed)));
    if (upper_ahead) conj(c <= w::current_date() + w::days(*upper_ahead));
    REQUIRE(e.has_value());
    if (nondeterministic) e = *e && w::rand() < 2.0;
    if (or_day) e = *e || c == w::lit(day(*or_day));
    return *e;
  }
  bool single_range() const { return !nondeterministic && !or_day; }
  /// Its days under the update at `today` (a single range only).
  day_range days(int today) const {
    day_range r;
    if (lower_back) r.lo = today - *lower_back;
    if (lower_fixed) r.lo = *lower_fixed;
    if (upper_ahead) r.hi = today + *upper_ahead;
    return r;
  }
};

/// R-WHERE-8 from what the reference remembers. Flows always use the same
/// slice column (event_date), which a flow has when its own predicate is a
/// single range.
struct reference_planner {
  bool has_previous = false;
  std::optional<day_range> previous;  // the window the previous update processed
  bool previous_nondeterministic = false;
  bool recorded_incremental = true;
  std::string recorded_query;  // "version v" or "unversioned <object>"
  std::vector<int> inserted;   // days of rows inserted directly since the previous update
  bool inserted_unknown = false;  // inserted before a restart: where is not known

  struct plan {
    std::string technique, reason;
    std::string text() const { return technique + " " + reason; }
  };

  /// The plan of an update of a flow with `own` predicate, the options
  /// given and query identity `query`, running `run` (own or an override)
  /// at `today`; then remembers what it processed.
  plan update(const predicate_spec& own, const predicate_spec& run, bool is_override, bool incremental,
              const std::string& version, const std::string& query, int today) {
    std::optional<day_range> current;
    if (own.single_range() && run.single_range()) current = run.days(today);
    plan p = decide(run, is_override, incremental, version, query, current);
    has_previous = true;
    previous = current;
    previous_nondeterministic = run.nondeterministic;
    recorded_incremental = incremental;
    recorded_query = query;
    inserted.clear();
    inserted_unknown = false;
    return p;
  }

  void restarted() {
    if (!inserted.empty()) inserted_unknown = true;
  }

 private:
  plan decide(const predicate_spec& run, bool is_override, bool incremental, const std::string& version,
              const std::string& query, const std::optional<day_range>& current) const {
    const auto recompute = [](std::string reason) { return plan{"COMPLETE_RECOMPUTE", std::move(reason)}; };
    if (!has_previous || !incremental) return recompute("none");
    if (recorded_incremental != incremental) return recompute("REPLACE_WHERE_DEFINITION_CHANGED");
    if (recorded_query != query) {
      const bool unversioned = version.empty() && recorded_query.starts_with("unversioned ");
      return recompute(unversioned ? "REPLACE_WHERE_QUERY_NOT_VERSIONED"
                                   : "REPLACE_WHERE_DEFINITION_CHANGED");
    }
    if (run.nondeterministic) return recompute("REPLACE_WHERE_NOT_DETERMINISTIC");
    if (previous_nondeterministic) return recompute("PRIOR_REPLACE_WHERE_NOT_DETERMINISTIC");
    if (is_override || !current || !previous || !previous->covers(*current)) {
      return recompute("UNSUPPORTED_REPLACE_WHERE_PREDICATE");
    }
    if (inserted_unknown ||
        std::any_of(inserted.begin(), inserted.end(), [&](int d) { return current->contains(d); })) {
      return recompute("EXTERNAL_CHANGE_IN_REPLACE_WINDOW");
    }
    return plan{"INCREMENTAL", "none"};
  }
};

TEST_CASE("R-WHERE-8: random predicate changes, overrides, direct inserts: a reference's plans, a recompute's target") {
  std::map<std::string, int> seen;  // plan -> updates
  int changed_predicate_incremental = 0, changed_predicate_unsupported = 0, changed_predicate_external = 0;
  int updates = 0;
  const std::string versions[] = {"v1", "v2", ""};  // "": unversioned
  for (std::uint32_t seed = 1; seed <= 60; ++seed) {
    std::mt19937 rng(seed);
    const auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    int today = 10;
    const auto random_predicate = [&](bool for_override) {
      predicate_spec s;
      switch (pick(0, 5)) {
        case 0: s.lower_fixed = today - pick(0, 6); break;
        case 1:
          s.lower_back = pick(0, 6);
          s.upper_ahead = pick(0, 2);
          break;
        case 2: s.upper_ahead = pick(0, 3); break;  // everything up to a day
        default: s.lower_back = pick(0, 6); break;
      }
      if (pick(0, for_override ? 6 : 14) == 0) s.nondeterministic = true;
      if (pick(0, for_override ? 6 : 14) == 0) s.or_day = today - pick(0, 9);
      return s;
    };
    world wd;
    side inc{"inc"}, full{"full"};
    reference_planner ref;
    predicate_spec own = random_predicate(false);
    std::string version = "v1";
    bool incremental = true;
    int object = 0;  // the flow objects of the incremental side, for unversioned queries
    inc.open(wd, own.build(), version, incremental);
    full.open(wd, own.build(), "", false);
    for (int step = 0; step < 40; ++step) {
      // The sources change, the clock moves.
      for (int k = pick(1, 4); k > 0; --k) wd.change(pick, today, 10, 2);
      // Rows inserted directly, into both targets.
      if (step > 0 && pick(0, 5) == 0) {
        const int d = today + pick(-10, 3);
        const std::vector<RegionDay> rows{{day(d), "direct", pick(1, 9)}};
        fl::dml_insert(inc.table, rows);
        fl::dml_insert(full.table, rows);
        ref.inserted.push_back(d);
      }
      // A restart, often with another predicate, now and then another
      // version or incremental option.
      bool predicate_changed = false;
      if (pick(0, 3) == 0) {
        if (pick(0, 3) != 0) {
          own = random_predicate(false);
          predicate_changed = true;
        }
        if (pick(0, 14) == 0) version = versions[static_cast<std::size_t>(pick(0, 2))];
        if (pick(0, 14) == 0) incremental = !incremental;
        inc.open(wd, own.build(), version, incremental);
        full.open(wd, own.build(), "", false);
        ref.restarted();
        ++object;
      }
      std::map<std::string, w::expr> overrides;
      std::optional<predicate_spec> backfill;
      if (pick(0, 7) == 0) {
        backfill = random_predicate(true);
        overrides.emplace("f", backfill->build());
      }
      const std::string query =
          version.empty() ? "unversioned " + std::to_string(object) : "version " + version;
      const predicate_spec& run = backfill ? *backfill : own;
      const reference_planner::plan want =
          ref.update(own, run, backfill.has_value(), incremental, version, query, today);
      inc.update(today, overrides);
      full.update(today, overrides);
      ++updates;
      INFO("seed " << seed << " step " << step << " day " << today << " predicate "
                   << run.build().to_string() << (backfill ? " (override)" : ""));
      CHECK(inc.last == plan_pair{want.technique, want.reason});
      REQUIRE(inc.table.sorted_all_rows() == full.table.sorted_all_rows());
      ++seen[want.text()];
      if (predicate_changed && !backfill) {
        if (want.reason == "none" && want.technique == "INCREMENTAL") ++changed_predicate_incremental;
        if (want.reason == "UNSUPPORTED_REPLACE_WHERE_PREDICATE") ++changed_predicate_unsupported;
        if (want.reason == "EXTERNAL_CHANGE_IN_REPLACE_WINDOW") ++changed_predicate_external;
      }
    }
  }
  CHECK(updates == 60 * 40);
  // Not vacuous: every plan came up, and changed predicates gave each of the three.
  for (const char* p : {"INCREMENTAL none", "COMPLETE_RECOMPUTE none",
                        "COMPLETE_RECOMPUTE REPLACE_WHERE_DEFINITION_CHANGED",
                        "COMPLETE_RECOMPUTE REPLACE_WHERE_QUERY_NOT_VERSIONED",
                        "COMPLETE_RECOMPUTE REPLACE_WHERE_NOT_DETERMINISTIC",
                        "COMPLETE_RECOMPUTE PRIOR_REPLACE_WHERE_NOT_DETERMINISTIC",
                        "COMPLETE_RECOMPUTE UNSUPPORTED_REPLACE_WHERE_PREDICATE",
                        "COMPLETE_RECOMPUTE EXTERNAL_CHANGE_IN_REPLACE_WINDOW"}) {
    CAPTURE(p);
    CHECK(seen[p] > 0);
  }
  CHECK(changed_predicate_incremental > 10);
  CHECK(changed_predicate_unsupported > 10);
  CHECK(changed_predicate_external > 0);
}

}  // namespace flows_replace_where_planner_model
