// `kvbench prune --older-than DAYS [--keep N] [--dry-run] [--db PATH]`: removes the runs that
// started at least DAYS days ago and that nothing keeps (baselines/retention.h says what does:
// a live process, a baseline, an acknowledgement, being one of the newest N complete runs of
// its suite, being the baseline of such a run's verdict), with every row that refers to them,
// then reclaims the space. --dry-run lists the same and changes nothing.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "store_location.h"

namespace kvbench {

struct PruneCommandOptions {
  std::string db = kDefaultResultsDb;
  std::string older_than;  // days, validated by run_prune
  std::string keep = "5";  // complete runs per suite
  bool dry_run = false;
  CLI::App* command = nullptr;
};

void add_prune_command(CLI::App& app, PruneCommandOptions& options);
int run_prune(const PruneCommandOptions& options);

}  // namespace kvbench
