#include "report_sections.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "human_units.h"
#include "metric_table.h"

namespace kvbench::report {

namespace {

// Each device run beside the model of its SoC: what the board measured (median of quiet
// repetitions, its own clock) and what that SoC's profile prices for the same cases.
void device_runs_table(Page& page, const ReportModel& m) {
  for (const DeviceRun& d : m.device_runs) {
    page << line(fmt::format("measured on a device: {} (run {}, suite {}, {}), priced with the {} profile", d.machine.empty() ? "-" : d.machine,
                             d.record.id, d.record.suite, d.record.started_at, d.soc));
    std::string rows;
    for (const ValidationRow& r : d.rows) {
      const auto ratio = r.ratio();
      const bool in = ratio && std::fabs(*ratio - 1.0) <= validation_tolerance(r.metric);
      rows += "<tr><td>" + h(r.case_name) + "</td><td>" + h(r.metric) + "</td><td>" + h(r.measured ? human_value(*r.measured, "ms") : "-") +
              "</td><td>" + h(r.modelled ? human_value(*r.modelled, "ms") : "-") + "</td><td>" +
              h(ratio ? fmt::format("{:.2f}{}", *ratio, in ? "" : " (outside band)") : "-") + "</td><td>" + h(r.note) + "</td></tr>\n";
    }
    if (rows.empty()) rows = "<tr><td colspan=\"6\">no complete measured case</td></tr>\n";
    page << "<table class=\"rows device-run\">\n<thead><tr><th>case (measured)</th><th>metric</th><th>measured on the device</th>"
            "<th>modelled</th><th>modelled / measured</th><th>note</th></tr></thead>\n<tbody>\n" +
                rows + "</tbody>\n</table>\n";
  }
}

}  // namespace

void cross_soc_section(Page& page, const ReportModel& m) {
  const RunView& model = m.model;
  page << section_open("cross-soc", "Across SoCs");
  device_runs_table(page, m);
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
      {"ttft_first_request_ms",
       "time to first token of the first request (the long prompt) priced by each SoC's profile: the dense layers' compute and "
       "weight traffic and the KV work"},
      {"decode_tps", "decode tokens per second priced by each SoC's profile, dense layers included"},
      {"energy_mj_per_token", "energy per decoded token priced by each SoC's profile"},
      {"memory_headroom_bytes", "the SoC's model budget less weights, peak KV and the runtime reserve: below zero it does not fit"},
  };
  for (const char* name : {"ttft_first_request_ms", "decode_tps", "energy_mj_per_token", "memory_headroom_bytes"}) {
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
