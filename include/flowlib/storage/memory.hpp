// flowlib/storage/memory.hpp
//
// MemoryStorage: the default storage policy. Rows live in slots addressed by
// a stable row id, in segments that never move; erased slots are reused. Not
// durable.
//
// It meets the row-store contract (storage/row_store.hpp) and has every
// optional hook and capability listed there, the change journal included
// (journaled_row_store: a micro-batch's changes can be undone exactly), and
// prepared assigns (parallel_assign_row_store: rows assigned from several
// threads at once, journaled as a one-thread commit would journal them).
//
// Threads: a store is used by one thread at a time, with one exception.
// Between prepare_assigns() and finish_assigns(), assign_prepared() calls
// for distinct ids may run on several threads at once, and nothing else may
// run concurrently with them. Such a call writes only its row's slot and
// the journal record prepare_assign() set aside for it (a slot of its own);
// everything shared (the free list, the counters, the flag bytes, the
// journal's lists) is written by prepare_assign() and finish_assigns(), on
// one thread.
#pragma once

#include <flowlib/detail/prefetch.hpp>
#include <flowlib/detail/slot_iterator.hpp>
#include <flowlib/detail/slot_segments.hpp>
#include <flowlib/error.hpp>
#include <flowlib/storage/detail/preimage_buffer.hpp>
#include <flowlib/storage/row_store.hpp>

#include <algorithm>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <new>
#include <ranges>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

namespace flowlib {

namespace detail {

/// The memory store's row slots, addressed by row id.
///   - Slots live in segments that never move (detail/slot_segments.hpp):
///     a row's address is stable until it is erased.
///   - A live slot holds a constructed Row; a dead slot holds no object, only
///     the id of the next dead slot (an intrusive free list, so erasing needs
///     no side array that would have to grow with the table).
///   - A byte per slot (after each segment's slots) says whether it is live
///     (bit 0); while a journal is open, two more bits mark the slots whose
///     state before the journal was saved, and the rows the journal inserted.
///   - Rows are constructed in their slot (insert() moves once; the optional
///     emplace hooks build a row from its source without a temporary).
///
/// The change journal (begin_journal() .. commit_journal() or
/// rollback_journal()) saves, on the first change of each slot that existed
/// before the journal, what the slot held: a live row's value (moved aside
/// by erase() and assign(), copied by the first mutable get()) or a dead
/// slot's free-list link. Rollback puts those back and restores the four
/// counters; the free list's links live in the dead slots, so the list, and
/// with it the ids later inserts receive, is exactly as before. Slots past
/// the old id_bound() are just emptied. Each slot is saved at most once, so
/// the journal's memory is bounded by the rows a batch touches, and its
/// buffers are kept for the next batch. Without a journal, each operation
/// pays one test of a flag.
///
/// Prepared assigns (prepare_assign() .. assign_prepared()) split a
/// journaled assign in two: the serial half records the slot in the journal
/// (in the order a one-thread commit would assign, so journal_changed()
/// lists the rows in that order) and sets aside a record of its own for the
/// row's old value; the other half, which may run on any thread, moves the
/// old value into that record and the new value into the slot. The records
/// live in a buffer of their own (pre_: storage/detail/preimage_buffer.hpp),
/// reserved before the commit.
template <class Row>
class memory_row_store {
  static_assert(std::is_nothrow_move_constructible_v<Row> && std::is_nothrow_move_assignable_v<Row>,
                "flowlib::MemoryStorage: rows must be nothrow-movable (inserts and erases "
                "happen in a commit that cannot fail).");

  struct alignas(alignof(Row) > alignof(row_id) ? alignof(Row) : alignof(row_id)) slot {
    unsigned char bytes[sizeof(Row) > sizeof(row_id) ? sizeof(Row) : sizeof(row_id)];
  };
  static constexpr row_id no_slot = std::numeric_limits<row_id>::max();

