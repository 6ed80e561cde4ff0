// `kvbench pareto --run SEL [--db PATH] [--soc NAME] --x METRIC --y METRIC [--z METRIC]
// [--format table|json] [--all]`: per (model, workload, SoC) of a run, the policies no other
// policy beats on every objective at once. Directions come from the metric table; on the host's
// cases a timing is the measured one, on another SoC's the modelled one.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "pareto.h"
#include "run_view.h"

namespace kvbench {

struct ParetoOptions {
  std::string db = "kvbench-results/results.sqlite";
  std::string run = "latest";
  std::string soc;  // "": every SoC of the run
  std::string x = "kv_bytes_per_token", y, z;
  std::string format = "table";
  bool all = false;  // also the dominated policies, with what dominates each
  CLI::App* command = nullptr;
};

struct ParetoGroup {
  std::string model, workload, soc;
  std::vector<std::string> objectives;  // metric names
  std::vector<ParetoPoint> points;      // policies with every objective
  ParetoResult result;
  std::vector<std::pair<std::string, std::string>> incomplete;  // policy, why it has no point
};

// The fronts of a run's cases (both views of one run: host figures on host cases, modelled ones
// elsewhere). Throws kv::InputError for a metric that is unknown or has no direction.
std::vector<ParetoGroup> pareto_groups(const RunView& host_view, const RunView& model_view, const std::vector<std::string>& objectives,
                                       const std::string& soc);

void add_pareto_command(CLI::App& app, ParetoOptions& options);
int run_pareto(const ParetoOptions& options, std::FILE* out = stdout);

}  // namespace kvbench
