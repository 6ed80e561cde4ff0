#include "merge_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <filesystem>
#include <map>
#include <memory>
#include <set>

#include <nlohmann/json.hpp>

#include "cli.h"
#include "cli_checks.h"
#include "results_reader.h"
#include "run_import.h"
#include "run_metadata.h"
#include "runtime/error.h"
#include "shard_merge.h"

namespace kvbench {

namespace fs = std::filesystem;

namespace {

// A shard file, opened read-only, with its shard runs of the group.
struct ShardFile {
  std::string path;
  std::unique_ptr<ResultsStore> store;
  std::vector<RunRecord> runs;  // shard runs
};

nlohmann::json meta_of(const RunRecord& run) {
  nlohmann::json meta = nlohmann::json::parse(run.meta_json, nullptr, false);
  return meta.is_object() ? meta : nlohmann::json::object();
}

ShardRunInfo describe_shard(const ShardFile& file, const RunRecord& run) {
  const nlohmann::json meta = meta_of(run);
  const nlohmann::json& shard = meta["shard"];
  const nlohmann::json config = nlohmann::json::parse(run.config_json, nullptr, false);
  ShardRunInfo info;
  info.file = file.path;
  info.run_id = run.id;
  info.status = parse_run_status(run.status).value_or(RunStatus::Aborted);
  info.suite = run.suite;
  info.config_hash = run.config_hash;
  info.plan = shard.value("plan", "");
  info.run_group = shard.value("run_group", "");
  info.index = shard.value("index", 0);
  info.count = shard.value("count", 0);
  info.definition = config.is_object() ? config.value("benchmark_definition", 0) : 0;
  info.repetitions = meta.value("repetitions", 0);
  info.build = run.git_sha + (run.git_dirty ? "+dirty" : "");
  info.kernel_path = meta.value("kernel_path", "");
  info.profiles = meta.value("soc_profiles", nlohmann::json::object()).dump();
  for (const auto& [id, name] : stored_cases(*file.store, run.id)) {
    info.case_ids.push_back(id);
    info.cases.push_back(name);
  }
  return info;
}

// A shard file opened read-only; its problems name the argument (SHARD), not --db.
std::unique_ptr<ResultsStore> open_shard(const std::string& path) {
  try {
    auto store = std::make_unique<ResultsStore>(path, Access::ReadOnly);
    require_current_schema(*store);  // before the target is opened or created
    return store;
  } catch (const DatabaseError& e) {
    throw kv::InputError(path, "SHARD", e.reason());
  } catch (const kv::InputError& e) {
    if (e.field() != "--db") throw;
    throw kv::InputError(path, "SHARD", e.reason());
  }
}

// The shard runs each file holds (of one shard index, the newest: a shard run again into the same
// database replaces its earlier attempt); the group: the one given, else the only one the files
// hold.
std::string open_shards(const MergeOptions& o, std::vector<ShardFile>& files) {
  std::set<std::string> groups;
  for (const std::string& path : o.shards) {
    ShardFile file;
    file.path = path;
    file.store = open_shard(path);
    std::map<std::pair<std::string, int>, RunRecord> newest;
    for (RunRecord& run : list_runs(*file.store)) {
      const nlohmann::json meta = meta_of(run);
      if (!meta.contains("shard") || !meta["shard"].is_object()) continue;
      const std::string group = meta["shard"].value("run_group", "");
      groups.insert(group);
      if (!o.run_group.empty() && group != o.run_group) continue;
      newest[{group, meta["shard"].value("index", 0)}] = std::move(run);  // runs come in id order
    }
    for (auto& [key, run] : newest) file.runs.push_back(std::move(run));
    files.push_back(std::move(file));
  }
  if (!o.run_group.empty()) return o.run_group;
  if (groups.size() == 1) return *groups.begin();
  throw kv::InputError("--run-group", "",
                       groups.empty() ? std::string("the files hold no shard run (`kvbench run --shard I/N --run-group ID` makes them)")
                                      : fmt::format("the files hold shards of several run groups ({}): name one", fmt::join(groups, ", ")));
}

// Where a case comes in the suite's plan (models x workloads x policies x SoCs, case_plan.h), from
// the run's resolved configuration; cases it does not name come after, in the shards' order.
std::size_t plan_rank(const nlohmann::json& config, const std::string& case_name, std::size_t unknown) {
  std::vector<std::string> parts;
  for (std::size_t begin = 0, end = 0; end != std::string::npos; begin = end + 1) {
    end = case_name.find('/', begin);
    parts.push_back(case_name.substr(begin, end == std::string::npos ? std::string::npos : end - begin));
  }
  const char* lists[] = {"models", "workloads", "policies", "socs"};
  if (parts.size() != 4 || !config.is_object()) return unknown;
  std::size_t rank = 0;
  for (int k = 0; k < 4; ++k) {
    const nlohmann::json& list = config.value(lists[k], nlohmann::json::array());
    std::size_t at = list.size();
    for (std::size_t i = 0; i < list.size(); ++i) {
      const nlohmann::json& item = list[i];
      const std::string name = item.is_string() ? item.get<std::string>() : item.is_object() ? item.value("name", "") : "";
      if (name == parts[static_cast<std::size_t>(k)]) at = i;
    }
    if (at == list.size()) return unknown;
    rank = rank * (list.size() + 1) + at;
  }
  return rank;
}

// A shard run as its file holds it: what the merge decides on, the run, and the open file.
struct ShardRun {
  const ShardRunInfo* info = nullptr;
  const RunRecord* record = nullptr;
  ResultsStore* store = nullptr;
};

// The merged run's metadata: the first shard's, with where every shard ran and what it held.
nlohmann::json merged_meta(const MergePlan& plan, const std::vector<ShardRun>& runs) {
  const ShardRunInfo& first = *plan.shards.front();
  nlohmann::json meta = meta_of(*runs.front().record);
  meta.erase("shard");
  nlohmann::json shards = nlohmann::json::array();
  std::set<std::string> cpus;
  for (const ShardRun& shard : runs) {
    const ShardRunInfo* s = shard.info;
    const RunRecord& run = *shard.record;
    nlohmann::json own = meta_of(run);
    own.erase("shard");
    cpus.insert(own.value("cpu_model", ""));
    shards.push_back({{"index", s->index},
                      {"file", s->file},
                      {"run_id", s->run_id},
                      {"status", run_status_name(s->status)},
                      {"git_sha", run.git_sha},
                      {"git_dirty", run.git_dirty},
                      {"started_at", run.started_at},
                      {"ended_at", run.ended_at},
                      {"cases", s->cases},
                      {"meta", own}});
  }
  // Host timings of shards on different CPUs are not one machine's: the gate reads cpu_model.
  if (cpus.size() > 1) meta["cpu_model"] = fmt::format("mixed ({})", fmt::join(cpus, "; "));
  meta["merged"] = {{"run_group", first.run_group}, {"count", first.count}, {"plan", first.plan},
                    {"partial", plan.partial},      {"missing", plan.missing}, {"shards", shards}};
  return meta;
}

// Shards are the databases `run --shard` wrote: files, or a server the shards wrote straight into
// (often --into itself).
void check_paths(const MergeOptions& o) {
  std::error_code ec;
  const bool into_file = !is_postgres_uri(o.into);
  const fs::path into(o.into);
  if (into_file && into.has_parent_path() && !fs::is_directory(into.parent_path(), ec)) {
    throw kv::InputError(o.into, "--into", "its directory does not exist (" + into.parent_path().string() + ")");
  }
  std::set<fs::path> seen;
  for (const std::string& path : o.shards) {
    if (is_postgres_uri(path)) {
      if (!seen.insert(path).second) throw kv::InputError(path, "SHARD", "given twice");
      continue;
    }
    if (!fs::exists(path, ec)) throw kv::InputError(path, "SHARD", "does not exist");
    const fs::path canonical = fs::weakly_canonical(path, ec);
    if (!seen.insert(canonical).second) throw kv::InputError(path, "SHARD", "given twice");
    if (into_file && fs::exists(o.into, ec) && fs::equivalent(o.into, path, ec)) {
      throw kv::InputError(o.into, "--into", "is also a shard file: merge into another database");
    }
  }
}

}  // namespace

void add_merge_command(CLI::App& app, MergeOptions& o) {
  o.command = app.add_subcommand("merge", "Join the shard runs of one run group (`run --shard I/N --run-group ID`) into one run of another database");
  o.command->add_option("SHARD", o.shards, "the shards' databases: files, or a PostgreSQL server they wrote into (--into's own: its shard runs are replaced by the merged run)")
      ->required()
      ->transform(without_password_transform("SHARD"));
  add_db_option(o.command, "--into", o.into, "the database that gets the merged run (created when absent)")->required();
  o.command->add_option("--run-group", o.run_group, "the run group to merge (default: the only one the shard files hold)");
  o.command->add_flag("--allow-partial", o.allow_partial,
                      "merge even when shards are missing, failed, aborted or interrupted: the run is tagged partial and its "
                      "status is the worst of its shards' (failed where one is missing)");
  o.command->add_flag("--json", o.json, "print {run_id, db, status, run_group, shards, cases, partial, noisy_repetitions} as JSON");
}

int run_merge(const MergeOptions& o) {
  check_paths(o);
  std::vector<ShardFile> files;
  const std::string group = open_shards(o, files);
  std::vector<ShardRunInfo> shards;
  std::vector<ShardRun> by_shard;  // parallel to shards
  for (ShardFile& file : files) {
    if (file.runs.empty()) {
      throw kv::InputError(file.path, "run group", fmt::format("holds no shard run of run group {}", group));
    }
    for (const RunRecord& run : file.runs) {
      shards.push_back(describe_shard(file, run));
      by_shard.push_back({nullptr, &run, file.store.get()});
    }
  }
  const MergePlan plan = plan_merge(shards, o.allow_partial);
  std::vector<ShardRun> runs;  // in the plan's order
  for (const ShardRunInfo* s : plan.shards) {
    ShardRun run = by_shard[static_cast<std::size_t>(s - shards.data())];
    run.info = s;
    runs.push_back(run);
  }

  ResultsStore target(o.into);
  RunFilter already;
  already.tags = {run_group_tag(group), "merged"};
  if (const std::vector<RunRecord> held = list_runs(target, already); !held.empty()) {
    throw kv::InputError(o.into, "--into", fmt::format("already holds run {}, merged from run group {}", held.front().id, group));
  }
  const RunRecord& first = *runs.front().record;
  const nlohmann::json config = nlohmann::json::parse(first.config_json, nullptr, false);
  struct Source {
    std::size_t rank = 0;
    ImportedCase c;
  };
  std::vector<Source> sources;
  ImportedRun run;
  run.started_at = first.started_at;
  for (const ShardRun& shard : runs) {
    const RunRecord& record = *shard.record;
    run.started_at = std::min(run.started_at, record.started_at);
    run.ended_at = std::max(run.ended_at, record.ended_at);
    for (std::size_t i = 0; i < shard.info->cases.size(); ++i) {
      sources.push_back({plan_rank(config, shard.info->cases[i], std::numeric_limits<std::size_t>::max()), {shard.store, shard.info->case_ids[i]}});
    }
    // Shard runs on the target's own server: the merged run takes their place.
    if (is_postgres_uri(o.into) && shard.store->path() == o.into) run.replaces.push_back(record.id);
    for (const std::string& tag : record.tags) {
      if (std::find(run.info.tags.begin(), run.info.tags.end(), tag) == run.info.tags.end()) run.info.tags.push_back(tag);
    }
  }
  std::stable_sort(sources.begin(), sources.end(), [](const Source& a, const Source& b) { return a.rank < b.rank; });
  run.info.git_sha = first.git_sha;
  run.info.git_dirty = first.git_dirty;
  run.info.config_json = first.config_json;
  run.info.config_hash = first.config_hash;
  run.info.tags.push_back("merged");
  if (plan.partial) run.info.tags.push_back("partial");
  run.info.meta_json = merged_meta(plan, runs).dump();
  run.status = plan.status;
  std::vector<ImportedCase> cases;
  for (const Source& s : sources) cases.push_back(s.c);
  const std::int64_t id = import_run(target, run, cases);

  if (o.json) {
    const RepetitionNoise noise = repetition_noise(target, id);
    fmt::print("{}\n", nlohmann::json{{"run_id", id},
                                      {"db", o.into},
                                      {"status", run_status_name(run.status)},
                                      {"run_group", group},
                                      {"shards", plan.shards.size()},
                                      {"cases", cases.size()},
                                      {"partial", plan.partial},
                                      {"noisy_repetitions", {{"noisy", noise.noisy}, {"of", noise.repetitions}}}}
                           .dump());
  } else {
    fmt::print("merged run group {}: {} of {} shards, {} cases, into run {} of {} ({}{})\n", group, plan.shards.size(),
               plan.shards.front()->count, cases.size(), id, o.into, run_status_name(run.status), plan.partial ? ", partial" : "");
  }
  return kExitOk;
}

}  // namespace kvbench
