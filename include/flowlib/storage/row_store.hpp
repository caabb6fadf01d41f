// flowlib/storage/row_store.hpp
//
// The contract between tables (and the flows writing them) and a storage
// policy: the `row_store` concept, what it means beyond its signatures, and
// the optional hooks a store may add. A flow never knows which storage it
// writes to; a storage policy never knows which flow writes to it.
//
// A storage policy is a type with a member template `store<Row>`, the
// per-table row store (`table_storage<Policy, Row>`). A row store holds rows
// under stable ids and provides:
//   - insert(Row&&) -> row_id, assign(id, Row&&), erase(id), reserve(n),
//     clear(), get(id) const -> const Row&, size(), id_bound(), rows() (a
//     forward range of const Row&, in no particular order);
//   - ids are stable until the row is erased;
//   - every id handed out is below id_bound(), and one insert raises
//     id_bound() by at most one (flows keep per-row side arrays indexed by
//     id and size them by id_bound() plus the inserts to come);
//   - after reserve(n) succeeds, up to n inserts and any number of assign()
//     and erase() calls do not allocate and do not throw (given a row type
//     whose move operations are noexcept). Flows rely on this to stage a
//     batch, reserve, and then commit it without a failure point, so a batch
//     is applied all-or-nothing without an undo log;
//   - clear() removes every row and cannot fail (a table's full refresh).
//
// Capability beyond the concept:
//   - mutable rows (`mutable_row_store`): `get(id)` on a non-const store
//     returns `Row&`. AUTO CDC updates stored rows in place through it (and
//     moves a row's values aside and back to undo a batch); REPLACE USING
//     and append flows only insert, assign and erase. Both stores in the
//     repository have it.
//   - a change journal (`journaled_row_store`): begin_journal() starts
//     recording every change (insert, assign, erase, the emplace hooks, and
//     the first mutable get(id) of a row, which may change it in place);
//     rollback_journal() undoes them all exactly (the same rows under the
//     same ids, the same size() and id_bound(), and the same ids for the
//     inserts that follow: flows keep side arrays indexed by id, and a
//     replayed batch must behave as the first attempt did);
//     commit_journal() keeps them; both end the journal and cannot fail.
//     journaling() says whether one is open; journal_inserted() gives the
//     ids the journal inserted that are still live, in insertion order.
//     clear() is not called while a journal is open. The pipeline runtime
//     requires it of the tables it writes: a micro-batch's table changes are
//     undone when a later step of the batch (a checkpoint write) fails, and
//     the inserted rows feed the table's append log. The memory store has
//     it; flows never call it.
//   - prepared assigns (`parallel_assign_row_store`): assign(id, row) split
//     in a serial half and a half that may run on several threads at once.
//     prepare_assigns(n) makes room (may throw, changing nothing); then,
//     on one thread, prepare_assign(id) -> ticket for each row to assign,
//     in the order a one-thread commit would assign them (inserts and
//     erases of other rows may come between); then assign_prepared(ticket,
//     id, row) for each prepared id, on any threads, concurrently for
//     distinct ids and with nothing else running on the store; then
//     finish_assigns() on one thread. A ticket of detail::no_assign_ticket
//     (what prepare_assign() returns when nothing needs recording, e.g. no
//     journal is open) makes assign_prepared() a plain assign, for which no
//     prepare_assign() is needed. The result, journal included, is the
//     one the same assign() calls in prepare order give; all but
//     prepare_assigns() are noexcept. REPLACE USING spreads the commit of a
//     large batch over threads only on stores that have it. The memory
//     store has it (and so do SqliteStorage and FileStorage, which keep
//     their rows in one).
//
// Optional hooks, detected at compile time; a flow calls them through the
// helpers below, which fall back to the required operations:
//   - prefetch(id) (detail::prefetch_row): a hint that row `id` is about to
//     be read or written. REPLACE USING's and AUTO CDC's commit loops issue
//     it a few keys ahead; without it, nothing is prefetched.
//   - reserve_fresh(n) (detail::reserve_rows): as reserve(n), for n inserts
//     about to be made one at a time; the store may also map their memory in
//     at once. AUTO CDC's SCD2 paths use it before appending versions.
//   - emplace_with(make) (detail::insert_made): inserts the row make()
//     returns, built in its slot (no temporary row, no move); if make()
//     throws the store is unchanged. AUTO CDC's SCD2 one-pass path uses it.
//   - emplace_each(batch, make): inserts make(x) for every element of a
//     batch, each built in its slot, all or nothing (if iterating or make()
//     throws, the rows it inserted are erased again). Append flows use it on
//     their direct path (a row is copied once, straight into its slot).
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <ranges>
#include <span>
#include <type_traits>
#include <utility>

