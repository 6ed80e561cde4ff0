// What a run stores about itself before its first case (RunInfo): the build (git SHA and whether
// the tree was dirty), the resolved suite and its hash, the tags, and in meta_json the machine
// and the settings a reader needs to tell two runs apart - version, build type, suite, filter,
// repetitions, prefix-cache start, models directory, kernel path, L2 directory and filesystem,
// the SoC profiles that price it (origin and hash), and for a shard run its part of the suite
// ("shard": index, count, run_group, plan, balanced_by; tagged run-group=ID), and for a sim run
// how its counts were taken ("sim": SimSetup::metadata()).
#pragma once

#include <map>
#include <string>

#include "results_store.h"
#include "runner.h"
#include "shard_selection.h"
#include "sim_run.h"
#include "soc/soc_profile.h"
#include "suite_config.h"

namespace kvbench {

struct RunSettings {
  int repetitions = 0;     // after --repetitions
  std::string models_dir;  // resolved
  std::string l2_dir;      // the default L2 base (run_workspace.h)
  std::string l2_fs_type;  // its filesystem, or why there is none
  const std::map<std::string, kv::soc::SocProfile>* profiles = nullptr;  // by SoC name
  const ShardSelection* shard = nullptr;  // a shard run (RunOptions::shard): its part of the suite
  const SimSetup* sim = nullptr;          // a sim run: its callgrind children (harness/sim_run.h)
};

// The 16-hex-digit hash of a resolved suite: runs of one configuration share it.
std::string config_hash(const std::string& resolved_suite_json);

// The tag of a shard run, and of the run its shards merge into.
std::string run_group_tag(const std::string& run_group);

RunInfo describe_run(const SuiteConfig& suite, const RunOptions& options, const RunSettings& settings);

}  // namespace kvbench