 public:
  using row_type = Row;
  static constexpr bool durable = false;

  memory_row_store() = default;
  memory_row_store(const memory_row_store&) = delete;  // a table's rows are not copied
  memory_row_store& operator=(const memory_row_store&) = delete;
  memory_row_store(memory_row_store&& o) noexcept { steal(o); }
  memory_row_store& operator=(memory_row_store&& o) noexcept {
    if (this != &o) {
      destroy_live();
      steal(o);
    }
    return *this;
  }
  ~memory_row_store() { destroy_live(); }

  /// Makes room for `extra` inserts: afterwards up to `extra` inserts (or
  /// emplaced rows) and any number of assigns and erases do not allocate
  /// (the all-or-nothing commit relies on it). Adds segments as needed.
  void reserve(std::size_t extra) {
    const std::size_t need = extra > free_count_ ? bound_ + (extra - free_count_) : bound_;
    if (need > no_slot) {
      throw error(errc::invalid_argument, "memory storage", "", "",
                  "a table cannot hold more than 2^32-1 rows");
    }
    // emplace_each() records the dead slots it fills, to undo them.
    const std::size_t reuse = extra < free_count_ ? extra : free_count_;
    grow(undo_, reuse);
    if (journal_) {  // the journal's records of those inserts
      grow(j_inserted_, j_inserted_.size() + extra);
      grow(j_saved_, j_saved_.size() + reuse);
      j_saved_spare_ = reuse;  // kept free by first changes (save_live_slow)
    }
    segs_.grow_to(need);
  }

  /// Optional hook: the next `extra` inserts are about to be made one at a
  /// time. Makes room for them as reserve() does and, on Linux, maps in now
  /// the memory of the fresh slots they will take, one system call per
  /// segment instead of one page fault per page (a table that grows by a
  /// version per change spent a sixth of its time in those faults).
  void reserve_fresh(std::size_t extra) {
    reserve(extra);
    if (extra > free_count_) segs_.populate(bound_, bound_ + (extra - free_count_));
  }

  /// Inserts a row (a moved-in row; capacity reserved by reserve()).
  row_id insert(Row&& r) noexcept {
    ++changes_;
    if (journal_) return insert_journaled(std::move(r));
    const row_id id = take_slot();
    ::new (static_cast<void*>(slot_at(id)->bytes)) Row(std::move(r));
    flags(id) = live_bit;
    ++live_;
    return id;
  }

  /// Optional hook: inserts the row `make()` returns, constructed in its
  /// slot (no temporary, no move). If make() throws the store is unchanged.
  /// Capacity must be reserved, as for insert().
  template <class Make>
  row_id emplace_with(Make&& make) {
    const bool reuse = free_head_ != no_slot;
    const row_id id = reuse ? free_head_ : static_cast<row_id>(bound_);
    const row_id next = reuse ? link(id) : no_slot;
    // The journal's records first (they may allocate): if they throw,
    // nothing has changed.
    if (journal_) prepare_journaled_insert(id);
    try {
      ::new (static_cast<void*>(slot_at(id)->bytes)) Row(std::forward<Make>(make)());
    } catch (...) {
      if (reuse) set_link(id, next);  // a failed constructor may have written over it
      throw;
    }
    ++changes_;
    if (reuse) {
      free_head_ = next;
      --free_count_;
    } else {
      ++bound_;
    }
    if (journal_) {
      note_journaled_insert(id, flags(id));
    } else {
      flags(id) = live_bit;
    }
    ++live_;
    return id;
  }

