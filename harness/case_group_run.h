// Running a suite's cases once the run has begun: consecutive cases that differ only in their
// SoC form a group sharing one engine run per repetition (case_plan.h); each SoC prices it or
// runs again with its own capacities (soc_plan.h). Every repetition is stored as it ends; a case
// that fails is recorded with its error while the others still run; the store failing stops
// the run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "case_preparation.h"
#include "progress.h"
#include "results_store.h"
#include "run_workspace.h"
#include "runner.h"
#include "sim_run.h"
#include "soc/soc_profile.h"
#include "suite_config.h"

namespace kvbench {

using SocProfiles = std::map<std::string, kv::soc::SocProfile>;

// The work the ETA expects: each engine run weighs the positions its case processes. A SoC's own
// runs are planned from the peak L1 its host run is expected to reach (expected_peak_l1) and
// corrected once the first host run says what it was.
struct WorkPlan {
  double work = 0.0;
  int engine_runs = 0;  // the groups' host runs, warmups included
  int soc_runs = 0;     // SoCs' own runs expected
  std::vector<std::uint8_t> expected_rerun;  // per case
  std::vector<double> host_work, own_work;   // per group: its host runs', and its SoCs' expected own runs'
};
WorkPlan plan_work(const std::vector<PreparedCase>& cases, const std::vector<std::pair<std::size_t, std::size_t>>& groups,
                   const SocProfiles& profiles, int repetitions, int warmup);

// What every group of a run shares.
struct SuiteRun {
  const SuiteConfig& suite;
  const RunOptions& options;
  const SocProfiles& profiles;
  const WorkPlan& plan;
  int repetitions = 0;
  int warmup = 0;  // unrecorded repetitions before them (none in a sim run: its counts do not warm up)
  ResultsStore& store;
  RunWorkspace& workspace;
  Progress& progress;
  RunSummary& summary;  // its run_id set; cases, lines and counts are added to it
  const SimSetup* sim = nullptr;  // a sim run's callgrind children (harness/sim_run.h)
};

// Runs cases [begin, end) of one group and stores them. Sets summary.interrupted when stopped;
// rethrows DatabaseError (after marking the group's cases in flight failed where it can).
void run_case_group(SuiteRun& run, const std::vector<PreparedCase>& cases, std::size_t begin, std::size_t end);

}  // namespace kvbench
