// flowlib/where/bind.hpp
//
// Evaluating a predicate on rows of one type:
//
//   w::bound<Event> b = w::bind<Event>(p);      // resolves and type-checks, once
//   b.prepare(w::context{now, seed});           // once per update: the clock
//   for (const Event& e : events) if (b(e)) ...; // per row: true only when TRUE
//
// bind<Row>(p) resolves p's column names through FLOWLIB_SCHEMA and checks
// types once; it throws flowlib::error (errc::invalid_argument) naming the
// column when Row has no such column, when its C++ type is not readable
// (where/column.hpp), or when it is compared or combined with a value of an
// incompatible kind (string with number, ...); the message says which kinds.
//
// The result is a small program: a vector of nodes indexed by position,
// each column read through a function pointer generated for that schema
// column, and every row-independent sub-tree (literals and clock
// arithmetic) folded into one constant by prepare(ctx). A comparison of a
// column with such a constant is a single node calling a comparator
// instantiated for the column's C++ type. Evaluating a row allocates
// nothing and looks nothing up.
//
// prepare(ctx) must be called before evaluating a predicate that uses the
// clock (otherwise operator() throws flowlib::error saying so); bind()
// prepares a clock-free predicate with a default context itself. rand()
// draws from a generator seeded by ctx.seed at each prepare(): the same
// seed and the same rows in the same order give the same draws.
//
// Threads: a bound predicate is a value; evaluating one from several threads
// at once is safe unless it uses rand() (the generator is its state). Copy
// it per thread in that case.
#pragma once

#include <flowlib/error.hpp>
#include <flowlib/schema.hpp>
#include <flowlib/where/column.hpp>
#include <flowlib/where/expr.hpp>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace flowlib::where {

namespace detail {

/// Operation of a bound node.
enum class bop : std::uint8_t {
  konst, column, rand, add, sub, cmp, fast_cmp, between, in, fast_in, is_null, and_, or_, not_
};

template <class Row>
struct bnode {
  bop o = bop::konst;
  std::uint8_t cmp = 0;        // comparison: 0 eq, 1 ne, 2 lt, 3 le, 4 gt, 5 ge
  std::uint32_t a = 0, b = 0, c = 0;  // children; for `in`: a = x, [b, c) item range in items_
  std::uint32_t slot = 0;      // konst / fast_cmp: index of the folded constant
  cell k;                      // konst / fast_cmp: the constant
  cell (*get)(const Row&) = nullptr;                  // column
  tri (*fast)(const cell&, const Row&) = nullptr;     // fast_cmp
};

inline int cmp_index(op o) noexcept { return static_cast<int>(o) - static_cast<int>(op::eq); }

inline tri to_tri(const cell& c) noexcept {
  if (c.k == kind::boolean) return c.i ? tri::yes : tri::no;
  return tri::unknown;
}

inline tri tri_and(tri a, tri b) noexcept {
  if (a == tri::no || b == tri::no) return tri::no;
  return a == tri::yes && b == tri::yes ? tri::yes : tri::unknown;
}
inline tri tri_or(tri a, tri b) noexcept {
  if (a == tri::yes || b == tri::yes) return tri::yes;
  return a == tri::no && b == tri::no ? tri::no : tri::unknown;
}

/// a + b or a - b on cells (where::add's rules; binding checked the kinds).
inline cell add_cells(const cell& a, const cell& b, bool negate) noexcept {
  cell r;
  if (a.k == kind::null || b.k == kind::null) return r;
  const std::int64_t sign = negate ? -1 : 1;
  const bool an = a.k == kind::int64 || a.k == kind::float64;
  const bool bn = b.k == kind::int64 || b.k == kind::float64;
  if (an && bn) {
    if (a.k == kind::int64 && b.k == kind::int64) {
      r.k = kind::int64;
      r.i = a.i + sign * b.i;
    } else {
      auto num = [](const cell& c) { return c.k == kind::int64 ? static_cast<double>(c.i) : c.d; };
      r.k = kind::float64;
      r.d = num(a) + static_cast<double>(sign) * num(b);
    }
    return r;
  }
  if (a.k == kind::interval && b.k == kind::interval) {
    r.k = kind::interval;
    r.i = a.i + sign * b.i;
    r.j = a.j + sign * b.j;
    return r;
  }
  if (b.k == kind::interval && (a.k == kind::date || a.k == kind::timestamp)) {
    if (a.k == kind::date && b.j == 0) {
      r.k = kind::date;
      r.i = a.i + sign * b.i;
    } else {
      r.k = kind::timestamp;
      const std::int64_t t = a.k == kind::date ? a.i * micros_per_day : a.i;
      r.i = t + sign * (b.i * micros_per_day + b.j);
    }
    return r;
  }
  if (!negate && a.k == kind::interval) return add_cells(b, a, false);
  return r;
}

/// A representative value of kind k (for type-checking row-dependent nodes).
inline value sample(kind k) {
  switch (k) {
    case kind::null: return value{};
    case kind::boolean: return value(true);
    case kind::int64: return value(std::int64_t{0});
    case kind::float64: return value(0.0);
    case kind::string: return value(std::string());
    case kind::date: return value(date_type{});
    case kind::timestamp: return value(timestamp_type{});
    case kind::interval: return value(interval{});
  }
  return value{};
}

/// The first column named in a sub-tree ("" when none), for messages.
inline std::string first_column(const node& n) {
  if (n.o == op::column) return n.name;
  for (const auto& k : n.kids) {
    std::string c = first_column(*k);
    if (!c.empty()) return c;
  }
  return {};
}

}  // namespace detail