  /// Optional hook: inserts `make(x)` for every element x of `batch`
  /// (forwarded as the range yields it), each row constructed in its slot,
  /// and returns how many. Capacity for the whole batch must be reserved;
  /// a batch that yields more rows than that is an error. All or nothing: if
  /// iterating the batch or make() throws, every row this call inserted is
  /// erased again (which cannot fail) and the exception propagates.
  template <class R, class Make>
  std::size_t emplace_each(R&& batch, Make&& make) {
    auto it = std::ranges::begin(batch);
    const auto last = std::ranges::end(batch);
    const std::size_t bound_before = bound_;
    ++changes_;
    undo_.clear();
    std::size_t b = bound_;
    try {
      // Dead slots first (a table that also erases): one by one.
      for (; free_head_ != no_slot && it != last; ++it) {
        undo_.push_back(emplace_with([&]() -> Row { return make(*it); }));  // capacity reserved
      }
      // Then the never used slots, segment by segment, with locals only (so
      // that writing a row's columns cannot be taken to alias the store's
      // counters).
      while (it != last) {
        if (b == segs_.capacity()) {
          throw error(errc::invalid_argument, "memory storage", "", "",
                      "a batch yielded more rows than were reserved for it (its size() was "
                      "wrong); nothing of it was written");
        }
        const auto run = segs_.run_at(b);
        slot* const s = run.slots;
        const std::size_t end = run.end;
        // b counts every row built, so that the handler below destroys
        // them all if the next one throws.
        for (std::size_t off = run.off; off < end && it != last; ++it, ++off, ++b) {
          ::new (static_cast<void*>(s[off].bytes)) Row(make(*it));
        }
      }
    } catch (...) {
      for (std::size_t i = b; i-- > bound_before;) row(static_cast<row_id>(i)).~Row();
      for (std::size_t i = undo_.size(); i-- > 0;) erase(undo_[i]);
      undo_.clear();
      throw;
    }
    if (journal_) {
      // Fresh slots: nothing to save (rollback empties the slots past the
      // old id_bound()); the inserted ids, in order (capacity reserved).
      segs_.set_flags(bound_before, b, live_bit | inserted_bit);
      for (std::size_t i = bound_before; i < b; ++i) j_inserted_.push_back(static_cast<row_id>(i));
    } else {
      segs_.set_flags(bound_before, b, live_bit);
    }
    const std::size_t added = b - bound_before;
    bound_ = b;
    live_ += added;
    const std::size_t n = undo_.size() + added;
    undo_.clear();
    return n;
  }

  // Inlined: REPLACE USING's commit loop calls it per key.
  [[gnu::always_inline]] void assign(row_id id, Row&& r) noexcept {
    ++changes_;
    if (journal_) save_live(id, /*move=*/true);  // the old value is overwritten anyway
    row(id) = std::move(r);
  }
  void erase(row_id id) noexcept {
    ++changes_;
    unsigned char keep = 0;  // flag bits that outlive the row
    if (journal_) keep = erase_journaled(id);
    row(id).~Row();
    set_link(id, free_head_);
    free_head_ = id;
    ++free_count_;
    flags(id) = keep;
    --live_;
  }
  /// Removes every row; the segments are kept. Not while a journal is open
  /// (a full refresh happens between batches): a precondition, asserted in
  /// debug builds.
  void clear() noexcept {
    assert(!journal_ && "flowlib::MemoryStorage: clear() while a journal is open");
    ++changes_;
    destroy_live();
    segs_.clear_flags();
    bound_ = 0;
    live_ = 0;
    free_head_ = no_slot;
    free_count_ = 0;
  }

  const Row& get(row_id id) const noexcept { return row(id); }
  /// The row, to change in place. While a journal is open, the first such
  /// access to a row that existed before the journal copies it (its
  /// pre-image): read through a const store to avoid the copy.
  Row& get(row_id id) noexcept {
    ++changes_;
    if (journal_) save_live(id);
    return row(id);
  }

  // --- Prepared assigns (capability parallel_assign_row_store) --------------

  /// What prepare_assign() returns: the journal record set aside for a row's
  /// old value, or no_ticket when the assign saves nothing.
  using assign_ticket = std::size_t;
  static constexpr assign_ticket no_ticket = no_assign_ticket;

