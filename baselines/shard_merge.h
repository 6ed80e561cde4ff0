// Whether the shard runs of one run group (`kvbench run --shard I/N --run-group ID`) make one run,
// decided before anything is written: they must be of one suite, configuration, benchmark
// definition and shard plan, each shard once, complete, none missing and no case twice. With
// allow_partial, missing or unfinished shards still merge, and the run says it is partial.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "results_store.h"

namespace kvbench {

// One shard run as its database describes it.
struct ShardRunInfo {
  std::string file;
  std::int64_t run_id = 0;
  RunStatus status = RunStatus::Complete;  // as reported (a running run whose process is gone: aborted)
  std::string suite, config_hash, plan, run_group;
  int definition = 0;  // the suite's benchmark definition version
  int repetitions = 0;  // after --repetitions
  std::string build;        // git sha, "+dirty" when the tree was
  std::string kernel_path;  // the engine's kernels
  std::string profiles;     // the SoC profiles that priced it (names and hashes)
  int index = 0, count = 0;
  std::vector<std::string> cases;        // its case names, as stored
  std::vector<std::int64_t> case_ids;    // and their ids in its file
  std::string where() const;       // "run N of FILE (shard I/N)"
};

struct MergePlan {
  std::vector<const ShardRunInfo*> shards;  // by index
  std::vector<int> missing;                 // shard indices with no run
  bool partial = false;
  RunStatus status = RunStatus::Complete;   // complete only when every shard is there and complete
};

// Throws InputError naming the shard's file and what differs.
MergePlan plan_merge(const std::vector<ShardRunInfo>& shards, bool allow_partial);

}  // namespace kvbench
