#include "report_sections.h"

#include <fmt/format.h>

#include <cmath>
#include <string>
#include <vector>

namespace kvbench::report {

void sparse_section(Page& page, const ReportModel& m) {
  const RunView& run = m.host;
  page << section_open("sparse-quality", "Sparse quality");
  const auto& budgets = m.policy_budgets;
  std::vector<std::string> categories;
  Bars recall{"attn_mass_recall", {}}, oracle{"oracle_mass_recall", {}};
  for (const CaseView& c : run.cases) {
    if (c.soc != run.cases.front().soc) continue;  // exact figures: the same on every SoC
    const auto r = figure(c, "attn_mass_recall"), top = figure(c, "oracle_mass_recall");
    if (!r) continue;
    const auto b = budgets.find(c.policy);
    categories.push_back(c.workload + "/" + c.policy + (b == budgets.end() || b->second.empty() ? "" : " (" + b->second + ")"));
    recall.values.push_back(*r);
    oracle.values.push_back(top.value_or(NAN));
  }
  if (categories.empty()) {
    page << line("no sparse-quality data: no case sampled attention quality");
  } else {
    page.plot(grouped_bars("Attention-mass recall against the oracle", Axis{"attention mass kept", "ratio"}, categories, {recall, oracle}),
              "recall of the selected pages beside the most any selection of as many pages could keep, per policy and budget");
  }
  page << "</section>\n";
}

}  // namespace kvbench::report
