// REPLACE USING applied by hand, batch by batch: from the reference example
// to a table of bookings with expectations and failing batches. (The same
// flows in a pipeline, with checkpoints and restarts: examples/flagship.cpp.)
//
//   Part 1  The reference's region example (docs/replace-using.md): a target
//           built by a first batch, then a batch of partial snapshots for
//           regions 1 and 3. Also: the same input in one batch, in another
//           order, gives the same target (R-USING-4).
//   Part 2  `bookings_current`: booking updates keyed by booking_id and
//           sequenced by booking_update_id, with an expect_or_drop
//           expectation "positive_amount" (total_amount > 0): a late
//           update, a dropped row that sets no sequence floor, equal
//           sequences that append, and two failing batches that change
//           nothing.
//
// Every step is printed as an aligned text table with the batch's
// BatchStats, and checked against the contract (docs/semantics.md#replace-using):
// the program exits 1 if any result differs, so it doubles as a test (it
// runs under CTest).
//
// The table printer at the top works for any row type that has
// FLOWLIB_SCHEMA; copy it along if you like it.

#include <flowlib/flowlib.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <optional>
#include <ranges>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace fl = flowlib;

// ---------------------------------------------------------------------------
// A small table printer for rows with FLOWLIB_SCHEMA
// ---------------------------------------------------------------------------
namespace print {

template <class T>
struct optional_traits {
  static constexpr bool is_optional = false;
  using value_type = T;
};
template <class T>
struct optional_traits<std::optional<T>> {
  static constexpr bool is_optional = true;
  using value_type = T;
};

/// The text of one cell: numbers as numbers (two decimals for floating
/// point), strings unquoted, an empty std::optional as "null".
template <class T>
std::string cell(const T& v) {
  if constexpr (optional_traits<T>::is_optional) {
    return v ? cell(*v) : std::string("null");
  } else if constexpr (std::is_same_v<T, bool>) {
    return v ? "true" : "false";
  } else if constexpr (std::is_floating_point_v<T>) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.2f", static_cast<double>(v));
    return buf;
  } else if constexpr (std::is_arithmetic_v<T>) {
    return std::to_string(v);
  } else {
    return std::string(v);  // std::string, std::string_view, const char*
  }
}

/// Prints `rows` (any range of a row type with FLOWLIB_SCHEMA) as an aligned
/// table: one column per schema column, numbers right-aligned.
template <std::ranges::input_range Rows>
void table(std::ostream& os, const Rows& rows) {
  using Row = std::ranges::range_value_t<Rows>;
  using Schema = fl::schema_of<Row>;
  constexpr std::size_t n = Schema::size;

  std::array<std::size_t, n> width{};
  std::array<bool, n> right{};
  {
    std::size_t i = 0;
    Schema::for_each([&](auto col) {
      using V = typename optional_traits<typename decltype(col)::value_type>::value_type;
      right[i] = std::is_arithmetic_v<V>;
      width[i] = Schema::names[i].size();
      ++i;
    });
  }
  std::vector<std::array<std::string, n>> lines;
  for (const Row& r : rows) {
    std::array<std::string, n> line;
    std::size_t i = 0;
    Schema::for_each([&](auto col) {
      line[i] = cell(decltype(col)::get(r));
      width[i] = std::max(width[i], line[i].size());
      ++i;
    });
    lines.push_back(std::move(line));
  }

  const auto rule = [&] {
    os << "  +";
    for (std::size_t w : width) os << std::string(w + 2, '-') << '+';
    os << '\n';
  };
  const auto line_out = [&](const auto& texts) {
    os << "  |";
    for (std::size_t i = 0; i < n; ++i) {
      const std::string_view t = texts[i];
      const std::string pad(width[i] - t.size(), ' ');
      os << ' ' << (right[i] ? pad : "") << t << (right[i] ? "" : pad) << " |";
    }
    os << '\n';
  };
  rule();
  line_out(Schema::names);
  rule();
  for (const auto& line : lines) line_out(line);
  rule();
  os << "  (" << lines.size() << (lines.size() == 1 ? " row" : " rows") << ")\n";
}

inline std::string_view action(fl::on_violation a) {
  switch (a) {
    case fl::on_violation::warn: return "warn";
    case fl::on_violation::drop: return "drop";
    case fl::on_violation::fail: return "fail";
    case fl::on_violation::quarantine: return "quarantine";
  }
  return "?";
}

