// flowlib/where/expr.hpp
//
// flowlib::where::expr: a REPLACE WHERE predicate as a runtime value, an
// immutable expression tree shared by copies (copying an expr copies a
// pointer). Built with C++ operators:
//
//   namespace w = flowlib::where;
//   w::expr p = w::col("event_date") >= w::current_date() - w::days(7);
//   w::expr q = w::col("region").in({"asia", "emea"}) || !(w::col("qty") > 3);
//   w::expr r = w::col("ts") >= w::now() - w::hours(6) && w::rand() < 0.5;
//
// C++ literals (integers, floating point, strings, bool, dates, time
// points, intervals) convert to literal nodes. Nodes: column references,
// literals, current_date() / now() (the update's logical clock, from
// where::context), rand() (uniform in [0, 1), seeded from the context),
// + and -, the six comparisons, between (inclusive), in, is_null, and, or,
// not. Semantics are SQL's, with three-valued logic: a comparison with a
// null is unknown, `not unknown` is unknown, and a row matches only when the
// predicate is true.
//
// Because the tree is data, the library inspects it: columns(),
// deterministic(), uses_clock(), to_string() (stable SQL-like text) and
// window(ctx) (the single-column interval it selects, where/window.hpp).
// Evaluation against a row type is where/bind.hpp.
#pragma once

#include <flowlib/error.hpp>
#include <flowlib/where/value.hpp>
#include <flowlib/where/window.hpp>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace flowlib::where {

