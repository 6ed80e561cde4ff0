// A planned case made ready to run: its model loaded (once per suite model), its workload's
// script built for that model, and every check that needs the model or the script made before
// anything runs or is written. A problem is an InputError naming the suite file and the field.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "case_plan.h"
#include "cache_config.h"
#include "model/synthetic.h"
#include "model_loader.h"
#include "soc/cost_model.h"
#include "suite_config.h"
#include "workload.h"

namespace kvbench {

struct CaseModel {
  const ModelConfig* config = nullptr;
  kv::SyntheticPreset chosen;                   // synthetic: the preset with the suite's weights
  const kv::SyntheticPreset* preset = nullptr;  // synthetic: &chosen
  LoadedLlama llama;                            // llama
  std::string missing;                          // a fetched model not on this machine: why its cases are skipped
  int max_positions = 0;
  std::map<std::string, std::vector<int>> texts;  // resolved text path -> tokens (llama)
};

struct PreparedCase {
  std::size_t model_index = 0;
  std::size_t workload_index = 0;
  const CaseModel* model = nullptr;  // once loaded
  WorkloadConfig workload;           // with the kind's defaults for this model
  std::string text;                  // llama: the resolved text path (a key of CaseModel::texts)
  const PolicyConfig* policy = nullptr;
  CaseInfo info;
  ScriptOrSkip script;
  std::string pinned_only;  // why its budget keeps no middle page, when the policy allows that
};

// The planned cases, prepared in their order, and the models they load (a model no kept case
// uses is not loaded).
struct PreparedSuite {
  std::vector<std::unique_ptr<CaseModel>> models;  // by suite model index; null where unused
  std::vector<PreparedCase> cases;
};

PreparedSuite prepare_suite(const SuiteConfig& suite, const std::vector<PlannedCase>& plan, const std::string& models_dir);

// A kernel path this CPU cannot run is refused before anything is stored.
void check_kernel_paths(const SuiteConfig& suite, const std::vector<PreparedCase>& cases);
// A suite that waits for a temperature (device.max_start_temp_c) on a machine without a
// thermal zone is refused.
void check_device_gate(const SuiteConfig& suite);

// The JSON path of a case's policy in its suite ("/policies/2").
std::string policy_path(const SuiteConfig& suite, const PreparedCase& c);

// The generator's configuration for a synthetic case: the model's block, the seed, and the
// script's needles and images.
kv::SyntheticConfig synthetic_config(const PreparedCase& c, std::uint64_t seed);

// What no demotion can free in L1 for case c (under `cache`, its policy's unless given), stated
// for the whole model.
struct L1Floor {
  std::uint64_t whole_bytes = 0;
  kv::L1Minimum executed;  // of the executed layers
  int layers = 0, kv_heads = 0;
};
L1Floor l1_floor(const PreparedCase& c, const kv::CacheConfig& cache);
L1Floor l1_floor(const PreparedCase& c);

// The peak L1 (whole model) a case's host run is expected to reach, for planning the ETA only:
// every page of its longest sequence resident, or the policy's cap.
double expected_peak_l1(const PreparedCase& c);

// The dense layers' work per token of a case's model, with the weights it keeps resident.
kv::soc::ModelWork model_work_of(const CaseModel& model);

}  // namespace kvbench
