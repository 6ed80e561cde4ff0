#include "engine_run.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <map>
#include <optional>

#include "case_metrics.h"
#include "cpu_probe.h"
#include "degradation.h"
#include "executor.h"
#include "layer_sampling.h"
#include "machine.h"
#include "model/llama_model.h"
#include "model/synthetic.h"
#include "quant/page_layout.h"
#include "recorder.h"
#include "sparse/sparse_decoder.h"

namespace kvbench {

namespace {

// Events per repetition kept in the store; the rest are counted in one closing event.
constexpr std::size_t kMaxEvents = 5000;

// The draft's own copy of the context (draft "kv"): the target's geometry and pages in the
// draft's formats, without tiers or a prefix cache.
kv::CacheConfig draft_cache_config(const kv::CacheConfig& target, const SpeculativeConfig& speculative) {
  kv::CacheConfig draft = target;
  draft.k_format = speculative.draft_k_format;
  draft.v_format = speculative.draft_v_format;
  draft.memory = kv::MemoryConfig{};
  draft.visual = kv::VisualPages{};  // the draft's copy is its own formats, in its own uncapped L1
  draft.prefix_cache = false;
  draft.prefix_cache_bytes = 0;
  return draft;
}

// The policy's cache, with a SoC's own capacities and the run's own L2 subdirectory and file I/O.
kv::CacheConfig run_cache_config(const PolicyConfig& policy, const RepetitionContext& context) {
  kv::CacheConfig config = policy.cache;
  if (context.capacities != nullptr) {
    if (context.capacities->l0_bytes > 0) config.memory.l0_bytes = context.capacities->l0_bytes;
    if (context.capacities->l1_bytes > 0) config.memory.l1_bytes = context.capacities->l1_bytes;
  }
  if (config.memory.l1_bytes > 0) config.memory.l2.dir = *context.l2_dir;
  if (context.l2_io != nullptr) config.memory.l2.io = context.l2_io;
  return config;
}

// What a repetition measures around its script and what the engine leaves behind, for the
// metrics. The peak resident set starts again when it is made (and after a warm start).
class Measurement {
 public:
  // A counted run reads nothing of the machine: what /proc and sysfs say differs from run to
  // run, and parsing it would leave the simulated caches in another state.
  explicit Measurement(const RepetitionContext& context)
      : measured_(context.kind == EngineRunKind::Measured),
        noise_threshold_(context.noise_threshold),
        max_start_temp_c_(context.max_start_temp_c),
        sysfs_(measured_ ? sysfs_root() : std::string()),
        cpus_(measured_ ? engine_cpus() : std::vector<int>()) {
    restart_peak_rss();
  }

  Recorder recorder;
  RepetitionFacts facts;
  ExecutionResult result;
  std::optional<kv::PageLayout> layout, f16_layout, visual_layout;
  kv::soc::ModelWork model_work_per_token;

  void restart_peak_rss() { rss_reset_ = measured_ && reset_peak_rss(); }

  // Around the script alone (setup is not the repetition's wall time), the second right after
  // it ran, while the engine's threads still exist (their run-queue wait goes with them). The
  // core-speed probe runs on either side of the script, outside the measured window.
  void start(std::size_t threads) {
    if (!measured_) return;
    probe_before_ms_ = cpu_probe_ms(threads);
    facts.device.start = sample_device(sysfs_, cpus_);
    cpu_before_ = cpu_sample();
    queue_before_ = run_queue_sample();
  }
  void stop(std::size_t threads) {
    if (!measured_) return;
    facts.noise = noise_between(cpu_before_, cpu_sample(), queue_before_, run_queue_sample());
    const std::optional<double> contention = facts.noise.contention();
    facts.device.end = sample_device(sysfs_, cpus_);
    // A core that slowed down (its clock fell, or the kernel throttled it) or started hot
    // measured slowly.
    const std::optional<double> start_c = facts.device.start.hottest_c;
    const bool hot = max_start_temp_c_ && start_c && *start_c >= *max_start_temp_c_;
    facts.noisy = !contention || *contention > noise_threshold_ || facts.device.slowed() || hot;
    // The repetition's peak resident set is read before the probe's buffers can add to it.
    facts.peak_rss_bytes = rss_reset_ ? peak_rss_bytes() : 0;
    facts.cpu_probe_ms = (probe_before_ms_ + cpu_probe_ms(threads)) / 2.0;
  }

  void take_cache(const kv::KVCache& cache, const kv::CacheConfig& config) {
    facts.cache = cache.stats();
    facts.token_drop_ratio = recorder.token_drop_ratio();
    layout = cache.layout();
    visual_layout = cache.visual_layout();
    const kv::PageLayoutSpec spec{config.page_tokens, config.geometry.head_dim, kv::Format::F16, kv::Format::F16, config.v_group,
                                  config.pad_pages_to_4k};
    f16_layout = kv::PageLayout::make(spec);
    facts.kv_heads = config.geometry.kv_heads;
    facts.prefix_cache = config.prefix_cache;
    facts.prefix = cache.prefix_stats();
  }

