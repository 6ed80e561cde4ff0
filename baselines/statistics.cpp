#include "statistics.h"

#include <algorithm>
#include <boost/math/distributions/normal.hpp>
#include <boost/math/distributions/students_t.hpp>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>

namespace kvbench {

double mean(const std::vector<double>& v) {
  if (v.empty()) return 0.0;
  return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

double sample_sd(const std::vector<double>& v) {
  if (v.size() < 2) return 0.0;
  const double m = mean(v);
  double sum = 0.0;
  for (double x : v) sum += (x - m) * (x - m);
  return std::sqrt(sum / static_cast<double>(v.size() - 1));
}

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  const std::size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  const double upper = v[mid];
  if (v.size() % 2 == 1) return upper;
  return (*std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid)) + upper) / 2.0;
}

WelchResult welch_t_test(const std::vector<double>& a, const std::vector<double>& b, double confidence) {
  return welch_t_test(a, b, 0.0, 1.0, confidence);
}

WelchResult welch_t_test(const std::vector<double>& a, const std::vector<double>& b, double between, double between_df,
                         double confidence) {
  if (a.size() < 2 || b.size() < 2) throw std::invalid_argument("welch_t_test: each sample needs at least 2 values");
  const double na = static_cast<double>(a.size()), nb = static_cast<double>(b.size());
  const double wa = sample_sd(a) * sample_sd(a) / na, wb = sample_sd(b) * sample_sd(b) / nb;
  const double va = wa + between, vb = wb + between;
  const double diff = mean(b) - mean(a);
  WelchResult r;
  r.difference = r.low = r.high = diff;
  if (va + vb == 0.0) {
    // No spread: the samples are equal or differ for certain.
    r.t = diff == 0.0 ? 0.0 : std::copysign(std::numeric_limits<double>::infinity(), diff);
    r.df = na + nb - 2.0;
    r.p = diff == 0.0 ? 1.0 : 0.0;
    return r;
  }
  r.t = diff / std::sqrt(va + vb);
  // Satterthwaite over the four variance estimates: each side's within-run part and the shared
  // between-run part counted twice.
  const double between_part = between > 0.0 ? (2.0 * between) * (2.0 * between) / std::max(between_df, 1.0) : 0.0;
  r.df = (va + vb) * (va + vb) / (wa * wa / (na - 1.0) + wb * wb / (nb - 1.0) + between_part);
  const boost::math::students_t_distribution<double> t(r.df);
  r.p = std::min(1.0, 2.0 * boost::math::cdf(t, -std::fabs(r.t)));
  const double half = boost::math::quantile(t, 1.0 - (1.0 - confidence) / 2.0) * std::sqrt(va + vb);
  r.low = diff - half;
  r.high = diff + half;
  return r;
}

WelchResult paired_t_test(const std::vector<double>& d, double confidence) {
  if (d.size() < 2) throw std::invalid_argument("paired_t_test: needs at least 2 pairs");
  const double n = static_cast<double>(d.size());
  const double se = sample_sd(d) / std::sqrt(n);
  WelchResult r;
  r.difference = r.low = r.high = mean(d);
  r.df = n - 1.0;
  if (se == 0.0) {
    r.t = r.difference == 0.0 ? 0.0 : std::copysign(std::numeric_limits<double>::infinity(), r.difference);
    r.p = r.difference == 0.0 ? 1.0 : 0.0;
    return r;
  }
  r.t = r.difference / se;
  const boost::math::students_t_distribution<double> t(r.df);
  r.p = std::min(1.0, 2.0 * boost::math::cdf(t, -std::fabs(r.t)));
  const double half = boost::math::quantile(t, 1.0 - (1.0 - confidence) / 2.0) * se;
  r.low = r.difference - half;
  r.high = r.difference + half;
  return r;
}

