// Which of a suite's cases one shard runs (`kvbench run --shard I/N --run-group ID`): whole
// engine-run groups, balanced by the time each group took in the suite's previous run where a
// database holds one, else by an estimate from the plan (each case's positions and engine runs).
// Every shard computes the assignment of every shard from the same inputs, so shards run on
// different machines take disjoint parts that together make the suite, as long as they balance
// from the same history; the assignment's hash goes into each shard's metadata and `kvbench
// merge` refuses shards whose hashes differ.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "case_group_run.h"
#include "case_plan.h"
#include "case_preparation.h"

namespace kvbench {

// The median wall time of each case's repetitions (case_wall_ms, host clock) in the newest
// complete, unsharded run of a suite; `source` says which run and file ("" when none).
struct CaseTimes {
  std::map<std::string, double> seconds;  // by case name
  std::string source;
};
// An absent file has no history; a file (or server) that is not a readable kvbench database is an
// InputError naming `flag` (--balance-from, or --db when the history is the run's own database).
CaseTimes previous_case_times(const std::string& db_path, const std::string& suite_name, const std::string& flag = "--db");

struct ShardSelection {
  std::vector<std::size_t> groups;  // the shard's groups (indices into the suite's), in plan order
  std::string plan_hash;            // shard_plan_hash of the whole assignment
  std::string balanced_by;          // where the weights came from, for people
  std::vector<double> shard_weights;  // each shard's expected share of the work, in the weights' unit
};

// groups: the whole suite's engine-run groups over `cases`; work: plan_work over them (its
// per-group estimates are the weights where the history has no time).
ShardSelection select_shard(const Shard& shard, const std::vector<PlannedCase>& plan, const std::vector<PreparedCase>& cases,
                            const std::vector<std::pair<std::size_t, std::size_t>>& groups, const WorkPlan& work, int repetitions,
                            int warmup, const CaseTimes& history);

}  // namespace kvbench
