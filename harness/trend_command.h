// `kvbench trend --metric NAME`: a metric's per-run medians across the complete runs of a suite,
// case by case, with the change points found in each history (baselines/change_points.h); the
// change points are stored for reports.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "store_location.h"

namespace kvbench {

struct TrendOptions {
  std::string db = kDefaultResultsDb;
  std::string metric, case_glob = "*", suite, format = "table";
  int last = 0;
  CLI::App* command = nullptr;
};

void add_trend_command(CLI::App& app, TrendOptions& options);
int run_trend(const TrendOptions& options);

}  // namespace kvbench
