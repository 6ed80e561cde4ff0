#include "case_preparation.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "case_pricing.h"
#include "device_conditions.h"
#include "executor.h"
#include "layer_sampling.h"
#include "runtime/error.h"
#include "runtime/isa.h"
#include "sparse/visual_budget.h"
#include "sparse_budget_check.h"
#include "synthetic_block.h"

namespace kvbench {

namespace {

namespace fs = std::filesystem;

std::string resolve_path(const std::string& path, const std::string& models_dir, const std::string& base_dir) {
  if (path.empty() || path.front() == '/') return path;
  if (path.find('/') == std::string::npos) return models_dir + "/" + path;  // bare names live in the models dir
  return base_dir + "/" + path;
}

// A fetched model's file: the models dir's when it holds it, else the fetched-models dir's; ""
// (and `missing` says where it was looked for) when neither does.
std::string resolve_fetched(const std::string& path, const std::string& models_dir, const std::string& base_dir,
                            std::string& missing) {
  const std::string first = resolve_path(path, models_dir, base_dir);
  if (fs::exists(first)) return first;
  if (path.find('/') != std::string::npos) {
    missing = first + " does not exist";
    return "";
  }
  const std::string second = fetched_models_dir() + "/" + path;
  if (fs::exists(second)) return second;
  missing = fmt::format("{} is in neither {} nor {} (models/fetch.sh fetches it)", path, models_dir, fetched_models_dir());
  return "";
}

// A V group at least the head's width is the whole head; a narrower one must divide it.
bool v_group_fits(int head_dim, int v_group) { return head_dim % std::min(v_group, head_dim) == 0; }

// A policy's V group must divide the head of every model it runs on.
void check_v_group(const SuiteConfig& suite, const PreparedCase& c) {
  const int head_dim = c.model->preset != nullptr ? c.model->preset->head_dim : c.model->llama.weights->config.head_dim();
  const auto check = [&](int v_group, const std::string& field) {
    if (v_group_fits(head_dim, v_group)) return;
    throw kv::InputError(suite.file, policy_path(suite, c) + field,
                         fmt::format("case {}: {} does not divide head_dim {} of model '{}' (V groups that do: {})", c.info.name(),
                                     v_group, head_dim, c.model->config->name, kv::v_group_choices(head_dim)));
  };
  check(c.policy->cache.v_group, "/v_group");
  if (c.policy->cache.visual.own) check(c.policy->cache.visual.v_group, "/visual/v_group");
}

// A synthetic case whose generator cannot be built from its model's block with its script's
// needles and images (too many needles for the head's channels, say) is refused before any work.
void check_synthetic(const SuiteConfig& suite, const PreparedCase& c) {
  if (c.model->preset == nullptr) return;
  try {
    kv::validate_synthetic_config(synthetic_config(c, suite.seed), *c.model->preset);
  } catch (const kv::InputError& e) {
    throw kv::InputError(suite.file, synthetic_error_path("/models/" + std::to_string(c.model_index) + "/synthetic", e),
                         fmt::format("case {}: {}", c.info.name(), e.reason()));
  }
  // A preset draft generates the same script with its own geometry.
  const std::string& draft = c.policy->speculative.enabled ? c.policy->speculative.draft_preset : std::string();
  if (draft.empty()) return;
  const kv::SyntheticPreset& dp = kv::find_synthetic_preset(draft, "speculative draft");
  const std::string where = policy_path(suite, c) + "/speculative/draft";
  if (!v_group_fits(dp.head_dim, c.policy->cache.v_group)) {
    throw kv::InputError(suite.file, where,
                         fmt::format("case {}: the policy's v_group {} does not divide head_dim {} of draft '{}' (V groups that do: {})",
                                     c.info.name(), c.policy->cache.v_group, dp.head_dim, draft, kv::v_group_choices(dp.head_dim)));
  }
  try {
    kv::validate_synthetic_config(synthetic_config(c, suite.seed), dp);
  } catch (const kv::InputError& e) {
    throw kv::InputError(suite.file, where, fmt::format("case {}: draft '{}': {}", c.info.name(), draft, e.reason()));
  }
}

// A budget that keeps no middle page at the case's largest decode context, or sinks and window
// that pin every page of it, are refused, or noted when the policy allows it.
void check_sparse_budget(const SuiteConfig& suite, PreparedCase& c) {
  const kv::SparsePolicy& sparse = c.policy->sparse;
  const std::string whole = whole_context_pinned_reason(sparse, c.policy->cache.page_tokens, largest_decode_context(c.script.script));
  if (!whole.empty()) {
    if (sparse.allow_pinned_only) {
      c.pinned_only = whole;
      return;
    }
    throw kv::InputError(suite.file, policy_path(suite, c) + "/sparse/window",
                         fmt::format("case {}: {}; shorten the window below the context, use selector full, or set "
                                     "allow_pinned_only: true to run it so (marked degraded)",
                                     c.info.name(), whole));
  }
  const std::string reason = pinned_only_reason(sparse, c.policy->cache.page_tokens, largest_decode_context(c.script.script));
  if (reason.empty()) return;
  if (sparse.allow_pinned_only) {
    c.pinned_only = reason;
    return;
  }
  throw kv::InputError(suite.file, policy_path(suite, c) + "/sparse/" + budget_field(sparse),
                       fmt::format("case {}: {}; raise the budget, shorten the window, or set allow_pinned_only: true to run it "
                                   "as sinks and window only (marked degraded)",
                                   c.info.name(), reason));
}

// A visual budget must keep min_pages_per_image of every image the case holds.
void check_case_visual_budget(const SuiteConfig& suite, const PreparedCase& c) {
  const kv::VisualBudget& visual = c.policy->sparse.visual;
  if (!visual.enabled()) return;
  const Script& script = c.script.script;
  const std::vector<kv::ImagePages> images = image_pages(script, c.policy->cache.page_tokens, script.positions);
  try {
    kv::check_visual_budget(visual, images, "visual");
  } catch (const kv::InputError& e) {
    throw kv::InputError(suite.file, policy_path(suite, c) + "/" + std::string(e.field()).replace(0, 7, "visual/"),
                         fmt::format("case {}: {}", c.info.name(), e.reason()));
  }
}

// A whole-model L1 budget must hold what no demotion can free; otherwise the run could only
// overflow its cap, so it is refused before anything is written.
void check_l1_budget(const SuiteConfig& suite, const PreparedCase& c) {
  const kv::MemoryConfig& memory = c.policy->cache.memory;
  if (memory.l1_bytes == 0) return;
  const L1Floor floor = l1_floor(c);
  const std::uint64_t whole = floor.whole_bytes;
  if (memory.l1_bytes >= whole) return;
  const auto index = static_cast<std::size_t>(c.policy - suite.policies.data());
  throw kv::InputError(suite.file, fmt::format("/policies/{}/memory/l1_bytes", index),
                       fmt::format("{} bytes ({:.1f} MiB) is below the {} bytes ({:.1f} MiB) that case {} needs for the whole "
                                   "model: {} layers x {} kv heads, each with {} pinned pages (sinks and window), {} residual "
                                   "pages and the page summaries of {} tokens, which no demotion can free, plus one page "
                                   "position of the attention call in flight",
                                   memory.l1_bytes, static_cast<double>(memory.l1_bytes) / (1 << 20), whole,
                                   static_cast<double>(whole) / (1 << 20), c.info.name(), floor.layers, floor.kv_heads,
                                   floor.executed.pinned_pages, floor.executed.residual_pages, c.script.script.positions));
}

// Suite model m, loaded (a fetched model not on this machine: its reason, its cases skipped),
// and checked against every policy that could run on it.
std::unique_ptr<CaseModel> load_model(const SuiteConfig& suite, std::size_t m, const std::string& models_dir) {
  const ModelConfig& config = suite.models[m];
  auto model = std::make_unique<CaseModel>();
  model->config = &config;
  if (config.backend == "synthetic") {
    model->chosen = with_weights(kv::find_synthetic_preset(config.preset, "preset"), config.weights);
    model->preset = &model->chosen;
    model->max_positions = model->preset->max_seq_long;
    if (config.sample_layers > model->preset->layers) {
      throw kv::InputError(suite.file, "/models/" + std::to_string(m) + "/sample_layers",
                           fmt::format("{} exceeds the {} layers of preset {}", config.sample_layers, model->preset->layers,
                                       config.preset));
    }
  } else if (config.fetched) {
    const std::string path = resolve_fetched(config.path, models_dir, suite.base_dir, model->missing);
    const std::string tokenizer =
        config.tokenizer.empty() || !model->missing.empty() ? "" : resolve_fetched(config.tokenizer, models_dir, suite.base_dir, model->missing);
    if (model->missing.empty()) {
      model->llama = load_llama(path, tokenizer);
      model->max_positions = model->llama.weights->config.seq_len;
    }
  } else {
    model->llama = load_llama(resolve_path(config.path, models_dir, suite.base_dir),
                              config.tokenizer.empty() ? "" : resolve_path(config.tokenizer, models_dir, suite.base_dir));
    model->max_positions = model->llama.weights->config.seq_len;
  }
  for (std::size_t p = 0; p < suite.policies.size() && model->missing.empty(); ++p) {
    const int draft_layers = suite.policies[p].speculative.enabled ? suite.policies[p].speculative.draft_layers : 0;
    if (model->preset == nullptr && draft_layers >= model->llama.weights->config.layers) {
      throw kv::InputError(suite.file, "/policies/" + std::to_string(p) + "/speculative/draft",
                           fmt::format("layers:{} needs a model of more layers: '{}' has {}", draft_layers, config.name,
                                       model->llama.weights->config.layers));
    }
    if (suite.policies[p].sparse.window > model->max_positions) {
      throw kv::InputError(suite.file, "/policies/" + std::to_string(p) + "/sparse/window",
                           fmt::format("window {} is larger than model '{}' context ({} tokens)", suite.policies[p].sparse.window,
                                       config.name, model->max_positions));
    }
  }
  return model;
}

// A case's script for its model, or why it is skipped, and every check that needs them.
void prepare_case(const SuiteConfig& suite, PreparedCase& c, CaseModel& model, const std::string& models_dir) {
  c.model = &model;
  c.workload = with_defaults(suite.workloads[c.workload_index], model.max_positions);
  if (!model.missing.empty()) {
    c.script.skipped = c.info.skipped_reason = model.missing;
    return;
  }
  ScriptTarget target;
  target.synthetic = model.preset != nullptr;
  target.max_positions = model.max_positions;
  target.seed = suite.seed;
  if (c.policy->sparse.visual.enabled()) target.image_page_tokens = c.policy->cache.page_tokens;
  if (!target.synthetic) {
    c.text = resolve_path(c.workload.text, models_dir, suite.base_dir);
    auto it = model.texts.find(c.text);
    if (it == model.texts.end()) {
      const std::string field = "/workloads/" + std::to_string(c.workload_index) + "/text";
      it = model.texts.emplace(c.text, model.llama.tokenizer.encode(read_text_file(c.text, field), true, false)).first;
    }
    target.text_tokens = static_cast<int>(it->second.size());
  }
  try {
    c.script = build_script(c.workload, target);
  } catch (const kv::InputError& e) {
    throw kv::InputError(suite.file, "/workloads/" + std::to_string(c.workload_index) + "/" + e.field(), e.reason());
  }
  if (c.script.skipped.empty() && target.synthetic && c.policy->speculative.enabled && c.policy->speculative.draft_layers > 0) {
    c.script.skipped = "a layers:N draft runs on the llama backend (the synthetic generator has no output head to propose with)";
  }
  if (c.script.skipped.empty() && !target.synthetic && c.policy->speculative.enabled && !c.policy->speculative.draft_preset.empty()) {
    c.script.skipped = "a synthetic preset drafts on the synthetic backend only (draft '" + c.policy->speculative.draft_preset + "')";
  }
  c.info.skipped_reason = c.script.skipped;
  check_v_group(suite, c);
  if (c.script.skipped.empty()) {
    check_l1_budget(suite, c);
    check_sparse_budget(suite, c);
    check_case_visual_budget(suite, c);
    check_synthetic(suite, c);
  }
}

}  // namespace

// The JSON path of a case's policy in its suite ("/policies/2").
std::string policy_path(const SuiteConfig& suite, const PreparedCase& c) {
  return "/policies/" + std::to_string(static_cast<std::size_t>(c.policy - suite.policies.data()));
}

// The generator's configuration for a synthetic case: the model's block, the seed, and the
// script's needles and images.
kv::SyntheticConfig synthetic_config(const PreparedCase& c, std::uint64_t seed) {
  const Script& script = c.script.script;
  kv::SyntheticConfig synthetic = c.model->config->synthetic;
  synthetic.seed = seed;
  for (const Script::TokenRange& image : script.images) synthetic.images.push_back({image.begin, image.end});
  synthetic.calibration_ctx = std::max(script.positions, 1024);
  synthetic.needles = script.needles;
  // A needle the placement put among the sinks moves just past them (the generator's sinks are
  // never needles); seeds that did not do so keep their positions.
  for (int& needle : synthetic.needles) needle = std::max(needle, synthetic.sinks);
  // The uniform heads are calibrated at one context that must hold the window; the published
  // statistics take any window.
  if (synthetic.statistics == kv::SyntheticStatistics::UniformHeads) {
    synthetic.window = std::min(synthetic.window, synthetic.calibration_ctx / 4);
  }
  return synthetic;
}

L1Floor l1_floor(const PreparedCase& c, const kv::CacheConfig& cache) {
  kv::CacheConfig executed = cache;
  LayerSampling sampling;
  const int positions = c.script.script.positions;
  if (c.model->preset != nullptr) {
    const kv::SyntheticPreset& p = *c.model->preset;
    sampling = LayerSampling::of(p.layers, c.model->config->sample_layers);
    executed.geometry = {sampling.samples, p.q_heads, p.kv_heads, p.head_dim, positions};
  } else {
    const kv::LlamaConfig& l = c.model->llama.weights->config;
    sampling = LayerSampling::all(l.layers);
    executed.geometry = {l.layers, l.heads, l.kv_heads, l.head_dim(), positions};
  }
  L1Floor floor;
  floor.executed = kv::minimum_l1_bytes(executed, positions);
  floor.whole_bytes = sampling.whole_bytes(floor.executed.bytes);
  floor.layers = sampling.layers;
  floor.kv_heads = executed.geometry.kv_heads;
  return floor;
}
L1Floor l1_floor(const PreparedCase& c) { return l1_floor(c, c.policy->cache); }

// The peak L1 (whole model) a case's host run is expected to reach, for planning the ETA only:
// every page of its longest sequence resident, or the policy's cap.
double expected_peak_l1(const PreparedCase& c) {
  kv::CacheConfig everything = c.policy->cache;
  everything.memory.pin_window_tokens = c.script.script.positions + everything.residual_tokens;
  const double bytes = static_cast<double>(l1_floor(c, everything).whole_bytes);
  const std::size_t cap = c.policy->cache.memory.l1_bytes;
  return cap > 0 ? std::min(bytes, static_cast<double>(cap)) : bytes;
}

// The dense layers' weights a case's model keeps resident.
kv::soc::ModelWork model_work_of(const CaseModel& model) {
  return model.preset != nullptr ? model_work(*model.preset) : model_work(*model.llama.weights);
}

PreparedSuite prepare_suite(const SuiteConfig& suite, const std::vector<PlannedCase>& plan, const std::string& models_dir) {
  PreparedSuite prepared;
  prepared.models.resize(suite.models.size());
  for (const PlannedCase& planned : plan) {
    PreparedCase c;
    c.info = planned.info;
    c.policy = &suite.policies[planned.policy_index];
    c.model_index = planned.model_index;
    c.workload_index = planned.workload_index;
    std::unique_ptr<CaseModel>& model = prepared.models[c.model_index];
    if (!model) model = load_model(suite, c.model_index, models_dir);
    prepare_case(suite, c, *model, models_dir);
    prepared.cases.push_back(std::move(c));
  }
  return prepared;
}

void check_device_gate(const SuiteConfig& suite) {
  if (!suite.device.max_start_temp_c) return;
  const DeviceSample now = sample_device(sysfs_root(), engine_cpus());
  if (!now.hottest_c) throw kv::InputError(suite.file, "/device/max_start_temp_c", "cannot wait for a temperature: " + now.no_thermal);
}

void check_kernel_paths(const SuiteConfig& suite, const std::vector<PreparedCase>& cases) {
  for (const PreparedCase& c : cases) {
    const kv::Isa isa = c.policy->cache.isa;
    if (isa == kv::Isa::Auto || kv::isa_supported(isa)) continue;
    std::string supported;
    for (kv::Isa s : kv::supported_isas()) supported += (supported.empty() ? "" : ", ") + std::string(kv::isa_name(s));
    throw kv::InputError(suite.file, policy_path(suite, c) + "/isa",
                         "this CPU or build cannot run the " + std::string(kv::isa_name(isa)) + " kernels (it runs: auto, " + supported + ")");
  }
}

}  // namespace kvbench