/// One paragraph per batch: what happened to each input row, then the
/// per-expectation metrics.
inline void stats(std::ostream& os, const fl::BatchStats& s) {
  os << "  batch: " << s.input_rows << " rows in; " << s.applied_rows << " applied ("
     << s.inserted_rows << " inserted for new keys, " << s.appended_rows
     << " appended at an equal sequence), " << s.replaced_rows << " target rows replaced\n"
     << "         " << s.superseded_rows << " superseded within the batch, "
     << s.ignored_late_rows << " ignored as late, " << s.dropped_rows
     << " dropped by expectations\n";
  for (const fl::ExpectationMetrics& e : s.expectations) {
    os << "  expectation " << e.name << " (" << action(e.action) << "): " << e.passed
       << " passed, " << e.failed << " failed\n";
  }
}

}  // namespace print

// ---------------------------------------------------------------------------
// Self-checks: the example verifies what it prints
// ---------------------------------------------------------------------------
namespace verify {

int failures = 0;

void that(bool ok, std::string_view what) {
  if (!ok) {
    ++failures;
    std::cerr << "CHECK FAILED: " << what << '\n';
  }
}

/// The table holds exactly `expected`, as a multiset (order does not matter).
template <class Table, class Row>
void rows(const Table& t, const std::vector<Row>& expected, std::string_view what) {
  const std::vector<Row> actual = t.sorted_rows();
  that(actual.size() == expected.size() &&
           std::is_permutation(actual.begin(), actual.end(), expected.begin()),
       what);
}

/// The counters REPLACE USING fills in.
struct Counts {
  std::uint64_t input, dropped, superseded, late, applied, inserted, appended, replaced;
};

void stats(const fl::BatchStats& s, const Counts& c, std::string_view what) {
  that(s.input_rows == c.input && s.dropped_rows == c.dropped &&
           s.superseded_rows == c.superseded && s.ignored_late_rows == c.late &&
           s.applied_rows == c.applied && s.inserted_rows == c.inserted &&
           s.appended_rows == c.appended && s.replaced_rows == c.replaced,
       what);
  // Every input row is accounted for exactly once.
  that(s.input_rows == s.dropped_rows + s.superseded_rows + s.ignored_late_rows + s.applied_rows,
       what);
}

}  // namespace verify

// ---------------------------------------------------------------------------
// Part 1: the reference's region example
// ---------------------------------------------------------------------------

struct Event {
  std::int64_t region_id;
  std::string device_type;
  std::string event_type;
  std::int64_t seq;
  friend bool operator==(const Event&, const Event&) = default;
};
// Column names, for printing, sorting and error messages.
FLOWLIB_SCHEMA(Event, region_id, device_type, event_type, seq);

// REPLACE USING (region_id) SEQUENCE BY seq
using EventsFlow = fl::ReplaceUsing<fl::Key<&Event::region_id>, fl::Seq<&Event::seq>>;

void part1_regions() {
  std::cout << "== Part 1: REPLACE USING (region_id) SEQUENCE BY seq\n\n";

  fl::StreamingTable<Event> events{"events"};
  EventsFlow flow{"events_flow"};

  // The target: two regions, two events each. The table starts empty, so
  // this first batch inserts every row.
  const std::vector<Event> first{{1, "iOS", "click", 1},
                                 {1, "Android", "conversion", 1},
                                 {2, "iOS", "click", 1},
                                 {2, "desktop", "click", 1}};
  fl::BatchStats s = flow.apply(events, first);
  std::cout << "After the first batch:\n";
  print::table(std::cout, events.sorted_rows());
  print::stats(std::cout, s);
  verify::stats(s, {4, 0, 0, 0, 4, 4, 0, 0}, "part 1, first batch: stats");
  verify::rows(events, first, "part 1, first batch: target");

  // Partial snapshots for regions 1 and 3; nothing for region 2.
  const std::vector<Event> second{{1, "iOS", "click", 2},
                                  {1, "Android", "conversion", 2},
                                  {1, "desktop", "click", 2},
                                  {3, "iOS", "click", 1},
                                  {3, "desktop", "click", 2}};
  s = flow.apply(events, second);
  std::cout << "\nAfter the second batch:\n";
  print::table(std::cout, events.sorted_rows());
  print::stats(std::cout, s);
  std::cout << "  region 1: replaced (seq 2 > 1); region 2: untouched (not in the batch);\n"
               "  region 3: only its seq-2 row (only a key's highest sequence is applied)\n";

  // The contract's result (R-USING-1..3). Superseded: (3,iOS,click,1).
  // Replaced: region 1's two seq-1 rows.
  const std::vector<Event> expected{{1, "iOS", "click", 2},   {1, "Android", "conversion", 2},
                                    {1, "desktop", "click", 2}, {2, "iOS", "click", 1},
                                    {2, "desktop", "click", 1}, {3, "desktop", "click", 2}};
  verify::stats(s, {5, 0, 1, 0, 4, 1, 0, 2}, "part 1, second batch: stats");
  verify::rows(events, expected, "part 1, second batch: target");

  // R-USING-4: any split and order of the input gives the same target. Here
  // all nine rows arrive in one batch, the newer ones first.
  std::vector<Event> all(second.rbegin(), second.rend());
  all.insert(all.end(), first.begin(), first.end());
  fl::StreamingTable<Event> at_once{"events_at_once"};
  EventsFlow at_once_flow{"events_at_once_flow"};
  at_once_flow.apply(at_once, all);
  const bool same = at_once.sorted_rows() == events.sorted_rows();
  std::cout << "\nThe same nine rows in one batch, newest first, give "
            << (same ? "the same" : "a DIFFERENT") << " target (R-USING-4).\n";
  verify::that(same, "part 1: R-USING-4, one batch gives the same target");
}

