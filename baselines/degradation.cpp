#include "degradation.h"

#include <fmt/format.h>

#include <cmath>

namespace kvbench {

namespace {

// The recorder's memory-event detail is "<from>-><to> l1_used=<used>/<cap> <reason>".
std::string memory_event_reason(const std::string& detail) {
  const auto used = detail.find(" l1_used=");
  if (used == std::string::npos) return detail;
  const auto reason = detail.find(' ', used + 1);
  return reason == std::string::npos ? std::string() : detail.substr(reason + 1);
}

}  // namespace

const std::vector<std::string>& degradation_metric_names() {
  static const std::vector<std::string> names = {"l2_errors", "pressure_danger_steps", "requantized_pages", "l1_overflow_events"};
  return names;
}

bool is_degradation_event(const std::string& kind) {
  return kind == "l2_failed" || kind == "l2_full" || kind == "budget_change" || kind == "requantized" || kind == "l1_overflow";
}

std::vector<std::string> degradation_lines(const std::map<std::string, double>& counts, const std::vector<EventRecord>& events) {
  const auto count = [&](const char* name) {
    const auto it = counts.find(name);
    return it == counts.end() ? 0.0 : it->second;
  };
  std::vector<std::string> lines;
  const EventRecord* failed = nullptr;
  const EventRecord* full = nullptr;
  std::vector<const EventRecord*> budgets;
  for (const EventRecord& e : events) {
    if (e.kind == "l2_failed" && failed == nullptr) failed = &e;
    if (e.kind == "l2_full" && full == nullptr) full = &e;
    if (e.kind == "budget_change") budgets.push_back(&e);
  }
  if (failed != nullptr) {
    lines.push_back(fmt::format("L2 write failed at step {}: {}", failed->step, memory_event_reason(failed->detail)));
  } else if (count("l2_errors") > 0) {
    lines.push_back(fmt::format("{:.0f} L2 errors", count("l2_errors")));
  }
  if (full != nullptr) lines.push_back(fmt::format("L2 full at step {}: demotion stopped", full->step));
  if (!budgets.empty()) {
    // "budget 10% -> 5%": the first change's start, the last one's end.
    const std::string& first = budgets.front()->detail;
    const std::string& last = budgets.back()->detail;
    const auto arrow = last.find(" -> ");
    const std::string to = arrow == std::string::npos ? last : last.substr(arrow + 4);
    const std::string from = first.substr(0, first.find(" -> "));
    lines.push_back(fmt::format("{} -> {} ({} change{} from step {})", from, to, budgets.size(), budgets.size() == 1 ? "" : "s",
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

std::vector<std::string> degradation_lines(const std::vector<MetricRecord>& metrics, const std::vector<EventRecord>& events) {
  std::map<std::string, double> counts;
  for (const MetricRecord& m : metrics) {
    for (const std::string& name : degradation_metric_names()) {
      if (m.name == name && m.value) counts[name] = *m.value;
    }
  }
  return degradation_lines(counts, events);
}

}  // namespace kvbench
