// flowlib/table.hpp
//
// Tables that flows write (docs/semantics.md#tables-and-flows):
//
//   - StreamingTable<Row, Storage>: accepts any flow type, within each flow's
//     own limits (R-TABLE-1). A REPLACE USING target, for example, accepts
//     that one flow and no other (R-USING-9).
//   - ManagedTable<Row, Storage>: accepts only append flows (INSERT BY NAME).
//     Any other flow fails with MANAGED_TABLE_DOES_NOT_SUPPORT_CDC: at compile
//     time in flows that know their target's type (they static_assert
//     `!is_managed_table_v<Table>`), at run time in claim() otherwise.
//
// Readers see rows through rows() (a forward range, in no particular order)
// and sorted_rows() (a copy in a canonical order, for printing and
// comparing). Both honour the table's row filter; the owner's accessors
// all_rows() / sorted_all_rows() and size() do not.
//
// Row is the table's declared schema (R-TABLE-3): flows map their rows onto
// it by column name. To take the schema from a query instead, instantiate
// the table with the query's row type.
//
// Options (R-TABLE-3), given at construction:
//
//   flowlib::ManagedTable<Event> events{
//       "events", flowlib::table_options<Event>()
//                     .partitioned_by<"bucket">()        // or .cluster_by<"a", "b">(), never both
//                     .comment("raw events")
//                     .property("owner", "ingest")
//                     .reset_allowed(false)              // property reset_allowed = false
//                     .row_filter([](const Event& e) { return e.bucket != "internal"; })
//                     .expect(flowlib::expect_or_drop("positive_id",
//                                                     [](const Event& e) { return e.id > 0; }))};
//
// Partitioning and clustering columns are schema names, checked at compile
// time; asking for both is a compile error. Expectations on a table are
// applied by the append flows that write it (flows/append.hpp), once per
// batch through one indirect call (the predicates themselves are inlined in
// a typed loop); the row filter costs one indirect call per row read, and
// nothing on the write path.
//
// full_refresh() is the table's part of a full refresh: it empties the
// table (and its append log), or throws and keeps the data when the
// property reset_allowed is false.
//
// append_log() is the table's append log (storage/row_log.hpp): the rows
// appended to it, at offsets that never restart, for a pipeline that reads
// the table as a stream. It stays empty, and costs nothing, unless
// something appends to it; flows never do. flowlib::Catalog (catalog.hpp) checks table names and flow kinds
// at declaration time for pipelines assembled at run time.
#pragma once

#include <flowlib/detail/fixed_string.hpp>
#include <flowlib/detail/format.hpp>
#include <flowlib/storage/row_log.hpp>
#include <flowlib/error.hpp>
#include <flowlib/expect.hpp>
#include <flowlib/schema.hpp>
#include <flowlib/stats.hpp>
#include <flowlib/storage/memory.hpp>

#include <algorithm>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <ranges>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace flowlib {

namespace detail {

/// Orders rows canonically: by operator< when Row has one, otherwise by its
/// FLOWLIB_SCHEMA columns, compared left to right.
template <class Row>
bool canonical_less(const Row& a, const Row& b) {
  if constexpr (std::totally_ordered<Row>) {
    return a < b;
  } else {
    static_assert(has_schema<Row>,
                  "flowlib: sorted_rows() orders rows by their columns: declare "
                  "FLOWLIB_SCHEMA(Row, ...) or give Row an operator<=>.");
    int result = 0;  // <0, 0, >0
    schema_of<Row>::for_each([&](auto col) {
      if (result != 0) return;
      const auto& x = decltype(col)::get(a);
      const auto& y = decltype(col)::get(b);
      if (x < y) result = -1;
      else if (y < x) result = 1;
    });
    return result < 0;
  }
}

/// Renders a row as `col=value, ...` by its schema (for error messages);
/// empty when Row has no schema.
template <class Row>
std::string describe_row(const Row& r) {
  if constexpr (has_schema<Row>) {
    std::string out;
    schema_of<Row>::for_each([&](auto col) {
      if (!out.empty()) out += ", ";
      out += decltype(col)::name;
      out += '=';
      out += to_text(decltype(col)::get(r));
    });
    return out;
  } else {
    return {};
  }
}

/// A table's expectations, type-erased at batch granularity: one indirect
/// call per batch, the predicates inlined in the typed loop behind it.
template <class Row>
class table_expectations {
 public:
  virtual ~table_expectations() = default;
  /// Evaluates every expectation on every row of `rows`; clears keep[i] for
  /// rows to drop; appends one ExpectationMetrics per expectation to
  /// `stats.expectations`. Throws flowlib::error (errc::expectation_failed)
  /// on a `fail` violation, naming `flow`, the expectation and the row.
  virtual void evaluate(std::span<const Row> rows, unsigned char* keep, BatchStats& stats,
                        std::string_view flow) const = 0;
  /// Number of expectations.
  virtual std::size_t size() const noexcept = 0;
};

template <class Row, class... P>
class table_expectations_impl final : public table_expectations<Row> {
 public:
  explicit table_expectations_impl(Expectations<P...> e) : checks_(std::move(e)) {}
  void evaluate(std::span<const Row> rows, unsigned char* keep, BatchStats& stats,
                std::string_view flow) const override {
    typename Expectations<P...>::counts_type counts;
    const auto describe = [](const Row& r) { return describe_row(r); };
    for (std::size_t i = 0; i < rows.size(); ++i) {
      if (!checks_.check(rows[i], counts, flow, describe)) keep[i] = 0;
    }
    checks_.report(counts, stats.expectations);
  }
  std::size_t size() const noexcept override { return sizeof...(P); }

