// flowlib/schema.hpp
//
// FLOWLIB_SCHEMA(Row, col1, col2, ...) declares, at compile time, the names
// and member pointers of a row type's columns. flowlib uses it to name
// columns in error messages, to print and sort rows, and to map one row type
// onto another by column name (as `INSERT ... BY NAME` does).
//
//   struct Event { std::int64_t region_id; std::string device_type; std::int64_t seq; };
//   FLOWLIB_SCHEMA(Event, region_id, device_type, seq);
//
// A column may be given a name other than its member's, as a parenthesised
// pair: names that are not valid C++ identifiers (or are reserved, such as the
// "__START_AT"/"__END_AT" columns of an SCD type 2 target) are spelled so:
//
//   struct UserHistory { std::int64_t userId; std::string city;
//                        std::int64_t start_at; std::optional<std::int64_t> end_at; };
//   FLOWLIB_SCHEMA(UserHistory, userId, city, (start_at, "__START_AT"), (end_at, "__END_AT"));
//
// Contract: write the macro at namespace scope, in the namespace that
// declares Row (it defines a function found by argument-dependent lookup,
// like AbslHashValue). Row must be a class name without template commas
// (use an alias for a template specialisation). At most 64 columns. Columns
// not listed are invisible to flowlib (by-name mapping ignores them).
#pragma once

#include <flowlib/detail/fixed_string.hpp>
#include <flowlib/detail/preprocessor.hpp>
#include <flowlib/detail/type_traits.hpp>

#include <array>
#include <cstddef>
#include <string_view>
#include <type_traits>

namespace flowlib {

/// @brief Tag through which FLOWLIB_SCHEMA's function is found by ADL.
template <class Row>
struct schema_tag {};

/// @brief One column: a data member and its name.
template <auto Member, detail::fixed_string Name>
struct column {
  static_assert(detail::data_member_pointer<Member>,
                "flowlib::column needs a pointer to a data member, such as &Row::id");
  using row_type = detail::member_class_t<Member>;
  using value_type = detail::member_value_t<Member>;
  static constexpr auto member = Member;
  static constexpr std::string_view name = Name.view();
  static constexpr const value_type& get(const row_type& r) noexcept { return r.*Member; }
  static constexpr value_type& get(row_type& r) noexcept { return r.*Member; }
};

/// @brief The columns of Row, in declaration order. Produced by FLOWLIB_SCHEMA.
template <class Row, detail::fixed_string RowName, class... Cols>
struct schema {
  using row_type = Row;
  using columns = detail::type_list<Cols...>;
  static constexpr std::size_t size = sizeof...(Cols);
  static constexpr std::string_view name = RowName.view();
  static constexpr std::array<std::string_view, size> names{Cols::name...};

  static_assert((std::is_same_v<typename Cols::row_type, Row> && ...),
                "FLOWLIB_SCHEMA(Row, ...): every column must be a data member declared "
                "in Row itself");

  /// Index of the column called `n`, or `size` when Row has no such column.
  static constexpr std::size_t index_of(std::string_view n) noexcept {
    for (std::size_t i = 0; i < size; ++i) {
      if (names[i] == n) return i;
    }
    return size;
  }
  static constexpr bool contains(std::string_view n) noexcept { return index_of(n) != size; }

  /// Calls f(column<...>{}) for every column, in order.
  template <class F>
  static constexpr void for_each(F&& f) {
    (f(Cols{}), ...);
  }