namespace detail {

/// The operation of one node.
enum class op : std::uint8_t {
  literal, column, current_date, now, rand,              // leaves
  add, sub,                                              // arithmetic
  eq, ne, lt, le, gt, ge,                                // comparisons
  between, in, is_null,                                  // predicates
  and_, or_, not_,                                       // logic
};

/// One immutable node of an expression tree.
struct node {
  op o = op::literal;
  value lit;                                         // literal
  std::string name;                                  // column
  std::vector<std::shared_ptr<const node>> kids;     // operands, in order
};

using node_ptr = std::shared_ptr<const node>;

inline node_ptr make(op o, std::vector<node_ptr> kids) {
  auto n = std::make_shared<node>();
  n->o = o;
  n->kids = std::move(kids);
  return n;
}

constexpr bool is_comparison(op o) noexcept { return o >= op::eq && o <= op::ge; }

/// True when `n`'s value does not depend on the row nor on rand(): it can be
/// computed once per update (literals and the clock).
inline bool row_independent(const node& n) {
  if (n.o == op::column || n.o == op::rand) return false;
  return std::all_of(n.kids.begin(), n.kids.end(), [](const node_ptr& k) { return row_independent(*k); });
}

inline bool any_op(const node& n, op a, op b) {
  if (n.o == a || n.o == b) return true;
  return std::any_of(n.kids.begin(), n.kids.end(), [&](const node_ptr& k) { return any_op(*k, a, b); });
}

inline void collect_columns(const node& n, std::vector<std::string>& out) {
  if (n.o == op::column) out.push_back(n.name);
  for (const auto& k : n.kids) collect_columns(*k, out);
}

inline bool same(const node& a, const node& b) {
  if (a.o != b.o || a.kids.size() != b.kids.size()) return false;
  if (a.o == op::literal && !(a.lit == b.lit)) return false;
  if (a.o == op::column && a.name != b.name) return false;
  for (std::size_t i = 0; i < a.kids.size(); ++i)
    if (!same(*a.kids[i], *b.kids[i])) return false;
  return true;
}

constexpr const char* op_text(op o) noexcept {
  switch (o) {
    case op::add: return " + ";
    case op::sub: return " - ";
    case op::eq: return " = ";
    case op::ne: return " <> ";
    case op::lt: return " < ";
    case op::le: return " <= ";
    case op::gt: return " > ";
    case op::ge: return " >= ";
    default: return " ? ";
  }
}

inline std::string quote_column(const std::string& name) {
  const bool plain = !name.empty() && !(name[0] >= '0' && name[0] <= '9') &&
                     std::all_of(name.begin(), name.end(), [](char c) {
                       return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                              (c >= '0' && c <= '9') || c == '_';
                     });
  if (plain) return name;
  std::string q = "`";
  for (char c : name) {
    if (c == '`') q += '`';
    q += c;
  }
  return q + "`";
}

// Precedence levels for printing: or 1, and 2, not 3, predicates 4,
// additive 5, primary 6. A child printed below the level its parent needs is
// parenthesised.
inline int level(op o) noexcept {
  switch (o) {
    case op::or_: return 1;
    case op::and_: return 2;
    case op::not_: return 3;
    case op::add:
    case op::sub: return 5;
    case op::literal:
    case op::column:
    case op::current_date:
    case op::now:
    case op::rand: return 6;
    default: return 4;
  }
}

inline void print(const node& n, int need, std::string& s) {
  const bool paren = level(n.o) < need;
  if (paren) s += '(';
  // `left text right`: the first two operands around an operator, printed
  // at the levels `left` and `right` ask for.
  const auto infix = [&](int left, std::string_view text, int right) {
    print(*n.kids[0], left, s);
    s += text;
    print(*n.kids[1], right, s);
  };
  switch (n.o) {
    case op::literal: s += n.lit.to_string(); break;
    case op::column: s += quote_column(n.name); break;
    case op::current_date: s += "current_date()"; break;
    case op::now: s += "now()"; break;
    case op::rand: s += "rand()"; break;
    case op::add:
    case op::sub:
    case op::eq:
    case op::ne:
    case op::lt:
    case op::le:
    case op::gt:
    case op::ge:
      // A binary operator. + and - associate to the left: a right operand
      // of their own level keeps its parentheses (a - (b - c)).
      infix(5, op_text(n.o), n.o == op::add || n.o == op::sub ? 6 : 5);
      break;
    case op::between:
      infix(5, " BETWEEN ", 5);
      s += " AND ";
      print(*n.kids[2], 5, s);
      break;
    case op::in:
      print(*n.kids[0], 5, s);
      s += " IN (";
      for (std::size_t i = 1; i < n.kids.size(); ++i) {
        if (i > 1) s += ", ";
        print(*n.kids[i], 1, s);
      }
      s += ')';
      break;
    case op::is_null:
      print(*n.kids[0], 5, s);
      s += " IS NULL";
      break;
    case op::and_:
      infix(2, " AND ", 3);
      break;
    case op::or_:
      infix(1, " OR ", 2);
      break;
    case op::not_:
      s += "NOT ";
      print(*n.kids[0], 6, s);  // NOT (x > 3): always parenthesise a non-primary
      break;
  }
  if (paren) s += ')';
}

/// A tri-state truth value as a value: TRUE, FALSE or NULL (unknown).
inline value truth(std::optional<bool> t) { return t ? value(*t) : value{}; }
inline std::optional<bool> truth_of(const value& v) {
  if (v.is_null()) return std::nullopt;
  return v.as_bool();
}

[[noreturn]] inline void type_error(const std::string& what) {
  throw flowlib::error(errc::invalid_argument, "where", "", "", what);
}

/// Evaluates a row-independent sub-tree (literals and the clock) for one
/// update. Throws flowlib::error when operands do not combine.
inline value fold(const node& n, const context& ctx) {
  switch (n.o) {
    case op::literal: return n.lit;
    case op::current_date: return value(ctx.current_date());
    case op::now: return value(ctx.now);
    case op::column:
    case op::rand: type_error("internal: fold() on a row-dependent node");
    case op::add:
    case op::sub: {
      const value a = fold(*n.kids[0], ctx), b = fold(*n.kids[1], ctx);
      auto r = add(a, b, n.o == op::sub);
      if (!r)
        type_error("cannot compute " + a.to_string() + op_text(n.o) + b.to_string() + " (" +
                   std::string(to_string(a.type())) + " and " + std::string(to_string(b.type())) + ")");
      return *r;
    }
    case op::eq:
    case op::ne:
    case op::lt:
    case op::le:
    case op::gt:
    case op::ge: {
      const value a = fold(*n.kids[0], ctx), b = fold(*n.kids[1], ctx);
      const auto c = compare(a, b);
      if (!c)
        type_error("cannot compare " + a.to_string() + " with " + b.to_string() + " (" +
                   std::string(to_string(a.type())) + " and " + std::string(to_string(b.type())) + ")");
      if (*c == compare_result::unknown) return value{};
      switch (n.o) {
        case op::eq: return value(*c == compare_result::equal);
        case op::ne: return value(*c != compare_result::equal);
        case op::lt: return value(*c == compare_result::less);
        case op::le: return value(*c != compare_result::greater);
        case op::gt: return value(*c == compare_result::greater);
        default: return value(*c != compare_result::less);
      }
    }
    case op::between: {
      auto ge = std::make_shared<node>(node{op::ge, {}, {}, {n.kids[0], n.kids[1]}});
      auto le = std::make_shared<node>(node{op::le, {}, {}, {n.kids[0], n.kids[2]}});
      return fold(node{op::and_, {}, {}, {ge, le}}, ctx);
    }
    case op::in: {
      const value x = fold(*n.kids[0], ctx);
      bool unknown = x.is_null();
      for (std::size_t i = 1; i < n.kids.size(); ++i) {
        const value e = fold(node{op::eq, {}, {}, {n.kids[0], n.kids[i]}}, ctx);
        if (e.is_null()) unknown = true;
        else if (e.as_bool()) return value(true);
      }
      return unknown ? value{} : value(false);
    }
    case op::is_null: return value(fold(*n.kids[0], ctx).is_null());
    case op::and_: {
      const auto a = truth_of(fold(*n.kids[0], ctx)), b = truth_of(fold(*n.kids[1], ctx));
      if ((a && !*a) || (b && !*b)) return value(false);
      return truth(a && b ? std::optional<bool>(true) : std::nullopt);
    }
    case op::or_: {
      const auto a = truth_of(fold(*n.kids[0], ctx)), b = truth_of(fold(*n.kids[1], ctx));
      if ((a && *a) || (b && *b)) return value(true);
      return truth(a && b ? std::optional<bool>(false) : std::nullopt);
    }
    case op::not_: {
      const auto a = truth_of(fold(*n.kids[0], ctx));
      return truth(a ? std::optional<bool>(!*a) : std::nullopt);
    }
  }
  return value{};
}

}  // namespace detail

