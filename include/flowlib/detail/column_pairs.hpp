// flowlib/detail/column_pairs.hpp
//
// The one by-name column walk: pairs each column of a Target row with the
// Source column of the same FLOWLIB_SCHEMA name. Every flow that maps one
// row type onto another goes through it, so names are matched in one place:
//
//   - Append's INSERT BY NAME (detail/by_name.hpp, by_name_checks::assign
//     and by_name_target_column), with Skipped = its skipped Target columns
//     and its dropped Source columns;
//   - AUTO CDC and AUTO CDC FROM SNAPSHOT (flows/cdc/detail/mapping.hpp's
//     cdc_mapping::for_each, column_checks.hpp's cdc_mapping_check), with
//     Skipped = an SCD2
//     target's __START_AT / __END_AT.
//
//   using P = flowlib::detail::column_pairs<Change, User, name_list<"__START_AT">>;
//   P::for_each([&](auto tc, auto sc) {           // one call per pair, in
//     decltype(tc)::get(u) = decltype(sc)::get(c);  // Target column order
//   });
//   P::for_each(f, [&](auto tc) { ... });          // and each unpaired one
//   using S = P::source_column_t<TargetCol>;       // its pair, or void
//
// Only the pairing lives here. What a pair may be (same type, a value into
// std::optional, ...), what happens to an unpaired Target column (Append
// fills it with null, a change-feed flow rejects it) and every diagnostic
// stay with the caller. The walk is a fold over the Target columns resolved
// at compile time: nothing is looked up by name at run time. Internal.
#pragma once

#include <flowlib/detail/name_list.hpp>
#include <flowlib/schema.hpp>

#include <cstddef>
#include <type_traits>
#include <utility>

namespace flowlib::detail {

/// A column's value type; void for no column (source_column_t's void).
template <class Col>
struct col_value {
  using type = typename Col::value_type;
};
template <>
struct col_value<void> {
  using type = void;
};

/// @brief The pairs (Target column, same-named Source column) of two rows
/// with FLOWLIB_SCHEMA, leaving out the Target columns named in `Skipped`.
template <class Source, class Target, class Skipped = name_list<>>
struct column_pairs {
 private:
  using source_schema = schema_of<Source>;

  // Resolved lazily, so that an unpaired column never indexes the Source
  // schema.
  template <class TargetColumn, bool Paired = !Skipped::contains(TargetColumn::name) &&
                                              source_schema::contains(TargetColumn::name)>
  struct source_of {
    using type = void;
  };
  template <class TargetColumn>
  struct source_of<TargetColumn, true> {
    using type =
        typename column_at<source_schema, source_schema::index_of(TargetColumn::name)>::type;
  };

 public:
  /// The Source column paired with Target column `TargetColumn`, or void
  /// when it is skipped or the Source has no column of its name.
  template <class TargetColumn>
  using source_column_t = typename source_of<TargetColumn>::type;

  /// Whether `TargetColumn` has a Source column.
  template <class TargetColumn>
  static constexpr bool paired = !std::is_void_v<source_column_t<TargetColumn>>;

  /// Calls f(TargetCol{}, SourceCol{}) for every pair, in Target column order.
  template <class F>
  static constexpr void for_each(F&& f) {
    schema_of<Target>::for_each([&](auto tcol) {
      using TC = decltype(tcol);
      if constexpr (paired<TC>) f(TC{}, source_column_t<TC>{});
    });
  }

  /// As for_each(f), and calls unpaired(TargetCol{}) for every other Target
  /// column (skipped or without a Source column), in the same single pass.
  template <class F, class U>
  static constexpr void for_each(F&& f, U&& unpaired) {
    schema_of<Target>::for_each([&](auto tcol) {
      using TC = decltype(tcol);
      if constexpr (paired<TC>) {
        f(TC{}, source_column_t<TC>{});
      } else {
        unpaired(TC{});
      }
    });
  }
};

/// column_pairs<Source, Target, Skipped>::for_each(f).
template <class Source, class Target, class Skipped = name_list<>, class F>
constexpr void for_each_column_pair(F&& f) {
  column_pairs<Source, Target, Skipped>::for_each(std::forward<F>(f));
}

}  // namespace flowlib::detail
