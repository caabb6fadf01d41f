// flowlib/flows/append.hpp
//
// Append<Options...>: an append flow, `INSERT [ONCE] BY NAME query`
// (docs/semantics.md#r-table-2). Each batch's rows are inserted into
// the target, their columns matched to the table's by FLOWLIB_SCHEMA name
// (detail/by_name.hpp): source columns the table lacks fail to compile unless
// dropped with DropColumns<...>; table columns the source lacks must be
// std::optional and are written as null (how a table's schema grows);
// same-named columns of different types fail to compile, naming the column.
// A source of the table's own row type is copied (or moved) whole.
//
//   flowlib::ManagedTable<Order> orders{"orders"};
//   flowlib::Append<> from_web{"from_web"};                        // INSERT BY NAME
//   flowlib::Append<flowlib::DropColumns<"debug">> from_app{"from_app"};
//   flowlib::AppendOnce<> backfill{"backfill"};                    // INSERT ONCE BY NAME
//   from_web.apply(orders, web_batch);       // any input range of rows
//   from_app.apply(orders, app_batch);       // fan-in: many flows, one table
//   backfill.apply(orders, history);         // runs once; later calls are skipped
//   orders.full_refresh();                   // after a full refresh it runs again (R-TABLE-2)
//
// Both table kinds accept append flows; a StreamingTable written by an
// exclusive flow (REPLACE USING) refuses them (R-USING-9). Each flow object
// is its own flow, with its own ONCE marker; a flow writes one table.
//
// Expectations: the table's own (declared in its options, on the table's
// row type) are applied to every mapped row; apply() may also take
// expectations on the source row type, checked before mapping. `drop` rows
// are not written, `warn` rows are written and counted, a `fail` violation
// throws and writes nothing (R-EXPECT-1). Metrics go to the returned stats,
// flow expectations first, then the table's (R-EXPECT-2).
//
// All-or-nothing, in one of two ways:
//   - staged (the general case, and always when an expectation applies or
//     the batch's size is unknown): the batch is mapped and checked into
//     per-flow scratch rows (user code and expectation failures throw here,
//     before the table is touched), the storage is reserved, and the rows are
//     then moved in by operations that cannot fail;
//   - direct (a sized batch and no expectation): the storage is reserved for
//     the batch's size and each mapped row is written straight into it. A
//     store with the emplace_each hook (the memory store) constructs each
//     row in its slot from the source row and undoes the batch itself if
//     anything throws. For other stores, each row goes through insert(): when
//     the batch is contiguous (vector, array, span) and mapping a row cannot
//     throw, nothing can fail after the reservation. Otherwise (a copy that
//     may allocate, a view running user code) the rows written so far are
//     erased again if anything throws, which cannot fail after a reservation
//     (row_store contract): the table holds the same rows as before, and the
//     exception propagates. This saves one move and one pass over scratch
//     memory per row.
// Either way a failed apply() leaves the table's rows and the ONCE marker as
// they were.
//
// Performance: no allocation per row beyond the rows themselves; the
// staging buffer is kept between batches (it holds as many rows, moved-from,
// as the largest batch); one indirect call per batch and expectation set.
//
// Checkpoints (write_checkpoint / read_checkpoint, for the pipeline runtime):
// an append flow keeps no state about rows; what it persists is its ONCE
// marker (and, in a delta, whether a full refresh of its table reset it).
#pragma once

#include <flowlib/detail/admit.hpp>
#include <flowlib/detail/batch.hpp>
#include <flowlib/detail/by_name.hpp>
#include <flowlib/detail/flow_checkpoint.hpp>
#include <flowlib/detail/target_binding.hpp>
#include <flowlib/error.hpp>
#include <flowlib/flows/contract.hpp>
#include <flowlib/expect.hpp>
#include <flowlib/once.hpp>
#include <flowlib/stats.hpp>
#include <flowlib/table.hpp>

#include <range/v3/range/access.hpp>
#include <range/v3/range/concepts.hpp>
#include <range/v3/range/traits.hpp>

#include <cstddef>
#include <memory>
#include <iterator>
#include <ranges>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace flowlib {

/// @brief What one Append::apply() did: BatchStats (input_rows,
/// dropped_rows, applied_rows == inserted_rows, expectations, and `skipped`
/// when a ONCE flow had already run).
/// @brief The kind append flows are named by (in claims, errors, the event
/// log and a stream's stored layout).
inline constexpr std::string_view append_flow_kind = "APPEND";

struct AppendStats : BatchStats {};