namespace flowlib {

/// @brief Stable identifier of a row inside a row store.
using row_id = std::uint32_t;

/// @brief The interface between tables (and the flows writing them) and a
/// storage policy's per-table row store; see the header comment for the
/// contract beyond the signatures.
template <class S>
concept row_store =
    requires { typename S::row_type; } &&
    requires(S& s, const S& cs, typename S::row_type&& r, row_id id, std::size_t n) {
      { s.insert(std::move(r)) } -> std::same_as<row_id>;
      s.assign(id, std::move(r));
      s.erase(id);
      s.reserve(n);
      s.clear();
      { cs.get(id) } -> std::same_as<const typename S::row_type&>;
      { cs.size() } -> std::convertible_to<std::size_t>;
      { cs.id_bound() } -> std::convertible_to<std::size_t>;
      { cs.rows() } -> std::ranges::forward_range;
    };

/// @brief A row store whose rows may be changed where they are:
/// `s.get(id)` on a non-const store returns `Row&`. AUTO CDC requires it (it
/// updates a stored row's columns in place, and moves its values aside and
/// back to undo a batch); REPLACE USING and append flows do not.
template <class S>
concept mutable_row_store =
    row_store<S> && requires(S& s, row_id id) {
      { s.get(id) } -> std::same_as<typename S::row_type&>;
    };

/// @brief A row store with a change journal (see the header comment):
/// begin_journal(), rollback_journal() and commit_journal() (both noexcept),
/// journaling(), and journal_inserted(), the ids inserted under the journal
/// that are still live, in insertion order. The pipeline runtime requires it
/// of the tables it writes, to undo a micro-batch exactly; flows do not.
template <class S>
concept journaled_row_store =
    row_store<S> && requires(S& s, const S& cs) {
      s.begin_journal();
      { s.rollback_journal() } noexcept;
      { s.commit_journal() } noexcept;
      { cs.journaling() } -> std::convertible_to<bool>;
      { cs.journal_inserted() } -> std::convertible_to<std::span<const row_id>>;
    };

namespace detail {
/// The ticket of a prepared assign that records nothing (see the header).
inline constexpr std::size_t no_assign_ticket = static_cast<std::size_t>(-1);
}  // namespace detail

/// @brief A row store with prepared assigns (see the header comment):
/// rows assigned from several threads at once. REPLACE USING's sharded
/// commit requires it; a store without it is written by one thread.
template <class S>
concept parallel_assign_row_store =
    row_store<S> && requires(S& s, row_id id, typename S::row_type&& r, std::size_t n) {
      s.prepare_assigns(n);
      { s.prepare_assign(id) } noexcept -> std::same_as<std::size_t>;
      { s.assign_prepared(std::size_t{}, id, std::move(r)) } noexcept;
      { s.finish_assigns() } noexcept;
    };

/// @brief A storage policy: `Policy::store<Row>` is its row store.
template <class Policy, class Row>
concept table_storage = row_store<typename Policy::template store<Row>>;

/// @brief A storage policy whose row stores meet mutable_row_store.
template <class Policy, class Row>
concept mutable_table_storage = mutable_row_store<typename Policy::template store<Row>>;

namespace detail {

/// Optional hook of a row store: `s.prefetch(id)` hints that row `id` is
/// about to be read or written. A no-op for stores without it.
template <class Store>
inline void prefetch_row(const Store& s, row_id id) noexcept {
  if constexpr (requires { s.prefetch(id); }) s.prefetch(id);
}

/// Makes room in `s` for `n` inserts about to be made one at a time, with
/// the optional hook reserve_fresh where the store has it (it may also map
/// their memory in at once), else with reserve.
template <class Store>
inline void reserve_rows(Store& s, std::size_t n) {
  if constexpr (requires { s.reserve_fresh(n); }) {
    s.reserve_fresh(n);
  } else {
    s.reserve(n);
  }
}

/// Inserts the row `make()` returns (capacity reserved, as for insert()):
/// built in its slot with the optional hook emplace_with where the store
/// has it (no temporary row, no move), else built and moved in. If make()
/// throws, the store is unchanged.
template <class Store, class Make>
inline row_id insert_made(Store& s, Make&& make) {
  if constexpr (requires { s.emplace_with(std::forward<Make>(make)); }) {
    return s.emplace_with(std::forward<Make>(make));
  } else {
    return s.insert(std::forward<Make>(make)());
  }
}

/// Whether store S has the optional emplace_each(batch, make) hook for
/// batches of type R (append flows' direct path).
template <class Store, class R, class Make>
concept has_emplace_each = requires(Store& s, R& batch, Make& make) { s.emplace_each(batch, make); };

}  // namespace detail
}  // namespace flowlib