  /// Makes room for the journal's records of `n` prepare_assign() calls, so
  /// that they and their assign_prepared() cannot fail. Nothing changes if
  /// it throws. Not between a prepare_assign() and its assign_prepared().
  void prepare_assigns(std::size_t n) {
    if (!journal_) return;
    grow(j_saved_, j_saved_.size() + n);
    pre_.reserve(pre_.size() + n);
  }
  /// The serial half of assign(id, ...): records the change of live row
  /// `id` in the journal (as assign() would) and returns the ticket its
  /// assign_prepared() takes. Call on one thread, in the order a one-thread
  /// commit would assign; each id at most once before finish_assigns().
  /// Room for the records must have been made by prepare_assigns().
  assign_ticket prepare_assign(row_id id) noexcept {
    if (!journal_ || id >= j_bound_) return no_ticket;
    unsigned char& b = flags(id);
    if (b & saved_bit) return no_ticket;
    b |= saved_bit;
    const std::size_t t = pre_.take();
    j_saved_.push_back({id, static_cast<row_id>(t), true});
    return t;
  }
  /// The other half: the old value of row `id` goes to the ticket's record,
  /// `r` into the slot. May run on several threads at once for distinct ids
  /// (see the header comment's thread rules). Every prepared id must be
  /// assigned before finish_assigns().
  void assign_prepared(assign_ticket t, row_id id, Row&& r) noexcept {
    Row& dst = row(id);
    if (t != no_ticket) pre_.construct(t, std::move(dst));
    dst = std::move(r);
  }
  /// Ends a run of prepared assigns (on one thread, after every
  /// assign_prepared() returned): counts the change (changes()).
  void finish_assigns() noexcept { ++changes_; }

  // --- The change journal (capability journaled_row_store) ------------------

  /// From now on every change is recorded, until commit_journal() or
  /// rollback_journal(). Requires Row to be copy-constructible. No journal
  /// may be open already. Inserts' records fit in what reserve() reserves;
  /// a row's first erase(), assign() or mutable get() may grow the journal's
  /// buffers, which are kept from batch to batch. Those changes are noexcept:
  /// should that growth (or a row's copy) throw, the program terminates.
  void begin_journal() noexcept {
    static_assert(std::is_copy_constructible_v<Row>,
                  "flowlib::MemoryStorage: begin_journal() needs a copy-constructible row: "
                  "the journal keeps a copy of a row before its first in-place change "
                  "(through get()); give Row a copy constructor.");
    assert(!journal_ && "flowlib::MemoryStorage: begin_journal() while a journal is open");
    journal_ = true;
    j_bound_ = bound_;
    j_live_ = live_;
    j_free_head_ = free_head_;
    j_free_count_ = free_count_;
    j_stale_ = 0;
  }

  /// Undoes every change since begin_journal() exactly: the same live rows
  /// under the same ids with the same values, size(), id_bound() and free
  /// list, so later inserts receive the ids they would have received had
  /// the changes never happened. Ends the journal. (capacity() may stay
  /// larger.) Does nothing without an open journal.
  void rollback_journal() noexcept {
    if (!journal_) return;
    ++changes_;
    // Slots past the old bound: emptied (their bytes never held flags before).
    for (std::size_t i = j_bound_; i < bound_; ++i) {
      unsigned char& b = flags(i);
      if (b & live_bit) row(static_cast<row_id>(i)).~Row();
      b = 0;
    }
    // Slots below it: what they held, each saved once.
    std::size_t k = 0;
    const std::size_t n = j_saved_.size();
    for (std::size_t i = 0; i < n; ++i) {
      if (i + flag_prefetch_distance < n) prefetch_flags(j_saved_[i + flag_prefetch_distance].id);
      const saved_slot& s = j_saved_[i];
      unsigned char& b = flags(s.id);
      if (b & live_bit) row(s.id).~Row();
      if (s.live) {
        Row& old = s.link == no_slot ? j_rows_[k++] : pre_[s.link];
        ::new (static_cast<void*>(slot_at(s.id)->bytes)) Row(std::move(old));
        b = live_bit;
      } else {
        set_link(s.id, s.link);
        b = 0;
      }
    }
    bound_ = j_bound_;
    live_ = j_live_;
    free_head_ = j_free_head_;
    free_count_ = j_free_count_;
    end_journal();
  }

