// flowlib/columns.hpp
//
// Keys and sequences: which columns identify a row's key, and which order its
// versions. Both are policies. The built-in ones, Key<&Row::a, ...> and
// Seq<&Row::s> / Seq<&Row::ts, &Row::id>, read data members; any other type
// that satisfies `key_extractor` / `sequence_extractor` plugs into the same
// flows (for example a key whose columns are chosen at run time).
//
// Key columns may be std::optional (null matches null, R-USING-5). Sequence
// columns may be std::optional too; a null sequence is an error at apply time
// (R-USING-7). Types that make unreliable keys or sequences (floating point,
// variants, maps) and non-hashable key types are rejected at compile time
// with a message that says what to use instead (R-USING-6).
#pragma once

#include <flowlib/detail/format.hpp>
#include <flowlib/detail/key_hash.hpp>
#include <flowlib/detail/type_traits.hpp>
#include <flowlib/schema.hpp>

#include <absl/hash/hash.h>

#include <array>
#include <concepts>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>

namespace flowlib {

// ---------------------------------------------------------------------------
// Concepts
// ---------------------------------------------------------------------------

/// @brief A policy that extracts a hashable, totally ordered key from a row.
///
/// Required: `row_type`, `value_type`, `k(row) -> value_type`, and
/// `k.describe(row) -> std::string` ("col=value, ...", used in errors).
/// Optional hooks, used when present (see detail::key_traits):
/// `k.hash(row)` equal to `detail::key_hash<value_type>{}(k(row))` (absl::Hash
/// for the types absl hashes), and
/// `k.equal(row, value)`, both avoiding a copy of the key on hot paths.
template <class K>
concept key_extractor =
    detail::row_value_policy<K> &&
    requires(const K& k, const typename K::row_type& r) {
      { k(r) } -> std::convertible_to<typename K::value_type>;
      { k.describe(r) } -> std::convertible_to<std::string>;
    } &&
    detail::ordered_value<typename K::value_type> && detail::key_hashable<typename K::value_type>;

/// @brief A policy that extracts a totally ordered sequence from a row.
///
/// Required: `row_type`, `value_type`, `s(row) -> std::optional<value_type>`
/// (std::nullopt for a null sequence), and `s.name()` naming the column(s).
template <class S>
concept sequence_extractor =
    detail::row_value_policy<S> &&
    requires(const S& s, const typename S::row_type& r) {
      { s(r) } -> std::same_as<std::optional<typename S::value_type>>;
      { s.name() } -> std::convertible_to<std::string_view>;
    } &&
    detail::ordered_value<typename S::value_type>;

namespace detail {

// Compile-time checks shared by Key and Seq. Each is a separate
// static_assert so the compiler reports exactly the rule that failed.
template <class T, bool IsKey>
struct column_type_check {
  using U = unwrap_optional_t<T>;
  static_assert(!std::is_floating_point_v<U>,
                "flowlib: a key or sequence column is floating point. Floating-point "
                "values make unreliable keys and orders (NaN != NaN, 0.0 == -0.0, "
                "rounding); use an integer, a fixed-point decimal or a string instead "
                "(R-USING-6).");
  static_assert(!is_variant_v<U>,
                "flowlib: a key or sequence column is a std::variant (VARIANT is not a "
                "key type). Extract the alternative you key on into its own column "
                "(R-USING-6).");
  static_assert(!map_like<U>,
                "flowlib: a key or sequence column is a map (MAP is not a key type). Key "
                "on atomic columns such as integers, strings or dates (R-USING-6).");
  static_assert(std::totally_ordered<U>,
                "flowlib: a key or sequence column's type is not totally ordered. Key "
                "and sequence types must be sortable: give the type operator<=> and "
                "operator== (R-USING-6).");
  static_assert(!IsKey || key_hashable<U>,
                "flowlib: a key column's type is not hashable. Provide "
                "`template <class H> friend H AbslHashValue(H h, const T& v)` for it "
                "(R-USING-6). (Types absl hashes, std::chrono durations, time points and "
                "dates, and optionals and tuples of these, are hashable already.)");
  static constexpr bool ok = true;
};

template <auto M>
std::string column_label(std::size_t index) {
  std::string_view n = member_name<M>();
  if (!n.empty()) return std::string(n);
  return "column#" + std::to_string(index);
}

}  // namespace detail

// ---------------------------------------------------------------------------
// Key
// ---------------------------------------------------------------------------

/// @brief Key<&Row::a, &Row::b, ...>: the key is the tuple of these members
/// (a single member's value for a one-column key).
template <auto... Members>
struct Key {
  static_assert(sizeof...(Members) > 0,
                "flowlib::Key<> needs at least one key column, for example "
                "flowlib::Key<&Row::id> (R-USING-6).");
  static_assert((detail::data_member_pointer<Members> && ...),
                "flowlib::Key<...> takes pointers to data members, such as &Row::id.");
  static_assert(detail::same_class_members<Members...>(),
                "flowlib::Key<...>: all key columns must be members of the same row type.");
  static_assert(detail::all_distinct_members<Members...>(),
                "flowlib::Key<...>: a key column is listed twice; key columns must be "
                "distinct (R-USING-6).");
  static_assert((detail::column_type_check<detail::member_value_t<Members>, true>::ok && ...));

