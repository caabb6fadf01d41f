// benchmarks/support/zipf.hpp
//
// Data generators shared by flowlib's benchmarks.
//
// zipf_distribution<Int>: draws ranks 1..n with P(k) proportional to k^-s
// (s > 0, s != 1 handled alike; s = 0.99 is the usual "skewed keys" setting).
// It uses Hörmann and Derflinger's rejection-inversion method ("Rejection-
// inversion to generate variates from monotone discrete distributions", 1996,
// the algorithm behind Apache Commons' RejectionInversionZipfSampler): O(1)
// time and memory per draw for any n, so a 1e6-key distribution costs no
// table, and the expected number of rejections is below 1.1.
//
// Rank 1 is the most frequent. Benchmarks usually map ranks to keys through
// a random permutation (see `permuted_zipf`) so that hot keys are spread over
// the key space rather than being the smallest keys.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <random>
#include <stdexcept>
#include <vector>

namespace flowlib_bench {

template <class Int = std::uint64_t>
class zipf_distribution {
 public:
  using result_type = Int;

  zipf_distribution(Int n, double s) : n_(n), s_(s) {
    if (n < 1 || !(s > 0.0)) throw std::invalid_argument("zipf_distribution: need n >= 1, s > 0");
    h_integral_x1_ = h_integral(1.5) - 1.0;
    h_integral_n_ = h_integral(static_cast<double>(n_) + 0.5);
    threshold_ = 2.0 - h_integral_inverse(h_integral(2.5) - h(2.0));
  }

  Int n() const noexcept { return n_; }
  double s() const noexcept { return s_; }

  /// A rank in [1, n].
  template <class URBG>
  Int operator()(URBG& g) {
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    for (;;) {
      const double u = h_integral_n_ + unit(g) * (h_integral_x1_ - h_integral_n_);
      const double x = h_integral_inverse(u);
      double k = std::floor(x + 0.5);
      if (k < 1.0) k = 1.0;
      if (k > static_cast<double>(n_)) k = static_cast<double>(n_);
      if (k - x <= threshold_ || u >= h_integral(k + 0.5) - h(k)) return static_cast<Int>(k);
    }
  }

  /// The exact probability of rank `k` (for tests of the generator; O(n)).
  double probability(Int k) const {
    double norm = 0.0;
    for (Int i = 1; i <= n_; ++i) norm += std::pow(static_cast<double>(i), -s_);
    return std::pow(static_cast<double>(k), -s_) / norm;
  }

 private:
  double h(double x) const { return std::exp(-s_ * std::log(x)); }
  // H(x) = ((x^(1-s)) - 1) / (1 - s), written to stay accurate near s = 1.
  double h_integral(double x) const {
    const double log_x = std::log(x);
    return helper2((1.0 - s_) * log_x) * log_x;
  }
  double h_integral_inverse(double x) const {
    double t = x * (1.0 - s_);
    if (t < -1.0) t = -1.0;  // rounding guard: the inverse is defined for t >= -1
    return std::exp(helper1(t) * x);
  }
  // log1p(x) / x, and (exp(x) - 1) / x, both continuous at 0.
  static double helper1(double x) {
    return std::abs(x) > 1e-8 ? std::log1p(x) / x : 1.0 - x * (0.5 - x * (1.0 / 3.0 - 0.25 * x));
  }
  static double helper2(double x) {
    return std::abs(x) > 1e-8 ? std::expm1(x) / x
                              : 1.0 + x * 0.5 * (1.0 + x * (1.0 / 3.0) * (1.0 + 0.25 * x));
  }

  Int n_;
  double s_;
  double h_integral_x1_;
  double h_integral_n_;
  double threshold_;
};

/// Zipf-distributed keys in [0, n): rank r (1 = hottest) is key perm[r - 1],
/// a fixed random permutation, so hot keys are scattered over the key space.
class permuted_zipf {
 public:
  permuted_zipf(std::uint64_t n, double s, std::uint64_t permutation_seed)
      : zipf_(n, s), perm_(n) {
    std::iota(perm_.begin(), perm_.end(), std::uint64_t{0});
    std::mt19937_64 g(permutation_seed);
    std::shuffle(perm_.begin(), perm_.end(), g);
  }
  template <class URBG>
  std::uint64_t operator()(URBG& g) {
    return perm_[zipf_(g) - 1];
  }
  /// The key of rank r (1-based).
  std::uint64_t key_of_rank(std::uint64_t r) const { return perm_[r - 1]; }
  const zipf_distribution<std::uint64_t>& ranks() const noexcept { return zipf_; }

 private:
  zipf_distribution<std::uint64_t> zipf_;
  std::vector<std::uint64_t> perm_;
};

}  // namespace flowlib_bench
