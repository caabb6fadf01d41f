// flowlib/detail/by_name.hpp
//
// By-name row mapping: writes a Source row into a Target row by matching
// FLOWLIB_SCHEMA column names, as `INSERT ... BY NAME` does (R-TABLE-2).
// Append flows use it to insert a query's rows into a table; any flow that
// turns one row type into another (for example a change row into a target
// row) can use it too.
//
//   using M = flowlib::detail::by_name_map<Change, User,
//                                          flowlib::detail::name_list<"operation", "seq">>;
//   User u = M::make(change);          // a new Target from a Source (copy or move)
//   M::assign(existing_user, change);  // overwrite every mapped column of a Target
//
// The rules, all checked at compile time when the map is instantiated:
//
//   - Source == Target and nothing is dropped or skipped: the row is copied or
//     moved whole (no schema needed).
//   - Otherwise both types need FLOWLIB_SCHEMA. Every Source column must have
//     a Target column of the same name, unless it is listed in `Dropped`
//     (columns the caller drops on purpose). Every name in `Dropped` must be
//     a Source column (a typo would otherwise drop nothing, silently).
//   - A Target column the Source lacks (or whose Source column is dropped)
//     must be std::optional and is set to null: this is how a table's schema
//     grows while older queries keep writing it. Target columns listed in
//     `Skipped` are left alone instead (the caller fills them, e.g. SCD2's
//     __START_AT / __END_AT); every name in `Skipped` must be a Target column.
//   - Same-named columns must have the same type, or the Target column must
//     be std::optional of the Source column's type (a value written into a
//     nullable column). A nullable Source column into a non-nullable Target
//     column, or any other difference (even int32 into int64), is an error.
//     Convert in the query instead, where the intent is visible.
//
// Diagnostics: each rule is a static_assert inside a class template whose
// arguments include the offending column (`flowlib::column<&Row::member,
// "name">`) or name, so the compiler's "required from" context shows which
// column failed, and the message says how to fix it.
//
// Members not listed in FLOWLIB_SCHEMA are invisible here: make() leaves
// such Target members value-initialised, assign() leaves them untouched.
//
// The column walk (which Target column takes which Source column) is not
// here: it is detail/column_pairs.hpp's column_pairs, shared with the
// change-feed flows (flows/cdc/detail/mapping.hpp), with the skipped Target
// columns and the dropped Source columns left out. This header adds
// Append's rules, its diagnostics and its null-filling of unpaired Target
// columns.
//
// Cost: make() value-initialises a Target and assigns each mapped column
// (one copy or move per column, no allocation beyond the values' own);
// nothing is looked up by name at run time.
#pragma once

#include <flowlib/detail/column_pairs.hpp>
#include <flowlib/detail/fixed_string.hpp>
#include <flowlib/detail/name_list.hpp>
#include <flowlib/detail/type_traits.hpp>
#include <flowlib/schema.hpp>

#include <array>
#include <cstddef>
#include <optional>
#include <string_view>
#include <type_traits>
#include <utility>

namespace flowlib {

namespace detail {

// --- Per-column checks ------------------------------------------------------
// One class template per rule, instantiated per column, so that the column
// appears in the diagnostic's instantiation context.

/// A Source column that is not dropped must exist in Target.
template <class Target, class SourceColumn>
struct by_name_source_column {
  static constexpr bool in_target = schema_of<Target>::contains(SourceColumn::name);
  static_assert(in_target,
                "flowlib INSERT BY NAME: the source row has a column that the target row "
                "lacks (the column is the SourceColumn argument in the instantiation "
                "context above). Add it to the target row and its FLOWLIB_SCHEMA (as "
                "std::optional to grow the schema), or drop it explicitly with "
                "flowlib::DropColumns<\"name\">.");
  static constexpr bool ok = in_target;
};

/// The lists of a by-name mapping that name columns: the drop list names
/// Source columns, the skip list Target columns.
enum class by_name_list : unsigned char { dropped, skipped };

/// Every name in a list must be a column of its row (Source for the drop
/// list, Target for the skip list).
template <class Row, fixed_string Name, by_name_list List>
struct by_name_listed_column {
  static constexpr bool ok = schema_of<Row>::contains(Name.view());
  static_assert(ok || List != by_name_list::dropped,
                "flowlib INSERT BY NAME: a dropped column name (the Name argument in the "
                "instantiation context above) is not a column of the source row; check "
                "the spelling against the source's FLOWLIB_SCHEMA.");
  static_assert(ok || List != by_name_list::skipped,
                "flowlib by-name mapping: a skipped column name (the Name argument in the "
                "instantiation context above) is not a column of the target row.");
};

enum class column_map_kind {
  same,      // same type: copy or move
  wrap,      // Target is std::optional<Source type>
  null,      // absent from Source (or dropped): set Target to null
  skip,      // left to the caller
};

/// The column pairs of an INSERT BY NAME: every Target column that is not
/// skipped, with the Source column of its name unless that one is dropped.
template <class Source, class Target, class Dropped, class Skipped>
using by_name_pairs =
    column_pairs<Source, Target, typename concat_name_lists<Skipped, Dropped>::type>;

template <class Source, class Target, class TargetColumn, class Dropped, class Skipped>
struct by_name_target_column {
  static constexpr std::string_view name = TargetColumn::name;
  using target_value = typename TargetColumn::value_type;
  static constexpr bool skipped = Skipped::contains(name);

