#include "report_sections.h"

#include <fmt/format.h>

#include <string>
#include <vector>

#include "metric_table.h"
#include "pareto.h"

namespace kvbench::report {

void pareto_section(Page& page, const ReportModel& m) {
  const RunView& host = m.host;
  const RunView& model = m.model;
  page << section_open("pareto", "Pareto fronts");
  bool ppl = false;
  for (const CaseView& c : host.cases) ppl = ppl || figure(c, "ppl_delta_pct").has_value();
  const std::string accuracy = ppl ? "ppl_delta_pct" : "attn_rel_error";
  const std::vector<ParetoGroup> groups = pareto_groups(host, model, {"kv_bytes_per_token", accuracy}, "");
  int drawn = 0;
  for (const ParetoGroup& g : groups) {
    if (g.points.size() < 2) continue;
    std::vector<ScatterPoint> points;
    for (std::size_t i = 0; i < g.points.size(); ++i) {
      std::string label = g.points[i].label;
      for (const CaseView& c : (g.soc == "host" ? host : model).cases) {
        if (c.model != g.model || c.workload != g.workload || c.soc != g.soc || c.policy != g.points[i].label) continue;
        if (const auto tps = figure(c, "decode_tps")) label += fmt::format(" ({:.3g} tok/s)", *tps);
      }
      points.push_back({g.points[i].values[0], g.points[i].values[1], label, static_cast<bool>(g.result.on_front[i])});
    }
    page.plot(scatter_front("Pareto front: " + g.model + " / " + g.workload + " / " + g.soc, Axis{"kv_bytes_per_token", "bytes"},
                            Axis{accuracy, metric(accuracy).unit}, points),
              "the front joined, dominated policies faded; labels carry decode tok/s (" +
                  std::string(g.soc == "host" ? "measured" : "modelled") + ")");
    ++drawn;
  }
  if (drawn == 0) page << line("no Pareto front: no (model, workload, SoC) has two policies with " + accuracy + " and KV size");
  page << "</section>\n";
}

}  // namespace kvbench::report