 private:
  Expectations<P...> checks_;
};

/// A reader-side row predicate, type-erased (one indirect call per row read).
template <class Row>
struct row_filter_ref {
  const void* obj = nullptr;
  bool (*call)(const void*, const Row&) = nullptr;
  bool operator()(const Row& r) const { return call == nullptr || call(obj, r); }
};

/// The run-time part of a table's options.
template <class Row>
struct table_settings {
  std::string comment;
  std::map<std::string, std::string, std::less<>> properties;
  // Names from template arguments (static storage).
  std::vector<std::string_view> partition_columns;
  std::vector<std::string_view> cluster_columns;
  std::shared_ptr<const void> row_filter_obj;
  bool (*row_filter_call)(const void*, const Row&) = nullptr;
  std::vector<std::shared_ptr<const table_expectations<Row>>> expectations;
};

/// Compile-time check that Row has a column called Name (partitioning and
/// clustering columns). The column is the Name argument in the context.
template <class Row, fixed_string Name>
struct require_table_column {
  static_assert(has_schema<Row>,
                "flowlib table options: partitioning and clustering columns are named by "
                "FLOWLIB_SCHEMA column names; declare FLOWLIB_SCHEMA(Row, ...) for the row.");
  static constexpr bool found = schema_of<Row>::contains(Name.view());
  static_assert(found,
                "flowlib table options: a partitioning or clustering column (the Name "
                "argument in the instantiation context above) is not a column of the "
                "table's row; use a name from the row's FLOWLIB_SCHEMA.");
  static constexpr bool ok = found;
};

struct no_layout {};
template <fixed_string... Cols>
struct partition_layout {};
template <fixed_string... Cols>
struct cluster_layout {};

template <class Row, class Layout>
struct table_layout_check {
  static constexpr bool ok = true;
};
template <class Row, fixed_string... Cols>
struct table_layout_check<Row, partition_layout<Cols...>> {
  static_assert(sizeof...(Cols) > 0,
                "flowlib table options: partitioned_by<...>() needs at least one column.");
  static constexpr bool ok = (require_table_column<Row, Cols>::ok && ...);
};
template <class Row, fixed_string... Cols>
struct table_layout_check<Row, cluster_layout<Cols...>> {
  static_assert(sizeof...(Cols) > 0,
                "flowlib table options: cluster_by<...>() needs at least one column.");
  static constexpr bool ok = (require_table_column<Row, Cols>::ok && ...);
};

}  // namespace detail

template <class Row, class Storage>
class table_base;

/// @brief Options of a table (R-TABLE-3): partitioning or clustering
/// columns, comment, properties, reset_allowed, a row filter, expectations.
/// Build with flowlib::table_options<Row>() and chained calls; pass to a
/// table's constructor. `Layout` records partitioning/clustering at compile
/// time so that asking for both fails to compile.
template <class Row, class Layout = detail::no_layout>
class TableOptions {
 public:
  using row_type = Row;
  using layout = Layout;

  TableOptions() = default;

  /// PARTITIONED BY (Cols...): schema names, checked at compile time.
  template <detail::fixed_string... Cols>
  TableOptions<Row, detail::partition_layout<Cols...>> partitioned_by() && {
    return std::move(*this).template with_layout<detail::partition_layout<Cols...>>(
        &detail::table_settings<Row>::partition_columns, {Cols.view()...});
  }

