#include "runner.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <optional>
#include <map>
#include <vector>

#include "build_info.h"
#include "case_group_run.h"
#include "run_heartbeat.h"
#include "case_plan.h"
#include "case_preparation.h"
#include "degradation.h"
#include "memory/l2_store.h"
#include "progress.h"
#include "run_metadata.h"
#include "memory_caps_check.h"
#include "run_workspace.h"
#include "runtime/error.h"
#include "shard_selection.h"
#include "sim_run.h"
#include "soc_profiles.h"

namespace kvbench {

namespace {

namespace fs = std::filesystem;

// --shard and --run-group come together: the merge joins the shards of one group.
void check_shard_options(const RunOptions& options) {
  if (options.shard && options.run_group.empty()) {
    throw kv::InputError("--run-group", "", "a shard run needs --run-group ID: the name its shards share, which `kvbench merge` joins");
  }
  if (!options.shard && !options.run_group.empty()) {
    throw kv::InputError("--run-group", options.run_group, "names the shards of one run; give --shard I/N with it");
  }
  if (!options.shard && !options.balance_from.empty()) {
    throw kv::InputError("--balance-from", options.balance_from, "balances the shards of a run; give --shard I/N with it");
  }
  if (!options.shard) return;
  std::error_code ec;
  // A server is tested by opening it, when the history is read.
  if (!options.balance_from.empty() && !is_postgres_uri(options.balance_from) && !fs::exists(options.balance_from, ec)) {
    throw kv::InputError(options.balance_from, "--balance-from", "does not exist");
  }
  const bool plain = options.run_group.size() <= 64 && std::all_of(options.run_group.begin(), options.run_group.end(), [](char ch) {
    return std::isalnum(static_cast<unsigned char>(ch)) != 0 || ch == '-' || ch == '_' || ch == '.';
  });
  if (!plain) throw kv::InputError("--run-group", options.run_group, "use at most 64 letters, digits, '-', '_' and '.'");
}

// The shard's part of the suite: the planned and prepared cases of its groups, in plan order.
void keep_groups(const std::vector<std::size_t>& kept, const std::vector<std::pair<std::size_t, std::size_t>>& groups,
                 std::vector<PlannedCase>& plan, std::vector<PreparedCase>& cases) {
  std::vector<PlannedCase> kept_plan;
  std::vector<PreparedCase> kept_cases;
  for (std::size_t g : kept) {
    for (std::size_t i = groups[g].first; i < groups[g].second; ++i) {
      kept_plan.push_back(std::move(plan[i]));
      kept_cases.push_back(std::move(cases[i]));
    }
  }
  plan = std::move(kept_plan);
  cases = std::move(kept_cases);
}

std::string shard_note(const Shard& shard, const std::string& run_group, const ShardSelection& selection) {
  double total = 0.0;
  for (double w : selection.shard_weights) total += w;
  const double share = total > 0.0 ? selection.shard_weights[static_cast<std::size_t>(shard.index - 1)] / total : 0.0;
  return fmt::format("shard {}/{} of run group {}: {} engine-run group{}, {:.0f}% of the suite's expected time, balanced by {}", shard.index,
                     shard.count, run_group, selection.groups.size(), selection.groups.size() == 1 ? "" : "s", share * 100.0,
                     selection.balanced_by);
}

// Every policy that offloads has its L2 base planned (run_workspace.h): an explicit one must exist.
void plan_l2_dirs(const SuiteConfig& suite, const std::vector<PreparedCase>& cases, RunWorkspace& workspace) {
  for (const PreparedCase& c : cases) {
    if (!c.script.skipped.empty() || c.policy->cache.memory.l1_bytes == 0) continue;
    workspace.plan(c.policy->cache.memory.l2.dir, suite.file, policy_path(suite, c) + "/memory/l2_dir");
  }
}

// A database file's directory: the default location's is made; any other must exist (a mistyped
// --db must not leave a tree of directories behind). A server has none.
void check_database_dir(const RunOptions& options) {
  const fs::path db_path(options.db_path);
  if (is_postgres_uri(options.db_path) || !db_path.has_parent_path()) return;
  std::error_code ec;
  if (options.db_path == RunOptions{}.db_path) {
    if (!options.check_only) fs::create_directories(db_path.parent_path(), ec);
    if (ec) throw kv::InputError(options.db_path, "--db", "cannot create its directory: " + ec.message());
  } else if (!fs::is_directory(db_path.parent_path(), ec)) {
    throw kv::InputError(options.db_path, "--db", "its directory does not exist (" + db_path.parent_path().string() + ")");
  }
}

// The SoC profiles that price the cases: a malformed one stops the run before it starts.
SocProfiles load_profiles(const SuiteConfig& suite, const RunOptions& options) {
  SocProfiles profiles;
  for (const std::string& soc : suite.socs) {
    const std::string priced_as = soc == "host" && !options.device_soc.empty() ? options.device_soc : soc;
    const auto given = options.profiles.find(priced_as);
    profiles.emplace(soc, given != options.profiles.end() ? given->second : load_soc_profile(priced_as, options.db_path));
  }
  return profiles;
}

// --check: the database opened read-only where it exists (damaged, foreign or newer: refused; a
// server is reached either way) and writable by this user, and which cases would be skipped or
// degraded.
RunSummary checked_summary(const std::vector<PreparedCase>& cases, const RunOptions& options) {
  if (store_exists(options.db_path)) {
    const ResultsStore readable(options.db_path, Access::ReadOnly);
  }
  // The run would write it: a read-only file (or directory) is refused here as the run would.
  if (const std::string read_only = file_store_write_problem(options.db_path); !read_only.empty()) {
    throw kv::InputError(options.db_path, "--db", "cannot write: it " + read_only);
  }
  RunSummary checked;
  checked.db = options.db_path;
  for (const PreparedCase& c : cases) {
    ++checked.cases;
    if (!c.script.skipped.empty()) {
      ++checked.skipped;
      checked.lines.push_back({c.info.name(), "skipped", c.script.skipped});
    } else if (!c.pinned_only.empty()) {
      ++checked.degraded;
      const std::vector<std::string> said =
          degradation_lines(std::map<std::string, double>{}, {note_event(EventKind::PinnedOnly, c.pinned_only)});
      checked.lines.push_back({c.info.name(), "degraded", said.front()});
    }
  }
  return checked;
}

RunInfo run_info(const SuiteConfig& suite, const RunOptions& options, const std::string& models_dir, int repetitions,
                 const RunWorkspace& workspace, const SocProfiles& profiles, const ShardSelection* shard, const SimSetup* sim) {
  RunSettings settings;
  settings.repetitions = repetitions;
  settings.models_dir = models_dir;
  settings.l2_dir = workspace.default_base();
  settings.l2_fs_type = workspace.bases().empty() ? std::string("none (no policy offloads)") : kv::filesystem_type(workspace.bases().front());
  settings.profiles = &profiles;
  settings.shard = shard;
  settings.sim = sim;
  return describe_run(suite, options, settings);
}

// The cases of a begun run, group after group; a stop seen between cases interrupts the next
// one before its first repetition. Anything thrown leaves the run failed and its L2 files gone.
void run_cases(SuiteRun& run, const std::vector<PreparedCase>& cases, const std::vector<std::pair<std::size_t, std::size_t>>& groups) {
  try {
    for (std::size_t g = 0; g < groups.size() && !run.summary.interrupted; ++g) {
      run_case_group(run, cases, groups[g].first, groups[g].second);
    }
  } catch (...) {
    run.progress.clear();
    // The run's L2 files go first: on a full filesystem shared with the database, their space
    // lets the store take the run's end. A store that still cannot is not the error to report.
    run.workspace.remove_all();
    try {
      run.store.finish_run(run.summary.run_id, RunStatus::Failed);
    } catch (const std::exception& e) {
      fmt::print(stderr, "kvbench: run {} could not be marked failed: {}\n", run.summary.run_id, e.what());
    }
    throw;
  }
  run.progress.clear();
}

}  // namespace

std::string resolve_models_dir(const std::string& flag) {
  if (!flag.empty()) return flag;
  if (const char* env = std::getenv("KVBENCH_MODELS_DIR"); env != nullptr && *env != '\0') return env;
  return KVBENCH_DEFAULT_MODELS_DIR;
}

RunSummary run_suite(const SuiteConfig& suite, const RunOptions& options) {
  const std::string models_dir = resolve_models_dir(options.models_dir);
  const int repetitions = options.repetitions > 0 ? options.repetitions : suite.repetitions;
  const int warmup = suite.sim ? 0 : suite.warmup;

  // Preflight: every problem that can be found before running is an error now. Models load
  // only when a kept case needs them.
  check_shard_options(options);
  if (!options.device_soc.empty() && std::find(suite.socs.begin(), suite.socs.end(), "host") == suite.socs.end()) {
    throw kv::InputError("--soc", options.device_soc,
                         "suite '" + suite.name + "' measures nothing here (no host among its socs): --soc prices the host cases as this device");
  }
  std::vector<PlannedCase> plan = plan_cases(suite, options.filter);
  PreparedSuite prepared = prepare_suite(suite, plan, models_dir);
  std::vector<PreparedCase>& cases = prepared.cases;
  // The L2 directories (run_workspace.h): the default one beside the database is created, and
  // only when some policy offloads.
  RunWorkspace workspace(options.l2_dir, options.db_path);
  check_kernel_paths(suite, cases);
  check_device_gate(suite);
  std::optional<SimSetup> sim_setup;
  if (suite.sim) sim_setup = prepare_sim(suite, cases, models_dir);
  plan_l2_dirs(suite, cases, workspace);
  if (options.stop != nullptr && options.stop->load()) throw RunInterrupted();
  const SocProfiles profiles = load_profiles(suite, options);
  check_memory_caps(suite, cases, profiles, !options.device_soc.empty());
  check_database_dir(options);
  if (!options.check_only) workspace.make_default_base();
  std::optional<ShardSelection> shard;
  if (options.shard) {
    const auto all_groups = engine_run_groups(plan);
    const WorkPlan all_work = plan_work(cases, all_groups, profiles, repetitions, warmup);
    const bool own_history = options.balance_from.empty();
    const CaseTimes history = own_history ? previous_case_times(options.db_path, suite.name, "--db")
                                          : previous_case_times(options.balance_from, suite.name, "--balance-from");
    shard = select_shard(*options.shard, plan, cases, all_groups, all_work, repetitions, warmup, history);
    keep_groups(shard->groups, all_groups, plan, cases);
    if (options.check_only) fmt::print(stderr, "kvbench: {}\n", shard_note(*options.shard, options.run_group, *shard));
  }
  if (options.check_only) return checked_summary(cases, options);

  // The database, then the run's own L2 subdirectories: each run writes L2 files only there.
  ResultsStore store(options.db_path);
  RunSummary summary;
  summary.db = options.db_path;
  summary.run_id = store.begin_run(
      run_info(suite, options, models_dir, repetitions, workspace, profiles, shard ? &*shard : nullptr, sim_setup ? &*sim_setup : nullptr));
  const RunHeartbeat beat(options.db_path, summary.run_id, options.heartbeat_timeout_s);
  try {
    workspace.open(summary.run_id);
  } catch (...) {
    store.finish_run(summary.run_id, RunStatus::Failed);
    throw;
  }

  const std::vector<std::pair<std::size_t, std::size_t>> groups = engine_run_groups(plan);  // [begin, end) into cases
  const WorkPlan work = plan_work(cases, groups, profiles, repetitions, warmup);
  Progress progress(static_cast<int>(cases.size()), work.work, Progress::mode_for(stderr, options.progress), stderr, options.heartbeat_s);
  if (shard) progress.note(shard_note(*options.shard, options.run_group, *shard));
  const int runs = work.engine_runs + work.soc_runs;
  progress.note(fmt::format("{} case{}: {} engine run{} planned{}", cases.size(), cases.size() == 1 ? "" : "s", runs, runs == 1 ? "" : "s",
                            work.soc_runs > 0 ? fmt::format(" ({} of them SoCs' own, expected from each case's size)", work.soc_runs) : ""));
  SuiteRun run{suite, options, profiles, work, repetitions, warmup, store, workspace, progress, summary, sim_setup ? &*sim_setup : nullptr};
  run_cases(run, cases, groups);
  summary.status = summary.interrupted ? RunStatus::Interrupted : summary.failed > 0 ? RunStatus::Failed : RunStatus::Complete;
  store.finish_run(summary.run_id, summary.status);
  summary.store_writes = store.writes();
  return summary;
}

}  // namespace kvbench
