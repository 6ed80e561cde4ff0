#include "run_metadata.h"

#include <fmt/format.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <nlohmann/json.hpp>

#include "build_info.h"
#include "machine.h"
#include "runtime/isa.h"
#include "store_location.h"

namespace kvbench {

std::string config_hash(const std::string& resolved_suite_json) {
  return fmt::format("{:016x}", XXH3_64bits(resolved_suite_json.data(), resolved_suite_json.size()));
}

std::string run_group_tag(const std::string& run_group) { return "run-group=" + run_group; }

RunInfo describe_run(const SuiteConfig& suite, const RunOptions& options, const RunSettings& settings) {
  RunInfo info;
  info.git_sha = KVBENCH_GIT_SHA;
  info.git_dirty = KVBENCH_GIT_DIRTY != 0;
  info.config_json = resolved_json(suite);
  info.config_hash = config_hash(info.config_json);
  info.tags = options.tags;
  nlohmann::json meta = nlohmann::json::parse(machine_info().to_json());
  meta["kvbench_version"] = KVBENCH_VERSION;
  meta["build_type"] = KVBENCH_BUILD_TYPE;
  meta["suite"] = suite.name;
  meta["suite_file"] = suite.file;
  meta["filter"] = options.filter;
  meta["repetitions"] = settings.repetitions;
  meta["prefix_cache_start"] = suite.prefix_warm ? "warm" : "cold";
  meta["models_dir"] = settings.models_dir;
  meta["kernel_path"] = kv::isa_name(kv::best_isa());
  meta["l2_dir"] = settings.l2_dir;
  meta["l2_fs_type"] = settings.l2_fs_type;
  nlohmann::json used = nlohmann::json::object();
  if (settings.profiles != nullptr) {
    for (const auto& [soc, profile] : *settings.profiles) used[soc] = {{"origin", profile.origin}, {"hash", profile.hash}};
  }
  meta["soc_profiles"] = used;
  // Read by liveness on a server (results_store.h, RunWriter); a file's runs go by their pid.
  if (is_postgres_uri(options.db_path)) meta["heartbeat_timeout_s"] = options.heartbeat_timeout_s;
  if (!options.device_soc.empty()) {
    meta["device_soc"] = options.device_soc;
    info.tags.push_back("device=" + options.device_soc);  // latest:device=NAME selects a board's newest run
  }
  if (options.shard && settings.shard != nullptr) {
    meta["shard"] = {{"index", options.shard->index},
                     {"count", options.shard->count},
                     {"run_group", options.run_group},
                     {"plan", settings.shard->plan_hash},
                     {"balanced_by", settings.shard->balanced_by}};
    info.tags.push_back(run_group_tag(options.run_group));
  }
  if (settings.sim != nullptr) meta["sim"] = settings.sim->metadata();
  info.meta_json = meta.dump();
  return info;
}

}  // namespace kvbench
