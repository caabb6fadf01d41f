// AUTO CDC under memory exhaustion: a batch during which any allocation
// fails changes nothing, and the same batch then applies as if nothing had
// happened (R-CDC-5's all-or-nothing batches, through every apply path).
//
// This program replaces the global allocation functions
// (support/failing_allocator.hpp): after arm(n), the n+1-th allocation
// throws std::bad_alloc. Each batch is applied with n = 0, 1, 2, ... until
// it goes through, so that it fails once at each of its allocations,
// wherever they are: in the pass, in preparing a stored row for a long
// string, in planning late changes, in a store's growth.
//
// The flows start empty and every batch brings new keys, so that growing
// the key index fails too: the index allocates its new array before it
// changes anything (detail/flat_index.hpp).
#include <support/auto_cdc_model.hpp>

#include <support/failing_allocator.hpp>
#include <support/storage_policies.hpp>

#include <new>

namespace flows_auto_cdc_random_allocation {

using failing_allocator::arm;
using failing_allocator::disarm;

namespace alloc {

using namespace onepass;

/// A nullable string column whose values are sometimes longer than a
/// string's small buffer (so that writing them allocates).
model::ostr maybe_long(std::mt19937& rng, const char* long_value) {
  const int p = std::uniform_int_distribution<int>(0, 9)(rng);
  if (p < 2) return std::nullopt;
  if (p < 5) return std::string(long_value);
  return std::string(1, static_cast<char>('a' + p));
}

/// random_batch (few keys, ties, late changes, deletes), with long values.
std::vector<Change> batch_with_long_values(std::mt19937& rng, std::int64_t base) {
  std::vector<Change> b = random_batch(rng, /*truncates=*/false, base);
  for (Change& c : b) {
    if (c.op != model::upsert) continue;
    c.name = maybe_long(rng, "a name longer than a small string buffer");
    c.city = maybe_long(rng, "a city whose name also needs the heap");
  }
  return b;
}

// A column type whose copy assignment may throw and that is not prepared
// ahead of time: the SCD1 pass moves the stored row's values aside before
// writing it.
struct Change2 {
  int key;
  model::ostr name;
  std::vector<char> city;
  int op;
  std::optional<std::int64_t> seq;
};
FLOWLIB_SCHEMA(Change2, key, name, city, op, seq);
struct Row2 {
  int key;
  model::ostr name;
  std::vector<char> city;
  friend bool operator==(const Row2&, const Row2&) = default;
  friend auto operator<=>(const Row2&, const Row2&) = default;
};
FLOWLIB_SCHEMA(Row2, key, name, city);
struct IsDelete2 {
  bool operator()(const Change2& c) const { return c.op == model::remove; }
};
static_assert(!fl::detail::cdc_assign_prep<std::vector<char>>::ok);
static_assert(fl::detail::cdc_assign_prep<model::ostr>::ok);

std::vector<Change2> as_change2(const std::vector<Change>& b) {
  std::vector<Change2> out;
  for (const Change& c : b) {
    std::vector<char> city;
    if (c.city) city.assign(c.city->begin(), c.city->end());
    out.push_back({c.key, c.name, std::move(city), c.op, c.seq});
  }
  return out;
}

/// Applies `batch` to `t` through `flow`, failing at each allocation in
/// turn until it goes through; each failure must leave the table and the
/// flow as they were. Returns the batch's metrics; counts the failures.
template <class Flow, class Table, class Batch>
fl::BatchStats apply_until_through(Flow& flow, Table& t, const Batch& batch, long& failures) {
  for (long n = 0;; ++n) {
    const auto rows = t.sorted_rows();
    const std::size_t keys = flow.key_count();
    arm(n);
    try {
      const fl::BatchStats s = flow.apply(t, batch);
      disarm();
      return s;
    } catch (const std::bad_alloc&) {
      disarm();
    }
    ++failures;
    REQUIRE(t.sorted_rows() == rows);
    REQUIRE(flow.key_count() == keys);
  }
}

}  // namespace alloc

TEST_CASE_TEMPLATE("AUTO CDC: a batch failing at any allocation changes nothing", Storage,
                   FLOWTEST_STORAGE_POLICIES) {
  using namespace alloc;
  fl::CdcOptions one_pass;
  one_pass.tuning.scd2_one_pass_min_keys = 0;  // SCD2 too takes its one pass, however few keys
  long failures[3] = {0, 0, 0};
  for (unsigned n = 0; n < 60; ++n) {
    std::mt19937 rng(120000 + n);
    using Scd1Flow = fl::AutoCdc<K, S, fl::Scd1, fl::apply_as_deletes<model::IsDelete>, Cols>;
    using Scd1Blob = fl::AutoCdc<fl::Key<&Change2::key>, fl::Seq<&Change2::seq>, fl::Scd1,
                                 fl::apply_as_deletes<IsDelete2>, Cols>;
    using Scd2Flow = fl::AutoCdc<K, S, fl::Scd2<>, fl::apply_as_deletes<model::IsDelete>, Cols>;
    Scd1Flow f1{"alloc_scd1"}, r1{"alloc_scd1"};
    Scd1Blob f2{"alloc_blob"}, r2{"alloc_blob"};
    Scd2Flow f3{"alloc_scd2", one_pass}, r3{"alloc_scd2"};
    fl::StreamingTable<Row, Storage> t1{"t1"}, u1{"u1"};
    fl::StreamingTable<Row2, Storage> t2{"t2"}, u2{"u2"};
    fl::StreamingTable<Version, Storage> t3{"t3"}, u3{"u3"};
    for (int batch_no = 1; batch_no < 7; ++batch_no) {
      // Rising windows of sequences, overlapping: mostly in order, some late.
      std::vector<Change> batch = batch_with_long_values(rng, 20 * batch_no);
      // And new keys, 4 to 32 of them, spread through the batch: the indexes
      // grow (from 8 slots to 256 over the batches).
      const int fresh = 4 << (batch_no % 4);
      for (int j = 0; j < fresh; ++j) {
        const auto at = batch.begin() + static_cast<std::ptrdiff_t>(rng() % (batch.size() + 1));
        batch.insert(at, Change{1000 * batch_no + j, "new", std::nullopt, model::upsert, 20 * batch_no + j % 7});
      }
      INFO("case " << n << ", batch " << batch_no << ": " << batch);
      require_same(apply_until_through(f1, t1, batch, failures[0]), r1.apply(u1, input_only{&batch}));
      REQUIRE(t1.sorted_rows() == u1.sorted_rows());
      const std::vector<Change2> batch2 = as_change2(batch);
      require_same(apply_until_through(f2, t2, batch2, failures[1]),
                   r2.apply(u2, input_only{&batch2}));
      REQUIRE(t2.sorted_rows() == u2.sorted_rows());
      require_same(apply_until_through(f3, t3, batch, failures[2]), r3.apply(u3, input_only{&batch}));
      REQUIRE(t3.sorted_rows() == u3.sorted_rows());
    }
  }
  // Every flow failed at every allocation of every batch: hundreds of
  // times (its scratch, kept across batches, seldom grows).
  MESSAGE("failures: SCD1 " << failures[0] << ", SCD1 (values aside) " << failures[1]
                            << ", SCD2 " << failures[2]);
  CHECK(failures[0] > 500);
  CHECK(failures[1] > 500);
  CHECK(failures[2] > 500);
}

}  // namespace flows_auto_cdc_random_allocation
