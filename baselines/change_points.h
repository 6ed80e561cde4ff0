// Change points of a metric's history: where a run-to-run series stepped. E-divisive means
// (Matteson and James, 2014; alpha = 1): the split that maximizes the energy distance between
// the two sides, kept when a permutation test says so, then each side again (binary
// segmentation). Distribution-free, so noise and outliers do not make steps. The permutations
// use a fixed seed: the same history gives the same change points.
#pragma once

#include <cstdint>
#include <vector>

namespace kvbench {

struct ChangePointOptions {
  int min_segment = 5;        // points on each side of a change: a step is found after this many runs
  double significance = 0.01; // permutation p-value at most this
  int permutations = 199;
  std::uint64_t seed = 1;
};

struct ChangePoint {
  int index = 0;           // the first point after the change
  double p = 1.0;          // its permutation p-value
  double before = 0.0, after = 0.0;  // medians of the segments on either side
};

// Change points of `series` (in order), sorted by index.
std::vector<ChangePoint> find_change_points(const std::vector<double>& series, const ChangePointOptions& options = {});

}  // namespace kvbench
