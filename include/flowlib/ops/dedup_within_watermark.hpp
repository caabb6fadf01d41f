// flowlib/ops/dedup_within_watermark.hpp
//
// DedupWithinWatermark<Key, EventTime>: drops redelivered rows of an
// at-least-once stream with state bounded by a watermark
// (docs/semantics.md#deduplication-within-a-watermark;
// Spark's dropDuplicatesWithinWatermark).
//
//   using Dedup = flowlib::DedupWithinWatermark<
//       flowlib::Key<&Click::session_id, &Click::click_seq_num>,  // the identity
//       flowlib::EventTime<&Click::click_ts>>;                     // the event time
//   Dedup dedup{std::chrono::minutes(5)};          // the delay
//   std::vector<Click> fresh = dedup.process(batch);  // any input range of Click
//   flow.apply(table, fresh);                      // composes before any flow
//   dedup.last_stats().duplicate_rows;             // per batch; total_stats() too
//
// Rules, per batch n (one call of process):
//   - R-DEDUP-3: a row with event_time <= the watermark after batch n-1 is
//     late: dropped and counted. Then, in batch order, the first row of an
//     identity absent from the state is emitted and the identity stored with
//     expires_at = event_time + delay (R-DEDUP-1); rows of an identity
//     present in the state are dropped as duplicates and never extend it.
//   - R-DEDUP-2: the watermark after batch n is max(watermark before, max
//     event time of batch n - delay), over every row of the batch (late and
//     duplicate rows included); none before the first row.
//   - R-DEDUP-4: at the end of batch n, identities with expires_at <= the
//     watermark after batch n are evicted: the state holds only identities
//     seen within the delay, and an evicted identity is accepted again.
//   - R-DEDUP-5: the identity need not contain the event time. With several
//     inputs (a union), process(input, batch) tags each batch with its input;
//     every input has its own watermark and the global one (used for late
//     rows and eviction) is their min (default) or max.
//   - R-DEDUP-6: write_checkpoint() / read_checkpoint() give the state
//     (identities with expiry, watermarks) for a checkpoint, as every flow
//     does (flows/contract.hpp): a snapshot holds the whole state, a delta
//     the watermarks and the identities the last batch stored (O(the batch)),
//     and a restore replays the deltas on the last snapshot. The format is
//     described at write_checkpoint() and in docs/dedup-within-watermark.md;
//     its encoding is detail/dedup_checkpoint.hpp.
//
// All-or-nothing: if anything throws while a batch is processed (a row's copy
// constructor, the key's copy, an allocation), the operator's state and
// counters are exactly as before the call, and process_into leaves the
// output vector as it was. Key hashing and equality must not throw.
//
// Performance. The state is a slab of {key, expires_at} entries indexed by
// an absl::flat_hash_set of 32-bit slab positions (heterogeneous probes with
// the row's precomputed hash: no key is built for a duplicate). Eviction
// does not scan the state: entries are filed in time buckets of width
// delay/32 (a std::map of bucket -> vector of slab positions, usually about
// 64 buckets), so a batch visits only the buckets the watermark passed, plus
// the one it stands in. Evicted slab positions are reused, bucket vectors are
// recycled, and scratch space is kept between batches: no allocation per row
// in steady state. Random-access batches are processed with software
// prefetching of the probes a few rows ahead. Memory per identity: the key
// and its expiry, 4 bytes of slab position in the index plus absl's control
// byte, and 4 bytes in a bucket.
//
// The state itself (slab, index, expiry buckets, eviction, undo) is
// detail/dedup_state.hpp; its checkpoint encoding is
// detail/dedup_checkpoint.hpp. This header holds the operator: options,
// counters, the batch loop and the all-or-nothing commit.
#pragma once

#include <flowlib/columns.hpp>
#include <flowlib/detail/batch.hpp>
#include <flowlib/detail/byte_codec.hpp>
#include <flowlib/detail/dedup_checkpoint.hpp>
#include <flowlib/detail/dedup_state.hpp>
#include <flowlib/detail/flow_checkpoint.hpp>
#include <flowlib/error.hpp>
#include <flowlib/ops/watermark.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <ranges>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace flowlib {

