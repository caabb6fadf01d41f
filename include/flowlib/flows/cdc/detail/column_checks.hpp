// flowlib/flows/cdc/detail/column_checks.hpp
//
// The compile-time checks of mapping a change (or snapshot) row onto the
// target row BY NAME (FLOWLIB_SCHEMA on both). The change-feed rules are
// stricter than Append's INSERT BY NAME: every target column must be
// paired, with the same type (no null-filling, no wrapping into
// std::optional). Where a mistake is about one column, the column's name
// is a template argument of the failing check
// (`cdc_target_column_check<"city", ...>`), so it shows in the compiler's
// "required from" line. Internal.
#pragma once

#include <flowlib/detail/column_pairs.hpp>
#include <flowlib/detail/fixed_string.hpp>
#include <flowlib/detail/name_list.hpp>
#include <flowlib/detail/type_traits.hpp>
#include <flowlib/flows/cdc/detail/option_traits.hpp>
#include <flowlib/schema.hpp>

#include <cstdint>
#include <optional>
#include <type_traits>
#include <utility>

namespace flowlib::detail {

template <class Col>
struct column_name_of;
template <auto M, fixed_string N>
struct column_name_of<column<M, N>> {
  static constexpr auto value = N;
};

// --- per-column checks (the column name is a template argument) --------------

/// What a column named in an option must be: a change column (column_list,
/// except_column_list, the ignore_null_updates lists), a target column
/// (the track_history lists), or, listed in ignore_null_updates_column_list,
/// nullable.
enum class cdc_option_column : std::uint8_t { in_change_row, in_target, nullable };

/// The check of one column named in an option; `Ok` says whether it is
/// what `Kind` asks for.
template <fixed_string Column, cdc_option_column Kind, bool Ok>
struct cdc_option_column_check {
  static_assert(Ok || Kind != cdc_option_column::in_change_row,
                "CDC_UNKNOWN_COLUMN: a column named in column_list / except_column_list / "
                "ignore_null_updates_(except_)column_list is not a column of the change row "
                "(its FLOWLIB_SCHEMA): fix the name shown as `Column` above.");
  static_assert(Ok || Kind != cdc_option_column::in_target,
                "CDC_UNKNOWN_COLUMN: a column named in track_history_column_list / "
                "track_history_except_column_list is not a column of the target row: fix the "
                "name shown as `Column` above.");
  static_assert(Ok || Kind != cdc_option_column::nullable,
                "CDC_IGNORE_NULL_ON_NON_NULLABLE_COLUMN: a column listed in "
                "ignore_null_updates_column_list is not a std::optional, so it is never null; "
                "make it std::optional<T> or remove it from the list (the column is shown as "
                "`Column` above).");
  static constexpr bool ok = true;
};

template <fixed_string Column, bool InChangeRow, bool Selected, bool SameType>
struct cdc_target_column_check {
  static_assert(InChangeRow,
                "TARGET_COLUMN_MISSING_FROM_CHANGE: a column of the target row has no column "
                "of the same name in the change row; the flow maps columns by name "
                "(FLOWLIB_SCHEMA). Rename the column, add it to the change row, or remove it "
                "from the target (the column is shown as `Column` above).");
  static_assert(!InChangeRow || Selected,
                "TARGET_COLUMN_NOT_SELECTED: a column of the target row is excluded by "
                "column_list / except_column_list; select it, or remove it from the target "
                "(the column is shown as `Column` above).");
  static_assert(!InChangeRow || !Selected || SameType,
                "TARGET_COLUMN_TYPE_MISMATCH: a column of the target row has another type than "
                "the change row's column of the same name; declare both with the same type "
                "(the column is shown as `Column` above).");
  static constexpr bool ok = InChangeRow && Selected && SameType;
};

template <fixed_string Column, bool InTarget>
struct cdc_selected_column_check {
  static_assert(InTarget,
                "SELECTED_COLUMN_MISSING_FROM_TARGET: a selected column of the change row is "
                "not a column of the target row, so its values would be lost; add it to the "
                "target row, or leave it out with except_column_list<...> (or column_list<...>) "
                "(the column is shown as `Column` above).");
  static constexpr bool ok = true;
};

template <class Seq, class Start, class End, bool HasStart, bool HasEnd>
struct cdc_scd2_bounds_check {
  static_assert(HasStart && HasEnd,
                "SCD2_TARGET_NEEDS_START_AT_END_AT: an SCD type 2 target row needs columns "
                "named \"__START_AT\" (the sequence's type) and \"__END_AT\" "
                "(std::optional of it); name them in FLOWLIB_SCHEMA as (start_at, "
                "\"__START_AT\"), (end_at, \"__END_AT\").");
  static_assert(!HasStart || std::is_same_v<Start, Seq>,
                "SCD2_START_AT_TYPE: the target's __START_AT column must have the sequence's "
                "value type (for a struct sequence, std::tuple of its columns).");
  static_assert(!HasEnd || std::is_same_v<End, std::optional<Seq>>,
                "SCD2_END_AT_TYPE: the target's __END_AT column must be std::optional of the "
                "sequence's value type (null for the current version).");
  static constexpr bool ok = HasStart && HasEnd && std::is_same_v<Start, Seq> &&
                             std::is_same_v<End, std::optional<Seq>>;
};

/// The compile-time checks of mapping Change onto Target under Opts. Its
/// `ok` is true or the program does not compile (with a message per mistake).
template <class Change, class Target, class Opts>
struct cdc_mapping_check {
  static_assert(has_schema<Change>,
                "flowlib::AutoCdc: the change row type needs FLOWLIB_SCHEMA(Change, ...), so "
                "that its columns can be mapped onto the target by name.");
  static_assert(has_schema<Target>,
                "flowlib::AutoCdc: the target row type needs FLOWLIB_SCHEMA(Target, ...), so "
                "that the change row's columns can be mapped onto it by name.");
  using CS = schema_of<Change>;
  using TS = schema_of<Target>;
  using rules = cdc_rules<Opts>;
  using pairs = column_pairs<Change, Target, typename rules::bounds>;