/// @brief A predicate bound to Row; see the header comment.
template <class Row>
class bound {
  static_assert(has_schema<Row>,
                "where::bind<Row>: Row needs FLOWLIB_SCHEMA(Row, columns...) at namespace scope in "
                "Row's namespace, so that the predicate's column names can be resolved");

 public:
  /// @brief Binds `p` (see bind<Row>). `flow` names the flow in errors.
  explicit bound(expr p, std::string_view flow = "where") : p_(std::move(p)), flow_(flow) {
    root_ = compile(*p_.root());
    const value t = type_of(*p_.root());
    if (!t.is_null() && t.type() != kind::boolean)
      fail(detail::first_column(*p_.root()),
           "the predicate `" + p_.to_string() + "` is not a condition (it computes a " +
               std::string(to_string(t.type())) + ", not a bool)");
    consts_.resize(folds_.size());
    clocked_ = p_.uses_clock();
    if (!clocked_) prepare(context{});
  }

  bound(const bound& o)
      : p_(o.p_), flow_(o.flow_), nodes_(o.nodes_), items_(o.items_), folds_(o.folds_),
        consts_(o.consts_), root_(o.root_), clocked_(o.clocked_), ready_(o.ready_), rng_(o.rng_) {
    relink();
  }
  bound& operator=(const bound& o) {
    if (this != &o) {
      bound copy(o);
      *this = std::move(copy);
    }
    return *this;
  }
  bound(bound&&) noexcept = default;
  bound& operator=(bound&&) noexcept = default;
  ~bound() = default;

  /// @brief Computes the clock and literal sub-trees for one update and
  /// seeds rand(). Throws flowlib::error when clock arithmetic does not
  /// combine (it cannot, once bound: binding checked the kinds); the bound
  /// predicate is then as it was.
  bound& prepare(const context& ctx) {
    std::vector<value> next;
    next.reserve(folds_.size());
    for (const detail::node* f : folds_) next.push_back(detail::fold(*f, ctx));
    consts_.swap(next);
    relink();
    rng_ = ctx.seed ^ 0x6A09E667F3BCC909ULL;
    ready_ = true;
    return *this;
  }

  /// @brief True when the predicate is TRUE for `r` (false for FALSE and
  /// for unknown). Throws flowlib::error when it uses the clock and
  /// prepare() was not called.
  bool operator()(const Row& r) const {
    if (!ready_) [[unlikely]] not_prepared();
    return quick(root_, r) == detail::tri::yes;
  }
  /// @brief The three-valued result: true, false, or nullopt for unknown.
  std::optional<bool> evaluate(const Row& r) const {
    if (!ready_) [[unlikely]] not_prepared();
    const detail::tri t = test(root_, r);
    if (t == detail::tri::unknown) return std::nullopt;
    return t == detail::tri::yes;
  }

  /// @brief The predicate this was bound from.
  const expr& predicate() const noexcept { return p_; }

 private:
  using node_t = detail::bnode<Row>;