/// @brief A predicate or scalar expression; see the header comment. A
/// default-constructed expr is the literal TRUE (matches every row).
class expr {
 public:
  /// @brief The literal TRUE.
  expr() : n_(literal_node(value(true))) {}
  /// @brief A literal.
  expr(const value& v) : n_(literal_node(v)) {}
  /// @brief A literal from a C++ value (integers, floating point, strings,
  /// bool, dates, time points, intervals, std::nullopt).
  template <class T>
    requires value_source<T> && (!std::same_as<std::remove_cvref_t<T>, value>)
  expr(T&& v) : n_(literal_node(value(std::forward<T>(v)))) {}
  /// @brief Wraps a node (the library's own builders use this).
  explicit expr(detail::node_ptr n) noexcept : n_(std::move(n)) {}

  /// @brief `*this BETWEEN lo AND hi` (both ends inclusive).
  expr between(const expr& lo, const expr& hi) const {
    return expr(detail::make(detail::op::between, {n_, lo.n_, hi.n_}));
  }
  /// @brief `*this IN (items...)`.
  expr in(std::initializer_list<expr> items) const {
    return in_impl(items.begin(), items.end());
  }
  /// @brief `*this IN (values...)`, for lists built at run time.
  expr in(const std::vector<value>& items) const {
    std::vector<expr> e(items.begin(), items.end());
    return in_impl(e.begin(), e.end());
  }
  /// @brief `*this IS NULL` (true or false, never unknown).
  expr is_null() const { return expr(detail::make(detail::op::is_null, {n_})); }
  /// @brief `NOT (*this IS NULL)`.
  expr is_not_null() const { return !is_null(); }

