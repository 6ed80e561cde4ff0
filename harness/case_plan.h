// The cases a run of a suite takes, in the order it takes them: models x workloads x policies x
// SoCs, less the pairs a workload's or a policy's `models` list leaves out, less the names the
// filter does not match. A plan only: nothing is loaded, checked against a model or run, so the
// runner, and whatever splits a suite into parts, start from the same list.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "results_store.h"
#include "suite_config.h"

namespace kvbench {

struct PlannedCase {
  CaseInfo info;  // its name's parts (skipped_reason empty: preflight decides that)
  std::size_t model_index = 0;
  std::size_t workload_index = 0;
  std::size_t policy_index = 0;
};

// filter: an ECMAScript regular expression searched in each case's name (model/workload/policy/
// soc); empty keeps every case. Throws InputError naming --filter for a filter that is not a
// regular expression or that keeps no case.
std::vector<PlannedCase> plan_cases(const SuiteConfig& suite, const std::string& filter);

// Runs of consecutive planned cases that differ only in their SoC, as [begin, end) indices: each
// shares one engine run per repetition (the SoCs price it; a SoC may add runs of its own).
std::vector<std::pair<std::size_t, std::size_t>> engine_run_groups(const std::vector<PlannedCase>& cases);

// One part of a suite run as several (`kvbench run --shard INDEX/COUNT`): whole engine-run
// groups, so a group's SoCs still share its engine runs.
struct Shard {
  int index = 1;  // from 1
  int count = 1;
};
// "I/N" with 1 <= I <= N <= 1000; throws InputError naming --shard otherwise.
Shard parse_shard(const std::string& text);

// The shard (from 0) of each group, given each group's expected time: the heaviest group first
// (ties: the earlier), each to the shard with the least time so far (ties: the lower index), so
// no shard exceeds another by more than its heaviest group. The same weights give the same
// assignment on every machine.
std::vector<int> assign_shards(const std::vector<double>& group_weights, int count);

// The 16-hex-digit identity of an assignment: shards of one run share it, and merging checks it.
std::string shard_plan_hash(const std::vector<PlannedCase>& cases, const std::vector<std::pair<std::size_t, std::size_t>>& groups,
                            const std::vector<int>& shard_of_group, int count);

}  // namespace kvbench
