// kvbench merge: the shard runs of one run group, from their own databases, joined into one run
// of another (shard_merge.h decides whether they may; run_import.h copies them row for row).
#pragma once

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace kvbench {

struct MergeOptions {
  std::vector<std::string> shards;
  std::string into;
  std::string run_group;
  bool allow_partial = false;
  bool json = false;
  CLI::App* command = nullptr;
};

void add_merge_command(CLI::App& app, MergeOptions& options);
int run_merge(const MergeOptions& options);

}  // namespace kvbench