  /// @brief The referenced column names, sorted, without duplicates.
  std::vector<std::string> columns() const {
    std::vector<std::string> c;
    detail::collect_columns(*n_, c);
    std::sort(c.begin(), c.end());
    c.erase(std::unique(c.begin(), c.end()), c.end());
    return c;
  }
  /// @brief False when rand() appears. The clock functions are
  /// deterministic: for a given context they have one value (R-WHERE-7).
  bool deterministic() const { return !detail::any_op(*n_, detail::op::rand, detail::op::rand); }
  /// @brief True when current_date() or now() appears.
  bool uses_clock() const { return detail::any_op(*n_, detail::op::current_date, detail::op::now); }
  /// @brief Stable SQL-like text: `event_date >= current_date() - INTERVAL 7 DAYS`.
  std::string to_string() const {
    std::string s;
    detail::print(*n_, 0, s);
    return s;
  }
  /// @brief Structural identity: the same tree (same operations, columns
  /// and literals). (`==` builds a comparison.)
  bool same(const expr& other) const { return detail::same(*n_, *other.n_); }

  /// @brief The single-column interval the predicate selects under `ctx`:
  /// when it is a comparison (=, <, <=, >, >=) of a column with a value
  /// computable from literals and the clock, a BETWEEN of such values, or a
  /// conjunction (AND) of those on one column (bounds combine to the
  /// tightest). std::nullopt otherwise: "not a single-column range" (OR,
  /// IN, <>, IS NULL, NOT, two columns, rand(), a bound that is NULL or
  /// cannot be computed, bounds that cannot be compared).
  std::optional<where::window> window(const context& ctx) const;

  /// @brief The root node (for the library's own passes: binding, push-down).
  const detail::node_ptr& root() const noexcept { return n_; }

  // Operators build nodes. Hidden friends: found through an expr operand,
  // so `w::col("x") > 3` and `3 < w::col("x")` both work, and nothing else
  // in the program gains these overloads.
  friend expr operator==(const expr& a, const expr& b) { return bin(detail::op::eq, a, b); }
  friend expr operator!=(const expr& a, const expr& b) { return bin(detail::op::ne, a, b); }
  friend expr operator<(const expr& a, const expr& b) { return bin(detail::op::lt, a, b); }
  friend expr operator<=(const expr& a, const expr& b) { return bin(detail::op::le, a, b); }
  friend expr operator>(const expr& a, const expr& b) { return bin(detail::op::gt, a, b); }
  friend expr operator>=(const expr& a, const expr& b) { return bin(detail::op::ge, a, b); }
  friend expr operator+(const expr& a, const expr& b) { return bin(detail::op::add, a, b); }
  friend expr operator-(const expr& a, const expr& b) { return bin(detail::op::sub, a, b); }
  friend expr operator&&(const expr& a, const expr& b) { return bin(detail::op::and_, a, b); }
  friend expr operator||(const expr& a, const expr& b) { return bin(detail::op::or_, a, b); }
  friend expr operator!(const expr& a) { return expr(detail::make(detail::op::not_, {a.n_})); }

 private:
  static detail::node_ptr literal_node(value v) {
    auto n = std::make_shared<detail::node>();
    n->o = detail::op::literal;
    n->lit = std::move(v);
    return n;
  }
  static expr bin(detail::op o, const expr& a, const expr& b) {
    return expr(detail::make(o, {a.n_, b.n_}));
  }
  template <class It>
  expr in_impl(It first, It last) const {
    std::vector<detail::node_ptr> k{n_};
    for (; first != last; ++first) k.push_back(first->n_);
    return expr(detail::make(detail::op::in, std::move(k)));
  }

  detail::node_ptr n_;
};