  [[noreturn]] void fail(const std::string& column, const std::string& what) const {
    throw flowlib::error(errc::invalid_argument, flow_, column, "", what);
  }
  [[noreturn]] void not_prepared() const {
    fail("", "the predicate `" + p_.to_string() +
                 "` uses the clock: call prepare(context) before evaluating it");
  }

  std::uint32_t push(node_t n) {
    nodes_.push_back(n);
    return static_cast<std::uint32_t>(nodes_.size() - 1);
  }

  std::uint32_t fold_point(const detail::node& n) {
    node_t b;
    b.o = detail::bop::konst;
    b.slot = static_cast<std::uint32_t>(folds_.size());
    folds_.push_back(&n);
    return push(b);
  }

  // A comparison: a fast one when it sets a column against a row-independent
  // value (either way round), else one over the two compiled operands.
  std::uint32_t compile_comparison(const detail::node& n) {
    using detail::op;
    node_t b;
    int ci = detail::cmp_index(n.o);
    const detail::node* c = n.kids[0].get();
    const detail::node* k = n.kids[1].get();
    if (c->o != op::column) {
      std::swap(c, k);
      static constexpr int flipped[6] = {0, 1, 4, 5, 2, 3};
      ci = flipped[ci];
    }
    if (c->o == op::column && detail::row_independent(*k)) {
      b.o = detail::bop::fast_cmp;
      b.cmp = static_cast<std::uint8_t>(ci);
      b.fast = detail::require_column<Row>(c->name, flow_).cmp[static_cast<std::size_t>(ci)];
      b.slot = nodes_[fold_point(*k)].slot;
      return push(b);
    }
    b.o = detail::bop::cmp;
    b.cmp = static_cast<std::uint8_t>(detail::cmp_index(n.o));
    b.a = compile(*n.kids[0]);
    b.b = compile(*n.kids[1]);
    return push(b);
  }

  // Builds the bound program for `n`; returns its node index.
  std::uint32_t compile(const detail::node& n) {
    using detail::op;
    if (detail::row_independent(n)) return fold_point(n);
    if (detail::is_comparison(n.o)) return compile_comparison(n);
    node_t b;
    // A node of `o` over the two compiled operands.
    const auto binary = [&](detail::bop o) {
      b.o = o;
      b.a = compile(*n.kids[0]);
      b.b = compile(*n.kids[1]);
      return push(b);
    };
    switch (n.o) {
      case op::column: {
        b.o = detail::bop::column;
        b.get = detail::require_column<Row>(n.name, flow_).get;
        return push(b);
      }
      case op::rand: b.o = detail::bop::rand; return push(b);
      case op::add:
      case op::sub: return binary(n.o == op::add ? detail::bop::add : detail::bop::sub);
      case op::between:
        // `column BETWEEN k1 AND k2` is exactly `column >= k1 AND column <= k2`
        // (SQL defines it so, nulls included): two fast comparisons.
        if (n.kids[0]->o == op::column && detail::row_independent(*n.kids[1]) &&
            detail::row_independent(*n.kids[2])) {
          const auto& e = detail::require_column<Row>(n.kids[0]->name, flow_);
          node_t lo, hi;
          lo.o = hi.o = detail::bop::fast_cmp;
          lo.cmp = 5;
          lo.fast = e.cmp[5];
          lo.slot = nodes_[fold_point(*n.kids[1])].slot;
          hi.cmp = 3;
          hi.fast = e.cmp[3];
          hi.slot = nodes_[fold_point(*n.kids[2])].slot;
          b.o = detail::bop::and_;
          b.a = push(lo);
          b.b = push(hi);
          return push(b);
        }
        b.o = detail::bop::between;
        b.a = compile(*n.kids[0]);
        b.b = compile(*n.kids[1]);
        b.c = compile(*n.kids[2]);
        return push(b);
      case op::in: {
        b.o = detail::bop::in;
        b.a = compile(*n.kids[0]);
        if (n.kids[0]->o == op::column &&
            std::all_of(n.kids.begin() + 1, n.kids.end(),
                        [](const detail::node_ptr& k) { return detail::row_independent(*k); })) {
          b.o = detail::bop::fast_in;  // the column read once, items are constants
          b.get = nodes_[b.a].get;
        }
        std::vector<std::uint32_t> ks;
        for (std::size_t i = 1; i < n.kids.size(); ++i) ks.push_back(compile(*n.kids[i]));
        b.b = static_cast<std::uint32_t>(items_.size());
        items_.insert(items_.end(), ks.begin(), ks.end());
        b.c = static_cast<std::uint32_t>(items_.size());
        return push(b);
      }
      case op::is_null: b.o = detail::bop::is_null; b.a = compile(*n.kids[0]); return push(b);
      case op::and_:
      case op::or_: return binary(n.o == op::and_ ? detail::bop::and_ : detail::bop::or_);
      case op::not_: b.o = detail::bop::not_; b.a = compile(*n.kids[0]); return push(b);
      default: return fold_point(n);  // unreachable: leaves are row-independent, comparisons above
    }
  }

