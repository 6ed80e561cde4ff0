#include "pareto.h"

#include <map>
#include <stdexcept>
#include <tuple>

#include "human_units.h"

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

std::vector<ParetoGroup> pareto_groups(const RunView& host_view, const RunView& model_view, const std::vector<std::string>& objectives,
                                       const std::string& soc, bool include_unfit) {
  std::vector<Better> directions;
  for (const std::string& name : objectives) directions.push_back(metric(name).better);
  std::map<std::tuple<std::string, std::string, std::string>, ParetoGroup> groups;
  std::vector<std::tuple<std::string, std::string, std::string>> order;
  for (const CaseView& c : host_view.cases) {
    if (!soc.empty() && c.soc != soc) continue;
    // The same case in the model view, by name: two reads of a run still being written may differ.
    const CaseView* modelled = nullptr;
    for (const CaseView& m : model_view.cases) {
      if (m.name == c.name) modelled = &m;
    }
    if (c.soc != "host" && modelled == nullptr) continue;
    const CaseView& figures = c.soc == "host" ? c : *modelled;
    const auto key = std::make_tuple(c.model, c.workload, c.soc);
    auto [it, added] = groups.try_emplace(key);
    ParetoGroup& g = it->second;
    if (added) {
      g.model = c.model;
      g.workload = c.workload;
      g.soc = c.soc;
      g.objectives = objectives;
      order.push_back(key);
    }
    ParetoPoint point{c.policy, {}};
    std::string missing;
    if (c.status != "complete") missing = "the case is " + c.status;
    for (const std::string& name : objectives) {
      if (!missing.empty()) break;
      const auto f = figures.figures.find(name);
      if (f == figures.figures.end() || !f->second.median) {
        missing = name + ": " + (f == figures.figures.end() ? std::string("not recorded") : f->second.na_reason);
      } else {
        point.values.push_back(*f->second.median);
      }
    }
    // A configuration that cannot load on the SoC is no recommendation.
    const auto fits = figures.figures.find("fits_in_memory");
    const bool unfit = missing.empty() && fits != figures.figures.end() && fits->second.median && *fits->second.median == 0.0;
    if (unfit) {
      const auto headroom = figures.figures.find("memory_headroom_bytes");
      const std::string by = headroom != figures.figures.end() && headroom->second.median
                                 ? "short of " + human_value(-*headroom->second.median, "bytes")
                                 : std::string("fits_in_memory 0");
      g.unfit.emplace_back(c.policy, by);
      if (!include_unfit) continue;
    }
    if (missing.empty()) {
      g.points.push_back(std::move(point));
      g.point_fits.push_back(!unfit);
    } else {
      g.incomplete.emplace_back(c.policy, missing);
    }
  }
  std::vector<ParetoGroup> out;
  for (const auto& key : order) {
    ParetoGroup& g = groups.at(key);
    g.result = pareto_front(g.points, directions);
    out.push_back(std::move(g));
  }
  return out;
}

}  // namespace kvbench