/// @brief What DedupWithinWatermark did: per batch (last_stats()) or summed
/// over every batch since construction or restore (total_stats()).
///
/// Every input row is accounted for exactly once:
/// input_rows == emitted_rows + late_rows + duplicate_rows.
struct DedupStats {
  std::uint64_t batches = 0;         ///< batches processed (1 for a per-batch record)
  std::uint64_t input_rows = 0;      ///< rows read
  std::uint64_t emitted_rows = 0;    ///< first rows of identities absent from the state
  std::uint64_t late_rows = 0;       ///< event_time <= watermark before the batch (R-DEDUP-3)
  std::uint64_t duplicate_rows = 0;  ///< rows of identities present in the state (R-DEDUP-3)
  std::uint64_t evicted_keys = 0;    ///< identities evicted at the end of the batch(es) (R-DEDUP-4)
  std::uint64_t state_keys = 0;      ///< identities held after the (last) batch
  friend bool operator==(const DedupStats&, const DedupStats&) = default;
};

/// @brief Options of DedupWithinWatermark beyond the delay.
struct DedupOptions {
  /// Number of inputs combined into the stream (R-DEDUP-5); batches are
  /// tagged with an input index below this.
  std::size_t inputs = 1;
  /// How the inputs' watermarks make the global one (R-DEDUP-5).
  watermark_policy policy = watermark_policy::min;
};

/// @brief Deduplication within a watermark
/// (docs/semantics.md#deduplication-within-a-watermark). See the header
/// comment for the rules, the guarantees and the costs.
///
/// @tparam K  the identity: a key extractor such as Key<&Row::id> or
///            Key<&Row::session_id, &Row::seq_num>; it need not contain the
///            event time.
/// @tparam T  the event time: EventTime<&Row::ts> (an integer or an
///            integer-based std::chrono::time_point column).
template <class K, class T>
class DedupWithinWatermark {
  static_assert(key_extractor<K>,
                "flowlib::DedupWithinWatermark<Key, EventTime>: the first argument must be the "
                "identity, a key extractor such as flowlib::Key<&Row::id> or "
                "flowlib::Key<&Row::session_id, &Row::seq_num>.");
  static_assert(event_time_extractor<T>,
                "flowlib::DedupWithinWatermark<Key, EventTime>: the second argument must be the "
                "event-time column, such as flowlib::EventTime<&Row::ts> (an integer or a "
                "std::chrono::time_point with an integer representation) (R-DEDUP-5).");
  static_assert(std::is_same_v<typename K::row_type, typename T::row_type>,
                "flowlib::DedupWithinWatermark<Key, EventTime>: the identity and the event time "
                "must be columns of the same row type.");

  using time_traits = detail::event_time_traits<typename T::value_type>;
  using rep = typename time_traits::rep;
  using traits = detail::key_traits<K>;
  using state = detail::dedup_state<K, rep>;
  using entry = typename state::entry;
  using row_probe = typename state::row_probe;

 public:
  using key_policy = K;
  using event_time_policy = T;
  using row_type = typename K::row_type;
  using key_type = typename K::value_type;
  /// The event time's type: the integer, or the std::chrono::time_point.
  using time_type = typename T::value_type;
  /// The delay's type: the integer, or the time point's duration.
  using delay_type = typename time_traits::duration_type;
  static constexpr std::string_view kind = "DEDUP WITHIN WATERMARK";

  /// @param delay  how long after its first row's event time an identity is
  ///               remembered; must not be negative.
  explicit DedupWithinWatermark(delay_type delay, std::string name = "dedup_within_watermark",
                                DedupOptions options = {}, K key = K{}, T time = T{})
      : name_(std::move(name)),
        key_(std::move(key)),
        time_(std::move(time)),
        delay_(time_traits::delay_rep(delay)),
        state_(std::make_unique<state>(key_, delay_)) {
    if (detail::is_negative_rep(delay_)) {
      throw error(errc::invalid_argument, name_, time_.name(), "",
                  "the watermark delay must not be negative");
    }
    if (options.inputs == 0) {
      throw error(errc::invalid_argument, name_, "", "", "a stream needs at least one input");
    }
    wm_.inputs.assign(options.inputs, std::nullopt);
    wm_.policy = options.policy;
  }

  DedupWithinWatermark(DedupWithinWatermark&&) noexcept = default;
  DedupWithinWatermark& operator=(DedupWithinWatermark&&) noexcept = default;
  DedupWithinWatermark(const DedupWithinWatermark&) = delete;
  DedupWithinWatermark& operator=(const DedupWithinWatermark&) = delete;