  /// Keeps every change since begin_journal() and ends the journal; the
  /// saved pre-images are released (the buffers keep their capacity, so a
  /// steady stream of similar batches allocates nothing). Does nothing
  /// without an open journal.
  void commit_journal() noexcept {
    if (!journal_) return;
    const std::size_t n = j_saved_.size();
    for (std::size_t i = 0; i < n; ++i) {
      if (i + flag_prefetch_distance < n) prefetch_flags(j_saved_[i + flag_prefetch_distance].id);
      flags(j_saved_[i].id) &= live_bit;
    }
    for (const row_id id : j_inserted_) flags(id) &= static_cast<unsigned char>(~inserted_bit);
    end_journal();
  }

  /// Whether a journal is open.
  bool journaling() const noexcept { return journal_; }

  /// The ids of the rows inserted since begin_journal() that are still live,
  /// in insertion order (a row erased and its id reused counts once, at its
  /// last insertion). Valid until the next change; empty without a journal.
  /// Costs nothing unless rows the journal inserted were erased since the
  /// last call (then one pass over the inserted ids drops them).
  std::span<const row_id> journal_inserted() const noexcept {
    if (j_stale_ != 0) drop_stale_inserted();
    return {j_inserted_.data(), j_inserted_.size()};
  }
  /// Appends to `out` the ids of the live rows the journal inserted or
  /// changed (assigned, or reached through mutable get()): the inserted ones
  /// first, in insertion order, then the changed ones that existed before
  /// the journal, in the order they were first changed. A table's append
  /// log takes these rows (a new row version replacing an old one in its
  /// slot is a new row to a reader of the table as a stream).
  void journal_changed(std::vector<row_id>& out) const {
    const auto ins = journal_inserted();
    out.insert(out.end(), ins.begin(), ins.end());
    for (const saved_slot& s : j_saved_) {
      if (s.live && is_live(s.id) && (flags(s.id) & inserted_bit) == 0) out.push_back(s.id);
    }
  }
  /// Appends to `out` the ids live before the journal and not live now, in
  /// first-change order (an erased id given to a new row is live: it is in
  /// journal_changed()). A durable store deletes these rows from its database.
  void journal_erased(std::vector<row_id>& out) const {
    for (const saved_slot& s : j_saved_)
      if (s.live && !is_live(s.id)) out.push_back(s.id);
  }
  /// Replaces the contents with `rows` (sorted by id, ids unique and below
  /// `bound`), each under its id, with id_bound() == `bound`; the ids below
  /// it without a row are free, the lowest taken first. A durable store
  /// reloads what it saved with it. No journal may be open; if allocating
  /// throws, the store is left empty.
  void restore_rows(std::vector<std::pair<row_id, Row>>& rows, std::size_t bound) {
    assert(!journal_ && "flowlib::MemoryStorage: restore_rows() while a journal is open");
    clear();
    if (bound > no_slot) {
      throw error(errc::invalid_argument, "memory storage", "", "", "a table cannot hold more than 2^32-1 rows");
    }
    segs_.grow_to(bound);
    for (auto& [id, r] : rows) {
      ::new (static_cast<void*>(slot_at(id)->bytes)) Row(std::move(r));
      flags(id) = live_bit;
    }
    bound_ = bound;
    live_ = rows.size();
    for (std::size_t i = bound; i-- > 0;) {
      if (is_live(i)) continue;
      set_link(static_cast<row_id>(i), free_head_);
      free_head_ = static_cast<row_id>(i);
      ++free_count_;
    }
  }
  /// Optional hook: calls f(id, row) for every live row, in id order (a
  /// flow restored from a checkpoint learns its rows' ids with it).
  template <class F>
  void for_each_row(F&& f) const {
    for (std::size_t i = next_occupied(0); i < bound_; i = next_occupied(i + 1)) f(static_cast<row_id>(i), row(static_cast<row_id>(i)));
  }
  /// Hint that row `id` is about to be read or written.
  void prefetch(row_id id) const noexcept {
    // The last byte's line too, when the row straddles two.
    const slot* p = slot_at(id);
    prefetch_straddling_exact<access::write>(p, sizeof(slot));
    // A journaled change reads and writes the slot's flag byte, which lies
    // apart from the slot (a miss of its own on a large table).
    if (journal_) prefetch_flags(id);
    // GCC takes a function that only reads memory and prefetches for pure,
    // and drops calls to it whose result is unused: this keeps the call.
    asm volatile("" : : "r"(p));
  }

