// REPLACE USING: the seed example (SEMANTICS.md section 1).
#include <flowlib/flowlib.hpp>

#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

namespace fl = flowlib;

namespace seed {
struct Event {
  std::int64_t region_id;
  std::string device_type;
  std::string event_type;
  std::int64_t seq;
  friend bool operator==(const Event&, const Event&) = default;
};
FLOWLIB_SCHEMA(Event, region_id, device_type, event_type, seq);
}  // namespace seed

TEST_CASE("R-USING-1 R-USING-2 R-USING-3: the seed example") {
  using seed::Event;
  fl::StreamingTable<Event> events{"events"};
  fl::ReplaceUsing<fl::Key<&Event::region_id>, fl::Seq<&Event::seq>> flow{"events_flow"};
  flow.apply(events, std::vector<Event>{{1, "iOS", "click", 1},
                                        {1, "Android", "conversion", 1},
                                        {2, "iOS", "click", 1},
                                        {2, "desktop", "click", 1}});
  const auto stats = flow.apply(events, std::vector<Event>{{1, "iOS", "click", 2},
                                                           {1, "Android", "conversion", 2},
                                                           {1, "desktop", "click", 2},
                                                           {3, "iOS", "click", 1},
                                                           {3, "desktop", "click", 2}});
  const std::vector<Event> expected{{1, "Android", "conversion", 2}, {1, "desktop", "click", 2},
                                    {1, "iOS", "click", 2},          {2, "desktop", "click", 1},
                                    {2, "iOS", "click", 1},          {3, "desktop", "click", 2}};
  CHECK(events.sorted_rows() == expected);
  CHECK(stats.input_rows == 5);
  CHECK(stats.superseded_rows == 1);
  CHECK(stats.replaced_rows == 2);
  CHECK(stats.applied_rows == 4);
  CHECK(stats.inserted_rows == 1);
}
