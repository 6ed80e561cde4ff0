// The statistics of the regression gate, on raw per-repetition samples of one (case, metric):
// host timings are ratios (a change is "x% slower"), so everything works on log values.
//
// - The point estimate and the 95% interval of the ratio candidate / baseline are the
//   Hodges-Lehmann shift of the log samples (the median of every pairwise difference) and the
//   distribution-free interval from the exact Mann-Whitney null distribution (normal
//   approximation past 50 per side): at 5 vs 5 it covers with probability 0.968, unlike a
//   percentile bootstrap.
// - The p-value is Welch's t-test on the log values, whose p can be small at 5 vs 5 (an exact
//   rank test cannot go below 2/252).
// - Benjamini-Hochberg adjusts the p-values of one comparison's host tests for the false
//   discovery rate.
#pragma once

#include <cstddef>
#include <vector>

namespace kvbench {

struct WelchResult {
  double difference = 0.0;  // mean(b) - mean(a)
  double low = 0.0, high = 0.0;  // its interval at the confidence asked
  double t = 0.0;   // difference / standard error
  double df = 0.0;  // Welch-Satterthwaite degrees of freedom
  double p = 1.0;   // two-sided
};
// Welch's t-test of two samples (each at least 2 values) and the interval of the difference of
// their means; sample values as given (callers pass logs, where a lognormal timing is normal
// and the interval covers at its nominal rate). Samples with no spread give p 1 when equal,
// p 0 when not, and a point interval.
WelchResult welch_t_test(const std::vector<double>& a, const std::vector<double>& b, double confidence = 0.95);
// The same with a between-run variance component: each sample's mean is one run's, and runs of
// one configuration scatter by `between` (a variance, estimated with `between_df` degrees of
// freedom) beyond what their repetitions show. The standard error adds it on both sides and the
// Satterthwaite degrees of freedom take its uncertainty.
WelchResult welch_t_test(const std::vector<double>& a, const std::vector<double>& b, double between, double between_df,
                         double confidence = 0.95);

// The paired t-test: the mean of per-pair differences (b_i - a_i, at least 2 pairs), its
// interval and two-sided p on n - 1 degrees of freedom. A load that rises and falls across the
// pairs moves both members of a pair alike and cancels in the differences.
WelchResult paired_t_test(const std::vector<double>& differences, double confidence = 0.95);

struct ShiftInterval {
  double estimate = 0.0;  // Hodges-Lehmann: median of b_j - a_i over all pairs
  double low = 0.0, high = 0.0;
  double coverage = 0.0;  // the interval's exact (or approximate) coverage, >= the confidence asked
};
// The shift of b against a (location difference b - a) with a distribution-free interval of at
// least `confidence` coverage; both samples need at least 2 values.
ShiftInterval hodges_lehmann(const std::vector<double>& a, const std::vector<double>& b, double confidence = 0.95);

// P(U <= u) under the null for the Mann-Whitney U of samples of sizes m and n (exact).
double mann_whitney_cdf(int u, int m, int n);

// Benjamini-Hochberg adjusted p-values (q-values), in the input's order: reject p_i at false
// discovery rate q when adjusted_i <= q.
std::vector<double> benjamini_hochberg(const std::vector<double>& p);

// Repetitions per side that would likely settle a comparison: the n at which a two-sided test
// at `alpha` has power `power` against a relative change `threshold`, for log values with
// standard deviation `sd` (normal approximation, at least 3).
int repetitions_to_settle(double sd, double threshold, double alpha = 0.05, double power = 0.8);

// Sample helpers.
double mean(const std::vector<double>& v);
double sample_sd(const std::vector<double>& v);  // n - 1; 0 for fewer than 2 values
double median(std::vector<double> v);

}  // namespace kvbench
