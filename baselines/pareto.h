// Pareto fronts: which configurations no other beats on every objective at once. A point
// dominates another when it is at least as good on every objective and strictly better on one;
// "good" follows each objective's direction (lower or higher is better). Equal points do not
// dominate each other, so both stay on the front.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "metric_table.h"
#include "run_view.h"

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

// A run's fronts, one group per (model, workload, SoC) in case order.
struct ParetoGroup {
  std::string model, workload, soc;
  std::vector<std::string> objectives;  // metric names
  std::vector<ParetoPoint> points;      // policies with every objective
  ParetoResult result;
  std::vector<std::pair<std::string, std::string>> incomplete;  // policy, why it has no point
  // Policies whose weights, KV and reserve do not fit the SoC's memory (fits_in_memory 0): left
  // out of the front, or, with include_unfit, points of it marked unfit.
  std::vector<std::pair<std::string, std::string>> unfit;  // policy, by how much it does not fit
  std::vector<bool> point_fits;                              // per point
};

// The fronts of a run's cases (both views of one run: host figures on host cases, modelled ones
// elsewhere). Throws kv::InputError for a metric that is unknown or has no direction.
std::vector<ParetoGroup> pareto_groups(const RunView& host_view, const RunView& model_view, const std::vector<std::string>& objectives,
                                       const std::string& soc, bool include_unfit = false);

}  // namespace kvbench