// ---------------------------------------------------------------------------
// Part 2: bookings_current
// ---------------------------------------------------------------------------

struct BookingUpdate {
  std::int64_t booking_id;
  std::string status;
  double total_amount;  // only key and sequence columns must not be floating point
  // Nullable, as a source column often is: a null sequence fails the batch.
  std::optional<std::int64_t> booking_update_id;
  friend bool operator==(const BookingUpdate&, const BookingUpdate&) = default;
};
FLOWLIB_SCHEMA(BookingUpdate, booking_id, status, total_amount, booking_update_id);

// CREATE STREAMING TABLE bookings_current
// FLOW REPLACE USING (booking_id) SEQUENCE BY booking_update_id ...
using BookingsFlow = fl::ReplaceUsing<fl::Key<&BookingUpdate::booking_id>,
                                      fl::Seq<&BookingUpdate::booking_update_id>>;

bool known_status(const BookingUpdate& b) {
  return b.status == "pending" || b.status == "confirmed" || b.status == "modified" ||
         b.status == "cancelled";
}

void show(const fl::StreamingTable<BookingUpdate>& t, const fl::BatchStats& s) {
  print::table(std::cout, t.sorted_rows());
  print::stats(std::cout, s);
}

void part2_bookings() {
  std::cout << "\n== Part 2: bookings_current, REPLACE USING (booking_id) SEQUENCE BY "
               "booking_update_id\n";

  fl::StreamingTable<BookingUpdate> bookings{"bookings_current"};
  BookingsFlow flow{"bookings_flow"};

  // @dp.expect_or_drop("positive_amount", "total_amount > 0"), plus a `fail`
  // expectation for statuses this program does not know.
  const auto checks = fl::expectations(
      fl::expect_or_drop("positive_amount",
                         [](const BookingUpdate& b) { return b.total_amount > 0; }),
      fl::expect_or_fail("known_status", known_status));

  // Batch 1: three bookings. Booking 101 appears twice; only its highest
  // booking_update_id (3) counts (R-USING-1).
  fl::BatchStats s = flow.apply(bookings,
                                std::vector<BookingUpdate>{{101, "pending", 450.00, 1},
                                                           {102, "pending", 980.50, 2},
                                                           {101, "confirmed", 450.00, 3},
                                                           {103, "pending", 120.00, 4}},
                                checks);
  std::cout << "\nBatch 1: new bookings; 101's update 1 is superseded by its update 3\n";
  show(bookings, s);
  verify::stats(s, {4, 0, 1, 0, 3, 3, 0, 0}, "bookings batch 1: stats");
  verify::rows(bookings,
               std::vector<BookingUpdate>{{101, "confirmed", 450.00, 3},
                                          {102, "pending", 980.50, 2},
                                          {103, "pending", 120.00, 4}},
               "bookings batch 1: target");

  // Batch 2: 102 is confirmed; a late update of 101 (2 < stored 3) is
  // ignored; 103's update 9 has a negative amount and is dropped, so 103
  // keeps its rows (R-USING-8).
  s = flow.apply(bookings,
                 std::vector<BookingUpdate>{{102, "confirmed", 980.50, 6},
                                            {101, "cancelled", 450.00, 2},
                                            {103, "confirmed", -120.00, 9}},
                 checks);
  std::cout << "\nBatch 2: 102 replaced; 101's late update 2 ignored; 103's update 9 dropped\n";
  show(bookings, s);
  verify::stats(s, {3, 1, 0, 1, 1, 0, 0, 1}, "bookings batch 2: stats");
  verify::that(s.expectation("positive_amount") != nullptr &&
                   s.expectation("positive_amount")->passed == 2 &&
                   s.expectation("positive_amount")->failed == 1,
               "bookings batch 2: positive_amount metrics");
  verify::rows(bookings,
               std::vector<BookingUpdate>{{101, "confirmed", 450.00, 3},
                                          {102, "confirmed", 980.50, 6},
                                          {103, "pending", 120.00, 4}},
               "bookings batch 2: target");

  // Batch 3: the dropped update 9 set no sequence floor, so 103's valid
  // update 7 applies (7 > stored 4). Within one batch, the drop also comes
  // first: 104's update 11 (amount 0) is dropped and its update 10 is the
  // latest valid version.
  s = flow.apply(bookings,
                 std::vector<BookingUpdate>{{103, "confirmed", 120.00, 7},
                                            {104, "pending", 75.00, 10},
                                            {104, "confirmed", 0.00, 11}},
                 checks);
  std::cout << "\nBatch 3: 103's update 7 applies although a dropped update 9 came before;\n"
               "         104's update 11 is dropped, so its update 10 is inserted\n";
  show(bookings, s);
  verify::stats(s, {3, 1, 0, 0, 2, 1, 0, 1}, "bookings batch 3: stats");
  verify::that(flow.sequence_of(103) == 7, "bookings batch 3: 103's stored sequence is 7");
  verify::rows(bookings,
               std::vector<BookingUpdate>{{101, "confirmed", 450.00, 3},
                                          {102, "confirmed", 980.50, 6},
                                          {103, "confirmed", 120.00, 7},
                                          {104, "pending", 75.00, 10}},
               "bookings batch 3: target");

  // Batch 4: equal sequences append. Two changes of 102 carry the same
  // update id 13: both are kept. The source redelivers 104's update 10:
  // it equals the stored sequence, so a second row joins the first. This is
  // why sequences should increase strictly per key.
  s = flow.apply(bookings,
                 std::vector<BookingUpdate>{{102, "modified", 1010.00, 13},
                                            {102, "modified", 1050.00, 13},
                                            {104, "pending", 75.00, 10}},
                 checks);
  std::cout << "\nBatch 4: equal sequences append: 102 now has two rows, 104 a duplicate\n";
  show(bookings, s);
  verify::stats(s, {3, 0, 0, 0, 3, 0, 1, 1}, "bookings batch 4: stats");
  const std::vector<BookingUpdate> final_rows{{101, "confirmed", 450.00, 3},
                                              {102, "modified", 1010.00, 13},
                                              {102, "modified", 1050.00, 13},
                                              {103, "confirmed", 120.00, 7},
                                              {104, "pending", 75.00, 10},
                                              {104, "pending", 75.00, 10}};
  verify::rows(bookings, final_rows, "bookings batch 4: target");

  // Batch 5 fails: booking 105's update has a null booking_update_id
  // (R-USING-7). Nothing of the batch is applied, not even 101's valid row.
  std::cout << "\nBatch 5: a null booking_update_id\n";
  try {
    flow.apply(bookings,
               std::vector<BookingUpdate>{{101, "cancelled", 450.00, 14},
                                          {105, "pending", 60.00, std::nullopt}},
               checks);
    verify::that(false, "bookings batch 5: a null sequence must fail the batch");
  } catch (const fl::error& e) {
    std::cout << "  caught: " << e.what() << '\n';
    verify::that(e.code() == fl::errc::null_sequence && e.key() == "booking_id=105" &&
                     e.column() == "booking_update_id" && e.flow() == "bookings_flow",
                 "bookings batch 5: the error names the flow, the column and the key");
  }
  verify::rows(bookings, final_rows, "bookings batch 5: target unchanged");

  // Batch 6 fails: an expect_or_fail expectation is violated.
  std::cout << "\nBatch 6: a status that fails the expectation known_status\n";
  try {
    flow.apply(bookings,
               std::vector<BookingUpdate>{{101, "cancelled", 450.00, 14},
                                          {106, "on hold", 60.00, 15}},
               checks);
    verify::that(false, "bookings batch 6: expect_or_fail must fail the batch");
  } catch (const fl::error& e) {
    std::cout << "  caught: " << e.what() << '\n';
    verify::that(e.code() == fl::errc::expectation_failed && e.column() == "known_status" &&
                     e.key() == "booking_id=106",
                 "bookings batch 6: the error names the expectation and the key");
  }
  verify::rows(bookings, final_rows, "bookings batch 6: target unchanged");
  verify::that(flow.sequence_of(101) == 3, "bookings: 101's stored sequence is still 3");

  std::cout << "\nAfter the failed batches the table is unchanged:\n";
  print::table(std::cout, bookings.sorted_rows());
}

int main() {
  part1_regions();
  part2_bookings();
  if (verify::failures != 0) {
    std::cerr << "\nreplace_using: " << verify::failures << " check(s) FAILED\n";
    return 1;
  }
  std::cout << "\nreplace_using: every result matches the REPLACE USING contract\n";
  return 0;
}