  std::size_t size() const noexcept { return live_; }
  /// Optional hook: a count that grows with every change of the rows
  /// (insert, assign, erase, mutable get(), clear, rollback, restore): a
  /// reader that cached something derived from the rows (a lookup's index)
  /// knows it is still valid when the count is unchanged.
  std::uint64_t changes() const noexcept { return changes_; }
  /// One past the largest id ever handed out (ids are dense below it).
  std::size_t id_bound() const noexcept { return bound_; }
  /// Rows the store holds without allocating.
  std::size_t capacity() const noexcept { return segs_.capacity(); }

  /// The live rows, in id order: a forward view of const Row&, valid while
  /// the store lives (it sees rows inserted after it was made).
  class rows_view : public std::ranges::view_interface<rows_view> {
   public:
    using iterator = slot_iterator<memory_row_store, Row, true>;

    rows_view() = default;
    explicit rows_view(const memory_row_store* s) noexcept : s_(s) {}
    iterator begin() const noexcept { return {s_, s_->next_occupied(0)}; }
    iterator end() const noexcept { return {s_, s_->bound_}; }

   private:
    const memory_row_store* s_ = nullptr;
  };
  rows_view rows() const noexcept { return rows_view(this); }

 private:
  slot* slot_at(std::size_t id) const noexcept { return segs_.slot(id); }
  Row& row(row_id id) noexcept { return *std::launder(reinterpret_cast<Row*>(slot_at(id)->bytes)); }
  const Row& row(row_id id) const noexcept {
    return *std::launder(reinterpret_cast<const Row*>(slot_at(id)->bytes));
  }
  bool is_live(std::size_t id) const noexcept { return (flags(id) & live_bit) != 0; }
  // The iteration protocol of slot_iterator (rows_view).
  template <class, class, bool>
  friend class slot_iterator;
  const Row& slot_value(std::size_t id) const noexcept { return row(static_cast<row_id>(id)); }
  unsigned char& flags(std::size_t id) const noexcept { return segs_.flags(id); }
  // Grows v's capacity to at least n, geometrically (repeated small
  // reserves stay linear in total).
  template <class V>
  static void grow(V& v, std::size_t n) {
    if (v.capacity() < n) v.reserve(std::max(n, 2 * v.capacity()));
  }

  // --- The journal's slow paths (taken only while a journal is open) --------

