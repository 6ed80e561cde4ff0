#include "report_sections.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "change_points.h"
#include "metric_table.h"

namespace kvbench::report {

namespace {

const std::vector<std::string>& headline_metrics() {
  static const std::vector<std::string> names = {"decode_tps",         "ttft_first_request_ms", "ttft_followup_ms_p50",
                                                 "tpot_ms_p99",        "peak_l1_bytes",         "kv_bytes_per_token",
                                                 "ppl_delta_pct",      "attn_mass_recall",      "token_drop_ratio"};
  return names;
}

}  // namespace

void trends_section(Page& page, const ReportModel& m) {
  const RunView& run = m.host;
  const std::string& suite = m.suite;
  const std::vector<std::int64_t>& ids = m.history;
  page << section_open("trends", "Trends");
  if (ids.size() < 2) {
    page << line(fmt::format("no history: run {} is the only complete run of suite {} so far", run.id, suite));
    page << "</section>\n";
    return;
  }
  page << "<p>" + h(fmt::format("The last {} complete runs of suite {} (medians per case on each metric's own clock); dashed marks "
                                "are change points found in each case's history and the baseline run.",
                                ids.size(), suite)) +
              "</p>\n";
  const std::map<std::int64_t, RunView>& views = m.history_views;
  std::vector<std::string> labels;
  for (std::int64_t id : ids) labels.push_back(std::to_string(id));
  std::vector<std::string> cases;
  for (const CaseView& c : run.cases) cases.push_back(c.name);
  const bool many_socs = std::any_of(run.cases.begin(), run.cases.end(), [&](const CaseView& c) { return c.soc != run.cases.front().soc; });
  for (const std::string& name : headline_metrics()) {
    const MetricDef& def = metric(name);
    std::vector<Series> series;
    std::map<std::size_t, std::vector<std::string>> changes;  // run position -> the cases that stepped there
    for (std::size_t k = 0; k < run.cases.size(); ++k) {
      const CaseView& c = run.cases[k];
      Series s;
      s.name = case_label(c, many_socs);
      std::vector<double> clean;
      std::vector<std::size_t> where;
      for (std::size_t i = 0; i < ids.size(); ++i) {
        double v = NAN;
        for (const CaseView& other : views.at(ids[i]).cases) {
          if (other.name != c.name) continue;
          const auto f = other.figures.find(name);
          if (f != other.figures.end() && f->second.median) v = *f->second.median;
        }
        s.x.push_back(static_cast<double>(i));
        s.y.push_back(v);
        if (std::isfinite(v)) {
          clean.push_back(v);
          where.push_back(i);
        }
      }
      if (clean.empty()) continue;
      for (const ChangePoint& cp : find_change_points(clean)) changes[where[static_cast<std::size_t>(cp.index)]].push_back(s.name);
      series.push_back(std::move(s));
    }
    if (series.empty()) {
      page << line(fmt::format("{}: no data (no run of suite {} records it)", name, suite));
      continue;
    }
    // One mark per run where cases stepped, naming the case or counting them.
    std::vector<Mark> marks;
    for (const auto& [at, names] : changes) {
      marks.push_back({static_cast<double>(at), names.size() == 1 ? "change: " + names.front() : fmt::format("change: {} cases", names.size())});
    }
    for (std::size_t i = 0; i < ids.size(); ++i) {
      if (ids[i] == m.baseline_run) marks.push_back({static_cast<double>(i), "baseline"});
    }
    page.plot(lines_over_runs(name + " over runs", Axis{name, def.unit}, labels, series, marks), def.description);
  }
  page << "</section>\n";
}

}  // namespace kvbench::report