namespace detail {

template <class T>
struct is_drop_columns : std::false_type {};
template <fixed_string... Names>
struct is_drop_columns<DropColumns<Names...>> : std::true_type {};

template <class T>
inline constexpr bool is_append_option = std::is_same_v<T, Once> || is_drop_columns<T>::value;

template <class O>
struct option_dropped_names {
  using type = name_list<>;
};
template <fixed_string... Names>
struct option_dropped_names<DropColumns<Names...>> {
  using type = name_list<Names...>;
};

/// The names of every DropColumns option, concatenated.
template <class... Opts>
struct dropped_of {
  using type = name_list<>;
};
template <class O, class... Opts>
struct dropped_of<O, Opts...> {
  using type = typename concat_name_lists<typename option_dropped_names<O>::type,
                                          typename dropped_of<Opts...>::type>::type;
};

/// The row type of a batch.
template <class R>
using batch_row_t = std::remove_cvref_t<batch_reference_t<R>>;

/// A table an append flow can write: both flowlib table kinds.
template <class T>
concept append_target = requires(T& t, const void* flow, std::string_view s) {
  typename T::row_type;
  t.store();
  t.table_expectation_sets();
  t.claim(flow, s, s, false);
};

/// Per-flow staging rows (type-erased so the flow is not a template on the
/// table's row type; one virtual call per flow lifetime, to destroy it).
struct append_scratch_base {
  virtual ~append_scratch_base() = default;
};
template <class Row>
struct append_scratch final : append_scratch_base {
  std::vector<Row> rows;             // [0, used) hold this batch's rows
  std::vector<unsigned char> keep;   // table expectations: 1 = keep the row
  std::vector<row_id> written;       // direct path: rows written so far (for the undo)
  /// Distinguishes the scratch types of different Row types.
  static const void* tag() noexcept {
    static const char t = 0;
    return &t;
  }
};

/// Renders a whole row by its schema (expectation errors of append flows,
/// whose source rows have no key).
template <class Row>
struct describe_whole_row {
  std::string operator()(const Row& r) const { return describe_row(r); }
};

}  // namespace detail

/// @brief An append flow (INSERT BY NAME; with flowlib::Once, INSERT ONCE
/// BY NAME). Options: flowlib::Once, flowlib::DropColumns<"name", ...>.
/// See the header comment.
template <class... Opts>
class Append {
  static_assert((detail::is_append_option<Opts> && ...),
                "flowlib::Append<Options...>: the options are flowlib::Once and "
                "flowlib::DropColumns<\"column\", ...>.");

 public:
  /// True for ONCE flows.
  static constexpr bool once = (std::is_same_v<Opts, Once> || ...);
  /// Source columns dropped before the by-name mapping.
  using dropped_columns = typename detail::dropped_of<Opts...>::type;
  /// The kind this flow claims its target with.
  static constexpr std::string_view kind = append_flow_kind;
  /// The flow contract's options (flows/contract.hpp): several append
  /// flows may write one table (fan-in); a stream's checkpoint may be
  /// imported (R-TABLE-4); any row type is mapped by name (R-TABLE-1).
  static constexpr bool shares_target = true;
  static constexpr bool imports_streams = true;
  static constexpr bool maps_by_name = true;

  Append() : Append(std::string(once ? "append_once" : "append")) {}
  explicit Append(std::string name) : name_(std::move(name)) {}
  Append(Append&&) noexcept = default;
  Append& operator=(Append&&) noexcept = default;

  const std::string& name() const noexcept { return name_; }

  /// Appends one batch (any input range of rows that map onto the table's
  /// row type by name). All-or-nothing; see the header.
  template <class Table, class R>
    requires(std::ranges::input_range<R> || ranges::input_range<R>)
  AppendStats apply(Table& target, R&& batch) {
    return apply(target, std::forward<R>(batch), NoExpectations{});
  }

  /// The flow contract's batch (flows/contract.hpp): the rows are moved
  /// into the table; rows written count as upserted.
  template <class Table, class Row, class... P>
  BatchStats apply_batch(Table& target, std::vector<Row>& rows, const Expectations<P...>& checks,
                         const batch_info&) {
    BatchStats stats = apply(target,
                             std::ranges::subrange(std::make_move_iterator(rows.begin()),
                                                   std::make_move_iterator(rows.end())),
                             checks);
    stats.upserted_rows = stats.applied_rows;
    stats.deleted_rows = stats.replaced_rows;
    return stats;
  }