  // Saves live row `id` before its first change in the journal: moved
  // aside by erase/assign (`move`), copied by get(). Rows past the old
  // bound, and slots already saved, need nothing.
  void save_live(row_id id, bool move = false) noexcept {
    if (id >= j_bound_) return;
    unsigned char& b = flags(id);
    if (b & saved_bit) return;
    save_live_slow(id, b, move);
  }
  [[gnu::noinline]] void save_live_slow(row_id id, unsigned char& b, bool move) noexcept {
    // A failure to grow the journal ends the program (see begin_journal());
    // the room reserve() made for the inserts' records stays theirs.
    grow(j_saved_, j_saved_.size() + 1 + j_saved_spare_);
    j_saved_.push_back({id, no_slot, true});
    if (move) {
      j_rows_.push_back(std::move(row(id)));
    } else if constexpr (std::is_copy_constructible_v<Row>) {
      j_rows_.push_back(row(id));  // (begin_journal() requires the copy)
    }
    b |= saved_bit;
  }
  void prefetch_flags(row_id id) const noexcept {
    const unsigned char* p = &flags(id);
    detail::prefetch<access::write>(p);
    asm volatile("" : : "r"(p));  // (see prefetch())
  }
  // erase() while journaling: saves the row's value (moved out) if needed;
  // returns the flag bits the dead slot keeps.
  [[gnu::noinline]] unsigned char erase_journaled(row_id id) noexcept {
    save_live(id, true);
    const unsigned char b = flags(id);
    if (b & inserted_bit) ++j_stale_;  // its entry in j_inserted_ is void now
    return static_cast<unsigned char>(b & saved_bit);
  }
  // Before an insert into slot `id` while journaling: a dead slot from
  // before the journal gets its free-list link saved; room for the id in
  // the inserted list. May throw (allocation) before anything changes.
  void prepare_journaled_insert(row_id id) {
    grow(j_inserted_, j_inserted_.size() + 1);
    if (id < j_bound_ && !(flags(id) & saved_bit)) {
      grow(j_saved_, j_saved_.size() + 1);
      if (j_saved_spare_ != 0) --j_saved_spare_;
      j_saved_.push_back({id, link(id), false});
      flags(id) |= saved_bit;
    }
  }
  // After the insert into `id`: its flags and its place in the inserted list.
  void note_journaled_insert(row_id id, unsigned char& b) noexcept {
    b = static_cast<unsigned char>((b & saved_bit) | live_bit | inserted_bit);
    j_inserted_.push_back(id);
  }
  [[gnu::noinline]] row_id insert_journaled(Row&& r) noexcept {
    // Capacity reserved by reserve(): the records do not allocate.
    const bool reuse = free_head_ != no_slot;
    const row_id id = reuse ? free_head_ : static_cast<row_id>(bound_);
    prepare_journaled_insert(id);
    take_slot();
    ::new (static_cast<void*>(slot_at(id)->bytes)) Row(std::move(r));
    note_journaled_insert(id, flags(id));
    ++live_;
    return id;
  }
  // Drops from j_inserted_ the ids erased since (keeping each live id's last
  // insertion): walking backwards, an entry whose slot still has its
  // inserted bit is kept and the bit cleared, so earlier entries of the
  // same id are dropped; the kept ones get the bit back.
  void drop_stale_inserted() const noexcept {
    const std::size_t n = j_inserted_.size();
    std::size_t w = n;
    for (std::size_t i = n; i-- > 0;) {
      const row_id id = j_inserted_[i];
      unsigned char& b = flags(id);
      if (b & inserted_bit) {
        b &= static_cast<unsigned char>(~inserted_bit);
        j_inserted_[--w] = id;
      }
    }
    j_inserted_.erase(j_inserted_.begin(), j_inserted_.begin() + static_cast<std::ptrdiff_t>(w));
    for (const row_id id : j_inserted_) flags(id) |= inserted_bit;
    j_stale_ = 0;
  }
  void end_journal() noexcept {
    j_saved_.clear();
    j_rows_.clear();
    pre_.clear();
    j_inserted_.clear();
    j_stale_ = j_saved_spare_ = 0;
    journal_ = false;
  }
  row_id link(row_id id) const noexcept {
    row_id next;
    std::memcpy(&next, slot_at(id)->bytes, sizeof next);
    return next;
  }
  void set_link(row_id id, row_id next) noexcept { std::memcpy(slot_at(id)->bytes, &next, sizeof next); }
  // A slot for one insert: a dead one, else the next never used one.
  row_id take_slot() noexcept {
    if (free_head_ != no_slot) {
      const row_id id = free_head_;
      free_head_ = link(id);
      --free_count_;
      return id;
    }
    return static_cast<row_id>(bound_++);
  }
  std::size_t next_occupied(std::size_t i) const noexcept {
    while (i < bound_ && !is_live(i)) ++i;
    return i;
  }

