// flowlib/detail/target_key.hpp
//
// target_key<K, Target>: the key of a target row, for a flow whose key K is
// read from the rows it is given (a change or a snapshot row) and whose
// target has other rows: the target's columns of the same FLOWLIB_SCHEMA
// names as K's columns, in K's order. A flow that rebuilds its index from
// its target's rows (read_checkpoint) uses it. Supported: K =
// flowlib::Key<&Row::col, ...> over a row type with a schema, whose every
// column the target has, of the same type (`supported`). Internal.
#pragma once

#include <flowlib/columns.hpp>
#include <flowlib/schema.hpp>

#include <cstddef>
#include <string_view>
#include <tuple>
#include <type_traits>

namespace flowlib::detail {

template <class K, class Target>
struct target_key {
  static constexpr bool supported = false;
};

template <auto... Ms, class Target>
  requires has_schema<Target> && has_schema<typename Key<Ms...>::row_type>
struct target_key<Key<Ms...>, Target> {
 private:
  using S = schema_of<Target>;
  template <auto M>
  static constexpr std::size_t index = S::index_of(member_name<M>());
  template <auto M>
  static constexpr bool column_ok() {
    if constexpr (member_name<M>().empty() || index<M> >= S::size) {
      return false;
    } else {
      return std::is_same_v<typename column_at<S, index<M>>::type::value_type,
                            member_value_t<M>>;
    }
  }
  template <auto M>
  static const member_value_t<M>& get(const Target& t) noexcept {
    return column_at<S, index<M>>::type::get(t);
  }

 public:
  static constexpr bool supported = (column_ok<Ms>() && ...);
  using key_type = typename Key<Ms...>::value_type;

  /// The key of target row `t`.
  static key_type of(const Target& t)
    requires supported
  {
    if constexpr (sizeof...(Ms) == 1) {
      return (get<Ms>(t), ...);
    } else {
      return key_type(get<Ms>(t)...);
    }
  }
};

}  // namespace flowlib::detail
