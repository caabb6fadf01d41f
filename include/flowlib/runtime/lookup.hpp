// flowlib/runtime/lookup.hpp
//
// lookup(table, key, combine): a stream-static join (R-STAGE-6). The stage
// indexes the dimension table's current rows by key and probes the index
// once per row; the index is kept while the table's rows are unchanged (a
// store with the changes() hook: MemoryStorage, SqliteStorage), and built
// again, in one pass over the dimension, by the first batch after a change
// (by every batch over a store without the hook):
//   inner: combine(row, const Dim&) for a row whose key the dimension holds;
//          a row without a match is removed and counted (unmatched_rows);
//   left:  combine(row, const Dim*) or combine(row, std::optional<Dim>),
//          null / empty without a match.
// The dimension is read as it is when the batch runs (each attempt of a
// batch reads it again), after every flow of the pipeline that writes it
// (the pipeline orders flows by the tables they read). A dimension holding
// two rows of one key fails the batch (errc::invalid_argument, naming the
// key). Internal; the public names are in flowlib/stage.hpp.
#pragma once

#include <flowlib/detail/format.hpp>
#include <flowlib/error.hpp>
#include <flowlib/runtime/stages.hpp>
#include <flowlib/stage.hpp>

#include <absl/container/flat_hash_map.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace flowlib::detail {

/// The two key functions of a lookup: from join_on(), or one callable
/// (a generic lambda) that applies to both rows.
template <class Key>
struct lookup_keys {
  Key fn;
  template <class R>
  decltype(auto) row_key(const R& r) const { return std::invoke(fn, r); }
  template <class D>
  decltype(auto) dim_key(const D& d) const { return std::invoke(fn, d); }
};
template <class RowKey, class DimKey>
struct lookup_keys<join_key<RowKey, DimKey>> {
  join_key<RowKey, DimKey> fn;
  template <class R>
  decltype(auto) row_key(const R& r) const { return std::invoke(fn.row_key, r); }
  template <class D>
  decltype(auto) dim_key(const D& d) const { return std::invoke(fn.dim_key, d); }
};

template <class Row, class Dim, class Key>
using lookup_row_key_t =
    std::remove_cvref_t<decltype(std::declval<const lookup_keys<Key>&>().row_key(std::declval<const Row&>()))>;
template <class Row, class Dim, class Key>
using lookup_dim_key_t =
    std::remove_cvref_t<decltype(std::declval<const lookup_keys<Key>&>().dim_key(std::declval<const Dim&>()))>;

/// How a left lookup passes a missing or found dimension row: a pointer
/// when combine takes one, else a std::optional<Dim> (a copy).
template <class In, class Dim, class Combine>
inline constexpr bool left_by_pointer = std::is_invocable_v<Combine&, In&&, const Dim*>;

template <class In, class Dim, class Combine, join Kind>
struct lookup_result {
  using type = std::invoke_result_t<Combine&, In&&, const Dim&>;
};
template <class In, class Dim, class Combine>
struct lookup_result<In, Dim, Combine, join::left> {
  using type = std::conditional_t<left_by_pointer<In, Dim, Combine>,
                                  std::invoke_result<Combine&, In&&, const Dim*>,
                                  std::invoke_result<Combine&, In&&, std::optional<Dim>>>::type;
};

template <class In, class DimTable, class Key, class Combine, join Kind>
struct lookup_stage {
  using dim_row = typename DimTable::row_type;
  using key_type = lookup_dim_key_t<In, dim_row, Key>;
  using input_type = In;
  using output_type = std::remove_cvref_t<typename lookup_result<In, dim_row, Combine, Kind>::type>;
  DimTable* table;
  lookup_keys<Key> keys;
  Combine combine;
  absl::flat_hash_map<key_type, const dim_row*> index;
  std::optional<std::uint64_t> indexed_at;  // the store's changes() the index reflects
  std::vector<output_type> out;
  static constexpr bool stateful = false;

  std::string describe() const {
    return std::string("LOOKUP ") + (Kind == join::inner ? "INNER" : "LEFT") + " '" + table->name() + "'";
  }
  static constexpr std::string_view stage_kind() { return "LOOKUP"; }

  template <class Ctx>
  std::vector<output_type>& run(std::vector<In>& rows, Ctx& ctx) {
    build_index(ctx.flow);
    out.clear();
    out.reserve(rows.size());
    std::uint64_t unmatched = 0;
    for (auto& r : rows) {
      const auto it = index.find(keys.row_key(r));
      if constexpr (Kind == join::inner) {
        if (it == index.end()) {
          ++unmatched;
          continue;
        }
        out.push_back(std::invoke(combine, std::move(r), *it->second));
      } else if constexpr (left_by_pointer<In, dim_row, Combine>) {
        out.push_back(std::invoke(combine, std::move(r), it == index.end() ? nullptr : it->second));
      } else {
        out.push_back(std::invoke(combine, std::move(r),
                                  it == index.end() ? std::optional<dim_row>() : std::optional<dim_row>(*it->second)));
      }
    }
    ctx.outcome.unmatched_rows += unmatched;
    return out;
  }

 private:
  // The dimension's current rows, by key (R-STAGE-6): rows are read where
  // they are stored, and a store's rows stay put until they change.
  void build_index(std::string_view flow) {
    if constexpr (requires { table->store().changes(); }) {
      if (indexed_at == table->store().changes()) return;
    }
    indexed_at.reset();
    index.clear();
    index.reserve(table->size());
    for (const dim_row& d : table->rows()) {
      auto [it, fresh] = index.try_emplace(keys.dim_key(d), &d);
      if (!fresh) {
        throw error(errc::invalid_argument, std::string(flow), "", to_text(it->first),
                    "lookup: the dimension table '" + table->name() +
                        "' holds two rows of this key; a lookup needs one row per key (an "
                        "AUTO CDC SCD1 table, for example; not an SCD2 history)");
      }
    }
    if constexpr (requires { table->store().changes(); }) indexed_at = table->store().changes();
  }
};

}  // namespace flowlib::detail