  const std::string& name() const noexcept { return name_; }
  delay_type delay() const noexcept { return delay_type(delay_); }
  std::size_t inputs() const noexcept { return wm_.inputs.size(); }
  watermark_policy policy() const noexcept { return wm_.policy; }

  // --- Processing -------------------------------------------------------------

  /// Processes one batch of the (only) input; returns the surviving rows in
  /// batch order. All-or-nothing.
  template <class R>
  std::vector<row_type> process(R&& batch) {
    return process(std::size_t{0}, std::forward<R>(batch));
  }

  /// Processes one batch of input `input` (R-DEDUP-5). All-or-nothing.
  template <class R>
  std::vector<row_type> process(std::size_t input, R&& batch) {
    std::vector<row_type> out;
    process_into(input, std::forward<R>(batch), out);
    return out;
  }

  /// Appends the surviving rows of one batch to `out` (reuse `out` across
  /// batches to avoid allocating). On an exception `out` is as before.
  template <class R>
  void process_into(R&& batch, std::vector<row_type>& out) {
    process_into(std::size_t{0}, std::forward<R>(batch), out);
  }

  /// Appends the surviving rows of one batch of input `input` to `out`.
  template <class R>
  void process_into(std::size_t input, R&& batch, std::vector<row_type>& out) {
    static_assert(batch_of<R, row_type>,
                  "flowlib::DedupWithinWatermark::process takes a batch: an input range (a "
                  "std::vector, a view, ...) whose elements are the operator's row type, the row "
                  "type of its Key and EventTime columns (R-DEDUP-5).");
    if constexpr (batch_of<R, row_type>) {
      if (input >= wm_.inputs.size()) {
        throw error(errc::invalid_argument, name_, "", "",
                    "input index " + std::to_string(input) + " is out of range: the operator has " +
                        std::to_string(wm_.inputs.size()) + " input(s) (DedupOptions::inputs)");
      }
      run(input, batch, out);
    }
  }

  // --- Observing ----------------------------------------------------------------

  /// Counters of the last batch.
  const DedupStats& last_stats() const noexcept { return last_; }
  /// Counters summed over all batches; state_keys is the current state size.
  const DedupStats& total_stats() const noexcept { return total_; }

  /// The global watermark (none before any row).
  std::optional<time_type> watermark() const {
    if (!wm_.global) return std::nullopt;
    return time_traits::from_rep(*wm_.global);
  }
  /// The watermark of input `i` (none before its first row).
  std::optional<time_type> input_watermark(std::size_t i) const {
    const auto& w = wm_.inputs.at(i);
    if (!w) return std::nullopt;
    return time_traits::from_rep(*w);
  }

  /// Number of identities in the state.
  std::size_t state_size() const noexcept { return state_->index.size(); }
  bool contains(const key_type& k) const { return state_->find(k) != nullptr; }
  /// When the identity `k` expires, if it is in the state.
  std::optional<time_type> expires_at(const key_type& k) const {
    const entry* e = state_->find(k);
    if (e == nullptr) return std::nullopt;
    return time_traits::from_rep(e->expires);
  }
  /// The identities in the state, sorted.
  std::vector<key_type> state_keys() const { return state_->sorted_keys(); }

  /// Bytes the state occupies in its containers (capacities, not sizes; the
  /// heap buffers of long string keys are not included).
  std::size_t state_memory_bytes() const noexcept { return state_->memory_bytes(); }

  // --- Checkpoint (R-DEDUP-6) -------------------------------------------------------

