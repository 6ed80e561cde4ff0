#include "degradation.h"

#include <fmt/format.h>

#include <cmath>

namespace kvbench {

const std::vector<std::string>& degradation_metric_names() {
  static const std::vector<std::string> names = {"l2_errors", "pressure_danger_steps", "requantized_pages", "l1_overflow_events"};
  return names;
}

std::vector<std::string> degradation_lines(const std::map<std::string, double>& counts, const std::vector<RunEvent>& events) {
  const auto count = [&](const char* name) {
    const auto it = counts.find(name);
    return it == counts.end() ? 0.0 : it->second;
  };
  std::vector<std::string> lines;
  const RunEvent* failed = nullptr;
  const RunEvent* full = nullptr;
  std::vector<const RunEvent*> budgets;
  for (const RunEvent& e : events) {
    if (e.kind == EventKind::PinnedOnly) lines.push_back("sinks and window only (allow_pinned_only): " + e.text);
    if (e.kind == EventKind::L2Failed && failed == nullptr) failed = &e;
    if (e.kind == EventKind::L2Full && full == nullptr) full = &e;
    if (e.kind == EventKind::BudgetChange) budgets.push_back(&e);
  }
  if (failed != nullptr) {
    lines.push_back(fmt::format("L2 write failed at step {}: {}", failed->step, failed->reason));
  } else if (count("l2_errors") > 0) {
    lines.push_back(fmt::format("{:.0f} L2 errors", count("l2_errors")));
  }
  if (full != nullptr) lines.push_back(fmt::format("L2 full at step {}: demotion stopped", full->step));
  if (!budgets.empty()) {
    // The first change's start, the last one's end.
    lines.push_back(fmt::format("budget {} -> {} ({} change{} from step {})", budget_text(budgets.front()->from_budget),
                                budget_text(budgets.back()->to_budget), budgets.size(), budgets.size() == 1 ? "" : "s",
                                budgets.front()->step));
  }
  if (count("requantized_pages") > 0) lines.push_back(fmt::format("{:.0f} pages requantized to q2", count("requantized_pages")));
  if (count("pressure_danger_steps") > 0) {
    lines.push_back(fmt::format("{:.0f} layer steps at the danger watermark", count("pressure_danger_steps")));
  }
  if (count("l1_overflow_events") > 0) {
    lines.push_back(fmt::format("L1 above its cap {:.0f} time{} (nothing could be demoted)", count("l1_overflow_events"),
                                count("l1_overflow_events") == 1 ? "" : "s"));
  }
  return lines;
}

std::vector<std::string> degradation_lines(const std::vector<MetricRecord>& metrics, const std::vector<RunEvent>& events) {
  std::map<std::string, double> counts;
  for (const MetricRecord& m : metrics) {
    for (const std::string& name : degradation_metric_names()) {
      if (m.name == name && m.value) counts[name] = *m.value;
    }
  }
  return degradation_lines(counts, events);
}

}  // namespace kvbench
