// flowlib/flows/cdc/detail/mapping.hpp
//
// The mapping of a change (or snapshot) row onto the target row BY NAME, at
// run time: assigning, comparing, keeping the stored value of a column that
// ignores nulls, and making an assignment unable to throw ahead of time.
// The column walk is detail/column_pairs.hpp's, shared with Append's INSERT
// BY NAME (detail/by_name.hpp), with an SCD2 target's __START_AT / __END_AT
// left out (cdc_rules::bounds). A mapping is used once column_checks.hpp's
// cdc_mapping_check has passed. Internal.
#pragma once

#include <flowlib/detail/column_pairs.hpp>
#include <flowlib/detail/type_traits.hpp>
#include <flowlib/flows/cdc/detail/option_traits.hpp>
#include <flowlib/schema.hpp>

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace flowlib::detail {

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

}  // namespace flowlib::detail