 private:
  bool measured_ = true;  // EngineRunKind::Measured: the machine is probed around the script
  double noise_threshold_ = 0.0;
  std::optional<double> max_start_temp_c_;
  std::string sysfs_;      // where the device conditions are read
  std::vector<int> cpus_;  // the engine's cores
  bool rss_reset_ = false;
  double probe_before_ms_ = 0.0;
  CpuSample cpu_before_;
  RunQueueSample queue_before_;
};

// A warm start: the first prompt of every sequence runs once before the repetition, into the
// same prefix cache, with every figure closed to it (no telemetry, no steps, no timing); then the
// cache's counters and peaks start again from what it holds.
void warm_prefix_cache(kv::SyntheticModel& model, kv::KVCache& cache, kv::SparseDecoder& decoder, kv::TelemetryGate& telemetry,
                       const ExecutionOptions& execution, const Script& script, double layer_scale, Measurement& m) {
  ExecutionOptions unrecorded;
  unrecorded.stop = execution.stop;
  unrecorded.full_prefill_positions = execution.full_prefill_positions;
  telemetry.set_open(false);
  const auto ask_needle = [&](int i) { model.ask_needle(i); };
  Executor(model, cache, decoder, layer_scale, ask_needle, std::nullopt, unrecorded).run(warm_script(script));
  cache.reset_counters();
  kv::sim::discard_counts();  // under callgrind: the warm start is not the repetition's work
  telemetry.set_open(true);
  m.restart_peak_rss();
}

// The synthetic backend: the generator at the case's sampled layers, budgets in their share, the
// quality monitor regenerating exact K/V, and a draft for speculative decoding (a preset draft
// has its own generator and geometry, sampled at as many layers as the target or all of its own;
// its counts, times and bytes are stated in the target's share).
void execute_synthetic(const PreparedCase& c, const RepetitionContext& context, kv::CacheConfig cache_config,
                       const ExecutionOptions& execution, kv::ThreadPool& pool, Measurement& m) {
  const Script& script = c.script.script;
  const PolicyConfig& policy = *c.policy;
  const kv::SyntheticPreset& preset = *c.model->preset;
  const kv::SyntheticConfig synthetic = synthetic_config(c, context.seed);
  const LayerSampling sampling = LayerSampling::of(preset.layers, c.model->config->sample_layers);
  // Budgets are the whole model's; the executed layers get their share.
  cache_config.memory.l1_bytes = sampling.executed_share(cache_config.memory.l1_bytes);
  cache_config.memory.l2.max_bytes = sampling.executed_share(cache_config.memory.l2.max_bytes);
  cache_config.prefix_cache_bytes = sampling.executed_share(cache_config.prefix_cache_bytes);
  kv::SyntheticModel model(preset, synthetic, sampling.executed_layers(), script.positions, pool);
  cache_config.geometry = model.geometry();
  kv::TelemetryGate telemetry(&m.recorder);
  kv::KVCache cache(cache_config, &telemetry);
  kv::SparseDecoder decoder(cache, policy.sparse, &telemetry);
  QualityMonitor quality(model, policy.sparse, &m.recorder);
  ExecutionOptions checked = execution;
  if (context.kind == EngineRunKind::Measured) checked.quality = &quality;
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
    checked.draft_model_share =
        static_cast<double>(dp.non_attention_macs_per_token()) / static_cast<double>(preset.non_attention_macs_per_token());
  }
  // Only the draft's operation counts reach the recorder (its steps are priced); its time and
  // bytes are figures of their own.
  kv::OpsOnlyTelemetry draft_ops(&telemetry, draft_ratio);  // before the draft: it outlives the draft's reports
  std::optional<kv::KVCache> draft;
  if (policy.speculative.enabled) {
    draft.emplace(draft_config, &draft_ops);
    checked.speculative = &policy.speculative;
    checked.draft = &*draft;
    checked.seed = context.seed;
  }
  const double layer_scale = sampling.scale();
  if (context.prefix_warm && cache_config.prefix_cache) {
    warm_prefix_cache(model, cache, decoder, telemetry, execution, script, layer_scale, m);
  }
  const auto ask_needle = [&](int i) { model.ask_needle(i); };
  Executor executor(model, cache, decoder, layer_scale, ask_needle, std::nullopt, checked);
  m.start(pool.size());
  m.result = executor.run(script);
  m.stop(pool.size());
  m.take_cache(cache, cache_config);
  m.facts.model_layers = preset.layers;
  m.model_work_per_token = model_work(preset);
}

// The llama backend: every layer, checked against the same model on an f32 cache.
void execute_llama(const PreparedCase& c, const RepetitionContext& context, kv::CacheConfig cache_config,
                   const ExecutionOptions& execution, kv::ThreadPool& pool, Measurement& m) {
  const Script& script = c.script.script;
  const PolicyConfig& policy = *c.policy;
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
  kv::KVCache cache(cache_config, &m.recorder);
  kv::KVCache reference_cache(reference_config);
  kv::SparseDecoder decoder(cache, policy.sparse, &m.recorder);
  const std::vector<int>& tokens = c.model->texts.at(c.text);
  ExecutionOptions checked = execution;
  kv::OpsOnlyTelemetry draft_ops(&m.recorder);  // before the draft: it outlives the draft's reports
  std::optional<kv::KVCache> draft;
  if (policy.speculative.enabled) {
    checked.speculative = &policy.speculative;
    checked.seed = context.seed;
    if (policy.speculative.draft_layers == 0) {
      draft.emplace(draft_cache_config(cache_config, policy.speculative), &draft_ops);
      checked.draft = &*draft;
    }
  }
  Executor executor(tested, cache, decoder, 1.0, {}, LlamaRun{&tested, &reference, &reference_cache, &tokens}, checked);
  m.start(pool.size());
  m.result = executor.run(script);
  m.stop(pool.size());
  m.take_cache(cache, cache_config);
  m.facts.model_layers = weights->config.layers;
  m.model_work_per_token = model_work(*weights);
}

// x = the request's index, for scripts of several sequences (requests 2..N against request 1,
// with and without the prefix cache): TTFT when every request has a prompt; quality when every
// request had checks (and, for needle recall, needles): later requests can degrade.
void add_request_series(std::map<std::string, std::vector<double>>& series, const Script& script, const ExecutionResult& result,
                        const Recorder& recorder) {
  bool every_request = !result.repeat_requests.empty() && static_cast<int>(result.ttft_ms.size()) == script.requests;
  for (std::size_t i = 0; every_request && i < result.request_of_ttft.size(); ++i) {
    every_request = result.request_of_ttft[i] == static_cast<int>(i);
  }
  if (every_request) series["ttft_ms_by_request"] = result.ttft_ms;
  const auto& quality = recorder.quality_by_request();
  if (result.repeat_requests.empty() || static_cast<int>(quality.size()) != script.requests) return;
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

// Roleplay: quality by turn index over every session (x = the turn), when every turn had checks
// (needles, only when every turn asked for one).
void add_turn_series(std::map<std::string, std::vector<double>>& series, const Script& script, const Recorder& recorder) {
  const int turns = script.turns;
  if (!script.sessions || turns <= 0) return;
  std::vector<Recorder::RequestQuality> by_turn(static_cast<std::size_t>(turns));
  for (const auto& [request, q] : recorder.quality_by_request()) {
    Recorder::RequestQuality& t = by_turn[static_cast<std::size_t>(request % turns)];
    t.recall_sum += q.recall_sum;
    t.checks += q.checks;
    t.needles += q.needles;
    t.needles_kept += q.needles_kept;
  }
  if (!std::all_of(by_turn.begin(), by_turn.end(), [](const Recorder::RequestQuality& t) { return t.checks > 0; })) return;
  std::vector<double> recall, needles;
  for (const Recorder::RequestQuality& t : by_turn) {
    recall.push_back(t.recall_sum / static_cast<double>(t.checks));
    if (t.needles > 0) needles.push_back(static_cast<double>(t.needles_kept) / static_cast<double>(t.needles));
  }
  series["attn_mass_recall_by_turn"] = std::move(recall);
  if (needles.size() == by_turn.size()) series["needle_recall_by_turn"] = std::move(needles);
}

// The recorder's events, at most kMaxEvents of them beyond the degradations, and one closing
// event counting what was left out.
std::vector<RunEvent> kept_events(const Recorder& recorder) {
  std::vector<RunEvent> kept;
  std::size_t dropped = 0;
  for (const RunEvent& e : recorder.events()) {
    if (kept.size() >= kMaxEvents && !is_degradation_event(e.kind)) {
      ++dropped;
      continue;
    }
    kept.push_back(e);
  }
  if (dropped > 0) kept.push_back(truncated_event(dropped));
  return kept;
}

// How long the repetition took here, generator and reference checks included (not a figure of
// the engine: it sizes suites).
MetricRecord case_wall(int repetition, std::chrono::steady_clock::time_point started, bool noisy) {
  MetricRecord wall;
  wall.repetition = repetition;
  wall.name = "case_wall_ms";
  wall.value = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
  wall.unit = "ms";
  wall.clock = Clock::Host;
  wall.noisy = noisy;
  return wall;
}

// The stored record and the pricing inputs of a finished repetition.
EngineRun finish_run(const PreparedCase& c, Measurement& m, StepCollector& steps, int repetition,
                     std::chrono::steady_clock::time_point started) {
  const Script& script = c.script.script;
  RepetitionFacts& facts = m.facts;
  facts.execution = &m.result;
  facts.recorder = &m.recorder;
  facts.synthetic = c.model->preset != nullptr;
  facts.has_needles = !script.needles.empty();
  facts.has_images = !script.images.empty();
  facts.image_pages = 0.0;
  for (const kv::ImagePages& image : image_pages(script, c.policy->cache.page_tokens, script.positions)) facts.image_pages += image.count();
  facts.image_whole_pages = 0.0;
  const int page_tokens = c.policy->cache.page_tokens;
  for (const Script::TokenRange& image : script.images) {
    if (image.end <= script.positions) facts.image_whole_pages += std::max(0, image.end / page_tokens - image.begin / page_tokens);
  }
  if (facts.has_images) {
    facts.image_pages /= static_cast<double>(script.images.size());
    facts.image_whole_pages /= static_cast<double>(script.images.size());
  }
  facts.visual_pool = c.policy->sparse.visual.enabled();
  facts.layout = &*m.layout;
  facts.f16_layout = &*m.f16_layout;
  facts.visual_layout = &*m.visual_layout;
  facts.ttft_target_ms = c.workload.ttft_target_ms;
  facts.tpot_target_ms = c.workload.tpot_target_ms;

  EngineRun run;
  RepetitionRecord& record = run.record;
  record.repetition = repetition;
  record.metrics = contract_metrics(facts, repetition);
  run.steps = steps.take_steps();
  PricedCase& priced = run.priced;
  priced.layer_scale = m.result.layer_scale;
  priced.prefill_extrapolated = steps.prefill_extrapolated();
  priced.model = m.model_work_per_token;
  // The whole model's peak L1, as the contract states it (peak_l1_bytes): what a SoC must hold.
  run.peak_l1_bytes = static_cast<double>(facts.cache.memory.peak_l1_bytes) * m.result.layer_scale;
  priced.kv_resident_bytes = static_cast<std::uint64_t>(run.peak_l1_bytes);
  priced.ttft_target_ms = c.workload.ttft_target_ms;
  priced.tpot_target_ms = c.workload.tpot_target_ms;
  record.metrics.push_back(case_wall(repetition, started, facts.noisy));
  std::map<std::string, std::vector<double>> series = m.recorder.series();
  series["ttft_ms"] = m.result.ttft_ms;
  series["tpot_ms"] = m.result.tpot_ms;
  series["request_tpot_ms"] = m.result.request_tpot_ms;
  add_request_series(series, script, m.result, m.recorder);
  add_turn_series(series, script, m.recorder);
  record.series.assign(series.begin(), series.end());
  const auto histograms = m.recorder.histograms();
  record.histograms.assign(histograms.begin(), histograms.end());
  record.events = kept_events(m.recorder);
  return run;
}

}  // namespace

namespace {

// The engine built for the case and its script executed; `m` holds what the run left.
void execute(const PreparedCase& c, const RepetitionContext& context, Measurement& m, StepCollector& steps) {
  const bool measured = context.kind == EngineRunKind::Measured;
  kv::CacheConfig cache_config = run_cache_config(*c.policy, context);
  if (!measured) cache_config = kv::serial_config(cache_config);
  ExecutionOptions execution;
  execution.stop = context.stop;
  execution.test_slowdown = measured ? c.policy->test_slowdown : 0.0;
  if (c.workload.full_prefill) execution.full_prefill_positions = std::numeric_limits<int>::max();
  execution.on_step = [&steps](const StepDone& done) { steps.on_step(done); };
  execution.on_request = [&m](int request) { m.recorder.set_request(request); };
  kv::ThreadPool pool(cache_config.threads);
  if (c.model->preset != nullptr) {
    execute_synthetic(c, context, cache_config, execution, pool, m);
  } else {
    execute_llama(c, context, cache_config, execution, pool, m);
  }
}

}  // namespace

EngineRun run_engine(const PreparedCase& c, const RepetitionContext& context, int repetition) {
  const auto started = std::chrono::steady_clock::now();
  Measurement m(context);
  StepCollector steps(m.recorder);
  execute(c, context, m, steps);
  return finish_run(c, m, steps, repetition, started);
}

CountedRun run_engine_counted(const PreparedCase& c, RepetitionContext context) {
  context.kind = EngineRunKind::Counted;
  Measurement m(context);
  StepCollector steps(m.recorder);
  execute(c, context, m, steps);
  return {m.result.prefill_tokens, m.result.decode_tokens, std::string(kv::isa_name(kv::resolve_isa(c.policy->cache.isa)))};
}

}  // namespace kvbench