  /// CLUSTER BY (Cols...): schema names, checked at compile time.
  template <detail::fixed_string... Cols>
  TableOptions<Row, detail::cluster_layout<Cols...>> cluster_by() && {
    return std::move(*this).template with_layout<detail::cluster_layout<Cols...>>(
        &detail::table_settings<Row>::cluster_columns, {Cols.view()...});
  }

  /// COMMENT.
  TableOptions comment(std::string text) && {
    s_.comment = std::move(text);
    return std::move(*this);
  }

  /// One TBLPROPERTIES entry (a later value for the same key wins).
  TableOptions property(std::string key, std::string value) && {
    s_.properties.insert_or_assign(std::move(key), std::move(value));
    return std::move(*this);
  }

  /// The property `reset_allowed`: false makes a full refresh of the table
  /// fail and leave the data as it was (R-WHERE-6).
  TableOptions reset_allowed(bool allowed) && {
    return std::move(*this).property("reset_allowed", allowed ? "true" : "false");
  }

  /// WITH ROW FILTER: readers (rows(), sorted_rows()) see only the rows for
  /// which `pred(row)` is true. Flows still see and write every row.
  template <class Pred>
  TableOptions row_filter(Pred pred) && {
    static_assert(std::predicate<const Pred&, const Row&>,
                  "flowlib table options: a row filter must be callable as bool(const Row&).");
    auto obj = std::make_shared<const Pred>(std::move(pred));
    s_.row_filter_call = [](const void* p, const Row& r) -> bool {
      return (*static_cast<const Pred*>(p))(r);
    };
    s_.row_filter_obj = std::move(obj);
    return std::move(*this);
  }

  /// Adds expectations (CONSTRAINT name EXPECT (...) ON VIOLATION ...),
  /// checked by the append flows that write the table.
  template <class... P>
  TableOptions expect(Expectation<P>... es) && {
    static_assert(sizeof...(P) > 0,
                  "flowlib table options: expect(...) needs at least one expectation.");
    return std::move(*this).expectations(Expectations<P...>(std::move(es)...));
  }
  /// Adds an expectation set (see flowlib::expectations()).
  template <class... P>
  TableOptions expectations(Expectations<P...> es) && {
    s_.expectations.push_back(
        std::make_shared<const detail::table_expectations_impl<Row, P...>>(std::move(es)));
    return std::move(*this);
  }

 private:
  template <class, class>
  friend class TableOptions;
  template <class, class>
  friend class table_base;

  // These options with layout L (partitioned_by, cluster_by), whose column
  // names go to `columns`: given once, and never both; L's columns are
  // checked against the row's schema.
  template <class L>
  TableOptions<Row, L> with_layout(std::vector<std::string_view> detail::table_settings<Row>::*columns,
                                   std::vector<std::string_view> names) && {
    static_assert(std::is_same_v<Layout, detail::no_layout>,
                  "flowlib table options: PARTITIONED BY and CLUSTER BY cannot be combined, "
                  "and each is given once; choose either partitioned_by<...>() or "
                  "cluster_by<...>() (R-TABLE-3).");
    static_assert(detail::table_layout_check<Row, L>::ok);
    TableOptions<Row, L> out;
    out.s_ = std::move(s_);
    out.s_.*columns = std::move(names);
    return out;
  }

  detail::table_settings<Row> s_;
};

/// @brief Starts a table's options: `flowlib::table_options<Row>().comment(...)...`.
template <class Row>
TableOptions<Row> table_options() {
  return {};
}

/// @brief True for managed tables (which accept only append flows,
/// R-TABLE-1). Specialised for ManagedTable below.
template <class Table>
inline constexpr bool is_managed_table_v = false;

/// @brief The identity of the flow that writes a table (kind and instance).
struct writer_claim {
  const void* flow = nullptr;  ///< the flow object
  std::string kind;            ///< "REPLACE USING", "AUTO CDC", "APPEND", ...
  std::string name;            ///< the flow's name
  bool exclusive = false;      ///< the flow takes the table alone (R-USING-9)
};

/// @brief What StreamingTable and ManagedTable share: rows, options,
/// writers, the append log (the base every table type derives from).
template <class Row, class Storage>
class table_base {
  static_assert(table_storage<Storage, Row>,
                "flowlib::StreamingTable<Row, Storage>: Storage must be a storage policy "
                "whose `store<Row>` meets flowlib::row_store: give the store the operations "
                "listed in storage/row_store.hpp.");
  static_assert(std::is_nothrow_move_constructible_v<Row> && std::is_nothrow_move_assignable_v<Row>,
                "flowlib: table rows must be nothrow-movable (a batch is committed without a "
                "failure point); mark Row's move constructor and assignment noexcept, or "
                "use members whose moves are noexcept.");

