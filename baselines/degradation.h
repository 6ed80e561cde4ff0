// Degradation in plain words: what the engine gave up to keep running (an L2 fault, a
// tightened sparse budget, pages requantized to INT2, L1 over its cap) or what the policy
// allowed it to give up (a sparse budget that keeps no middle page), from a repetition's
// degradation counts and its stored events. A degraded case still completes, but `run` and
// `show` mark it and list these lines under the table.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "results_store.h"

namespace kvbench {

// The metric names that count degradation (gated exactly: any new degradation is a regression).
const std::vector<std::string>& degradation_metric_names();

// counts: degradation metric -> value; events: the repetition's (any kinds, in order).
// Empty when nothing degraded.
std::vector<std::string> degradation_lines(const std::map<std::string, double>& counts, const std::vector<RunEvent>& events);
std::vector<std::string> degradation_lines(const std::vector<MetricRecord>& metrics, const std::vector<RunEvent>& events);

}  // namespace kvbench