  /// @brief Writes the operator's state for a checkpoint: the whole state
  /// (`snapshot`) or what the last batch changed (`delta`: the watermarks
  /// and the identities it stored, with their expiry; O(the batch)). The
  /// pipeline runtime calls it after every committed batch; a program that
  /// keeps checkpoints itself takes a snapshot with
  /// flowlib::checkpoint_snapshot(op). When more than one batch ran since
  /// the previous call, a delta holds the whole state instead.
  ///
  /// Format (all integers little-endian, fixed width; `rep` is the event
  /// time's integer representation, of sizeof(rep) bytes): the header
  /// "FLDD", u16 format version (1), u8 scope; then a snapshot is the state:
  ///
  ///   u64 length, then "FLDW"  u8 version (1)  u8 time kind (0 integer,
  ///   1 time_point)  u8 sizeof(rep)  u8 policy (0 min, 1 max)
  ///   rep delay  u32 inputs
  ///   u8 has_global [rep global]           the global watermark
  ///   inputs x (u8 has [rep watermark])    each input's watermark
  ///   u64 count
  ///   count x (rep expires_at, key)        identities, in expiry order
  ///
  /// and a delta is u8 1 and the state as above, or u8 0 and the last
  /// batch's watermarks and identities (detail/dedup_checkpoint.hpp). A key
  /// is written column by column: integers and enums at their own width,
  /// bool as u8, std::string as u64 length + bytes, std::optional as u8
  /// (0 null, 1 present) + value, std::chrono durations and time points as
  /// their integer count; a tuple key is its columns in order. Key column
  /// types outside this list are rejected at compile time.
  void write_checkpoint(byte_writer& out, checkpoint_scope scope) const {
    static_assert(detail::serialisable_key<key_type>(),
                  "flowlib::DedupWithinWatermark::write_checkpoint: a key column's type cannot be "
                  "serialised. Checkpointed identity columns must be integers, bool, enums, "
                  "std::string, std::chrono durations or time points, or std::optional or "
                  "std::tuple of those; convert other columns to one of these (R-DEDUP-6).");
    detail::write_checkpoint_header(out, checkpoint_tag, checkpoint_version, scope);
    if (scope == checkpoint_scope::snapshot) {
      write_whole(out);
    } else if (since_write_ > 1) {
      out.integer<std::uint8_t>(1);  // the whole state
      write_whole(out);
    } else {
      out.integer<std::uint8_t>(0);  // the last batch
      detail::write_dedup_delta(out, *state_, since_write_ == 1, wm_.global, wm_.inputs);
    }
    since_write_ = 0;
  }

  /// @brief Replaces the state by the one `blobs` hold: the snapshot (if
  /// any), then every delta replayed in order. The pipeline runtime calls it
  /// on a restart; a program that keeps checkpoints itself restores a
  /// snapshot with `read_checkpoint(checkpoint_blobs::of_snapshot(bytes))`.
  /// Throws errc::checkpoint_corrupt (a truncated or garbled blob, a wrong tag or
  /// version) or errc::checkpoint_mismatch (a state saved with another
  /// delay, watermark policy or key type), leaving the state unchanged.
  /// Counters are reset. Empty blobs give a fresh operator's state.
  void read_checkpoint(const checkpoint_blobs& blobs) {
    static_assert(detail::serialisable_key<key_type>(),
                  "flowlib::DedupWithinWatermark::read_checkpoint: a key column's type cannot be "
                  "serialised. Checkpointed identity columns must be integers, bool, enums, "
                  "std::string, std::chrono durations or time points, or std::optional or "
                  "std::tuple of those; convert other columns to one of these (R-DEDUP-6).");
    detail::dedup_checkpoint<K, rep> c;
    c.delay = delay_;
    c.policy = wm_.policy == watermark_policy::min ? 0 : 1;
    c.inputs.assign(wm_.inputs.size(), std::nullopt);
    c.state = std::make_unique<state>(key_, delay_);
    if (blobs.snapshot) {
      detail::byte_reader r = detail::checkpoint_reader(*blobs.snapshot, name_);
      detail::read_checkpoint_header(r, checkpoint_tag, checkpoint_version, kind,
                                     checkpoint_scope::snapshot);
      read_whole(r, c);
    }
    for (std::string_view d : blobs.deltas) {
      detail::byte_reader r = detail::checkpoint_reader(d, name_);
      detail::read_checkpoint_header(r, checkpoint_tag, checkpoint_version, kind,
                                     checkpoint_scope::delta);
      const auto mode = r.integer<std::uint8_t>();
      if (mode > 1) r.fail("unknown delta kind");
      if (mode == 1) {
        read_whole(r, c);
      } else {
        detail::replay_dedup_delta(r, c);
        detail::expect_checkpoint_end(r);
      }
    }
    // Commit (nothing below throws).
    state_ = std::move(c.state);
    wm_.global = c.global;
    wm_.inputs = std::move(c.inputs);
    last_ = DedupStats{};
    total_ = DedupStats{};
    total_.state_keys = state_size();
    since_write_ = 0;
  }

 private:
  static constexpr char checkpoint_tag[5] = "FLDD";
  static constexpr std::uint16_t checkpoint_version = 1;

