#include "pareto.h"

#include <stdexcept>

namespace kvbench {

bool dominates(const std::vector<double>& a, const std::vector<double>& b, const std::vector<Better>& directions) {
  if (a.size() != directions.size() || b.size() != directions.size()) {
    throw std::invalid_argument("pareto: a point's values do not match the objectives");
  }
  bool strictly = false;
  for (std::size_t i = 0; i < directions.size(); ++i) {
    if (directions[i] == Better::None) throw std::invalid_argument("pareto: an objective without a direction");
    const bool lower = directions[i] == Better::Lower;
    const double ai = lower ? a[i] : -a[i], bi = lower ? b[i] : -b[i];
    if (ai > bi) return false;
    if (ai < bi) strictly = true;
  }
  return strictly;
}

ParetoResult pareto_front(const std::vector<ParetoPoint>& points, const std::vector<Better>& directions) {
  ParetoResult out;
  out.on_front.assign(points.size(), true);
  out.dominated_by.assign(points.size(), {});
  for (std::size_t i = 0; i < points.size(); ++i) {
    for (std::size_t j = 0; j < points.size(); ++j) {
      if (i != j && dominates(points[j].values, points[i].values, directions)) {
        out.on_front[i] = false;
        out.dominated_by[i].push_back(j);
      }
    }
  }
  return out;
}

}  // namespace kvbench