  // Type check: a representative value of what `n` computes (row-independent
  // sub-trees are folded with a default context: the clock changes values,
  // never kinds). Throws naming the column on a mismatch.
  value type_of(const detail::node& n) const {
    using detail::op;
    if (detail::row_independent(n)) {
      try {
        return detail::fold(n, context{});
      } catch (const flowlib::error& e) {
        fail("", e.what());
      }
    }
    auto kinds = [](const value& a, const value& b) {
      return "(" + std::string(to_string(a.type())) + " and " + std::string(to_string(b.type())) + ")";
    };
    auto check_cmp = [&](const detail::node& x, const detail::node& y) {
      const value a = type_of(x), b = type_of(y);
      if (!detail::comparable(a.type(), b.type())) {
        std::string col = detail::first_column(x);
        if (col.empty()) col = detail::first_column(y);
        fail(col, "cannot compare " + describe(x) + " with " + describe(y) + " " + kinds(a, b));
      }
    };
    auto check_bool = [&](const detail::node& x, const char* what) {
      const value a = type_of(x);
      if (!a.is_null() && a.type() != kind::boolean)
        fail(detail::first_column(x), std::string("the operand of ") + what + ", " + describe(x) +
                                          ", is a " + std::string(to_string(a.type())) + ", not a bool");
    };
    switch (n.o) {
      case op::column: {
        const auto& e = detail::require_column<Row>(n.name, flow_);
        return detail::sample(e.k);
      }
      case op::rand: return value(0.5);
      case op::add:
      case op::sub: {
        const value a = type_of(*n.kids[0]), b = type_of(*n.kids[1]);
        auto r = add(a, b, n.o == op::sub);
        if (!r)
          fail(detail::first_column(n), "cannot compute " + describe(n) + " " + kinds(a, b));
        return *r;
      }
      case op::between:
        check_cmp(*n.kids[0], *n.kids[1]);
        check_cmp(*n.kids[0], *n.kids[2]);
        return value(true);
      case op::in:
        for (std::size_t i = 1; i < n.kids.size(); ++i) check_cmp(*n.kids[0], *n.kids[i]);
        return value(true);
      case op::is_null: type_of(*n.kids[0]); return value(true);
      case op::and_:
        check_bool(*n.kids[0], "AND");
        check_bool(*n.kids[1], "AND");
        return value(true);
      case op::or_:
        check_bool(*n.kids[0], "OR");
        check_bool(*n.kids[1], "OR");
        return value(true);
      case op::not_: check_bool(*n.kids[0], "NOT"); return value(true);
      default:  // comparisons
        check_cmp(*n.kids[0], *n.kids[1]);
        return value(true);
    }
  }

  static std::string describe(const detail::node& n) {
    if (n.o == detail::op::column) return "column '" + n.name + "'";
    std::string s;
    detail::print(n, 0, s);
    return "`" + s + "`";
  }

  // Points the constant cells at consts_ (after prepare and after a copy).
  void relink() {
    for (auto& n : nodes_)
      if (n.o == detail::bop::konst || n.o == detail::bop::fast_cmp) n.k = detail::to_cell(consts_[n.slot]);
  }