namespace {

// Counts of U = 0..m*n under the null: the coefficients of the Gaussian binomial
// [m+n choose m] in q, built factor by factor so every intermediate is itself a Gaussian
// binomial (non-negative, and exact for the small U a tail needs).
std::vector<double> mann_whitney_counts(int m, int n) {
  std::vector<double> c(static_cast<std::size_t>(m) * n + 1, 0.0);
  c[0] = 1.0;
  int degree = 0;
  for (int i = 1; i <= m; ++i) {
    // Multiply by (1 - q^(n+i)), then divide by (1 - q^i).
    const int shift = n + i;
    degree += n;
    for (int k = degree; k >= shift; --k) c[static_cast<std::size_t>(k)] -= c[static_cast<std::size_t>(k - shift)];
    for (int k = i; k <= degree; ++k) c[static_cast<std::size_t>(k)] += c[static_cast<std::size_t>(k - i)];
  }
  return c;
}

}  // namespace

double mann_whitney_cdf(int u, int m, int n) {
  if (u < 0) return 0.0;
  if (u >= m * n) return 1.0;
  const std::vector<double> c = mann_whitney_counts(m, n);
  const double total = std::accumulate(c.begin(), c.end(), 0.0);
  return std::accumulate(c.begin(), c.begin() + u + 1, 0.0) / total;
}

ShiftInterval hodges_lehmann(const std::vector<double>& a, const std::vector<double>& b, double confidence) {
  if (a.size() < 2 || b.size() < 2) throw std::invalid_argument("hodges_lehmann: each sample needs at least 2 values");
  std::vector<double> d;
  d.reserve(a.size() * b.size());
  for (double x : a) {
    for (double y : b) d.push_back(y - x);
  }
  std::sort(d.begin(), d.end());
  ShiftInterval r;
  r.estimate = median(d);
  const int m = static_cast<int>(a.size()), n = static_cast<int>(b.size());
  const double tail = (1.0 - confidence) / 2.0;
  // k: the largest count with P(U <= k - 1) <= tail; the interval is [d_(k), d_(mn+1-k)].
  int k = 0;
  double below = 0.0;  // P(U <= k - 1)
  if (static_cast<long long>(m) * n <= 250000) {
    const std::vector<double> c = mann_whitney_counts(m, n);
    const double total = std::accumulate(c.begin(), c.end(), 0.0);
    double cumulative = 0.0;
    for (int u = 0; u < m * n; ++u) {
      cumulative += c[static_cast<std::size_t>(u)] / total;
      if (cumulative > tail) break;
      k = u + 1;
      below = cumulative;
    }
  } else {
    const boost::math::normal_distribution<double> z;
    const double mu = m * static_cast<double>(n) / 2.0;
    const double sd = std::sqrt(m * static_cast<double>(n) * (m + n + 1) / 12.0);
    k = std::max(0, static_cast<int>(std::floor(mu - boost::math::quantile(z, 1.0 - tail) * sd)));
    below = tail;
  }
  if (k < 1) {
    r.low = -std::numeric_limits<double>::infinity();
    r.high = std::numeric_limits<double>::infinity();
    r.coverage = 1.0;
    return r;
  }
  r.low = d[static_cast<std::size_t>(k - 1)];
  r.high = d[d.size() - static_cast<std::size_t>(k)];
  r.coverage = 1.0 - 2.0 * below;
  return r;
}

std::vector<double> benjamini_hochberg(const std::vector<double>& p) {
  const std::size_t n = p.size();
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) { return p[x] < p[y]; });
  std::vector<double> adjusted(n, 1.0);
  double running = 1.0;
  for (std::size_t rank = n; rank >= 1; --rank) {
    const std::size_t i = order[rank - 1];
    running = std::min(running, p[i] * static_cast<double>(n) / static_cast<double>(rank));
    adjusted[i] = std::min(1.0, running);
  }
  return adjusted;
}

int repetitions_to_settle(double sd, double threshold, double alpha, double power) {
  const boost::math::normal_distribution<double> z;
  const double effect = std::log1p(threshold);
  if (!(effect > 0.0) || !(sd >= 0.0)) return 3;
  const double k = (boost::math::quantile(z, 1.0 - alpha / 2.0) + boost::math::quantile(z, power)) * sd / effect;
  return std::max(3, static_cast<int>(std::ceil(2.0 * k * k)));
}

}  // namespace kvbench
