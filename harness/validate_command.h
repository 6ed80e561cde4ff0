// `kvbench validate-model --run SEL [--db PATH] [--json]`: the cost model against measurement.
// Per host case of a run: measured (median of the quiet repetitions) and modelled attention
// compute, tpot p50, ttft and L2 wait, and their ratio. On the synthetic backend the host
// timings leave out the model's dense layers (the generator stands in for them), so the
// modelled tpot and ttft are compared with the modelled dense time taken out.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "store_location.h"

namespace kvbench {

struct ValidateOptions {
  std::string db = kDefaultResultsDb;
  std::string run = "latest";
  bool json = false;
  CLI::App* command = nullptr;
};

void add_validate_command(CLI::App& app, ValidateOptions& options);
int run_validate(const ValidateOptions& options, std::FILE* out = stdout);

}  // namespace kvbench