  using row_type = detail::first_member_class_t<Members...>;
  static constexpr std::size_t size = sizeof...(Members);
  static constexpr auto first_member = std::get<0>(std::tuple{Members...});
  using value_type =
      std::conditional_t<size == 1,
                         std::tuple_element_t<0, std::tuple<detail::member_value_t<Members>...>>,
                         std::tuple<detail::member_value_t<Members>...>>;

  value_type operator()(const row_type& r) const {
    if constexpr (size == 1) {
      return r.*first_member;
    } else {
      return value_type(r.*Members...);
    }
  }
  /// Equal to detail::key_hash<value_type>{}((*this)(r)), without building the key.
  std::size_t hash(const row_type& r) const { return detail::hash_of(r.*Members...); }
  bool equal(const row_type& r, const value_type& v) const {
    if constexpr (size == 1) {
      return r.*first_member == v;
    } else {
      return std::tie(r.*Members...) == v;
    }
  }
  bool equal(const row_type& a, const row_type& b) const {
    return ((a.*Members == b.*Members) && ...);
  }
  /// "region_id=1" or "property_id=7, booking_id=null".
  std::string describe(const row_type& r) const {
    std::string out;
    std::size_t i = 0;
    ((out += (i ? ", " : ""), out += detail::column_label<Members>(i),
      out += '=', out += detail::to_text(r.*Members), ++i),
     ...);
    return out;
  }
  /// Column names (schema names, or column#i without FLOWLIB_SCHEMA).
  static std::array<std::string, size> names() {
    std::size_t i = 0;
    return {detail::column_label<Members>(i++)...};
  }
  friend bool operator==(const Key&, const Key&) = default;
};

// ---------------------------------------------------------------------------
// Seq
// ---------------------------------------------------------------------------

/// @brief Seq<&Row::s>: order by one column. Seq<&Row::ts, &Row::id>: a struct
/// sequence, compared lexicographically (ties on ts broken by id). A null
/// in any component makes the sequence null.
template <auto... Members>
struct Seq {
  static_assert(sizeof...(Members) > 0,
                "flowlib::Seq<> needs exactly one sequence: a column such as "
                "Seq<&Row::seq>, or a struct sequence such as Seq<&Row::ts, &Row::id> "
                "(R-USING-6).");
  static_assert((detail::data_member_pointer<Members> && ...),
                "flowlib::Seq<...> takes pointers to data members, such as &Row::seq.");
  static_assert(detail::same_class_members<Members...>(),
                "flowlib::Seq<...>: all sequence columns must be members of the same row type.");
  static_assert(detail::all_distinct_members<Members...>(),
                "flowlib::Seq<...>: a sequence column is listed twice.");
  static_assert((detail::column_type_check<detail::member_value_t<Members>, false>::ok && ...));

  using row_type = detail::first_member_class_t<Members...>;
  static constexpr std::size_t size = sizeof...(Members);
  static constexpr auto first_member = std::get<0>(std::tuple{Members...});
  using value_type = std::conditional_t<
      size == 1,
      std::tuple_element_t<0, std::tuple<detail::unwrap_optional_t<detail::member_value_t<Members>>...>>,
      std::tuple<detail::unwrap_optional_t<detail::member_value_t<Members>>...>>;

  std::optional<value_type> operator()(const row_type& r) const {
    if (((is_null(r.*Members)) || ...)) return std::nullopt;
    if constexpr (size == 1) {
      return value_type(unwrap(r.*first_member));
    } else {
      return value_type(unwrap(r.*Members)...);
    }
  }
  /// "seq", or "(ts, id)" for a struct sequence.
  std::string name() const {
    std::size_t i = 0;
    std::string out = size == 1 ? "" : "(";
    ((out += (i ? ", " : ""), out += detail::column_label<Members>(i), ++i), ...);
    if (size != 1) out += ')';
    return out;
  }
  friend bool operator==(const Seq&, const Seq&) = default;

 private:
  template <class T>
  static bool is_null(const T& v) {
    if constexpr (detail::is_optional_v<T>) {
      return !v.has_value();
    } else {
      return false;
    }
  }
  template <class T>
  static const auto& unwrap(const T& v) {
    if constexpr (detail::is_optional_v<T>) {
      return *v;
    } else {
      return v;
    }
  }
};

namespace detail {

/// Traits layer over key extractors: uses the optional hooks when present.
template <key_extractor K>
struct key_traits {
  using row_type = typename K::row_type;
  using value_type = typename K::value_type;

  static std::size_t hash(const K& k, const row_type& r) {
    if constexpr (requires { { k.hash(r) } -> std::convertible_to<std::size_t>; }) {
      return k.hash(r);
    } else {
      return key_hash<value_type>{}(k(r));
    }
  }
  static std::size_t hash(const K&, const value_type& v) { return key_hash<value_type>{}(v); }
  static bool equal(const K& k, const row_type& r, const value_type& v) {
    if constexpr (requires { { k.equal(r, v) } -> std::convertible_to<bool>; }) {
      return k.equal(r, v);
    } else {
      return k(r) == v;
    }
  }
  static bool equal(const K& k, const row_type& a, const row_type& b) {
    if constexpr (requires { { k.equal(a, b) } -> std::convertible_to<bool>; }) {
      return k.equal(a, b);
    } else {
      return k(a) == k(b);
    }
  }
};

}  // namespace detail
}  // namespace flowlib