  // The Source column of the same name (void when there is none, or it is
  // dropped, or this column is skipped).
  using source_column = typename by_name_pairs<Source, Target, Dropped,
                                               Skipped>::template source_column_t<TargetColumn>;
  using source_value = typename col_value<source_column>::type;
  static constexpr bool from_source = !std::is_void_v<source_column>;

  static constexpr bool same_type = from_source && std::is_same_v<source_value, target_value>;
  static constexpr bool wrap_type =
      from_source && !same_type && is_optional_v<target_value> &&
      std::is_same_v<std::optional<source_value>, target_value>;

  static_assert(skipped || from_source || is_optional_v<target_value>,
                "flowlib INSERT BY NAME: a target column is missing from the source (or "
                "dropped) and is not nullable (the column is the TargetColumn argument in "
                "the instantiation context above). Make the target column std::optional "
                "(it is then filled with null), or add the column to the source.");
  static_assert(!from_source || same_type || wrap_type,
                "flowlib INSERT BY NAME: a source column and the target column of the same "
                "name have different types (the column is the TargetColumn argument in the "
                "instantiation context above). Give both the same type (the target may be "
                "std::optional of the source's type), or convert in the query.");

  static constexpr bool ok =
      (skipped || from_source || is_optional_v<target_value>) &&
      (!from_source || same_type || wrap_type);
  static constexpr column_map_kind kind = skipped     ? column_map_kind::skip
                                          : !from_source ? column_map_kind::null
                                          : same_type    ? column_map_kind::same
                                                         : column_map_kind::wrap;

  // Whether writing this column from `const Source&` (Copy) or `Source&&`
  // cannot throw.
  template <bool Copy>
  static constexpr bool nothrow_write = [] {
    if constexpr (kind == column_map_kind::same) {
      return Copy ? std::is_nothrow_copy_assignable_v<target_value>
                  : std::is_nothrow_move_assignable_v<target_value>;
    } else if constexpr (kind == column_map_kind::wrap) {
      return (Copy ? std::is_nothrow_copy_constructible_v<source_value>
                   : std::is_nothrow_move_constructible_v<source_value>) &&
             std::is_nothrow_move_assignable_v<target_value>;
    } else {
      return true;
    }
  }();
  static constexpr bool nothrow_copy = nothrow_write<true>;
  static constexpr bool nothrow_move = nothrow_write<false>;

  /// Sets this column of `dst` to null if the Source lacks it (or drops
  /// it), and does nothing if it is skipped; by_name_checks::assign calls
  /// it for each unpaired column and writes the paired ones itself.
  static constexpr void fill_null(Target& dst) {
    if constexpr (kind == column_map_kind::null) TargetColumn::get(dst).reset();
  }
};

template <class Source, class Target, class Dropped, class Skipped, class SourceCols,
          class TargetCols>
struct by_name_checks;
template <class Source, class Target, class Dropped, class Skipped, class... SC, class... TC>
struct by_name_checks<Source, Target, Dropped, Skipped, type_list<SC...>, type_list<TC...>> {
  template <class Col>
  static constexpr bool source_ok() {
    if constexpr (Dropped::contains(Col::name)) {
      return true;
    } else {
      return by_name_source_column<Target, Col>::ok;
    }
  }
  template <fixed_string... D>
  static constexpr bool dropped_ok(name_list<D...>*) {
    return (by_name_listed_column<Source, D, by_name_list::dropped>::ok && ...);
  }
  template <fixed_string... K>
  static constexpr bool skipped_ok(name_list<K...>*) {
    return (by_name_listed_column<Target, K, by_name_list::skipped>::ok && ...);
  }
  static constexpr bool ok =
      dropped_ok(static_cast<Dropped*>(nullptr)) && skipped_ok(static_cast<Skipped*>(nullptr)) &&
      (source_ok<SC>() && ...) &&
      (by_name_target_column<Source, Target, TC, Dropped, Skipped>::ok && ...);

