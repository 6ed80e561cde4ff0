// Pareto fronts: which configurations no other beats on every objective at once. A point
// dominates another when it is at least as good on every objective and strictly better on one;
// "good" follows each objective's direction (lower or higher is better). Equal points do not
// dominate each other, so both stay on the front.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "metric_table.h"

namespace kvbench {

struct ParetoPoint {
  std::string label;
  std::vector<double> values;  // one per objective, finite
};

struct ParetoResult {
  std::vector<bool> on_front;                       // per point
  std::vector<std::vector<std::size_t>> dominated_by;  // per point: the points that dominate it
};

// directions: one per objective, Lower or Higher (None is a caller error: std::invalid_argument).
ParetoResult pareto_front(const std::vector<ParetoPoint>& points, const std::vector<Better>& directions);

// Whether a dominates b under `directions`.
bool dominates(const std::vector<double>& a, const std::vector<double>& b, const std::vector<Better>& directions);

}  // namespace kvbench
