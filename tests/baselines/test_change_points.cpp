// Change points on synthetic nightly histories: a planted step is found within one night of
// where it was planted, a flat noisy history gives none, and the answer repeats exactly.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "change_points.h"

using namespace kvbench;

namespace {

// 30 nights of a timing with 5% lognormal noise; from night `step` on, `factor` times slower.
std::vector<double> history(std::uint32_t seed, int step, double factor, int nights = 30) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> noise(0.0, 0.05);
  std::vector<double> v;
  for (int i = 0; i < nights; ++i) v.push_back(10.0 * (i >= step ? factor : 1.0) * std::exp(noise(rng)));
  return v;
}

}  // namespace

TEST_CASE("A step planted in 30 nights is found within one night of it", "[trend]") {
  for (std::uint32_t seed = 1; seed <= 20; ++seed) {
    for (int step : {8, 15, 22}) {
      const auto points = find_change_points(history(seed, step, 1.25));
      INFO("seed " << seed << " step " << step);
      REQUIRE(points.size() >= 1);
      int nearest = 1000;
      for (const ChangePoint& p : points) nearest = std::min(nearest, std::abs(p.index - step));
      CHECK(nearest <= 1);
      CHECK(points.size() <= 2);
    }
  }
  const auto points = find_change_points(history(3, 15, 1.25));
  REQUIRE(!points.empty());
  CHECK(points[0].after > points[0].before * 1.15);
}

TEST_CASE("A flat noisy history has no change point, and the answer repeats", "[trend]") {
  int found = 0;
  for (std::uint32_t seed = 1; seed <= 50; ++seed) found += find_change_points(history(seed, 1000, 1.0)).empty() ? 0 : 1;
  CHECK(found <= 2);  // 1% significance, 50 histories
  // An outlier night is not a step.
  auto spiky = history(7, 1000, 1.0);
  spiky[12] *= 3.0;
  CHECK(find_change_points(spiky).empty());
  const auto a = find_change_points(history(9, 18, 1.3)), b = find_change_points(history(9, 18, 1.3));
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    CHECK(a[i].index == b[i].index);
    CHECK(a[i].p == b[i].p);
  }
  // Too short to have a change of the minimum segment on each side.
  CHECK(find_change_points({1.0, 2.0, 3.0, 10.0, 11.0, 12.0}).empty());
}