  /// Appends one batch after `checks`, expectations on the batch's own row
  /// type (evaluated before the mapping), then the table's expectations.
  template <class Table, class R, class... P>
    requires(std::ranges::input_range<R> || ranges::input_range<R>)
  AppendStats apply(Table& target, R&& batch, const Expectations<P...>& checks) {
    static_assert(detail::append_target<Table>,
                  "flowlib::Append::apply: the target must be a flowlib::StreamingTable or "
                  "flowlib::ManagedTable.");
    using Row = typename Table::row_type;
    using Source = detail::batch_row_t<R>;
    using map = detail::by_name_map<Source, Row, dropped_columns>;
    constexpr bool move = detail::movable_elements<R>;

    AppendStats stats;
    // A full refresh of the table since the last apply clears the ONCE
    // marker: the backfill runs again (R-TABLE-2, R-EXACT-5).
    if (binding_.begin_apply(target, name_, one_table_reason)) reset_pending_ = true;
    if (once && binding_.done()) {  // ONCE: ran already; nothing is read (R-TABLE-2)
      stats.skipped = true;
      return stats;
    }
    auto& sc = scratch<Row>();

    if constexpr ((std::ranges::sized_range<R> || ranges::sized_range<R>) && sizeof...(P) == 0) {
      if (target.table_expectation_sets().empty()) {
        write_direct<map, move>(target, batch, sc, stats);
        if (once) binding_.mark_done();
        return stats;
      }
    }

    // Phase 1: map and check into scratch (may throw; the table is untouched).
    std::size_t used = 0;
    detail::admit_rows<Source, detail::describe_whole_row<Source>, P...> admit{
        checks, name_, detail::describe_whole_row<Source>{}};
    for (auto&& in : batch) {
      const Source& s = in;
      if (!admit(s)) continue;
      if (used < sc.rows.size()) {
        if constexpr (map::identity) {
          sc.rows[used] = std::forward<decltype(in)>(in);
        } else {
          sc.rows[used] = map::make(std::forward<decltype(in)>(in));
        }
      } else {
        sc.rows.push_back(map::make(std::forward<decltype(in)>(in)));
      }
      ++used;
    }
    admit.finish(stats);
    used = detail::apply_table_expectations(target.table_expectation_sets(), sc.rows, used,
                                            sc.keep, stats, name_);

    // Phase 2: reserve (may throw), then commit (cannot fail).
    auto& store = target.store();
    store.reserve(used);
    binding_.claim(target, kind, name_, /*exclusive=*/false);
    for (std::size_t i = 0; i < used; ++i) store.insert(std::move(sc.rows[i]));
    stats.applied_rows = stats.inserted_rows = used;
    if (once) binding_.mark_done();
    return stats;
  }

  /// ONCE flows: true after a successful apply(), until the table's next
  /// full refresh (seen at the next apply()) or reset().
  bool done() const noexcept { return binding_.done(); }
  /// Clears the ONCE marker: the flow runs again at its next apply(). Not
  /// needed after table.full_refresh(), which the flow notices by itself.
  void reset() noexcept { binding_.reset_once(); }
  /// Restores the ONCE marker from a checkpoint.
  void restore(bool done) noexcept { binding_.restore_once(done); }

  /// @brief Writes the flow's state for a checkpoint: the whole state
  /// (`snapshot`) or what changed since the previous call (`delta`). For the
  /// pipeline runtime; programs that checkpoint by hand may use it too.
  /// A blob is a 7-byte header, a flags byte (bit 0, in a delta: a full
  /// refresh of the table reset the flow since the previous call) and the
  /// ONCE marker. O(1).
  void write_checkpoint(byte_writer& out, checkpoint_scope scope) const {
    detail::write_flagged_header(out, checkpoint_format, scope, reset_pending_);
    out.integer<std::uint8_t>(binding_.done() ? 1 : 0);
    reset_pending_ = false;
  }

  /// @brief Replaces the flow's state (its ONCE marker) by the one `blobs`
  /// hold, and binds the flow to `target` (claiming it, at its current
  /// generation). For the pipeline runtime; programs that checkpoint by hand
  /// may use it too. A corrupt blob throws errc::checkpoint_corrupt and
  /// changes nothing. Empty blobs: a flow that has not run.
  template <class Table>
  void read_checkpoint(Table& target, const checkpoint_blobs& blobs) {
    static_assert(detail::append_target<Table>,
                  "flowlib::Append::read_checkpoint: the target must be a flowlib::StreamingTable "
                  "or flowlib::ManagedTable.");
    bool done = false;
    if (blobs.snapshot) done = read_blob(*blobs.snapshot, checkpoint_scope::snapshot);
    for (std::string_view d : blobs.deltas) done = read_blob(d, checkpoint_scope::delta);
    binding_.restore(target, kind, name_, /*exclusive=*/false, once && done, one_table_reason);
    reset_pending_ = false;
  }