/// @brief A reference to the column called `name` (FLOWLIB_SCHEMA's name).
inline expr col(std::string name) {
  auto n = std::make_shared<detail::node>();
  n->o = detail::op::column;
  n->name = std::move(name);
  return expr(std::move(n));
}
/// @brief A literal (w::lit(3), w::lit("asia")); C++ values convert implicitly too.
inline expr lit(const value& v) { return expr(v); }
/// @brief The literal NULL.
inline expr null() { return expr(value{}); }
/// @brief The update's date (UTC day of context::now). Deterministic.
inline expr current_date() { return expr(detail::make(detail::op::current_date, {})); }
/// @brief The update's logical clock (context::now). Deterministic.
inline expr now() { return expr(detail::make(detail::op::now, {})); }
/// @brief A uniform draw in [0, 1) per evaluation, from a generator seeded by
/// context::seed. Makes the predicate non-deterministic.
inline expr rand() { return expr(detail::make(detail::op::rand, {})); }

namespace detail {

// One conjunct `column op K` (op one of eq/lt/le/gt/ge, K row-independent),
// or `column BETWEEN K1 AND K2`, tightened into lo/hi. False when the
// conjunct is not of that shape or names another column.
struct window_builder {
  const context& ctx;
  std::string column;
  std::optional<endpoint> lo, hi;

  static op flip(op o) noexcept {
    switch (o) {
      case op::lt: return op::gt;
      case op::le: return op::ge;
      case op::gt: return op::lt;
      case op::ge: return op::le;
      default: return o;
    }
  }

  bool use_column(const node& c) {
    if (c.o != op::column) return false;
    if (column.empty()) column = c.name;
    return column == c.name;
  }

  // Narrows one side to `b` when `b` is tighter; false when incomparable.
  static bool tighten(std::optional<endpoint>& side, endpoint b, compare_result tighter) {
    if (b.at.is_null()) return false;
    if (!side) {
      side = std::move(b);
      return true;
    }
    const auto c = compare(b.at, side->at);
    if (!c || *c == compare_result::unknown) return false;
    if (*c == tighter || (*c == compare_result::equal && !b.inclusive)) side = std::move(b);
    return true;
  }
  bool lower(value v, bool inclusive) {
    return tighten(lo, endpoint{std::move(v), inclusive}, compare_result::greater);
  }
  bool upper(value v, bool inclusive) {
    return tighten(hi, endpoint{std::move(v), inclusive}, compare_result::less);
  }

  bool add(const node& n) {
    if (n.o == op::and_) return add(*n.kids[0]) && add(*n.kids[1]);
    if (n.o == op::between) {
      if (!use_column(*n.kids[0]) || !row_independent(*n.kids[1]) || !row_independent(*n.kids[2]))
        return false;
      return lower(fold(*n.kids[1], ctx), true) && upper(fold(*n.kids[2], ctx), true);
    }
    if (!is_comparison(n.o) || n.o == op::ne) return false;
    op o = n.o;
    const node* c = n.kids[0].get();
    const node* k = n.kids[1].get();
    if (c->o != op::column) {
      std::swap(c, k);
      o = flip(o);
    }
    if (!use_column(*c) || !row_independent(*k)) return false;
    value v = fold(*k, ctx);
    switch (o) {
      case op::eq: return lower(v, true) && upper(std::move(v), true);
      case op::lt: return upper(std::move(v), false);
      case op::le: return upper(std::move(v), true);
      case op::gt: return lower(std::move(v), false);
      default: return lower(std::move(v), true);
    }
  }
};

}  // namespace detail

inline std::optional<window> expr::window(const context& ctx) const {
  detail::window_builder b{ctx, {}, {}, {}};
  try {
    if (!b.add(*n_)) return std::nullopt;
  } catch (const flowlib::error&) {
    return std::nullopt;  // a bound that cannot be computed: binding reports it
  }
  if (b.lo && b.hi && !compare(b.lo->at, b.hi->at)) return std::nullopt;  // incomparable bounds
  return where::window(std::move(b.column), std::move(b.lo), std::move(b.hi));
}

}  // namespace flowlib::where