 public:
  using row_type = Row;
  using storage_policy = Storage;
  using store_type = typename Storage::template store<Row>;

  table_base() = default;
  explicit table_base(std::string name) : name_(std::move(name)), append_log_(name_) {}
  template <class Layout>
  table_base(std::string name, TableOptions<Row, Layout> options)
      : name_(std::move(name)), settings_(std::move(options.s_)), append_log_(name_) {}
  table_base(const table_base&) = delete;  // flows hold state about this table
  table_base& operator=(const table_base&) = delete;

  const std::string& name() const noexcept { return name_; }

  /// Number of stored rows (the row filter does not apply).
  std::size_t size() const noexcept { return store_.size(); }
  bool empty() const noexcept { return size() == 0; }

  /// The rows readers see: the stored rows that pass the row filter, as a
  /// forward range of const Row&, in storage order.
  auto rows() const {
    return store_.rows() | std::views::filter(detail::row_filter_ref<Row>{settings_.row_filter_obj.get(),
                                                                  settings_.row_filter_call});
  }
  /// Every stored row, unfiltered (for the table's owner and for flows).
  auto all_rows() const { return store_.rows(); }

  /// A copy of rows() in canonical order (operator<, or schema columns).
  std::vector<Row> sorted_rows() const { return sorted(rows()); }
  /// A copy of all_rows() in canonical order.
  std::vector<Row> sorted_all_rows() const { return sorted(all_rows()); }

  // --- Options (R-TABLE-3) ----------------------------------------------------

  const std::string& comment() const noexcept { return settings_.comment; }
  /// TBLPROPERTIES.
  const std::map<std::string, std::string, std::less<>>& properties() const noexcept {
    return settings_.properties;
  }
  /// The property `key`, if set.
  std::optional<std::string> property(std::string_view key) const {
    auto it = settings_.properties.find(key);
    if (it == settings_.properties.end()) return std::nullopt;
    return it->second;
  }
  /// False when the property reset_allowed is "false": full refresh fails.
  bool reset_allowed() const noexcept {
    auto it = settings_.properties.find(std::string_view("reset_allowed"));
    return it == settings_.properties.end() || it->second != "false";
  }
  /// PARTITIONED BY columns (empty when not partitioned).
  const std::vector<std::string_view>& partition_columns() const noexcept {
    return settings_.partition_columns;
  }
  /// CLUSTER BY columns (empty when not clustered).
  const std::vector<std::string_view>& cluster_columns() const noexcept {
    return settings_.cluster_columns;
  }
  bool has_row_filter() const noexcept { return settings_.row_filter_call != nullptr; }
  /// Number of expectations declared on the table.
  std::size_t expectation_count() const noexcept {
    std::size_t n = 0;
    for (const auto& e : settings_.expectations) n += e->size();
    return n;
  }

  // --- For flow implementations -------------------------------------------

  /// The row store. Only the flows that claimed the table write to it.
  store_type& store() noexcept { return store_; }
  const store_type& store() const noexcept { return store_; }

  /// The table's append log: the rows appended to the table, at offsets
  /// that never restart, for readers of the table as a stream (a pipeline
  /// fills it from the rows each batch inserted). Empty until something
  /// appends; flows do not touch it. full_refresh() clears it.
  row_log<Row>& append_log() noexcept { return append_log_; }
  const row_log<Row>& append_log() const noexcept { return append_log_; }

  /// The table's expectations (empty when none), for the flows that apply
  /// them. Each set is one indirect call per batch.
  const std::vector<std::shared_ptr<const detail::table_expectations<Row>>>& table_expectation_sets()
      const noexcept {
    return settings_.expectations;
  }

  /// Records `flow` as a writer of this table. Throws flowlib::error
  /// (errc::invalid_target) if another flow already writes it and either
  /// flow requires to be the only one (`exclusive`, R-USING-9).
  void claim(const void* flow, std::string_view kind, std::string_view flow_name, bool exclusive) {
    for (const auto& w : writers_) {
      if (w.flow == flow) return;
    }
    if (!writers_.empty() && (exclusive || exclusive_)) {
      const auto& w = writers_.front();
      throw error(errc::invalid_target, std::string(flow_name), "", "",
                  "table '" + name_ + "' is already written by " + w.kind + " flow '" + w.name +
                      "'; a " + std::string(exclusive ? kind : w.kind) +
                      " target takes exactly one flow and no other flow type");
    }
    writers_.push_back({flow, std::string(kind), std::string(flow_name), exclusive});
    exclusive_ = exclusive_ || exclusive;
  }