 private:
  static constexpr detail::blob_format checkpoint_format{"FLAP", 1, "append"};
  static constexpr std::string_view one_table_reason =
      "a flow writes exactly one table (declare one flow per source and table)";

  // Decodes one blob; returns its ONCE marker (each blob carries the whole
  // marker, so the last one read decides).
  bool read_blob(std::string_view blob, checkpoint_scope scope) const {
    detail::byte_reader r = detail::read_flagged_header(blob, name_, checkpoint_format, scope);
    const bool done = detail::read_flag(r, "the ONCE marker");
    detail::expect_checkpoint_end(r);
    return done;
  }

  // Direct path (sized batch, no expectation): reserve once, then write each
  // mapped row straight into the storage. When neither iterating the batch
  // nor mapping a row can throw, nothing can fail after the reservation.
  // Otherwise the ids written so far are recorded, and on an exception they
  // are erased again (erase cannot fail after a reservation, by the row_store
  // contract) before the exception propagates: the table's rows are as before.
  template <class Map, bool Move, class Table, class R, class Row>
  void write_direct(Table& target, R& batch, detail::append_scratch<Row>& sc, AppendStats& stats) {
    auto& store = target.store();
    const std::size_t n = detail::size_hint(batch);
    const auto make = [](auto&& in) -> Row { return Map::make(std::forward<decltype(in)>(in)); };
    if constexpr (requires { store.emplace_each(batch, make); }) {
      // The store builds each row in its slot and undoes the batch itself
      // if anything throws.
      store.reserve(n);
      binding_.claim(target, kind, name_, /*exclusive=*/false);
      const std::size_t count = store.emplace_each(batch, make);
      stats.input_rows = stats.applied_rows = stats.inserted_rows = count;
      return;
    }
    constexpr bool cannot_fail = std::ranges::contiguous_range<R> &&
                                 (Move ? Map::nothrow_move : Map::nothrow_copy);
    if constexpr (!cannot_fail) {
      sc.written.clear();
      sc.written.reserve(n);
    }
    store.reserve(n);
    binding_.claim(target, kind, name_, /*exclusive=*/false);
    std::size_t count = 0;
    if constexpr (cannot_fail) {
      for (auto&& in : batch) {
        store.insert(Map::make(std::forward<decltype(in)>(in)));
        ++count;
      }
    } else {
      try {
        for (auto&& in : batch) {
          if (count == n) {
            throw error(errc::invalid_argument, name_, "", "",
                        "the batch yielded more rows than its size(); nothing of it was written");
          }
          sc.written.push_back(store.insert(Map::make(std::forward<decltype(in)>(in))));
          ++count;
        }
      } catch (...) {
        for (row_id id : sc.written) store.erase(id);
        sc.written.clear();
        throw;
      }
      sc.written.clear();
    }
    stats.input_rows = stats.applied_rows = stats.inserted_rows = count;
  }

  // The staging scratch for rows of the table's type. A flow writes one
  // table, so the type never changes once the flow has claimed it; the
  // scratch is replaced only if a failed first apply left one of another.
  template <class Row>
  detail::append_scratch<Row>& scratch() {
    if (!scratch_ || scratch_tag_ != detail::append_scratch<Row>::tag()) {
      scratch_ = std::make_unique<detail::append_scratch<Row>>();
      scratch_tag_ = detail::append_scratch<Row>::tag();
    }
    return static_cast<detail::append_scratch<Row>&>(*scratch_);
  }

  std::string name_;
  detail::target_binding binding_;  // the one table, its generation, the ONCE marker
  std::unique_ptr<detail::append_scratch_base> scratch_;
  const void* scratch_tag_ = nullptr;  // which append_scratch<Row> scratch_ is
  // A full refresh cleared the ONCE marker since the last write_checkpoint(),
  // which clears it (a checkpoint write is const to its callers).
  mutable bool reset_pending_ = false;
};

/// @brief A ONCE append flow (INSERT ONCE BY NAME): Append<Once, Opts...>.
template <class... Opts>
using AppendOnce = Append<Once, Opts...>;

}  // namespace flowlib