  double next_rand() const noexcept {
    // splitmix64: small, fast, and the same sequence on every platform.
    std::uint64_t z = (rng_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    return static_cast<double>(z >> 11) * 0x1.0p-53;
  }

  detail::cell val(std::uint32_t i, const Row& r) const {
    const node_t& n = nodes_[i];
    switch (n.o) {
      case detail::bop::konst: return n.k;
      case detail::bop::column: return n.get(r);
      case detail::bop::rand: {
        detail::cell c;
        c.k = kind::float64;
        c.d = next_rand();
        return c;
      }
      case detail::bop::add:
      case detail::bop::sub:
        return detail::add_cells(val(n.a, r), val(n.b, r), n.o == detail::bop::sub);
      default: {  // a condition used as a value
        const detail::tri t = test(i, r);
        detail::cell c;
        if (t != detail::tri::unknown) {
          c.k = kind::boolean;
          c.i = t == detail::tri::yes;
        }
        return c;
      }
    }
  }

  // test(), with the common leaf (a column against a constant) called
  // directly rather than through test()'s dispatch.
  detail::tri quick(std::uint32_t i, const Row& r) const {
    const node_t& n = nodes_[i];
    if (n.o == detail::bop::fast_cmp) return n.fast(n.k, r);
    return test(i, r);
  }

  detail::tri test(std::uint32_t i, const Row& r) const {
    using detail::tri;
    const node_t& n = nodes_[i];
    switch (n.o) {
      case detail::bop::fast_cmp: return n.fast(n.k, r);
      case detail::bop::and_: {
        const tri a = quick(n.a, r);
        if (a == tri::no) return tri::no;
        return detail::tri_and(a, quick(n.b, r));
      }
      case detail::bop::or_: {
        const tri a = quick(n.a, r);
        if (a == tri::yes) return tri::yes;
        return detail::tri_or(a, quick(n.b, r));
      }
      case detail::bop::not_: {
        const tri a = quick(n.a, r);
        return a == tri::unknown ? a : (a == tri::yes ? tri::no : tri::yes);
      }
      case detail::bop::cmp:
        return detail::apply_cmp(n.cmp, detail::compare_cells(val(n.a, r), val(n.b, r)));
      case detail::bop::between: {
        const detail::cell x = val(n.a, r);
        return detail::tri_and(detail::apply_cmp(5, detail::compare_cells(x, val(n.b, r))),
                               detail::apply_cmp(3, detail::compare_cells(x, val(n.c, r))));
      }
      case detail::bop::in: {
        const detail::cell x = val(n.a, r);
        tri t = tri::no;
        for (std::uint32_t j = n.b; j < n.c; ++j) {
          t = detail::tri_or(t, detail::apply_cmp(0, detail::compare_cells(x, val(items_[j], r))));
          if (t == tri::yes) break;
        }
        return t;
      }
      case detail::bop::fast_in: {
        const detail::cell x = n.get(r);
        if (x.k == kind::null) return tri::unknown;
        tri t = tri::no;
        for (std::uint32_t j = n.b; j < n.c; ++j) {
          const detail::cell& k = nodes_[items_[j]].k;
          if (k.k == kind::null) t = tri::unknown;
          else if (detail::compare_cells(x, k) == compare_result::equal) return tri::yes;
        }
        return t;
      }
      case detail::bop::is_null: return val(n.a, r).k == kind::null ? tri::yes : tri::no;
      default: return detail::to_tri(val(i, r));
    }
  }

  expr p_;
  std::string flow_;
  std::vector<node_t> nodes_;
  std::vector<std::uint32_t> items_;
  std::vector<const detail::node*> folds_;  // into p_'s tree (shared, immutable)
  std::vector<value> consts_;               // folds_' values for the prepared update
  std::uint32_t root_ = 0;
  bool clocked_ = false;
  bool ready_ = false;
  mutable std::uint64_t rng_ = 0;
};

/// @brief Binds `p` to Row: resolves the columns and checks the kinds once
/// (throws flowlib::error naming the column; `flow` names the flow in the
/// message). See the header comment.
template <class Row>
bound<Row> bind(const expr& p, std::string_view flow = "where") {
  return bound<Row>(p, flow);
}

/// @brief Binds and prepares for `ctx` in one step.
template <class Row>
bound<Row> bind(const expr& p, const context& ctx, std::string_view flow = "where") {
  bound<Row> b(p, flow);
  b.prepare(ctx);
  return b;
}

/// @brief True when Row has a schema and a column of every name `p`
/// references (whether the predicate can be pushed down to a source of
/// Row). Never throws for a missing column; kinds are checked by bind().
template <class Row>
bool binds_to(const expr& p) {
  if constexpr (!has_schema<Row>) {
    return false;
  } else {
    for (const auto& c : p.columns())
      if (!schema_of<Row>::contains(c)) return false;
    return true;
  }
}

}  // namespace flowlib::where
