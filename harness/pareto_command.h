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
#include "store_location.h"

namespace kvbench {

struct ParetoOptions {
  std::string db = kDefaultResultsDb;
  std::string run = "latest";
  std::string soc;  // "": every SoC of the run
  std::string x = "kv_bytes_per_token", y, z;
  std::string format = "table";
  bool all = false;            // also the dominated policies, with what dominates each
  bool include_unfit = false;  // compare configurations that do not fit the SoC's memory too
  CLI::App* command = nullptr;
};

void add_pareto_command(CLI::App& app, ParetoOptions& options);
int run_pareto(const ParetoOptions& options, std::FILE* out = stdout);

}  // namespace kvbench
