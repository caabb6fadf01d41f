// flowlib/detail/cdc_columns.hpp
//
// Compile-time side of the change-feed flows (AutoCdc, AutoCdcFromSnapshot):
// parsing their option types, and mapping a change (or snapshot) row onto
// the target row BY NAME through FLOWLIB_SCHEMA. Every mistake a program can
// make here is a compile error whose message says how to fix it; where it is
// about one column, the column's name is a template argument of the failing
// check (`cdc_target_column_check<"city", ...>`), so it shows in the
// compiler's "required from" line.
//
// The column walk (which target column takes which change column) is not
// here: it is detail/column_pairs.hpp's column_pairs, shared with Append's
// INSERT BY NAME (detail/by_name.hpp), with an SCD2 target's __START_AT /
// __END_AT left out (cdc_rules::bounds). This header keeps the change-feed
// rules, which are stricter than Append's: every target column must be
// paired, with the same type (no null-filling, no wrapping into
// std::optional), checked in cdc_mapping_check. Internal.
#pragma once

#include <flowlib/detail/column_pairs.hpp>
#include <flowlib/detail/fixed_string.hpp>
#include <flowlib/detail/name_list.hpp>
#include <flowlib/detail/type_traits.hpp>
#include <flowlib/once.hpp>
#include <flowlib/schema.hpp>

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace flowlib {

// Option templates (defined in flows/auto_cdc.hpp).
struct Scd1;
template <class... TrackOptions>
struct Scd2;
template <class Pred>
struct apply_as_deletes;
template <class Pred>
struct apply_as_truncates;
template <detail::fixed_string... Names>
struct column_list;
template <detail::fixed_string... Names>
struct except_column_list;
struct ignore_null_updates;
template <detail::fixed_string... Names>
struct ignore_null_updates_column_list;
template <detail::fixed_string... Names>
struct ignore_null_updates_except_column_list;
template <detail::fixed_string... Names>
struct track_history_column_list;
template <detail::fixed_string... Names>
struct track_history_except_column_list;
struct strict_sequence;
template <class T>
struct snapshot_version;

namespace detail {

template <class Col>
struct column_name_of;
template <auto M, fixed_string N>
struct column_name_of<column<M, N>> {
  static constexpr auto value = N;
};

// --- option recognition ------------------------------------------------------
template <class T> struct is_column_list : std::false_type {};
template <fixed_string... N>
struct is_column_list<column_list<N...>> : std::true_type {
  using set = name_list<N...>;
};
template <class T> struct is_except_column_list : std::false_type {};
template <fixed_string... N>
struct is_except_column_list<except_column_list<N...>> : std::true_type {
  using set = name_list<N...>;
};
template <class T> struct is_ignore_all : std::is_same<T, ignore_null_updates> {};
template <class T> struct is_ignore_list : std::false_type {};
template <fixed_string... N>
struct is_ignore_list<ignore_null_updates_column_list<N...>> : std::true_type {
  using set = name_list<N...>;
};
template <class T> struct is_ignore_except : std::false_type {};
template <fixed_string... N>
struct is_ignore_except<ignore_null_updates_except_column_list<N...>> : std::true_type {
  using set = name_list<N...>;
};
template <class T> struct is_track_list : std::false_type {};
template <fixed_string... N>
struct is_track_list<track_history_column_list<N...>> : std::true_type {
  using set = name_list<N...>;
};
template <class T> struct is_track_except : std::false_type {};
template <fixed_string... N>
struct is_track_except<track_history_except_column_list<N...>> : std::true_type {
  using set = name_list<N...>;
};
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
  static constexpr int track_mode = count_options<is_track_list, Ts...> ? 1
                                    : count_options<is_track_except, Ts...> ? 2
                                                                             : 0;
  using track_set = typename names_or_none<typename find_option<
      is_track_list, typename find_option<is_track_except, no_option, Ts...>::type,
      Ts...>::type>::set;
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

  static constexpr int select_mode = count_options<is_column_list, Os...> ? 1
                                     : count_options<is_except_column_list, Os...> ? 2
                                                                                   : 0;
  using select_set = typename names_or_none<typename find_option<
      is_column_list, typename find_option<is_except_column_list, no_option, Os...>::type,
      Os...>::type>::set;
  static constexpr int ignore_mode = count_options<is_ignore_all, Os...> ? 1
                                     : count_options<is_ignore_list, Os...> ? 2
                                     : count_options<is_ignore_except, Os...> ? 3
                                                                              : 0;
  using ignore_set = typename names_or_none<typename find_option<
      is_ignore_list, typename find_option<is_ignore_except, no_option, Os...>::type,
      Os...>::type>::set;
};

// --- per-column checks (the column name is a template argument) --------------

template <fixed_string Column, bool InChangeRow>
struct cdc_listed_column_check {
  static_assert(InChangeRow,
                "CDC_UNKNOWN_COLUMN: a column named in column_list / except_column_list / "
                "ignore_null_updates_(except_)column_list is not a column of the change row "
                "(its FLOWLIB_SCHEMA): fix the name shown as `Column` above.");
  static constexpr bool ok = true;
};

template <fixed_string Column, bool InTarget>
struct cdc_track_column_check {
  static_assert(InTarget,
                "CDC_UNKNOWN_COLUMN: a column named in track_history_column_list / "
                "track_history_except_column_list is not a column of the target row: fix the "
                "name shown as `Column` above.");
  static constexpr bool ok = true;
};

template <fixed_string Column, bool Nullable>
struct cdc_ignore_column_check {
  static_assert(Nullable,
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

  template <class NS>
  struct listed;
  template <fixed_string... N>
  struct listed<name_list<N...>> {
    static constexpr bool ok = (cdc_listed_column_check<N, CS::contains(N.view())>::ok && ...);
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
        (cdc_listed_column_check<N, CS::contains(N.view())>::ok && ...) &&
        (Opts::ignore_mode != 2 || (cdc_ignore_column_check<N, nullable<N>()>::ok && ...));
  };
  template <class NS>
  struct tracked;
  template <fixed_string... N>
  struct tracked<name_list<N...>> {
    static constexpr bool ok =
        (cdc_track_column_check<N, TS::contains(N.view()) && !rules::is_bound(N.view())>::ok &&
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

/// Whether a column's copy assignment can be made unable to throw ahead of
/// time, and how (cdc_mapping::prepare).
///   - A type whose copy assignment is nothrow needs nothing.
///   - A std::basic_string (with std::allocator, which never propagates on
///     assignment) is given room for the source's characters: assigning at
///     most capacity() characters copies them in place (libstdc++, libc++
///     and MSVC alike). No string holds less room than an empty one, its
///     small buffer, so a source that fits there needs nothing and the
///     target's string is not read.
///   - A std::optional of such a string: likewise when it holds a string. A
///     null one that is to take a long string is given an empty string with
///     room; `nulled()` is called first (it may throw, and records that the
///     column must be made null again if the batch is undone).
///   - Other types are not preparable.
/// prepare() may throw (std::bad_alloc); it leaves the value as it was,
/// except for a null made an empty string after `nulled()` returned.
template <class T>
struct cdc_assign_prep {
  static constexpr bool ok = std::is_nothrow_copy_assignable_v<T>;
  template <class Nulled>
  static void prepare(T&, const T&, Nulled&&) noexcept {}
};
template <class C, class Tr>
struct cdc_assign_prep<std::basic_string<C, Tr, std::allocator<C>>> {
  using string = std::basic_string<C, Tr, std::allocator<C>>;
  static constexpr bool ok = true;
  static constexpr std::size_t small = string().capacity();
  template <class Nulled>
  static void prepare(string& d, const string& s, Nulled&&) {
    if (s.size() > small) d.reserve(s.size());
  }
};
template <class C, class Tr>
struct cdc_assign_prep<std::optional<std::basic_string<C, Tr, std::allocator<C>>>> {
  using string = std::basic_string<C, Tr, std::allocator<C>>;
  static constexpr bool ok = true;
  template <class Nulled>
  static void prepare(std::optional<string>& d, const std::optional<string>& s, Nulled&& nulled) {
    if (!s || s->size() <= cdc_assign_prep<string>::small) return;
    if (!d) {
      nulled();
      d.emplace();
    }
    d->reserve(s->size());
  }
};

/// The mapping of a change (or snapshot) row onto a target row, by name.
/// Check it with cdc_mapping_check first.
template <class Change, class Target, class Opts>
struct cdc_mapping {
  using CS = schema_of<Change>;
  using TS = schema_of<Target>;
  using rules = cdc_rules<Opts>;

  /// Calls f(TargetCol{}, ChangeCol{}) for every mapped (non-bound) column:
  /// the shared by-name walk (detail/column_pairs.hpp). cdc_mapping_check
  /// has made sure that it pairs every non-bound target column.
  template <class F>
  static constexpr void for_each(F&& f) {
    for_each_column_pair<Change, Target, typename rules::bounds>(std::forward<F>(f));
  }

  /// t's mapped columns = c's (copied).
  static void assign(Target& t, const Change& c) {
    for_each([&](auto tc, auto cc) { decltype(tc)::get(t) = decltype(cc)::get(c); });
  }
  /// Whether every mapped column is preparable (cdc_assign_prep): then
  /// assign(t, c) cannot throw once prepare(t, c) has returned.
  static constexpr bool preparable = [] {
    bool ok = true;
    for_each(
        [&](auto tc, auto) { ok = ok && cdc_assign_prep<typename decltype(tc)::value_type>::ok; });
    return ok;
  }();
  /// Makes assign(t, c) unable to throw (preparable only), so that it may
  /// run in a commit that must not fail. May throw. t's values stay as they
  /// were, except that a null column may become an empty string: then
  /// nulled(i) was called first, i the column's place among the mapped
  /// ones (see reset_null). Reads t only where c's value is a long string.
  template <class Nulled>
  static void prepare(Target& t, const Change& c, Nulled&& nulled) {
    static_assert(preparable, "cdc_mapping::prepare: a column is not preparable");
    std::uint32_t i = 0;
    for_each([&](auto tc, auto cc) {
      using TC = decltype(tc);
      cdc_assign_prep<typename TC::value_type>::prepare(TC::get(t), decltype(cc)::get(c),
                                                       [&] { nulled(i); });
      ++i;
    });
  }
  /// Makes mapped column i of t null again (undoes prepare's nulled(i)).
  static void reset_null(Target& t, std::uint32_t i) noexcept {
    std::uint32_t j = 0;
    for_each([&](auto tc, auto) {
      using V = typename decltype(tc)::value_type;
      if constexpr (is_optional_v<V>) {
        if (j == i) decltype(tc)::get(t).reset();
      }
      ++j;
    });
  }
  /// As assign(), moving from c.
  static void assign(Target& t, Change&& c) {
    for_each([&](auto tc, auto cc) { decltype(tc)::get(t) = std::move(decltype(cc)::get(c)); });
  }
  /// As assign(), but a null column that ignores nulls keeps t's value (R-CDC-6).
  static void assign_keeping_ignored_nulls(Target& t, const Change& c) {
    for_each([&](auto tc, auto cc) {
      using TC = decltype(tc);
      using CC = decltype(cc);
      if constexpr (rules::template ignores_null<typename TC::value_type>(TC::name)) {
        if (!CC::get(c).has_value()) return;
      }
      TC::get(t) = CC::get(c);
    });
  }
  /// Whether the mapped columns of a and b are equal.
  static bool equal(const Target& a, const Target& b) {
    bool same = true;
    for_each([&](auto tc, auto) {
      if (same && !(decltype(tc)::get(a) == decltype(tc)::get(b))) same = false;
    });
    return same;
  }
  /// Whether the mapped columns of t equal those of c.
  static bool equal_change(const Target& t, const Change& c) {
    bool same = true;
    for_each([&](auto tc, auto cc) {
      if (same && !(decltype(tc)::get(t) == decltype(cc)::get(c))) same = false;
    });
    return same;
  }
  /// Whether the history-tracked columns of a and b are equal (SCD2). b is
  /// a target row or a change row; a change compares as the row assign()
  /// would make of it, so none needs to be built to find out.
  template <class B>
    requires std::same_as<B, Target> || std::same_as<B, Change>
  static bool tracked_equal(const Target& a, const B& b) {
    bool same = true;
    for_each([&](auto tc, auto cc) {
      using TC = decltype(tc);
      using Col = std::conditional_t<std::is_same_v<B, Target>, TC, decltype(cc)>;
      if constexpr (rules::tracked(TC::name)) {
        if (same && !(TC::get(a) == Col::get(b))) same = false;
      }
    });
    return same;
  }
};

/// The selected change columns that ignore nulls (they are the target's
/// columns of the same names, so this does not depend on the target type).
template <class Change, class Opts>
struct cdc_ignored_columns {
  using rules = cdc_rules<Opts>;
  template <class CC>
  static constexpr bool is_ignored() {
    return rules::selected(CC::name) &&
           rules::template ignores_null<typename CC::value_type>(CC::name);
  }
  static constexpr std::size_t count() {
    std::size_t n = 0;
    schema_of<Change>::for_each([&](auto cc) {
      if (is_ignored<decltype(cc)>()) ++n;
    });
    return n;
  }
  /// Index of change column `name` among them.
  static constexpr std::size_t index(std::string_view name) {
    std::size_t n = 0;
    std::size_t found = 0;
    schema_of<Change>::for_each([&](auto cc) {
      using CC = decltype(cc);
      if (is_ignored<CC>()) {
        if (CC::name == name) found = n;
        ++n;
      }
    });
    return found;
  }
};

}  // namespace detail
}  // namespace flowlib
