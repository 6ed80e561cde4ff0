#include "runner.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <optional>

#include "build_info.h"
#include "case_metrics.h"
#include "case_plan.h"
#include "case_pricing.h"
#include "degradation.h"
#include "executor.h"
#include "layer_sampling.h"
#include "cpu_probe.h"
#include "human_units.h"
#include "machine.h"
#include "memory/l2_store.h"
#include "model/llama_model.h"
#include "model/synthetic.h"
#include "model_loader.h"
#include "progress.h"
#include "quant/page_layout.h"
#include "recorder.h"
#include "run_metadata.h"
#include "run_workspace.h"
#include "runtime/error.h"
#include "runtime/isa.h"
#include "soc_profiles.h"
#include "sparse_budget_check.h"
#include "synthetic_block.h"
#include "sparse/sparse_decoder.h"

namespace kvbench {

namespace {

namespace fs = std::filesystem;

// Events per repetition kept in the store; the rest are counted in one closing event.
constexpr std::size_t kMaxEvents = 5000;

struct Model {
  const ModelConfig* config = nullptr;
  kv::SyntheticPreset chosen;                   // synthetic: the preset with the suite's weights
  const kv::SyntheticPreset* preset = nullptr;  // synthetic: &chosen
  LoadedLlama llama;                            // llama
  std::string missing;                          // a fetched model not on this machine: why its cases are skipped
  int max_positions = 0;
  std::map<std::string, std::vector<int>> texts;  // resolved text path -> tokens (llama)
};

struct Case {
  std::size_t model_index = 0;
  std::size_t workload_index = 0;
  const Model* model = nullptr;  // once loaded
  WorkloadConfig workload;       // with the kind's defaults for this model
  std::string text;              // llama: the resolved text path (a key of Model::texts)
  const PolicyConfig* policy = nullptr;
  CaseInfo info;
  ScriptOrSkip script;
  std::string pinned_only;  // why its budget keeps no middle page, when the policy allows that
};

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

// The JSON path of a case's policy in its suite ("/policies/2").
std::string policy_path(const SuiteConfig& suite, const Case& c) {
  return "/policies/" + std::to_string(static_cast<std::size_t>(c.policy - suite.policies.data()));
}

// A V group at least the head's width is the whole head; a narrower one must divide it.
bool v_group_fits(int head_dim, int v_group) { return head_dim % std::min(v_group, head_dim) == 0; }

// A policy's V group must divide the head of every model it runs on.
void check_v_group(const SuiteConfig& suite, const Case& c) {
  const int head_dim = c.model->preset != nullptr ? c.model->preset->head_dim : c.model->llama.weights->config.head_dim();
  const int v_group = c.policy->cache.v_group;
  if (v_group_fits(head_dim, v_group)) return;
  throw kv::InputError(suite.file, policy_path(suite, c) + "/v_group",
                       fmt::format("case {}: {} does not divide head_dim {} of model '{}' (V groups that do: {})", c.info.name(),
                                   v_group, head_dim, c.model->config->name, kv::v_group_choices(head_dim)));
}

// The generator's configuration for a synthetic case: the model's block, the seed, and the
// script's needles and images.
kv::SyntheticConfig synthetic_config(const Case& c, std::uint64_t seed) {
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

// A synthetic case whose generator cannot be built from its model's block with its script's
// needles and images (too many needles for the head's channels, say) is refused before any work.
void check_synthetic(const SuiteConfig& suite, const Case& c) {
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

// The draft's own copy of the context (draft "kv"): the target's geometry and pages in the
// draft's formats, without tiers or a prefix cache.
kv::CacheConfig draft_cache_config(const kv::CacheConfig& target, const SpeculativeConfig& speculative) {
  kv::CacheConfig draft = target;
  draft.k_format = speculative.draft_k_format;
  draft.v_format = speculative.draft_v_format;
  draft.memory = kv::MemoryConfig{};
  draft.prefix_cache = false;
  draft.prefix_cache_bytes = 0;
  return draft;
}

struct Repetition {
  RepetitionRecord record;
  bool degraded = false;
};

// One engine run of a case: its host and exact figures and its recordings, with the per-step
// counts each SoC profile prices.
struct EngineRun {
  RepetitionRecord record;  // host and exact figures, series, histograms, events
  std::vector<kv::soc::StepOps> steps;
  PricedCase priced;        // its steps pointer is set when priced
  double peak_l1_bytes = 0.0;  // whole model
};

// What a SoC imposes on an engine run of its own (0: the policy's).
struct Capacities {
  std::size_t l0_bytes = 0;
  std::size_t l1_bytes = 0;
};

struct RepetitionContext {
  std::uint64_t seed = 0;
  double noise_threshold = 0.0;
  const std::string* l2_dir = nullptr;  // the run's own L2 subdirectory for this case ("" none)
  kv::FileIo* l2_io = nullptr;
  const std::atomic<bool>* stop = nullptr;
  const Capacities* capacities = nullptr;  // a SoC's rerun; nullptr: the policy's own
  bool prefix_warm = false;  // SuiteConfig::prefix_warm
};

EngineRun run_engine(const Case& c, const RepetitionContext& context, int repetition) {
  const std::uint64_t seed = context.seed;
  const double noise_threshold = context.noise_threshold;
  const auto started = std::chrono::steady_clock::now();
  bool rss_reset = reset_peak_rss();
  CpuSample before;
  RunQueueSample queue_before;
  const Script& script = c.script.script;
  const PolicyConfig& policy = *c.policy;
  Recorder recorder;
  kv::CacheConfig cache_config = policy.cache;
  if (context.capacities != nullptr) {
    if (context.capacities->l0_bytes > 0) cache_config.memory.l0_bytes = context.capacities->l0_bytes;
    if (context.capacities->l1_bytes > 0) cache_config.memory.l1_bytes = context.capacities->l1_bytes;
  }
  if (cache_config.memory.l1_bytes > 0) cache_config.memory.l2.dir = *context.l2_dir;
  if (context.l2_io != nullptr) cache_config.memory.l2.io = context.l2_io;
  ExecutionOptions execution;
  execution.stop = context.stop;
  execution.test_slowdown = policy.test_slowdown;
  if (c.workload.full_prefill) execution.full_prefill_positions = std::numeric_limits<int>::max();
  StepCollector steps(recorder);
  execution.on_step = [&steps](const StepDone& done) { steps.on_step(done); };
  execution.on_request = [&recorder](int request) { recorder.set_request(request); };
  kv::ThreadPool pool(cache_config.threads);
  kv::soc::ModelWork model_work_per_token;
  RepetitionFacts facts;
  // Around the script alone (setup is not the repetition's wall time), the second right after
  // it ran, while the engine's threads still exist (their run-queue wait goes with them).
  // The core-speed probe runs on either side of the script, outside the measured window.
  double probe_before_ms = 0.0;
  const auto start_noise = [&] {
    probe_before_ms = cpu_probe_ms(pool.size());
    before = cpu_sample();
    queue_before = run_queue_sample();
  };
  const auto measure_noise = [&] {
    facts.noise = noise_between(before, cpu_sample(), queue_before, run_queue_sample());
    const std::optional<double> contention = facts.noise.contention();
    facts.noisy = !contention || *contention > noise_threshold;
    // The repetition's peak resident set is read before the probe's buffers can add to it.
    facts.peak_rss_bytes = rss_reset ? peak_rss_bytes() : 0;
    facts.cpu_probe_ms = (probe_before_ms + cpu_probe_ms(pool.size())) / 2.0;
  };
  ExecutionResult result;
  std::optional<kv::PageLayout> layout, f16_layout;
  const auto fill_cache_facts = [&](kv::KVCache& cache) {
    facts.cache = cache.stats();
    facts.token_drop_ratio = recorder.token_drop_ratio();
    layout = cache.layout();
    kv::PageLayoutSpec spec{cache_config.page_tokens, cache_config.geometry.head_dim, kv::Format::F16, kv::Format::F16,
                            cache_config.v_group, cache_config.pad_pages_to_4k};
    f16_layout = kv::PageLayout::make(spec);
    facts.kv_heads = cache_config.geometry.kv_heads;
    facts.prefix_cache = cache_config.prefix_cache;
    facts.prefix = cache.prefix_stats();
  };
  if (c.model->preset != nullptr) {
    const kv::SyntheticPreset& preset = *c.model->preset;
    const kv::SyntheticConfig synthetic = synthetic_config(c, seed);
    const LayerSampling sampling = LayerSampling::of(preset.layers, c.model->config->sample_layers);
    // Budgets are the whole model's; the executed layers get their share.
    cache_config.memory.l1_bytes = sampling.executed_share(cache_config.memory.l1_bytes);
    cache_config.memory.l2.max_bytes = sampling.executed_share(cache_config.memory.l2.max_bytes);
    cache_config.prefix_cache_bytes = sampling.executed_share(cache_config.prefix_cache_bytes);
    kv::SyntheticModel model(preset, synthetic, sampling.executed_layers(), script.positions, pool);
    cache_config.geometry = model.geometry();
    kv::TelemetryGate telemetry(&recorder);
    kv::KVCache cache(cache_config, &telemetry);
    kv::SparseDecoder decoder(cache, policy.sparse, &telemetry);
    QualityMonitor quality(model, policy.sparse, &recorder);  // the generator regenerates exact K/V
    ExecutionOptions checked = execution;
    checked.quality = &quality;
    // Speculative decoding: the draft's own copy of the context, in its formats, without tiers
    // or a prefix cache; only its operation counts reach the recorder (the draft steps are
    // priced), its time and bytes are figures of their own.
    // A preset draft has its own generator and geometry, sampled at as many layers as the
    // target (or all of its own): its counts, times and bytes are stated in the target's share.
    std::optional<kv::SyntheticModel> draft_model;
    double draft_ratio = 1.0;
    kv::CacheConfig draft_config = draft_cache_config(cache_config, policy.speculative);
    if (policy.speculative.enabled && !policy.speculative.draft_preset.empty()) {
      const kv::SyntheticPreset& dp = kv::find_synthetic_preset(policy.speculative.draft_preset, "speculative draft");
      const LayerSampling draft_sampling = LayerSampling::of(dp.layers, sampling.samples);
      draft_model.emplace(dp, synthetic, draft_sampling.executed_layers(), script.positions, pool);
      draft_config.geometry = draft_model->geometry();
      draft_ratio = draft_sampling.scale() / sampling.scale();
      checked.draft_model = &*draft_model;
      checked.draft_layer_ratio = draft_ratio;
      checked.draft_model_share = static_cast<double>(dp.non_attention_macs_per_token()) /
                                  static_cast<double>(preset.non_attention_macs_per_token());
    }
    kv::OpsOnlyTelemetry draft_ops(&telemetry, draft_ratio);  // before the draft: it outlives the draft's reports
    std::optional<kv::KVCache> draft;
    if (policy.speculative.enabled) {
      draft.emplace(draft_config, &draft_ops);
      checked.speculative = &policy.speculative;
      checked.draft = &*draft;
      checked.seed = seed;
    }
    const double layer_scale = sampling.scale();
    const auto ask_needle = [&](int i) { model.ask_needle(i); };
    if (context.prefix_warm && cache_config.prefix_cache) {
      // A warm start: the first prompt of every sequence runs once before the repetition, into
      // the same prefix cache, with every figure closed to it (no telemetry, no steps, no
      // timing); then the cache's counters and peaks start again from what it holds.
      ExecutionOptions unrecorded;
      unrecorded.stop = execution.stop;
      unrecorded.full_prefill_positions = execution.full_prefill_positions;
      telemetry.set_open(false);
      Executor(model, cache, decoder, layer_scale, ask_needle, std::nullopt, unrecorded).run(warm_script(script));
      cache.reset_counters();
      telemetry.set_open(true);
      rss_reset = reset_peak_rss();
    }
    Executor executor(model, cache, decoder, layer_scale, ask_needle, std::nullopt, checked);
    start_noise();
    result = executor.run(script);
    measure_noise();
    fill_cache_facts(cache);
    facts.model_layers = preset.layers;
    model_work_per_token = model_work(preset);
  } else {
    const auto& weights = c.model->llama.weights;
    kv::LlamaModel tested(weights, script.positions, pool);
    kv::LlamaModel reference(weights, script.positions, pool);
    cache_config.geometry = tested.geometry();
    kv::CacheConfig reference_config;
    reference_config.geometry = tested.geometry();
    reference_config.k_format = kv::Format::F32;
    reference_config.v_format = kv::Format::F32;
    reference_config.page_tokens = cache_config.page_tokens;
    reference_config.v_group = cache_config.v_group;  // a group the tested one takes, so it divides the head
    reference_config.threads = cache_config.threads;
    kv::KVCache cache(cache_config, &recorder);
    kv::KVCache reference_cache(reference_config);
    kv::SparseDecoder decoder(cache, policy.sparse, &recorder);
    const std::vector<int>& tokens = c.model->texts.at(c.text);
    ExecutionOptions checked = execution;
    kv::OpsOnlyTelemetry draft_ops(&recorder);  // before the draft: it outlives the draft's reports
    std::optional<kv::KVCache> draft;
    if (policy.speculative.enabled) {
      checked.speculative = &policy.speculative;
      checked.seed = seed;
      if (policy.speculative.draft_layers == 0) {
        draft.emplace(draft_cache_config(cache_config, policy.speculative), &draft_ops);
        checked.draft = &*draft;
      }
    }
    Executor executor(tested, cache, decoder, 1.0, {}, LlamaRun{&tested, &reference, &reference_cache, &tokens}, checked);
    start_noise();
    result = executor.run(script);
    measure_noise();
    fill_cache_facts(cache);
    facts.model_layers = weights->config.layers;
    model_work_per_token = model_work(*weights);
  }
  facts.execution = &result;
  facts.recorder = &recorder;
  facts.synthetic = c.model->preset != nullptr;
  facts.has_needles = !script.needles.empty();
  facts.layout = &*layout;
  facts.f16_layout = &*f16_layout;
  facts.ttft_target_ms = c.workload.ttft_target_ms;
  facts.tpot_target_ms = c.workload.tpot_target_ms;

  EngineRun run;
  RepetitionRecord& record = run.record;
  record.repetition = repetition;
  record.metrics = contract_metrics(facts, repetition);
  run.steps = steps.take_steps();
  PricedCase& priced = run.priced;
  priced.layer_scale = result.layer_scale;
  priced.prefill_extrapolated = steps.prefill_extrapolated();
  priced.model = model_work_per_token;
  for (const MetricRecord& m : record.metrics) {
    if (m.name == "peak_l1_bytes" && m.value) {
      priced.kv_resident_bytes = static_cast<std::uint64_t>(*m.value);
      run.peak_l1_bytes = *m.value;
    }
  }
  priced.ttft_target_ms = c.workload.ttft_target_ms;
  priced.tpot_target_ms = c.workload.tpot_target_ms;
  // How long the repetition took here, generator and reference checks included (not a figure
  // of the engine: it sizes suites).
  MetricRecord wall;
  wall.repetition = repetition;
  wall.name = "case_wall_ms";
  wall.value = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  wall.unit = "ms";
  wall.clock = Clock::Host;
  wall.noisy = facts.noisy;
  record.metrics.push_back(wall);
  std::map<std::string, std::vector<double>> series = recorder.series();
  series["ttft_ms"] = result.ttft_ms;
  series["tpot_ms"] = result.tpot_ms;
  series["request_tpot_ms"] = result.request_tpot_ms;
  // x = the request's index, for scripts of several sequences (requests 2..N against request 1,
  // with and without the prefix cache); only when every request has a prompt.
  bool every_request = !result.repeat_requests.empty() && static_cast<int>(result.ttft_ms.size()) == c.script.script.requests;
  for (std::size_t i = 0; every_request && i < result.request_of_ttft.size(); ++i) {
    every_request = result.request_of_ttft[i] == static_cast<int>(i);
  }
  if (every_request) series["ttft_ms_by_request"] = result.ttft_ms;
  // Quality per request (x = the request's index), when every request of such a script had
  // checks (and, for needle recall, needles): later requests and turns can degrade.
  const auto& quality = recorder.quality_by_request();
  if (!result.repeat_requests.empty() && static_cast<int>(quality.size()) == c.script.script.requests) {
    std::vector<double> recall, needles;
    bool every_needle = true;
    for (const auto& [request, q] : quality) {
      recall.push_back(q.checks > 0 ? q.recall_sum / static_cast<double>(q.checks) : 0.0);
      every_needle = every_needle && q.needles > 0;
      needles.push_back(q.needles > 0 ? static_cast<double>(q.needles_kept) / static_cast<double>(q.needles) : 0.0);
    }
    series["attn_mass_recall_by_request"] = std::move(recall);
    if (every_needle) series["needle_recall_by_request"] = std::move(needles);
  }
  // Roleplay: quality by turn index over every session (x = the turn), when every turn had
  // checks (needles, only when every turn asked for one).
  const int turns = c.script.script.turns;
  if (c.script.script.sessions && turns > 0) {
    std::vector<Recorder::RequestQuality> by_turn(static_cast<std::size_t>(turns));
    for (const auto& [request, q] : quality) {
      Recorder::RequestQuality& t = by_turn[static_cast<std::size_t>(request % turns)];
      t.recall_sum += q.recall_sum;
      t.checks += q.checks;
      t.needles += q.needles;
      t.needles_kept += q.needles_kept;
    }
    const auto every = [&](auto has) { return std::all_of(by_turn.begin(), by_turn.end(), has); };
    if (every([](const Recorder::RequestQuality& t) { return t.checks > 0; })) {
      std::vector<double> recall, needles;
      for (const Recorder::RequestQuality& t : by_turn) {
        recall.push_back(t.recall_sum / static_cast<double>(t.checks));
        if (t.needles > 0) needles.push_back(static_cast<double>(t.needles_kept) / static_cast<double>(t.needles));
      }
      series["attn_mass_recall_by_turn"] = std::move(recall);
      if (needles.size() == by_turn.size()) series["needle_recall_by_turn"] = std::move(needles);
    }
  }
  record.series.assign(series.begin(), series.end());
  const auto histograms = recorder.histograms();
  record.histograms.assign(histograms.begin(), histograms.end());
  std::size_t dropped = 0;
  for (const RunEvent& e : recorder.events()) {
    if (record.events.size() >= kMaxEvents && !is_degradation_event(e.kind)) {
      ++dropped;
      continue;
    }
    record.events.push_back(e);
  }
  if (dropped > 0) record.events.push_back(truncated_event(dropped));
  return run;
}

// Series timed on this host; a case priced for another SoC leaves them out with the host figures.
bool host_timed_series(const std::string& name) {
  return name == "ttft_ms" || name == "ttft_ms_by_request" || name == "tpot_ms" || name == "request_tpot_ms" || name == "swap_in_gb_per_s" ||
         name == "swap_out_gb_per_s";
}

// How one SoC's case is made from an engine run.
struct Pricing {
  const kv::soc::SocProfile* profile = nullptr;
  bool host_case = false;  // the case's SoC is this host: its host-clock figures are kept
  bool rerun = false;      // the run was this SoC's own (capacity_rerun)
  std::vector<RunEvent> notes;  // why it reran, or why it does not fit
};

// The stored repetition of one SoC's case: the run's exact figures (and host ones on the host's
// case), the model clock priced with the SoC's profile, and the pricing notes.
Repetition priced_repetition(const EngineRun& run, const Pricing& how) {
  Repetition rep;
  RepetitionRecord& record = rep.record;
  const int repetition = run.record.repetition;
  record.repetition = repetition;
  for (const MetricRecord& m : run.record.metrics) {
    if (how.host_case || !measured_here(m.clock)) record.metrics.push_back(m);
  }
  PricedCase priced = run.priced;
  priced.steps = &run.steps;
  for (MetricRecord& m : modelled_metrics(priced, *how.profile, repetition)) record.metrics.push_back(std::move(m));
  MetricRecord rerun;
  rerun.repetition = repetition;
  rerun.name = "capacity_rerun";
  rerun.value = how.rerun ? 1.0 : 0.0;
  rerun.unit = metric(rerun.name).unit;
  rerun.clock = Clock::Exact;
  record.metrics.push_back(rerun);
  for (const auto& [name, values] : run.record.series) {
    if (how.host_case || !host_timed_series(name)) record.series.emplace_back(name, values);
  }
  record.histograms = run.record.histograms;
  record.events = how.notes;
  record.events.insert(record.events.end(), run.record.events.begin(), run.record.events.end());
  rep.degraded = !degradation_lines(record.metrics, record.events).empty();
  return rep;
}

std::string gib(double bytes) { return fmt::format("{:.2f} GiB", bytes / (1024.0 * 1024.0 * 1024.0)); }

// Whether a SoC's model budget holds the weights and its runtime reserve; one that does not is
// priced from the host run as it is (fits_in_memory 0) and never reruns.
bool holds_weights(const kv::soc::SocProfile& p, double weights) {
  return weights + p.runtime_reserve_bytes.value <= p.model_budget_bytes.value;
}

// What a SoC does with a case given the host run's peak L1: priced from the host run as it is,
// run again with the SoC's capacities (a smaller KV budget or L0), or priced as it is because it
// cannot even hold what no demotion frees.
struct SocPlan {
  bool rerun = false;
  Capacities capacities;
  std::optional<RunEvent> note;  // CapacityRerun or DoesNotFit
};

SocPlan plan_soc(const kv::soc::SocProfile& p, double weights, double peak_l1, const kv::MemoryConfig& memory,
                 std::uint64_t floor_bytes) {
  SocPlan plan;
  const double kv_budget = p.model_budget_bytes.value - weights - p.runtime_reserve_bytes.value;
  const bool l1_short = kv_budget < peak_l1;
  const bool l0_short = p.l0.capacity_bytes.value < static_cast<double>(memory.l0_bytes);
  if (!l1_short && !l0_short) return plan;
  std::string why;
  if (l1_short) {
    plan.capacities.l1_bytes = static_cast<std::size_t>(kv_budget);
    if (memory.l1_bytes > 0) plan.capacities.l1_bytes = std::min(plan.capacities.l1_bytes, memory.l1_bytes);
    why = fmt::format("its KV budget ({}: model budget less weights and reserve) is below the host run's peak L1 ({})", gib(kv_budget),
                      gib(peak_l1));
  }
  if (l0_short) {
    plan.capacities.l0_bytes = static_cast<std::size_t>(p.l0.capacity_bytes.value);
    why += fmt::format("{}its L0 ({} KiB) is smaller than the policy's ({} KiB)", why.empty() ? "" : " and ",
                       plan.capacities.l0_bytes >> 10, memory.l0_bytes >> 10);
  }
  if (l1_short && plan.capacities.l1_bytes < floor_bytes) {
    plan.note = note_event(EventKind::DoesNotFit,
                           fmt::format("{}: {}, and it cannot even hold the {} no demotion can free (pinned and residual "
                                       "pages, summaries); priced from the host run's capacities",
                                       p.name, why, gib(static_cast<double>(floor_bytes))));
    plan.capacities = {};
    return plan;
  }
  plan.rerun = true;
  plan.note = note_event(EventKind::CapacityRerun,
                         fmt::format("{}: {}; the engine ran again with L0 {} KiB and L1 {}", p.name, why,
                                     (plan.capacities.l0_bytes > 0 ? plan.capacities.l0_bytes : memory.l0_bytes) >> 10,
                                     plan.capacities.l1_bytes > 0 ? gib(static_cast<double>(plan.capacities.l1_bytes))
                                                                  : std::string("uncapped")));
  return plan;
}

// A budget that keeps no middle page at the case's largest decode context is refused, or noted
// when the policy allows it.
void check_sparse_budget(const SuiteConfig& suite, Case& c) {
  const kv::SparsePolicy& sparse = c.policy->sparse;
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

// What no demotion can free in L1 for case c (under `cache`, its policy's unless given), stated
// for the whole model.
struct L1Floor {
  std::uint64_t whole_bytes = 0;
  kv::L1Minimum executed;  // of the executed layers
  int layers = 0, kv_heads = 0;
};

L1Floor l1_floor(const Case& c, const kv::CacheConfig& cache) {
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
L1Floor l1_floor(const Case& c) { return l1_floor(c, c.policy->cache); }

// The peak L1 (whole model) a case's host run is expected to reach, for planning the ETA only:
// every page of its longest sequence resident, or the policy's cap.
double expected_peak_l1(const Case& c) {
  kv::CacheConfig everything = c.policy->cache;
  everything.memory.pin_window_tokens = c.script.script.positions + everything.residual_tokens;
  const double bytes = static_cast<double>(l1_floor(c, everything).whole_bytes);
  const std::size_t cap = c.policy->cache.memory.l1_bytes;
  return cap > 0 ? std::min(bytes, static_cast<double>(cap)) : bytes;
}

// A whole-model L1 budget must hold what no demotion can free; otherwise the run could only
// overflow its cap, so it is refused before anything is written.
void check_l1_budget(const SuiteConfig& suite, const Case& c) {
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

// The dense layers' weights a case's model keeps resident.
kv::soc::ModelWork model_work_of(const Model& model) {
  return model.preset != nullptr ? model_work(*model.preset) : model_work(*model.llama.weights);
}

// Suite model m, loaded (a fetched model not on this machine: its reason, its cases skipped),
// and checked against every policy that could run on it.
std::unique_ptr<Model> load_model(const SuiteConfig& suite, std::size_t m, const std::string& models_dir) {
  const ModelConfig& config = suite.models[m];
  auto model = std::make_unique<Model>();
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
void prepare_case(const SuiteConfig& suite, Case& c, Model& model, const std::string& models_dir) {
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
    check_synthetic(suite, c);
  }
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

  // The cases to run (case_plan.h); models load only when a kept case needs them.
  const std::vector<PlannedCase> plan = plan_cases(suite, options.filter);
  std::vector<Case> cases;  // one per planned case, in its order
  for (const PlannedCase& planned : plan) {
    Case c;
    c.info = planned.info;
    c.policy = &suite.policies[planned.policy_index];
    c.model_index = planned.model_index;
    c.workload_index = planned.workload_index;
    cases.push_back(std::move(c));
  }

  // Preflight: every problem that can be found before running is an error now.
  std::vector<std::unique_ptr<Model>> models(suite.models.size());
  for (Case& c : cases) {
    const std::size_t m = c.model_index;
    if (!models[m]) models[m] = load_model(suite, m, models_dir);
    prepare_case(suite, c, *models[m], models_dir);
  }

  // The L2 directories (run_workspace.h): an explicit one must exist; the default one beside the
  // database is created, and only when some policy offloads.
  const fs::path db_path(options.db_path);
  RunWorkspace workspace(options.l2_dir, options.db_path);
  // A kernel path this CPU cannot run is refused before anything is stored.
  for (const Case& c : cases) {
    const kv::Isa isa = c.policy->cache.isa;
    if (isa == kv::Isa::Auto || kv::isa_supported(isa)) continue;
    std::string supported;
    for (kv::Isa s : kv::supported_isas()) supported += (supported.empty() ? "" : ", ") + std::string(kv::isa_name(s));
    throw kv::InputError(suite.file, policy_path(suite, c) + "/isa",
                         "this CPU or build cannot run the " + std::string(kv::isa_name(isa)) + " kernels (it runs: auto, " + supported + ")");
  }
  for (const Case& c : cases) {
    if (!c.script.skipped.empty() || c.policy->cache.memory.l1_bytes == 0) continue;
    workspace.plan(c.policy->cache.memory.l2.dir, suite.file, policy_path(suite, c) + "/memory/l2_dir");
  }
  if (options.stop != nullptr && options.stop->load()) throw RunInterrupted();

  // The database, then the run's own L2 subdirectories. Only the default location's directory
  // is made: a mistyped --db must not leave a tree of directories behind.
  if (db_path.has_parent_path()) {
    std::error_code ec;
    if (options.db_path == RunOptions{}.db_path) {
      if (!options.check_only) fs::create_directories(db_path.parent_path(), ec);
      if (ec) throw kv::InputError(options.db_path, "--db", "cannot create its directory: " + ec.message());
    } else if (!fs::is_directory(db_path.parent_path(), ec)) {
      throw kv::InputError(options.db_path, "--db", "its directory does not exist (" + db_path.parent_path().string() + ")");
    }
  }
  if (!options.check_only) workspace.make_default_base();
  // The SoC profiles that price the cases: a malformed one stops the run before it starts.
  std::map<std::string, kv::soc::SocProfile> profiles;
  for (const std::string& soc : suite.socs) {
    const auto given = options.profiles.find(soc);
    profiles.emplace(soc, given != options.profiles.end() ? given->second : load_soc_profile(soc, options.db_path));
  }
  if (options.check_only) {
    std::error_code ec;
    if (fs::exists(db_path, ec)) {
      const ResultsStore readable(options.db_path, Access::ReadOnly);  // damaged, foreign or newer: refused
    }
    RunSummary checked;
    checked.db = options.db_path;
    for (const Case& c : cases) {
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
  ResultsStore store(options.db_path);

  RunSettings settings;
  settings.repetitions = repetitions;
  settings.models_dir = models_dir;
  settings.l2_dir = workspace.default_base();
  settings.l2_fs_type = workspace.bases().empty() ? std::string("none (no policy offloads)") : kv::filesystem_type(workspace.bases().front());
  settings.profiles = &profiles;
  const RunInfo info = describe_run(suite, options, settings);

  RunSummary summary;
  summary.db = options.db_path;
  summary.run_id = store.begin_run(info);
  // Each run writes L2 files only inside its own subdirectories (run_workspace.h).
  try {
    workspace.open(summary.run_id);
  } catch (...) {
    store.finish_run(summary.run_id, RunStatus::Failed);
    throw;
  }
  const auto case_l2_dir = [&](const Case& c, bool capped) -> std::string {
    return capped ? workspace.run_dir(c.policy->cache.memory.l2.dir) : "";
  };

  // Consecutive cases differing only in their SoC share one engine run per repetition.
  const std::vector<std::pair<std::size_t, std::size_t>> groups = engine_run_groups(plan);  // [begin, end) into cases

  // The ETA weighs each repetition by the positions it processes.
  const int units_per_case = repetitions + suite.warmup;
  const auto work_of = [](const Case& c) { return static_cast<double>(std::max(c.script.script.positions, 1)); };
  // A SoC's own runs are planned from the peak L1 its host run is expected to reach, and
  // corrected once the first host run says what it was.
  std::vector<std::uint8_t> expected_rerun(cases.size(), 0);
  double work = 0.0;
  int engine_runs = 0, soc_runs = 0;
  for (const auto& [begin, end] : groups) {
    const Case& c = cases[begin];
    if (!c.script.skipped.empty()) continue;
    work += work_of(c) * units_per_case;
    engine_runs += units_per_case;
    const auto weights = static_cast<double>(model_work_of(*c.model).resident_bytes);
    const double peak = expected_peak_l1(c);
    const std::uint64_t floor = l1_floor(c).whole_bytes;
    for (std::size_t i = begin; i < end; ++i) {
      const kv::soc::SocProfile& p = profiles.at(cases[i].info.soc);
      if (cases[i].info.soc == "host" || !holds_weights(p, weights)) continue;
      if (!plan_soc(p, weights, peak, c.policy->cache.memory, floor).rerun) continue;
      expected_rerun[i] = 1;
      work += work_of(c) * repetitions;
      soc_runs += repetitions;
    }
  }
  Progress progress(static_cast<int>(cases.size()), work, Progress::mode_for(stderr, options.progress), stderr, options.heartbeat_s);
  progress.note(fmt::format("{} case{}: {} engine run{} planned{}", cases.size(), cases.size() == 1 ? "" : "s", engine_runs + soc_runs,
                            engine_runs + soc_runs == 1 ? "" : "s",
                            soc_runs > 0 ? fmt::format(" ({} of them SoCs' own, expected from each case's size)", soc_runs) : ""));
  const auto stopped = [&] { return options.stop != nullptr && options.stop->load(); };

  // One SoC's case of a group.
  struct Member {
    const Case* c = nullptr;
    int index = 0;  // 1-based, for the progress lines
    std::int64_t id = 0;
    Pricing how;
    Capacities capacities;
    bool decided = false;  // whether it reruns is known
    double engine_s = 0.0;         // wall time of the engine runs that are its own
    bool failed = false;
    bool finished = false;  // stored as complete
    bool degraded = false;
  };
  try {
    // A stop seen between cases interrupts the next one before its first repetition.
    for (std::size_t g = 0; g < groups.size() && !summary.interrupted; ++g) {
      const auto [begin, end] = groups[g];
      const Case& c = cases[begin];
      const auto group_started = std::chrono::steady_clock::now();
      const auto wall_s = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - group_started).count(); };
      // The group's planned work and what of it ran: what did not run leaves the ETA at its end.
      double group_planned = work_of(c) * units_per_case, group_done = 0.0;
      const auto add_work = [&](double w) {
        group_planned += w;
        progress.add(w);
      };
      const auto skip_work = [&](double w) {
        group_planned -= w;
        progress.skip(w);
      };
      std::vector<Member> members;
      for (std::size_t i = begin; i < end; ++i) {
        Member m;
        m.c = &cases[i];
        m.index = static_cast<int>(i) + 1;
        m.id = store.add_case(summary.run_id, cases[i].info);
        m.how.profile = &profiles.at(cases[i].info.soc);
        m.how.host_case = cases[i].info.soc == "host";
        m.decided = m.how.host_case;  // the host's case is the host run itself
        if (!cases[i].pinned_only.empty()) m.how.notes.push_back(note_event(EventKind::PinnedOnly, cases[i].pinned_only));
        ++summary.cases;
        members.push_back(std::move(m));
      }
      // The host run's time is the host case's, where the SoCs include the host.
      Member no_host_case;
      Member& host_member = [&]() -> Member& {
        for (Member& m : members) {
          if (m.how.host_case) return m;
        }
        return no_host_case;
      }();
      // One engine run, timed for the progress lines and its case's time.
      const auto timed_run = [&](Member& owner, const RepetitionContext& context, int repetition) {
        const auto started = std::chrono::steady_clock::now();
        EngineRun run = run_engine(c, context, repetition);
        const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        owner.engine_s += took;
        group_done += work_of(c);
        progress.done(work_of(c));
        progress.repetition_done(took);
        return run;
      };
      if (!c.script.skipped.empty()) {
        for (const Member& m : members) {
          ++summary.skipped;
          summary.lines.push_back({m.c->info.name(), "skipped", c.script.skipped});
          progress.case_done(m.index, m.c->info.name(), "skipped", "");
        }
        progress.skip(work_of(c) * units_per_case);
        continue;
      }
      // A SoC whose budget cannot hold the weights is priced from the host run as it is.
      const kv::soc::ModelWork work_per_token = model_work_of(*c.model);
      const auto weights = static_cast<double>(work_per_token.resident_bytes);
      for (Member& m : members) {
        const kv::soc::SocProfile& p = *m.how.profile;
        if (!holds_weights(p, weights)) {
          const double reserve = p.runtime_reserve_bytes.value, budget = p.model_budget_bytes.value;
          m.decided = true;
          m.how.notes.push_back(note_event(EventKind::DoesNotFit,
                                 fmt::format("{}: the weights ({}) and the runtime reserve ({}) exceed the model budget ({}); "
                                             "priced from the host run's capacities, fits_in_memory 0",
                                             p.name, gib(weights), gib(reserve), gib(budget))));
        }
      }
      const std::string host_l2 = case_l2_dir(c, c.policy->cache.memory.l1_bytes > 0);
      const RepetitionContext host_context{suite.seed, suite.noise_threshold, &host_l2, options.l2_io, options.stop, nullptr,
                                           suite.prefix_warm};
      const L1Floor floor = l1_floor(c);
      // Whether each SoC reruns is decided from the first host run's actual peak L1.
      const kv::MemoryConfig& memory = c.policy->cache.memory;
      const auto predicted = [&](const Member& m) { return expected_rerun[static_cast<std::size_t>(m.index - 1)] != 0; };
      for (const Member& m : members) group_planned += predicted(m) ? work_of(c) * repetitions : 0.0;  // already in the total
      const auto decide = [&](const EngineRun& run) {
        for (Member& m : members) {
          if (m.decided) continue;
          m.decided = true;
          SocPlan plan = plan_soc(*m.how.profile, weights, run.peak_l1_bytes, memory, floor.whole_bytes);
          m.capacities = plan.capacities;
          m.how.rerun = plan.rerun;
          if (plan.note) m.how.notes.push_back(std::move(*plan.note));
          // Its own runs join the ETA, or leave it, where the plan guessed wrong.
          if (plan.rerun && !predicted(m)) add_work(work_of(c) * repetitions);
          if (!plan.rerun && predicted(m)) skip_work(work_of(c) * repetitions);
        }
      };
      const auto fail = [&](Member& m, const std::string& error) {
        m.failed = true;
        store.finish_case(m.id, CaseStatus::Failed, error);
        ++summary.failed;
        summary.lines.push_back({m.c->info.name(), "failed", error});
        progress.case_done(m.index, m.c->info.name(), error == "interrupted" ? "interrupted" : "failed",
                           " after " + human_duration_ms(wall_s() * 1e3));
      };
      const auto fail_all = [&](const std::string& error) {
        for (Member& m : members) {
          if (!m.failed && !m.finished) fail(m, error);
        }
      };
      try {
        for (int r = 1 - suite.warmup; r <= repetitions; ++r) {
          if (stopped()) throw ExecutionStopped();
          progress.start(members.front().index, c.info.name(), r < 1 ? "warmup" : fmt::format("repetition {}/{}", r, repetitions),
                         work_of(c));
          const EngineRun run = timed_run(host_member, host_context, std::max(r, 1));
          decide(run);
          if (r < 1) continue;  // warmup: not stored
          for (Member& m : members) {
            if (m.failed) continue;
            Repetition rep;
            if (m.how.rerun) {
              if (stopped()) throw ExecutionStopped();
              progress.start(m.index, m.c->info.name(), fmt::format("repetition {}/{} with {}'s capacities", r, repetitions, m.c->info.soc),
                             work_of(c));
              try {
                const std::string own_l2 = case_l2_dir(c, m.capacities.l1_bytes > 0 || c.policy->cache.memory.l1_bytes > 0);
                RepetitionContext own = host_context;
                own.l2_dir = &own_l2;
                own.capacities = &m.capacities;
                rep = priced_repetition(timed_run(m, own, r), m.how);
              } catch (const ExecutionStopped&) {
                throw;
              } catch (const DatabaseError&) {
                throw;  // the store, not the case: the run stops
              } catch (const std::exception& e) {
                // A SoC's own run that fails fails its case only.
                progress.clear();
                fmt::print(stderr, "kvbench: case {} failed: {}\n", m.c->info.name(), e.what());
                fail(m, e.what());
                continue;
              }
            } else {
              rep = priced_repetition(run, m.how);
            }
            m.degraded = m.degraded || rep.degraded;
            store.add_repetition(m.id, rep.record);
            ++summary.stored_repetitions;
          }
          store.heartbeat(summary.run_id);
        }
        for (Member& m : members) {
          if (m.failed) continue;
          store.finish_case(m.id, CaseStatus::Complete);
          m.finished = true;
          summary.lines.push_back({m.c->info.name(), "complete", ""});
          summary.degraded += m.degraded ? 1 : 0;
          const bool own_runs = m.how.host_case || m.how.rerun;
          progress.case_done(m.index, m.c->info.name(), m.degraded ? "complete (degraded)" : "complete",
                             own_runs ? " in " + human_duration_ms(m.engine_s * 1e3) : ", priced from the host run");
        }
      } catch (const ExecutionStopped&) {
        summary.interrupted = true;
        fail_all("interrupted");
      } catch (const DatabaseError& e) {
        // The store, not the case: the run stops. Its cases in flight say why where the file
        // still takes it (an update in place often fits where new rows do not).
        const std::string why = "the results database could not be written: " + e.reason();
        for (Member& m : members) {
          if (m.failed || m.finished) continue;
          try {
            store.finish_case(m.id, CaseStatus::Failed, why);
          } catch (const std::exception&) {
          }
        }
        throw;
      } catch (const std::exception& e) {
        // A case that fails is recorded with its error; the others still run.
        progress.clear();
        fmt::print(stderr, "kvbench: case {} failed: {}\n", c.info.name(), e.what());
        fail_all(e.what());
      }
      if (group_planned > group_done) progress.skip(group_planned - group_done);
    }
  } catch (...) {
    progress.clear();
    // The run's L2 files go first: on a full filesystem shared with the database, their space
    // lets the store take the run's end. A store that still cannot is not the error to report.
    workspace.remove_all();
    try {
      store.finish_run(summary.run_id, RunStatus::Failed);
    } catch (const std::exception& e) {
      fmt::print(stderr, "kvbench: run {} could not be marked failed: {}\n", summary.run_id, e.what());
    }
    throw;
  }
  progress.clear();
  summary.status = summary.interrupted ? RunStatus::Interrupted : summary.failed > 0 ? RunStatus::Failed : RunStatus::Complete;
  store.finish_run(summary.run_id, summary.status);
  return summary;
}

}  // namespace kvbench
