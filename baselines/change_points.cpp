#include "change_points.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "statistics.h"

namespace kvbench {

namespace {

// The best split of x[order[0..n)] and its statistic: for each tau in [m, n - m], the scaled
// energy distance between the left and right parts, from running sums over the distance
// matrix (O(n^2) for all splits).
std::pair<int, double> best_split(const std::vector<double>& x, const std::vector<int>& order, int m) {
  const int n = static_cast<int>(order.size());
  const auto d = [&](int i, int j) { return std::fabs(x[static_cast<std::size_t>(order[static_cast<std::size_t>(i)])] -
                                                      x[static_cast<std::size_t>(order[static_cast<std::size_t>(j)])]); };
  // Left within-sum, between-sum and the total of every pair.
  double total = 0.0;
  for (int i = 0; i < n; ++i) {
    for (int j = i + 1; j < n; ++j) total += d(i, j);
  }
  double within_left = 0.0, between = 0.0;
  // between(tau) = sum over i < tau <= j; start at tau = 0 (empty left side).
  int best = -1;
  double best_q = -1.0;
  for (int tau = 1; tau < n; ++tau) {
    // Move point tau - 1 from the right side to the left.
    const int k = tau - 1;
    double to_left = 0.0, to_right = 0.0;
    for (int i = 0; i < k; ++i) to_left += d(i, k);
    for (int j = k + 1; j < n; ++j) to_right += d(k, j);
    between += to_right - to_left;
    within_left += to_left;
    if (tau < m || n - tau < m) continue;
    const double within_right = total - within_left - between;
    const double left = tau, right = n - tau;
    const double e = 2.0 * between / (left * right) - within_left / (left * (left - 1.0) / 2.0) -
                     within_right / (right * (right - 1.0) / 2.0);
    const double q = left * right / n * e;
    if (q > best_q) {
      best_q = q;
      best = tau;
    }
  }
  return {best, best_q};
}

void segment(const std::vector<double>& series, int begin, int end, const ChangePointOptions& o, std::mt19937_64& rng,
             std::vector<ChangePoint>& out) {
  const int n = end - begin;
  if (n < 2 * o.min_segment) return;
  std::vector<double> x(series.begin() + begin, series.begin() + end);
  std::vector<int> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  const auto [tau, q] = best_split(x, order, o.min_segment);
  if (tau < 0) return;
  int as_large = 0;
  for (int r = 0; r < o.permutations; ++r) {
    std::shuffle(order.begin(), order.end(), rng);
    if (best_split(x, order, o.min_segment).second >= q) ++as_large;
  }
  const double p = (as_large + 1.0) / (o.permutations + 1.0);
  if (p > o.significance) return;
  const std::vector<double> left(x.begin(), x.begin() + tau), right(x.begin() + tau, x.end());
  out.push_back({begin + tau, p, median(left), median(right)});
  segment(series, begin, begin + tau, o, rng, out);
  segment(series, begin + tau, end, o, rng, out);
}

}  // namespace

std::vector<ChangePoint> find_change_points(const std::vector<double>& series, const ChangePointOptions& options) {
  std::mt19937_64 rng(options.seed);
  std::vector<ChangePoint> out;
  segment(series, 0, static_cast<int>(series.size()), options, rng, out);
  std::sort(out.begin(), out.end(), [](const ChangePoint& a, const ChangePoint& b) { return a.index < b.index; });
  return out;
}

}  // namespace kvbench
