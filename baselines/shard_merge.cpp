#include "shard_merge.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "runtime/error.h"

namespace kvbench {

std::string ShardRunInfo::where() const { return fmt::format("run {} of {} (shard {}/{})", run_id, file, index, count); }

namespace {

// What every shard of the group must share with the first.
void check_same(const ShardRunInfo& first, const ShardRunInfo& s) {
  const auto differs = [&](const char* field, const std::string& a, const std::string& b, const char* why) {
    if (a == b) return;
    throw kv::InputError(s.file, field, fmt::format("{} has {} '{}', {} has '{}': {}", s.where(), field, b, first.where(), a, why));
  };
  differs("suite", first.suite, s.suite, "shards of one run run one suite");
  differs("benchmark_definition", std::to_string(first.definition), std::to_string(s.definition),
          "the suite's figures were defined differently");
  differs("config_hash", first.config_hash, s.config_hash, "the shards ran different configurations of the suite");
  differs("repetitions", std::to_string(first.repetitions), std::to_string(s.repetitions), "one run has one repetition count");
  differs("build", first.build, s.build, "one run is one build of kvbench");
  differs("kernel_path", first.kernel_path, s.kernel_path, "exact figures compare only on one kernel path");
  differs("soc_profiles", first.profiles, s.profiles, "the modelled figures were priced with different SoC profiles");
  differs("shard count", std::to_string(first.count), std::to_string(s.count), "the shards split the suite differently");
  differs("shard plan", first.plan, s.plan,
          "the shards assigned the cases differently: they balanced from different histories (give every shard the "
          "same --balance-from), or found different models (a fetched model missing on one runner)");
}

// The merged run's status is the worst of its shards': failed, aborted, interrupted, complete.
int severity(RunStatus status) {
  switch (status) {
    case RunStatus::Failed: return 3;
    case RunStatus::Aborted: return 2;
    case RunStatus::Interrupted: return 1;
    default: return 0;
  }
}

}  // namespace

MergePlan plan_merge(const std::vector<ShardRunInfo>& shards, bool allow_partial) {
  if (shards.empty()) throw kv::InputError("SHARD.sqlite", "run group", "no shard run of the group in the files given");
  MergePlan plan;
  const ShardRunInfo& first = shards.front();
  std::map<int, const ShardRunInfo*> by_index;
  std::map<std::string, const ShardRunInfo*> case_owner;
  for (const ShardRunInfo& s : shards) {
    check_same(first, s);
    if (const auto [it, added] = by_index.emplace(s.index, &s); !added) {
      throw kv::InputError(s.file, "shard", fmt::format("{} is the same shard as {}: merge each shard once", s.where(), it->second->where()));
    }
    for (const std::string& name : s.cases) {
      if (const auto [it, added] = case_owner.emplace(name, &s); !added) {
        throw kv::InputError(s.file, "cases", fmt::format("case {} of {} is also in {}", name, s.where(), it->second->where()));
      }
    }
    if (s.status == RunStatus::Running) {
      throw kv::InputError(s.file, "status", fmt::format("{} is still running: merge it when it ends", s.where()));
    }
    if (s.status != RunStatus::Complete) {
      if (!allow_partial) {
        throw kv::InputError(s.file, "status",
                             fmt::format("{} is {}, not complete: merge complete shards, or pass --allow-partial to merge it "
                                         "into a run marked partial",
                                         s.where(), run_status_name(s.status)));
      }
      plan.partial = true;
      if (severity(s.status) > severity(plan.status)) plan.status = s.status;
    }
  }
  for (int i = 1; i <= first.count; ++i) {
    if (by_index.count(i) == 0) plan.missing.push_back(i);
  }
  if (!plan.missing.empty()) {
    const std::string which = fmt::format("{}", fmt::join(plan.missing, ", "));
    if (!allow_partial) {
      throw kv::InputError(first.file, "shards",
                           fmt::format("shard{} {} of {} of run group {} {} missing: give every shard's database, or pass "
                                       "--allow-partial to merge the others into a run marked partial",
                                       plan.missing.size() == 1 ? "" : "s", which, first.count, first.run_group,
                                       plan.missing.size() == 1 ? "is" : "are"));
    }
    plan.partial = true;
    plan.status = RunStatus::Failed;
  }
  for (const auto& [index, s] : by_index) plan.shards.push_back(s);
  return plan;
}

}  // namespace kvbench
