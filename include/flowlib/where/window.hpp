// flowlib/where/window.hpp
//
// flowlib::where::window: the interval of one column that a predicate
// selects in one update, as expr::window(ctx) computes it (where/expr.hpp).
// REPLACE WHERE compares the windows of two updates to decide whether the
// second may be incremental (R-WHERE-7): it may when the current window is
// covered by the previous one (every value the current predicate selects
// was selected before, so no row the previous update excluded comes in).
//
// A bound (where::endpoint) is a value plus whether it is inclusive; an absent bound is
// unbounded. Bounds compare with where::compare (SQL semantics: int64 with
// double, a date with a timestamp at its midnight UTC). covers() is exact
// on the bounds it is given and conservative across representations: for
// an integer or date column `x > 4` and `x >= 5` select the same values,
// but the window does not know the column's type, so it does not treat them
// as equal (covers() may say false where the sets are equal; never true
// where they are not). A false answer only costs a full recompute.
#pragma once

#include <flowlib/where/value.hpp>

#include <optional>
#include <string>
#include <utility>

namespace flowlib::where {

/// @brief One side of a window: a value and whether it is included.
struct endpoint {
  value at;
  bool inclusive = true;
  friend bool operator==(const endpoint&, const endpoint&) = default;
};

/// @brief The interval [lower, upper] of one column (either side may be
/// open or absent). See the header comment.
class window {
 public:
  window() = default;
  window(std::string column, std::optional<endpoint> lower, std::optional<endpoint> upper)
      : column_(std::move(column)), lower_(std::move(lower)), upper_(std::move(upper)) {}

  /// @brief The column the window constrains.
  const std::string& column() const noexcept { return column_; }
  /// @brief The lower bound (nullopt: unbounded below).
  const std::optional<endpoint>& lower() const noexcept { return lower_; }
  /// @brief The upper bound (nullopt: unbounded above).
  const std::optional<endpoint>& upper() const noexcept { return upper_; }

  /// @brief True when no value lies in the window (lower above upper, or
  /// equal with either side exclusive).
  bool empty() const {
    if (!lower_ || !upper_) return false;
    const auto c = compare(lower_->at, upper_->at);
    if (!c || *c == compare_result::unknown) return true;
    if (*c == compare_result::greater) return true;
    return *c == compare_result::equal && !(lower_->inclusive && upper_->inclusive);
  }

  /// @brief True when `v` lies in the window (a null never does; nor does a
  /// value that cannot be compared with the bounds).
  bool contains(const value& v) const {
    if (v.is_null()) return false;
    if (lower_) {
      const auto c = compare(v, lower_->at);
      if (!c || *c == compare_result::unknown || *c == compare_result::less) return false;
      if (*c == compare_result::equal && !lower_->inclusive) return false;
    }
    if (upper_) {
      const auto c = compare(v, upper_->at);
      if (!c || *c == compare_result::unknown || *c == compare_result::greater) return false;
      if (*c == compare_result::equal && !upper_->inclusive) return false;
    }
    return true;
  }

  /// @brief True when every value in `other` is in *this: same column, and
  /// each of this window's bounds is at or outside the other's (an empty
  /// `other` on the same column is covered).
  bool covers(const window& other) const {
    if (column_ != other.column_) return false;
    if (other.empty()) return true;
    return side_covers(lower_, other.lower_, compare_result::less) &&
           side_covers(upper_, other.upper_, compare_result::greater);
  }

  friend bool operator==(const window&, const window&) = default;

  /// @brief "event_date in [DATE '2026-01-01', +inf)": brackets for inclusive
  /// bounds, parentheses for exclusive or absent ones.
  std::string to_string() const {
    std::string s = column_ + " in ";
    s += lower_ ? (lower_->inclusive ? "[" : "(") + lower_->at.to_string() : "(-inf";
    s += ", ";
    s += upper_ ? upper_->at.to_string() + (upper_->inclusive ? "]" : ")") : "+inf)";
    return s;
  }

 private:
  // `mine` covers `theirs` on one side: `outward` is the direction in which
  // a bound is wider (less for the lower side, greater for the upper side).
  static bool side_covers(const std::optional<endpoint>& mine, const std::optional<endpoint>& theirs,
                          compare_result outward) {
    if (!mine) return true;
    if (!theirs) return false;
    const auto c = compare(mine->at, theirs->at);
    if (!c || *c == compare_result::unknown) return false;
    if (*c == outward) return true;
    if (*c == compare_result::equal) return mine->inclusive || !theirs->inclusive;
    return false;
  }

  std::string column_;
  std::optional<endpoint> lower_;
  std::optional<endpoint> upper_;
};

}  // namespace flowlib::where
