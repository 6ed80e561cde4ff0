#include "shard_selection.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <memory>

#include <nlohmann/json.hpp>

#include "results_reader.h"
#include "statistics.h"
#include "store_location.h"

namespace kvbench {

namespace {

// A run that is itself one shard holds only part of the suite's cases.
bool is_shard(const RunRecord& run) {
  const nlohmann::json meta = nlohmann::json::parse(run.meta_json, nullptr, false);
  return meta.is_object() && meta.contains("shard");
}

// The history opened read-only; its problems name the flag that gave it.
std::unique_ptr<ResultsStore> open_history(const std::string& db_path, const std::string& flag) {
  try {
    return std::make_unique<ResultsStore>(db_path, Access::ReadOnly);
  } catch (const kv::InputError& e) {
    if (e.field() != "--db") throw;
    throw kv::InputError(db_path, flag, e.reason());
  }
}

}  // namespace

CaseTimes previous_case_times(const std::string& db_path, const std::string& suite_name, const std::string& flag) {
  CaseTimes times;
  if (db_path.empty() || !store_exists(db_path)) return times;
  const std::unique_ptr<ResultsStore> history = open_history(db_path, flag);
  ResultsStore& store = *history;
  RunFilter filter;
  filter.status = "complete";
  filter.suite = suite_name;
  const std::vector<RunRecord> runs = list_runs(store, filter);
  const auto newest = std::find_if(runs.rbegin(), runs.rend(), [](const RunRecord& r) { return !is_shard(r); });
  if (newest == runs.rend()) return times;
  for (const CaseRecord& c : load_cases(store, newest->id)) {
    std::vector<double> walls;
    for (const MetricRow& m : c.metrics) {
      if (m.name == "case_wall_ms" && m.clock == "host" && m.value) walls.push_back(*m.value / 1e3);
    }
    if (!walls.empty()) times.seconds[c.name] = median(walls);
  }
  if (!times.seconds.empty()) times.source = fmt::format("run {} of {}", newest->id, db_path);
  return times;
}

ShardSelection select_shard(const Shard& shard, const std::vector<PlannedCase>& plan, const std::vector<PreparedCase>& cases,
                            const std::vector<std::pair<std::size_t, std::size_t>>& groups, const WorkPlan& work, int repetitions,
                            int warmup, const CaseTimes& history) {
  // The estimate: plan_work's, in positions (a group's host runs and its SoCs' expected own runs).
  // The history: the host case's median repetition time for its host runs.
  const int units = repetitions + warmup;
  const std::vector<double>& host_estimate = work.host_work;
  const std::vector<double>& own_estimate = work.own_work;
  std::vector<double> host_seconds(groups.size(), -1.0);
  double timed_seconds = 0.0, timed_estimate = 0.0;
  std::size_t timed = 0;
  for (std::size_t g = 0; g < groups.size(); ++g) {
    const auto [begin, end] = groups[g];
    if (!cases[begin].script.skipped.empty()) continue;
    for (std::size_t i = begin; i < end; ++i) {
      const auto found = history.seconds.find(cases[i].info.name());
      if (cases[i].info.soc != "host" || found == history.seconds.end()) continue;
      host_seconds[g] = found->second * units;
      timed_seconds += host_seconds[g];
      timed_estimate += host_estimate[g];
      ++timed;
    }
  }
  // Estimates join the history's seconds at the rate the timed groups ran.
  const double rate = timed > 0 && timed_estimate > 0.0 ? timed_seconds / timed_estimate : 1.0;
  std::vector<double> weights(groups.size());
  for (std::size_t g = 0; g < groups.size(); ++g) {
    weights[g] = (host_seconds[g] >= 0.0 ? host_seconds[g] : host_estimate[g] * rate) + own_estimate[g] * rate;
  }
  const std::vector<int> shard_of = assign_shards(weights, shard.count);
  ShardSelection selection;
  selection.plan_hash = shard_plan_hash(plan, groups, shard_of, shard.count);
  selection.shard_weights.assign(static_cast<std::size_t>(shard.count), 0.0);
  for (std::size_t g = 0; g < groups.size(); ++g) {
    selection.shard_weights[static_cast<std::size_t>(shard_of[g])] += weights[g];
    if (shard_of[g] == shard.index - 1) selection.groups.push_back(g);
  }
  const std::size_t live = static_cast<std::size_t>(std::count_if(host_estimate.begin(), host_estimate.end(), [](double e) { return e > 0.0; }));
  selection.balanced_by = timed == 0 ? "an estimate from each case's positions and engine runs (no previous run of the suite)"
                     : timed == live ? fmt::format("the case times of {}", history.source)
                                     : fmt::format("the case times of {} ({} of {} groups timed, the rest estimated)", history.source,
                                                   timed, live);
  return selection;
}

}  // namespace kvbench