  /// One pass of the shared walk over the Target columns, in order: a
  /// paired column (the same and wrap kinds: a plain assignment either way)
  /// is copied or moved from src; an unpaired one is nulled unless skipped.
  template <class S>
  static constexpr void assign(Target& dst, S&& src) {
    by_name_pairs<Source, Target, Dropped, Skipped>::for_each(
        [&](auto tc, auto sc) {
          if constexpr (std::is_lvalue_reference_v<S>) {
            decltype(tc)::get(dst) = decltype(sc)::get(src);
          } else {
            decltype(tc)::get(dst) = std::move(decltype(sc)::get(src));
          }
        },
        [&](auto tc) {
          by_name_target_column<Source, Target, decltype(tc), Dropped, Skipped>::fill_null(dst);
        });
  }
  static constexpr bool nothrow_copy =
      (by_name_target_column<Source, Target, TC, Dropped, Skipped>::nothrow_copy && ...);
  static constexpr bool nothrow_move =
      (by_name_target_column<Source, Target, TC, Dropped, Skipped>::nothrow_move && ...);
};

template <class Source, class Target, class Dropped, class Skipped>
constexpr bool by_name_identity =
    std::is_same_v<Source, Target> && Dropped::size == 0 && Skipped::size == 0;

template <class Source, class Target, class Dropped, class Skipped,
          bool Identity = by_name_identity<Source, Target, Dropped, Skipped>>
struct by_name_impl {
  // Identity: the whole row is copied or moved.
  static constexpr bool ok = true;
  static constexpr bool nothrow_copy = std::is_nothrow_copy_constructible_v<Target>;
  static constexpr bool nothrow_move = std::is_nothrow_move_constructible_v<Target>;
  template <class S>
  static constexpr void assign(Target& dst, S&& src) {
    dst = std::forward<S>(src);
  }
  template <class S>
  static constexpr Target make(S&& src) {
    return Target(std::forward<S>(src));
  }
};

template <class Source, class Target, class Dropped, class Skipped>
struct by_name_impl<Source, Target, Dropped, Skipped, false> {
  static_assert(has_schema<Source> && has_schema<Target>,
                "flowlib INSERT BY NAME: mapping one row type onto another matches columns "
                "by name, so both row types need FLOWLIB_SCHEMA(Row, columns...).");
  static_assert(std::is_default_constructible_v<Target>,
                "flowlib INSERT BY NAME: the target row type must be default-constructible "
                "(a mapped row starts value-initialised, then its columns are written).");
  using checks = by_name_checks<Source, Target, Dropped, Skipped,
                                typename schema_of<Source>::columns,
                                typename schema_of<Target>::columns>;
  static constexpr bool ok = checks::ok;
  static constexpr bool nothrow_copy =
      std::is_nothrow_default_constructible_v<Target> && checks::nothrow_copy;
  static constexpr bool nothrow_move =
      std::is_nothrow_default_constructible_v<Target> && checks::nothrow_move;
  template <class S>
  static constexpr void assign(Target& dst, S&& src) {
    checks::assign(dst, std::forward<S>(src));
  }
  template <class S>
  static constexpr Target make(S&& src) {
    Target t{};
    checks::assign(t, std::forward<S>(src));
    return t;
  }
};

/// @brief Maps Source rows onto Target rows by column name (see the header).
///
/// `Dropped`: a name_list of Source columns not written anywhere.
/// `Skipped`: a name_list of Target columns that assign() leaves alone and
/// make() leaves value-initialised (the caller fills them).
///
/// Members:
///   - `make(src)`: a new Target (src may be an lvalue, copied, or an rvalue,
///     whose mapped columns are moved);
///   - `assign(dst, src)`: writes every mapped column of dst, nulls the
///     Target columns the Source lacks, leaves skipped columns alone;
///   - `nothrow_copy` / `nothrow_move`: whether make() from an lvalue / an
///     rvalue cannot throw (flows use it to skip staging);
///   - `identity`: Source and Target are the same type, copied whole.
template <class Source, class Target, class Dropped = name_list<>, class Skipped = name_list<>>
struct by_name_map {
 private:
  using impl = by_name_impl<Source, Target, Dropped, Skipped>;

 public:
  using source_type = Source;
  using target_type = Target;
  static constexpr bool identity = by_name_identity<Source, Target, Dropped, Skipped>;
  static constexpr bool ok = impl::ok;
  // Evaluating `ok` instantiates every per-column check; the failing one
  // reports the column and the fix just above this line's error.
  static_assert(ok, "flowlib by-name mapping: the row types do not match by name (see the "
                    "previous error for the column and the fix).");
  static constexpr bool nothrow_copy = impl::nothrow_copy;
  static constexpr bool nothrow_move = impl::nothrow_move;

  /// A new Target from `src` (copied from an lvalue, moved from an rvalue).
  template <class S>
    requires std::is_same_v<std::remove_cvref_t<S>, Source>
  static constexpr Target make(S&& src) noexcept(
      std::is_lvalue_reference_v<S> ? nothrow_copy : nothrow_move) {
    return impl::make(std::forward<S>(src));
  }

  /// Writes `src` into `dst` column by column (see the class comment).
  template <class S>
    requires std::is_same_v<std::remove_cvref_t<S>, Source>
  static constexpr void assign(Target& dst, S&& src) {
    impl::assign(dst, std::forward<S>(src));
  }
};

}  // namespace detail

/// @brief Append option: source columns dropped on purpose before an
/// INSERT BY NAME (`flowlib::Append<flowlib::DropColumns<"debug", "raw">>`).
/// Every name must be a column of the source row (checked at compile time).
template <detail::fixed_string... Names>
struct DropColumns {
  using names = detail::name_list<Names...>;
};

}  // namespace flowlib