  // Writes the whole state as a snapshot holds it (see write_checkpoint()):
  // its length, then its bytes, encoded in place (the length is filled in
  // after them).
  void write_whole(byte_writer& out) const {
    const std::size_t at = out.out.size();
    out.integer<std::uint64_t>(0);
    const std::uint8_t policy = wm_.policy == watermark_policy::min ? 0 : 1;
    detail::write_dedup_state(out.out, *state_, time_traits::is_time_point, policy, delay_,
                              wm_.global, wm_.inputs);
    auto length = static_cast<std::uint64_t>(out.out.size() - at - sizeof(std::uint64_t));
    for (std::size_t i = 0; i < sizeof length; ++i, length >>= 8) {
      out.out[at + i] = static_cast<char>(static_cast<unsigned char>(length & 0xffu));
    }
  }

  // Reads a whole state (whole_state()'s bytes) from `r` into `c`; it must be
  // of this operator's delay and policy.
  void read_whole(byte_reader& r, detail::dedup_checkpoint<K, rep>& c) const {
    const std::string_view payload = r.bytes();
    detail::expect_checkpoint_end(r);
    auto w = detail::read_dedup_state<K, rep>(payload, name_, key_, time_traits::is_time_point,
                                              wm_.inputs.size());
    if (w.delay != delay_ || w.policy != c.policy) {
      throw error(errc::checkpoint_mismatch, name_, "", "",
                  "the checkpoint was saved by an operator with another delay or watermark "
                  "policy; the operator's state is unchanged");
    }
    c = std::move(w);
  }

  // How many rows ahead random-access batches prefetch their index probes.
  static constexpr std::size_t prefetch_distance = state::prefetch_distance;

  /// Handles one non-late row: duplicate, or a new identity (stored, emitted).
  ///
  /// One probe per row: the row's entry is written first into a candidate
  /// slab position (a free one, or a spare at the slab's end), then
  /// lazy_emplace either finds the identity (a duplicate: the candidate stays
  /// free for the next row) or indexes the candidate. A position not in the
  /// index is not part of the state, so a throw before the index holds it
  /// changes nothing.
  template <bool Move, class In>
  void accept(state& s, In&& in, const row_type& r, std::size_t h, rep et, std::size_t& free_used,
              bool& spare, std::size_t& filed, std::vector<row_type>& out, DedupStats& st) {
    if (s.added.size() == s.added.capacity()) s.added.reserve(s.added.size() * 2 + 64);
    const rep expires = detail::saturating_add(et, delay_);
    std::uint32_t slot;
    const bool from_free = free_used < s.free.size();
    if (from_free || spare) {
      slot = from_free ? s.free[s.free.size() - 1 - free_used]
                       : static_cast<std::uint32_t>(s.slab.size() - 1);
      detail::key_assign<K>::assign(key_, r, s.slab[slot].key);
      s.slab[slot].expires = expires;
    } else {
      if (s.slab.size() >= 0xfffffffeu) {
        throw error(errc::invalid_argument, name_, "", key_.describe(r),
                    "the state cannot hold more than 2^32 - 2 identities; shorten the delay");
      }
      if (s.slab.size() == s.slab.capacity()) {
        s.slab.reserve(s.slab.size() + s.slab.size() / 4 + 64);  // grow by 1.25x: state memory
      }
      slot = static_cast<std::uint32_t>(s.slab.size());
      s.slab.push_back(entry{key_(r), expires});
      spare = true;
    }
    bool inserted = false;
    s.index.lazy_emplace(row_probe{&r, h}, [&](const auto& ctor) {
      ctor(slot);
      inserted = true;
    });
    if (!inserted) {
      ++st.duplicate_rows;
      return;
    }
    if (from_free) {
      ++free_used;
    } else {
      spare = false;
    }
    s.added.push_back({slot, h});  // capacity reserved above: cannot throw
    s.bucket_for(expires).push_back(slot);
    ++filed;
    ++st.emitted_rows;
    if constexpr (Move) {
      out.push_back(std::move(in));
    } else {
      out.push_back(r);
    }
  }