  template <fixed_string Name>
  static constexpr bool named_in_change_row() {
    return cdc_option_column_check<Name, cdc_option_column::in_change_row,
                                   CS::contains(Name.view())>::ok;
  }
  template <class NS>
  struct listed;
  template <fixed_string... N>
  struct listed<name_list<N...>> {
    static constexpr bool ok = (named_in_change_row<N>() && ...);
  };
  template <fixed_string Name>
  static constexpr bool nullable() {
    if constexpr (CS::contains(Name.view())) {
      return is_optional_v<typename col_value<column_named_t<Change, Name>>::type>;
    } else {
      return true;
    }
  }
  template <class NS>
  struct ignored;
  template <fixed_string... N>
  struct ignored<name_list<N...>> {
    static constexpr bool ok =
        (named_in_change_row<N>() && ...) &&
        (Opts::ignore_mode != 2 ||
         (cdc_option_column_check<N, cdc_option_column::nullable, nullable<N>()>::ok && ...));
  };
  template <class NS>
  struct tracked;
  template <fixed_string... N>
  struct tracked<name_list<N...>> {
    static constexpr bool ok =
        (cdc_option_column_check<N, cdc_option_column::in_target,
                                 TS::contains(N.view()) && !rules::is_bound(N.view())>::ok &&
         ...);
  };
  template <class TC>
  static constexpr bool target_column() {
    constexpr auto name = column_name_of<TC>::value;
    if constexpr (rules::is_bound(TC::name)) {
      return true;
    } else {
      using CC = typename pairs::template source_column_t<TC>;
      constexpr bool in_change = !std::is_void_v<CC>;
      constexpr bool sel = rules::selected(TC::name);
      constexpr bool same = std::is_same_v<typename col_value<CC>::type, typename TC::value_type>;
      return cdc_target_column_check<name, in_change, sel, same>::ok;
    }
  }
  template <class CC>
  static constexpr bool change_column() {
    if constexpr (!rules::selected(CC::name)) {
      return true;
    } else {
      constexpr auto name = column_name_of<CC>::value;
      return cdc_selected_column_check<name, TS::contains(CC::name) &&
                                                 !rules::is_bound(CC::name)>::ok;
    }
  }
  template <class L>
  struct columns;
  template <class... TCs, class... CCs>
  struct columns<std::pair<type_list<TCs...>, type_list<CCs...>>> {
    static constexpr bool ok = (target_column<TCs>() && ...) && (change_column<CCs>() && ...);
  };
  static constexpr bool ok = listed<typename Opts::select_set>::ok &&
                             ignored<typename Opts::ignore_set>::ok &&
                             tracked<typename Opts::scd::track_set>::ok &&
                             columns<std::pair<typename TS::columns, typename CS::columns>>::ok;
};

/// Every compile-time check of a change-feed flow's target row (AutoCdc and
/// AutoCdcFromSnapshot): the mapping of Row onto Target under Opts and,
/// with SCD2, Target's __START_AT and __END_AT against Seq (the sequence, or
/// the snapshot version, type). Use as static_assert(cdc_target_checked<...>()).
template <class Row, class Target, class Seq, class Opts>
constexpr bool cdc_target_checked() {
  static_assert(cdc_mapping_check<Row, Target, Opts>::ok);
  if constexpr (Opts::scd2) {
    using start = column_named_t<Target, "__START_AT">;
    using end = column_named_t<Target, "__END_AT">;
    static_assert(cdc_scd2_bounds_check<Seq, typename col_value<start>::type,
                                        typename col_value<end>::type, !std::is_void_v<start>,
                                        !std::is_void_v<end>>::ok);
  }
  return true;
}

}  // namespace flowlib::detail
