// flowlib/flows/cdc/detail/option_traits.hpp
//
// The option types of the change-feed flows (AutoCdc, AutoCdcFromSnapshot;
// flows/cdc/options.hpp), read and checked: cdc_options says
// what a flow's options are (column selection, null-ignoring, history
// tracking, deletes, truncates, strict_sequence, ONCE), and cdc_rules turns
// them into per-column rules. Every mistake a program can make here is a
// compile error whose message says how to fix it. Internal.
#pragma once

#include <flowlib/detail/fixed_string.hpp>
#include <flowlib/detail/name_list.hpp>
#include <flowlib/detail/type_traits.hpp>
#include <flowlib/flows/cdc/options.hpp>
#include <flowlib/once.hpp>

#include <string_view>
#include <type_traits>

namespace flowlib::detail {

// --- option recognition ------------------------------------------------------

/// Whether T is the name-list option L<...> (column_list<...>, ...).
template <class T, template <fixed_string...> class L>
struct is_names_option : std::false_type {};
template <template <fixed_string...> class L, fixed_string... N>
struct is_names_option<L<N...>, L> : std::true_type {};

template <class T> using is_column_list = is_names_option<T, column_list>;
template <class T> using is_except_column_list = is_names_option<T, except_column_list>;
template <class T> using is_ignore_list = is_names_option<T, ignore_null_updates_column_list>;
template <class T>
using is_ignore_except = is_names_option<T, ignore_null_updates_except_column_list>;
template <class T> using is_track_list = is_names_option<T, track_history_column_list>;
template <class T>
using is_track_except = is_names_option<T, track_history_except_column_list>;
template <class T> struct is_ignore_all : std::is_same<T, ignore_null_updates> {};
template <class T> struct is_deletes : std::false_type {};
template <class P> struct is_deletes<apply_as_deletes<P>> : std::true_type { using pred = P; };
template <class T> struct is_truncates : std::false_type {};
template <class P> struct is_truncates<apply_as_truncates<P>> : std::true_type { using pred = P; };
template <class T> struct is_strict : std::is_same<T, strict_sequence> {};
template <class T> struct is_once : std::is_same<T, Once> {};
template <class T> struct is_version : std::false_type {};
template <class V> struct is_version<snapshot_version<V>> : std::true_type { using type = V; };

template <template <class> class Is, class... Os>
inline constexpr int count_options = (int{Is<Os>::value} + ... + 0);

/// The first option O with Is<O>::value, or Default.
template <template <class> class Is, class Default, class... Os>
struct find_option {
  using type = Default;
};
template <template <class> class Is, class Default, class O, class... Os>
struct find_option<Is, Default, O, Os...> {
  using type = std::conditional_t<Is<O>::value, O,
                                  typename find_option<Is, Default, Os...>::type>;
};

template <class T> struct names_or_none { using set = name_list<>; };
template <template <fixed_string...> class L, fixed_string... N>
struct names_or_none<L<N...>> { using set = name_list<N...>; };

struct no_option {};

/// Of two exclusive name-list options (column_list and except_column_list,
/// say; IsList and IsExcept recognise them): which one Os give (1 the list,
/// 2 the exception list, 0 neither), and its names.
template <template <class> class IsList, template <class> class IsExcept, class... Os>
struct list_or_except {
  static constexpr int mode = count_options<IsList, Os...>     ? 1
                              : count_options<IsExcept, Os...> ? 2
                                                               : 0;
  using set = typename names_or_none<typename find_option<
      IsList, typename find_option<IsExcept, no_option, Os...>::type, Os...>::type>::set;
};

template <class T> struct is_scd2 : std::false_type {};
template <class... Ts> struct is_scd2<Scd2<Ts...>> : std::true_type {};

/// Scd2<Track...>: its history-tracking columns.
template <class Scd>
struct scd_traits {
  static_assert(std::is_same_v<Scd, Scd1> || is_scd2<Scd>::value,
                "flowlib::AutoCdc<Key, Seq, Scd, ...>: Scd must be flowlib::Scd1 or "
                "flowlib::Scd2<...>.");
  static constexpr bool scd2 = false;
  static constexpr int track_mode = 0;  // 0 all, 1 list, 2 except
  using track_set = name_list<>;
};
template <class... Ts>
struct scd_traits<Scd2<Ts...>> {
  static_assert(count_options<is_track_list, Ts...> + count_options<is_track_except, Ts...> <= 1,
                "TRACK_HISTORY_LISTS_EXCLUSIVE: flowlib::Scd2 takes track_history_column_list or "
                "track_history_except_column_list, never both (and each at most once); keep one.");
  static_assert(((is_track_list<Ts>::value || is_track_except<Ts>::value) && ...),
                "flowlib::Scd2<...> takes only track_history_column_list<...> or "
                "track_history_except_column_list<...>; put the other options after Scd2 in "
                "AutoCdc<Key, Seq, Scd2<...>, Options...>.");
  static constexpr bool scd2 = true;
  using track = list_or_except<is_track_list, is_track_except, Ts...>;
  static constexpr int track_mode = track::mode;  // 0 all, 1 list, 2 except
  using track_set = typename track::set;
};

/// What the options of a change-feed flow say, checked.
template <class Scd, class... Os>
struct cdc_options {
  static_assert(count_options<is_column_list, Os...> +
                        count_options<is_except_column_list, Os...> <=
                    1,
                "COLUMN_LIST_EXCLUSIVE: give column_list<...> or except_column_list<...>, never "
                "both (and each at most once); keep one.");
  static_assert(count_options<is_ignore_all, Os...> + count_options<is_ignore_list, Os...> +
                        count_options<is_ignore_except, Os...> <= 1,
                "IGNORE_NULL_UPDATES_EXCLUSIVE: give one of ignore_null_updates, "
                "ignore_null_updates_column_list<...> or "
                "ignore_null_updates_except_column_list<...>, not several; keep one.");
  static_assert(count_options<is_deletes, Os...> <= 1,
                "flowlib::AutoCdc: apply_as_deletes<...> is given twice; combine the "
                "predicates into one.");
  static_assert(count_options<is_truncates, Os...> <= 1,
                "flowlib::AutoCdc: apply_as_truncates<...> is given twice; combine the "
                "predicates into one.");
  static_assert(count_options<is_version, Os...> <= 1,
                "flowlib::AutoCdcFromSnapshot: snapshot_version<...> is given twice.");
  static_assert(count_options<is_track_list, Os...> + count_options<is_track_except, Os...> == 0,
                "flowlib::AutoCdc: track_history_column_list / track_history_except_column_list "
                "are options of SCD type 2: write them inside flowlib::Scd2<...>.");
  static_assert(((is_column_list<Os>::value || is_except_column_list<Os>::value ||
                  is_ignore_all<Os>::value || is_ignore_list<Os>::value ||
                  is_ignore_except<Os>::value || is_deletes<Os>::value ||
                  is_truncates<Os>::value || is_strict<Os>::value || is_once<Os>::value ||
                  is_version<Os>::value ||
                  is_track_list<Os>::value || is_track_except<Os>::value) &&
                 ...),
                "flowlib::AutoCdc: unknown option. Options are apply_as_deletes<Pred>, "
                "apply_as_truncates<Pred>, column_list<...>, except_column_list<...>, "
                "ignore_null_updates, ignore_null_updates_column_list<...>, "
                "ignore_null_updates_except_column_list<...>, strict_sequence and flowlib::Once.");

