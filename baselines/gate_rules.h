// The gate's rules: how each metric is judged. Defaults come from the metric table - its better
// direction (better: none is never gated), and its clock (exact and model figures are
// deterministic, compared value to value with a relative tolerance of 1e-9; host figures are
// statistical with a 5% band) - then the rules file's entries apply in order, each to the
// metrics its glob names (configs/gate.json is the built-in file; `--rules PATH` replaces it).
//
//   {"fdr": 0.05, "rules": [{"metric": "peak_rss_*", "class": "statistical", "relative": 0.10,
//                            "absolute": 0, "direction": "lower", "gated": true, "why": "..."}]}
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "comparison.h"

namespace kvbench {

struct GateRules {
  double fdr = 0.05;  // Benjamini-Hochberg false discovery rate over one comparison's host rows
  struct Entry {
    std::string glob;
    std::optional<bool> gated;
    std::optional<Better> better;
    std::optional<GateClass> kind;
    std::optional<double> relative, absolute;
    std::string why;
  };
  std::vector<Entry> entries;

  // The rule for a metric name (of the metric table; span metrics included).
  MetricRule rule_for(const std::string& metric) const;
};

// Parses a rules file's text; `file` names it in errors (kv::InputError with the JSON path): an
// unknown field, a glob that matches no metric, a bad direction or class, a negative threshold.
GateRules parse_gate_rules(const std::string& text, const std::string& file);

// The defaults for a metric before any rules file entry.
// On `clock` (default: the metric's own): host figures are statistical, the others deterministic.
MetricRule default_rule(const MetricDef& def, std::optional<Clock> clock = std::nullopt);

}  // namespace kvbench