  void destroy_live() noexcept {
    if constexpr (!std::is_trivially_destructible_v<Row>) {
      for (std::size_t i = 0; i < bound_; ++i) {
        if (is_live(i)) row(static_cast<row_id>(i)).~Row();
      }
    }
  }
  // Takes o's rows and state; o is left empty.
  void steal(memory_row_store& o) noexcept {
    changes_ = (changes_ > o.changes_ ? changes_ : o.changes_) + 1;
    ++o.changes_;
    segs_ = std::move(o.segs_);
    bound_ = std::exchange(o.bound_, 0);
    live_ = std::exchange(o.live_, 0);
    free_head_ = std::exchange(o.free_head_, no_slot);
    free_count_ = std::exchange(o.free_count_, 0);
    undo_ = std::move(o.undo_);
    journal_ = std::exchange(o.journal_, false);
    j_bound_ = o.j_bound_;
    j_live_ = o.j_live_;
    j_free_head_ = o.j_free_head_;
    j_free_count_ = o.j_free_count_;
    j_stale_ = std::exchange(o.j_stale_, 0), j_saved_spare_ = std::exchange(o.j_saved_spare_, 0);
    j_saved_ = std::move(o.j_saved_);
    j_rows_ = std::move(o.j_rows_);
    pre_ = std::move(o.pre_);
    j_inserted_ = std::move(o.j_inserted_);
  }

  slot_segments<slot> segs_;        // flag byte: see live_bit below
  std::size_t bound_ = 0;           // [0, bound_) were handed out
  std::size_t live_ = 0;
  row_id free_head_ = no_slot;      // first dead slot below bound_
  std::size_t free_count_ = 0;
  std::vector<row_id> undo_;        // emplace_each(): the dead slots it filled
  std::uint64_t changes_ = 0;       // changes(): grows with every change

  // The journal. A slot's flag byte: bit 0 live; bit 1 its pre-journal
  // state is saved in j_saved_; bit 2 a row the journal inserted (it is
  // in j_inserted_). Bits 1 and 2 are clear whenever no journal is open.
  static constexpr unsigned char live_bit = 1, saved_bit = 2, inserted_bit = 4;
  struct saved_slot {
    row_id id;
    row_id link;  // a dead slot's free-list link; a live row's record in pre_, or no_slot
    bool live;    // a live row: its value is in pre_[link], else the next one in j_rows_
  };
  // The journal reads and writes flag bytes in the order of j_saved_, which
  // is the order of the rows' ids nowhere: it prefetches them this far ahead.
  static constexpr std::size_t flag_prefetch_distance = 8;
  bool journal_ = false;
  std::size_t j_bound_ = 0, j_live_ = 0, j_free_count_ = 0;  // the counters at begin
  row_id j_free_head_ = no_slot;
  mutable std::size_t j_stale_ = 0;          // erased ids still listed in j_inserted_
  std::size_t j_saved_spare_ = 0;            // j_saved_ room reserve() kept for inserts
  std::vector<saved_slot> j_saved_;          // slots below j_bound_, first change order
  std::vector<Row> j_rows_;                  // the saved live rows' values, same order
  preimage_buffer<Row> pre_;                 // prepared assigns' old values, by ticket
  mutable std::vector<row_id> j_inserted_;   // inserted ids, in order (with stale ones)
};

}  // namespace detail

/// @brief The in-memory storage policy (the default). Fast, not durable.
struct MemoryStorage {
  template <class Row>
  using store = detail::memory_row_store<Row>;
};

}  // namespace flowlib
