#include "report_sections.h"

#include <fmt/format.h>

#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "metric_table.h"
#include "pareto.h"

namespace kvbench::report {

namespace {

// One scatter: a (model, workload) on the SoCs whose fronts are the same.
struct Front {
  std::string model, workload;
  std::vector<std::string> socs;
  std::vector<ScatterPoint> points;
  std::vector<std::tuple<std::string, bool, bool>> signature;  // per policy: label, on the front, fits
};

}  // namespace

void pareto_section(Page& page, const ReportModel& m) {
  const RunView& host = m.host;
  const RunView& model = m.model;
  page << section_open("pareto", "Pareto fronts");
  bool ppl = false;
  for (const CaseView& c : host.cases) ppl = ppl || figure(c, "ppl_delta_pct").has_value();
  const std::string accuracy = ppl ? "ppl_delta_pct" : "attn_rel_error";
  // The fronts are over speed too (measured on the host, modelled on a SoC), and among the
  // configurations that fit: one that cannot load is drawn faded and says so.
  const std::vector<std::string> objectives = {"kv_bytes_per_token", accuracy, "decode_tps"};
  const std::vector<Better> directions = {metric(objectives[0]).better, metric(objectives[1]).better, metric(objectives[2]).better};
  std::vector<Front> fronts;
  for (const ParetoGroup& g : pareto_groups(host, model, objectives, "", true)) {
    if (g.points.size() < 2) continue;
    std::vector<ParetoPoint> fitting;
    std::vector<std::size_t> where;
    for (std::size_t i = 0; i < g.points.size(); ++i) {
      if (!g.point_fits[i]) continue;
      fitting.push_back(g.points[i]);
      where.push_back(i);
    }
    std::vector<bool> on_front(g.points.size(), false);
    if (!fitting.empty()) {
      const ParetoResult r = pareto_front(fitting, directions);
      for (std::size_t k = 0; k < where.size(); ++k) on_front[where[k]] = r.on_front[k];
    }
    Front f{g.model, g.workload, {g.soc}, {}, {}};
    for (std::size_t i = 0; i < g.points.size(); ++i) {
      const ParetoPoint& p = g.points[i];
      std::string label = p.label + fmt::format(" ({:.3g} tok/s)", p.values[2]);
      if (!g.point_fits[i]) label += " does not fit";
      f.points.push_back({p.values[0], p.values[1], label, on_front[i]});
      f.signature.emplace_back(p.label, on_front[i], g.point_fits[i]);
    }
    // A SoC whose front is the one already drawn for this model and workload joins that plot.
    bool joined = false;
    for (Front& other : fronts) {
      if (other.model == f.model && other.workload == f.workload && other.signature == f.signature) {
        other.socs.push_back(g.soc);
        joined = true;
        break;
      }
    }
    if (!joined) fronts.push_back(std::move(f));
  }
  for (const Front& f : fronts) {
    std::string socs;
    for (const std::string& soc : f.socs) socs += (socs.empty() ? "" : ", ") + soc;
    page.plot(scatter_front("Pareto front: " + f.model + " / " + f.workload + " / " + socs, Axis{"kv_bytes_per_token", "bytes"},
                            Axis{accuracy, metric(accuracy).unit}, f.points),
              "the front over KV size, " + accuracy + " and decode tok/s among the configurations that fit, joined; the rest "
              "faded; labels carry the tok/s of the first SoC named (measured on the host, modelled elsewhere)" +
                  (f.socs.size() > 1 ? "; the same front on each SoC named" : ""));
  }
  if (fronts.empty()) page << line("no Pareto front: no (model, workload, SoC) has two policies with " + accuracy + " and KV size");
  page << "</section>\n";
}

}  // namespace kvbench::report
