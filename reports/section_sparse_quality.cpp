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
  Bars missed{"critical_miss_rate", {}}, oracle_missed{"oracle_critical_miss_rate", {}};
  // Cases with images: their image mass apart (a text budget must not decide whether an image is seen).
  std::vector<std::string> visual_categories;
  Bars visual{"visual_attn_mass_recall", {}}, visual_oracle{"visual_oracle_mass_recall", {}}, needles{"needle_recall", {}};
  for (const CaseView& c : run.cases) {
    if (c.soc != run.cases.front().soc) continue;  // exact figures: the same on every SoC
    const auto r = figure(c, "attn_mass_recall"), top = figure(c, "oracle_mass_recall");
    if (!r) continue;
    const auto b = budgets.find(c.policy);
    categories.push_back(c.workload + "/" + c.policy + (b == budgets.end() || b->second.empty() ? "" : " (" + b->second + ")"));
    recall.values.push_back(*r);
    oracle.values.push_back(top.value_or(NAN));
    missed.values.push_back(figure(c, "critical_miss_rate").value_or(NAN));
    oracle_missed.values.push_back(figure(c, "oracle_critical_miss_rate").value_or(NAN));
    if (const auto v = figure(c, "visual_attn_mass_recall")) {
      visual_categories.push_back(categories.back());
      visual.values.push_back(*v);
      visual_oracle.values.push_back(figure(c, "visual_oracle_mass_recall").value_or(NAN));
      needles.values.push_back(figure(c, "needle_recall").value_or(NAN));
    }
  }
  if (categories.empty()) {
    page << line("no sparse-quality data: no case sampled attention quality");
  } else {
    page.plot(grouped_bars("Attention-mass recall against the oracle", Axis{"attention mass kept", "ratio"}, categories, {recall, oracle}),
              "recall of the selected pages beside the most any selection of as many pages could keep, per policy and budget");
    page.plot(grouped_bars("Critical tokens missed against the oracle", Axis{"top tokens dropped", "ratio"}, categories,
                           {missed, oracle_missed}),
              "the exact top tokens the selection dropped beside those the oracle's pages (as many) would drop");
    if (!visual_categories.empty()) {
      page.plot(grouped_bars("Image attention-mass recall against the oracle, and image-needle recall",
                             Axis{"share kept", "ratio"}, visual_categories, {visual, visual_oracle, needles}),
                "of the attention on image tokens, the share the selected tokens hold, beside the most as many image pages could "
                "hold; and the share of image needles (a region each question asks about) kept whole");
    }
  }
  page << "</section>\n";
}

}  // namespace kvbench::report