  using scd = scd_traits<Scd>;
  static constexpr bool scd2 = scd::scd2;
  static constexpr bool has_deletes = count_options<is_deletes, Os...> == 1;
  static constexpr bool has_truncates = count_options<is_truncates, Os...> == 1;
  static_assert(!(scd2 && has_truncates),
                "SCD2_DOES_NOT_SUPPORT_TRUNCATE: apply_as_truncates is an SCD type 1 option; "
                "an SCD type 2 target keeps history and cannot be truncated. Remove "
                "apply_as_truncates, or use flowlib::Scd1.");
  static constexpr bool strict = count_options<is_strict, Os...> == 1;
  static constexpr bool once = count_options<is_once, Os...> >= 1;

  using select = list_or_except<is_column_list, is_except_column_list, Os...>;
  static constexpr int select_mode = select::mode;  // 0 all, 1 list, 2 except
  using select_set = typename select::set;
  using ignore_lists = list_or_except<is_ignore_list, is_ignore_except, Os...>;
  // 0 none, 1 every nullable column, 2 a list, 3 all but a list
  static constexpr int ignore_mode = count_options<is_ignore_all, Os...> ? 1
                                     : ignore_lists::mode != 0        ? 1 + ignore_lists::mode
                                                                      : 0;
  using ignore_set = typename ignore_lists::set;
};
/// Column rules of a flow's options: selection, bounds, nulls, history.
template <class Opts>
struct cdc_rules {
  static constexpr bool scd2 = Opts::scd2;
  /// The target columns the flow fills itself (SCD2's validity bounds):
  /// left out of the column pairs.
  using bounds = std::conditional_t<scd2, name_list<"__START_AT", "__END_AT">, name_list<>>;
  static constexpr bool is_bound(std::string_view n) noexcept { return bounds::contains(n); }
  static constexpr bool selected(std::string_view n) noexcept {
    if constexpr (Opts::select_mode == 1) return Opts::select_set::contains(n);
    if constexpr (Opts::select_mode == 2) return !Opts::select_set::contains(n);
    return true;
  }
  template <class T>
  static constexpr bool ignores_null(std::string_view n) noexcept {
    if constexpr (!is_optional_v<T>) {
      return false;
    } else if constexpr (Opts::ignore_mode == 1) {
      return true;
    } else if constexpr (Opts::ignore_mode == 2) {
      return Opts::ignore_set::contains(n);
    } else if constexpr (Opts::ignore_mode == 3) {
      return !Opts::ignore_set::contains(n);
    } else {
      return false;
    }
  }
  static constexpr bool tracked(std::string_view n) noexcept {
    using scd = typename Opts::scd;
    if constexpr (scd::track_mode == 1) return scd::track_set::contains(n);
    if constexpr (scd::track_mode == 2) return !scd::track_set::contains(n);
    return true;
  }
};

}  // namespace flowlib::detail