  template <class R>
  void run(std::size_t input, R& batch, std::vector<row_type>& out) {
    state& s = *state_;
    const std::size_t out_before = out.size();
    const std::size_t slab_before = s.slab.size();
    std::size_t free_used = 0;
    bool spare = false;  // the slab's last entry is a candidate, not (yet) state
    // The previous batch's identities (a delta's content) are dropped here:
    // if no checkpoint was written since, the next delta is the whole state.
    if (since_write_ == 1) since_write_ = 2;
    s.added.clear();
    DedupStats st;
    st.batches = 1;
    const std::optional<rep> wm = wm_.global;  // the watermark after the previous batch
    rep max_et = std::numeric_limits<rep>::lowest();
    bool any = false;
    constexpr bool move = detail::movable_elements<R>;
    std::size_t filed = 0;
    std::optional<rep> next_global;
    std::optional<rep> next_input;
    try {
      if (const std::size_t hint = detail::size_hint(batch); hint > out.capacity() - out.size()) {
        out.reserve(out.size() + hint);
      }
      // One row: late (counted, dropped) or accepted; `hash_of(r)` gives its
      // key's hash, asked only for a row that is not late.
      const auto one = [&](auto&& in, const auto& hash_of) {
        const row_type& r = in;
        ++st.input_rows;
        const rep et = time_traits::to_rep(time_(r));
        any = true;
        if (max_et < et) max_et = et;
        if (wm && et <= *wm) {
          ++st.late_rows;
          return;
        }
        accept<move>(s, std::forward<decltype(in)>(in), r, hash_of(r), et, free_used, spare,
                     filed, out, st);
      };
      if constexpr (std::ranges::random_access_range<R> && std::ranges::sized_range<R>) {
        // Hashes are computed prefetch_distance rows ahead and kept in a
        // small ring, so every probe finds its index group in cache.
        const auto n = static_cast<std::size_t>(std::ranges::size(batch));
        auto first = std::ranges::begin(batch);
        constexpr std::size_t ring = 16;
        static_assert(ring > prefetch_distance);
        std::size_t hashes[ring];
        const auto prime = [&](std::size_t j) {
          const row_type& rj = first[static_cast<std::ptrdiff_t>(j)];
          hashes[j % ring] = traits::hash(key_, rj);
          s.index.prefetch(row_probe{&rj, hashes[j % ring]});
        };
        for (std::size_t j = 0; j < std::min(n, prefetch_distance); ++j) prime(j);
        for (std::size_t i = 0; i < n; ++i) {
          if (i + prefetch_distance < n) prime(i + prefetch_distance);
          one(first[static_cast<std::ptrdiff_t>(i)],
              [&](const row_type&) noexcept { return hashes[i % ring]; });
        }
      } else {
        for (auto&& in : batch) {
          one(std::forward<decltype(in)>(in), [&](const row_type& r) { return traits::hash(key_, r); });
        }
      }
      // Make the eviction below infallible: room for every position it may
      // free and for every bucket vector it may retire.
      next_global = wm_.next(input, any ? std::optional<rep>(max_et) : std::nullopt, delay_, next_input);
      if (next_global) s.reserve_eviction(*next_global, free_used);
    } catch (...) {
      // Undo, in reverse: bucket filings, index insertions, slab growth, output.
      s.rollback(filed, slab_before);
      out.erase(out.begin() + static_cast<std::ptrdiff_t>(out_before), out.end());
      throw;
    }
    // Commit: nothing below throws.
    if (spare) s.slab.pop_back();
    s.free.resize(s.free.size() - free_used);
    // s.added is kept: the batch's identities, for write_checkpoint()'s delta.
    if (since_write_ == 0) since_write_ = 1;
    wm_.inputs[input] = next_input;
    wm_.global = next_global;
    if (wm_.global) st.evicted_keys = s.evict(*wm_.global);
    st.state_keys = s.index.size();
    last_ = st;
    total_.batches += st.batches;
    total_.input_rows += st.input_rows;
    total_.emitted_rows += st.emitted_rows;
    total_.late_rows += st.late_rows;
    total_.duplicate_rows += st.duplicate_rows;
    total_.evicted_keys += st.evicted_keys;
    total_.state_keys = st.state_keys;
  }

  std::string name_;
  K key_;
  T time_;
  rep delay_;
  std::unique_ptr<state> state_;
  detail::watermark_state<rep> wm_;
  DedupStats last_;
  DedupStats total_;
  // Batches since the last write_checkpoint() (0, 1, or 2 for "more"); a
  // checkpoint write is const to its callers.
  mutable std::uint8_t since_write_ = 0;
};

}  // namespace flowlib