  /// Removes the claim of `flow` (a flow releases its table when it is
  /// destroyed, so that a new flow object, a restarted pipeline's, can
  /// claim it). Unknown identities are ignored.
  void release(const void* flow) noexcept {
    for (auto it = writers_.begin(); it != writers_.end(); ++it) {
      if (it->flow == flow) {
        writers_.erase(it);
        break;
      }
    }
    exclusive_ = false;
    for (const auto& w : writers_) exclusive_ = exclusive_ || w.exclusive;
  }

  /// Expires when the table is destroyed: a flow outliving its table does
  /// not touch it to release its claim.
  std::weak_ptr<const void> lifetime() const noexcept { return alive_; }
  /// The flows that write this table.
  const std::vector<writer_claim>& writers() const noexcept { return writers_; }

  /// The table's part of a full refresh (R-EXACT-5): removes every row,
  /// clears the append log (its offsets go on from where they were) and
  /// starts a new generation(). Throws flowlib::error
  /// (errc::invalid_argument), changing nothing, when the property
  /// reset_allowed is false (R-WHERE-6). Every flow that writes the table
  /// sees the new generation at its next apply() and resets its own state
  /// first (key index, tombstones, history, ONCE marker), so that apply
  /// gives exactly the result of applying to a new, empty table.
  void full_refresh() {
    if (!reset_allowed()) {
      throw error(errc::invalid_argument, name_, "", "",
                  "full refresh refused: table property reset_allowed = false; the table's "
                  "data was left as it was");
    }
    store_.clear();
    append_log_.clear();
    ++generation_;
  }

  /// Counts the table's full refreshes. A flow remembers the generation of
  /// the table it last wrote; a different one means the table was emptied
  /// behind it, and the flow's state about the old rows is void.
  std::uint64_t generation() const noexcept { return generation_; }

 private:
  template <class R>
  static std::vector<Row> sorted(R&& range) {
    std::vector<Row> out;
    for (const Row& r : range) out.push_back(r);
    std::sort(out.begin(), out.end(),
              [](const Row& a, const Row& b) { return detail::canonical_less(a, b); });
    return out;
  }

  std::string name_;
  detail::table_settings<Row> settings_;
  store_type store_;
  row_log<Row> append_log_;
  std::vector<writer_claim> writers_;
  std::shared_ptr<const void> alive_ = std::make_shared<const int>(0);
  std::uint64_t generation_ = 0;
  bool exclusive_ = false;
};

/// @brief A table written by flows of any type (R-TABLE-1). Storage is a
/// storage policy (MemoryStorage by default). See the header comment.
template <class Row, class Storage = MemoryStorage>
class StreamingTable : public table_base<Row, Storage> {
  using base = table_base<Row, Storage>;

 public:
  /// (), (name), and (name, options) (R-TABLE-3; see flowlib::table_options()).
  using base::base;
};

/// @brief A table that accepts only append flows (INSERT BY NAME,
/// R-TABLE-1). Same options and reader interface as StreamingTable.
template <class Row, class Storage = MemoryStorage>
class ManagedTable : public table_base<Row, Storage> {
  using base = table_base<Row, Storage>;

 public:
  /// (), (name), and (name, options) (R-TABLE-3; see flowlib::table_options()).
  using base::base;

  /// As StreamingTable's, but only append flows may claim a managed table.
  /// Every other flow type takes its target alone (`exclusive`: REPLACE
  /// USING, AUTO CDC, REPLACE WHERE), so an exclusive claim throws
  /// flowlib::error (errc::invalid_target) with
  /// MANAGED_TABLE_DOES_NOT_SUPPORT_CDC in the message, changing nothing.
  void claim(const void* flow, std::string_view kind, std::string_view flow_name, bool exclusive) {
    if (exclusive) {
      throw error(errc::invalid_target, std::string(flow_name), "", "",
                  "MANAGED_TABLE_DOES_NOT_SUPPORT_CDC: managed table '" + this->name() +
                      "' accepts only append flows (INSERT BY NAME), not a " +
                      std::string(kind) +
                      " flow; write that flow into a flowlib::StreamingTable (R-TABLE-1)");
    }
    base::claim(flow, kind, flow_name, exclusive);
  }
};

template <class Row, class Storage>
inline constexpr bool is_managed_table_v<ManagedTable<Row, Storage>> = true;

}  // namespace flowlib