 private:
  static constexpr bool names_unique() {
    for (std::size_t i = 0; i < size; ++i)
      for (std::size_t j = i + 1; j < size; ++j)
        if (names[i] == names[j]) return false;
    return true;
  }
  static_assert(names_unique(), "FLOWLIB_SCHEMA(Row, ...): a column is listed twice");
};

/// @brief True when FLOWLIB_SCHEMA(Row, ...) is visible for Row.
template <class Row>
concept has_schema = requires { flowlib_schema_of(schema_tag<Row>{}); };

/// @brief The schema type of Row. Requires FLOWLIB_SCHEMA(Row, ...).
template <class Row>
  requires has_schema<Row>
using schema_of = decltype(flowlib_schema_of(schema_tag<Row>{}));

namespace detail {

template <class Schema, std::size_t I>
struct column_at;
template <class Row, fixed_string N, class... Cols, std::size_t I>
struct column_at<schema<Row, N, Cols...>, I> {
  using type = std::tuple_element_t<I, std::tuple<Cols...>>;
};

/// The schema's name for member M ("" when Row has no schema or M is not listed).
template <auto M>
constexpr std::string_view member_name() noexcept {
  using Row = member_class_t<M>;
  if constexpr (has_schema<Row>) {
    std::string_view found;
    schema_of<Row>::for_each([&](auto col) {
      // decltype of the constexpr static member is const-qualified: compare
      // the member pointer types without it.
      if constexpr (std::is_same_v<std::remove_cv_t<decltype(decltype(col)::member)>,
                                   decltype(M)>) {
        if (decltype(col)::member == M) found = decltype(col)::name;
      }
    });
    return found;
  } else {
    return {};
  }
}

}  // namespace detail

/// @brief The column of Row called Name, or void when there is none.
template <class Row, detail::fixed_string Name>
  requires has_schema<Row>
struct column_named {
 private:
  using S = schema_of<Row>;
  static constexpr std::size_t index = S::index_of(Name.view());
  template <std::size_t I>
  static auto pick() {
    if constexpr (I < S::size) {
      return typename detail::column_at<S, I>::type{};
    } else {
      return;
    }
  }

 public:
  using type = decltype(pick<index>());
};
template <class Row, detail::fixed_string Name>
using column_named_t = typename column_named<Row, Name>::type;

}  // namespace flowlib

// A column is either a member name (`city`, named "city") or a parenthesised
// pair `(member, "name")` giving it another name (see FLOWLIB_SCHEMA).
#define FLOWLIB_DETAIL_IS_PAREN(x) FLOWLIB_DETAIL_IS_PAREN_CHECK(FLOWLIB_DETAIL_IS_PAREN_PROBE x)
#define FLOWLIB_DETAIL_IS_PAREN_PROBE(...) ~, 1,
#define FLOWLIB_DETAIL_IS_PAREN_CHECK(...) FLOWLIB_DETAIL_IS_PAREN_CHECK_N(__VA_ARGS__, 0, )
#define FLOWLIB_DETAIL_IS_PAREN_CHECK_N(x, n, ...) n
#define FLOWLIB_DETAIL_UNPAREN(...) __VA_ARGS__
#define FLOWLIB_DETAIL_SCHEMA_COLUMN(Row, c) \
  FLOWLIB_DETAIL_CAT(FLOWLIB_DETAIL_SCHEMA_COLUMN_, FLOWLIB_DETAIL_IS_PAREN(c))(Row, c)
#define FLOWLIB_DETAIL_SCHEMA_COLUMN_0(Row, c) ::flowlib::column<&Row::c, #c>
#define FLOWLIB_DETAIL_SCHEMA_COLUMN_1(Row, c) \
  FLOWLIB_DETAIL_EXPAND(FLOWLIB_DETAIL_SCHEMA_COLUMN_AS FLOWLIB_DETAIL_EXPAND((Row, FLOWLIB_DETAIL_UNPAREN c)))
#define FLOWLIB_DETAIL_SCHEMA_COLUMN_AS(Row, member, name) ::flowlib::column<&Row::member, name>

/// FLOWLIB_SCHEMA(Row, columns...): see the header comment. The trailing
/// static_assert lets the user's semicolon end the declaration cleanly.
#define FLOWLIB_SCHEMA(Row, ...)                                                        \
  [[maybe_unused]] constexpr auto flowlib_schema_of(::flowlib::schema_tag<Row>) noexcept { \
    return ::flowlib::schema<Row, #Row,                                               \
                             FLOWLIB_DETAIL_FOR_EACH(FLOWLIB_DETAIL_SCHEMA_COLUMN, Row, \
                                                     __VA_ARGS__)>{};                 \
  }                                                                                   \
  static_assert(true)
