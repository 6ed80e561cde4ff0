#include "report_sections.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "metric_table.h"

namespace kvbench::report {

void cross_soc_section(Page& page, const ReportModel& m) {
  const RunView& model = m.model;
  page << section_open("cross-soc", "Across SoCs");
  // The host's figures stay off these scales: priced as a workstation they would flatten every
  // phone's bars (its measured figures are in the cases above).
  std::vector<std::string> socs, configs;
  bool host = false;
  for (const CaseView& c : model.cases) {
    if (c.soc == "host") {
      host = true;
      continue;
    }
    if (std::find(socs.begin(), socs.end(), c.soc) == socs.end()) socs.push_back(c.soc);
    const std::string config = c.model + "/" + c.workload + "/" + c.policy;
    if (std::find(configs.begin(), configs.end(), config) == configs.end()) configs.push_back(config);
  }
  if (socs.empty()) {
    page << line("no sweep: the run priced no SoC beside the host; `kvbench sweep` prices several");
    page << "</section>\n";
    return;
  }
  if (host) page << line("the host is left out of these charts: its measured figures are in the cases above");
  std::vector<std::string> unfit;
  for (const CaseView& c : model.cases) {
    if (c.soc != "host" && figure(c, "fits_in_memory").value_or(1.0) == 0.0) unfit.push_back(c.model + "/" + c.workload + "/" + c.policy + " on " + c.soc);
  }
  const std::string unfit_text = unfit.empty() ? "" : fmt::format("; does not fit ({}): {}", unfit.size(), unfit.front()) +
                                                          (unfit.size() > 1 ? fmt::format(" and {} more", unfit.size() - 1) : "");
  const std::map<std::string, std::string> captions = {
      {"ttft_ms", "time to first token priced by each SoC's profile: the dense layers' compute and weight traffic and the KV work"},
      {"decode_tps", "decode tokens per second priced by each SoC's profile, dense layers included"},
      {"energy_mj_per_token", "energy per decoded token priced by each SoC's profile"},
      {"memory_headroom_bytes", "the SoC's model budget less weights, peak KV and the runtime reserve: below zero it does not fit"},
  };
  for (const char* name : {"ttft_ms", "decode_tps", "energy_mj_per_token", "memory_headroom_bytes"}) {
    std::vector<Bars> bars;
    for (const std::string& soc : socs) {
      Bars b{soc, {}};
      for (const std::string& config : configs) {
        double v = NAN;
        for (const CaseView& c : model.cases) {
          if (c.soc == soc && c.model + "/" + c.workload + "/" + c.policy == config) v = figure(c, name).value_or(NAN);
        }
        b.values.push_back(v);
      }
      bars.push_back(std::move(b));
    }
    page.plot(grouped_bars(std::string(name) + " per SoC (model clock)", Axis{name, metric(name).unit}, configs, bars),
              captions.at(name) + unfit_text);
  }
  page << "</section>\n";
}

}  // namespace kvbench::report
