// The gate's statistics against textbook values, and their coverage and error rates on
// synthetic lognormal samples (the shape of host timings).
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "statistics.h"

using namespace kvbench;

namespace {

std::vector<double> lognormal_logs(std::mt19937& rng, int n, double log_mean, double cv) {
  const double sigma = std::sqrt(std::log1p(cv * cv));
  std::normal_distribution<double> normal(log_mean, sigma);
  std::vector<double> v(static_cast<std::size_t>(n));
  for (double& x : v) x = normal(rng);
  return v;
}

}  // namespace

TEST_CASE("Welch's t-test matches the textbook example", "[stats]") {
  // Welch (1947) as worked on Wikipedia's "Welch's t-test", example 1: t = 2.46, df = 24.9,
  // p = 0.021 (reference values computed independently: Satterthwaite df, Simpson-integrated t
  // density).
  const std::vector<double> a = {27.5, 21.0, 19.0, 23.6, 17.0, 17.9, 16.9, 20.1, 21.9, 22.6, 23.1, 19.6, 19.0, 21.7, 21.4};
  const std::vector<double> b = {27.1, 22.0, 20.8, 23.4, 23.4, 23.5, 25.8, 22.0, 24.8, 20.2, 21.9, 22.1, 22.9, 20.5, 24.4};
  const WelchResult r = welch_t_test(a, b);
  CHECK(r.t == Approx(2.455356398).epsilon(1e-9));
  CHECK(r.df == Approx(24.98852929).epsilon(1e-9));
  CHECK(r.p == Approx(0.021378).epsilon(1e-4));
  CHECK(r.low < r.difference);
  CHECK(r.high > r.difference);
  CHECK(r.low > 0.0);  // p < 0.05: the 95% interval excludes 0
  // No spread: equal samples are p 1, different ones p 0.
  CHECK(welch_t_test({1.0, 1.0, 1.0}, {1.0, 1.0}).p == 1.0);
  CHECK(welch_t_test({1.0, 1.0, 1.0}, {2.0, 2.0}).p == 0.0);
  // At 5 vs 5 a clear difference reaches far below an exact rank test's floor of 2/252.
  CHECK(welch_t_test({1.00, 1.01, 0.99, 1.00, 1.02}, {1.20, 1.21, 1.19, 1.22, 1.20}).p < 1e-6);
}

TEST_CASE("The Mann-Whitney null distribution is exact", "[stats]") {
  // m = n = 5: counts 1, 1, 2, 3, 5, 7, ... of C(10, 5) = 252 arrangements.
  CHECK(mann_whitney_cdf(0, 5, 5) == Approx(1.0 / 252));
  CHECK(mann_whitney_cdf(2, 5, 5) == Approx(4.0 / 252));
  CHECK(mann_whitney_cdf(3, 5, 5) == Approx(7.0 / 252));
  CHECK(mann_whitney_cdf(12, 5, 5) == Approx(0.5));  // symmetric about mn / 2
  CHECK(mann_whitney_cdf(24, 5, 5) == Approx(251.0 / 252));
  CHECK(mann_whitney_cdf(1, 3, 2) == Approx(2.0 / 10));
  // The Hodges-Lehmann interval at 5 vs 5 is [d(3), d(23)], covering 1 - 8/252.
  std::vector<double> a = {0, 1, 2, 3, 4}, b = {10, 11, 12, 13, 14};
  const ShiftInterval hl = hodges_lehmann(a, b);
  CHECK(hl.estimate == 10.0);
  CHECK(hl.coverage == Approx(1.0 - 8.0 / 252));
  CHECK(hl.low == 7.0);
  CHECK(hl.high == 13.0);
}

TEST_CASE("Benjamini-Hochberg on the published example", "[stats]") {
  // Benjamini and Hochberg (1995), section 3.2: 15 p-values; at q = 0.05 the four smallest are
  // rejected.
  const std::vector<double> p = {0.0001, 0.0004, 0.0019, 0.0095, 0.0201, 0.0278, 0.0298, 0.0344,
                                 0.0459, 0.3240, 0.4262, 0.5719, 0.6528, 0.7590, 1.000};
  const std::vector<double> q = benjamini_hochberg(p);
  int rejected = 0;
  for (double x : q) rejected += x <= 0.05 ? 1 : 0;
  CHECK(rejected == 4);
  CHECK(q[3] == Approx(0.0095 * 15 / 4));
  CHECK(q[0] == Approx(0.0015));
  CHECK(q[14] == 1.0);
  // Monotone in p, and never below p.
  for (std::size_t i = 0; i < p.size(); ++i) CHECK(q[i] >= p[i]);
  for (std::size_t i = 1; i < p.size(); ++i) CHECK(q[i] >= q[i - 1]);
}

TEST_CASE("The interval of the log ratio covers the true ratio at its nominal rate", "[stats]") {
  std::mt19937 rng(20261201);
  for (int n : {5, 10}) {
    for (double cv : {0.03, 0.15}) {
      int covered_welch = 0, covered_hl = 0;
      const double truth = std::log(1.07);
      for (int trial = 0; trial < 1000; ++trial) {
        const auto a = lognormal_logs(rng, n, 0.0, cv);
        const auto b = lognormal_logs(rng, n, truth, cv);
        const WelchResult w = welch_t_test(a, b);
        covered_welch += w.low <= truth && truth <= w.high ? 1 : 0;
        const ShiftInterval hl = hodges_lehmann(a, b);
        covered_hl += hl.low <= truth && truth <= hl.high ? 1 : 0;
      }
      INFO("n " << n << " cv " << cv << ": Welch " << covered_welch << ", Hodges-Lehmann " << covered_hl << " of 1000");
      CHECK(covered_welch >= 930);
      CHECK(covered_welch <= 970);
      // Hodges-Lehmann is distribution-free but conservative at small n (0.968 at 5 vs 5).
      CHECK(covered_hl >= 940);
    }
  }
}

TEST_CASE("Repetitions to settle a comparison grow with the noise", "[stats]") {
  const int at3 = repetitions_to_settle(std::sqrt(std::log1p(0.03 * 0.03)), 0.10);
  const int at5 = repetitions_to_settle(std::sqrt(std::log1p(0.05 * 0.05)), 0.10);
  CHECK(at3 >= 3);
  CHECK(at5 > at3);
  CHECK(repetitions_to_settle(0.5, 0.05) > 100);
}
