#include "runner.h"

#include <fmt/format.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>

#include "build_info.h"
#include "case_pricing.h"
#include "case_metrics.h"
#include "degradation.h"
#include "executor.h"
#include "machine.h"
#include "memory/l2_store.h"
#include "model/llama_model.h"
#include "model/synthetic.h"
#include "model_loader.h"
#include "progress.h"
#include "recorder.h"
#include "runtime/error.h"
#include "runtime/isa.h"
#include "soc_profiles.h"
#include "sparse/sparse_decoder.h"

namespace kvbench {

namespace {

namespace fs = std::filesystem;

// Events per repetition kept in the store; the rest are counted in one closing event.
constexpr std::size_t kMaxEvents = 5000;

struct Model {
  const ModelConfig* config = nullptr;
  const kv::SyntheticPreset* preset = nullptr;  // synthetic
  LoadedLlama llama;                            // llama
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
};

std::string resolve_path(const std::string& path, const std::string& models_dir, const std::string& base_dir) {
  if (path.empty() || path.front() == '/') return path;
  if (path.find('/') == std::string::npos) return models_dir + "/" + path;  // bare names live in the models dir
  return base_dir + "/" + path;
}

std::vector<int> sampled_layers(int layers, int samples) {
  std::vector<int> out;
  for (int i = 0; i < samples; ++i) out.push_back((2 * i + 1) * layers / (2 * samples));
  return out;
}

struct Repetition {
  RepetitionRecord record;
  bool degraded = false;
};

struct RepetitionContext {
  std::uint64_t seed = 0;
  double noise_threshold = 0.0;
  const std::string* l2_dir = nullptr;  // the run's own L2 subdirectory for this case ("" none)
  kv::FileIo* l2_io = nullptr;
  const std::atomic<bool>* stop = nullptr;
  const kv::soc::SocProfile* profile = nullptr;  // prices the case on the model clock
};

Repetition run_repetition(const Case& c, const RepetitionContext& context, int repetition) {
  const std::uint64_t seed = context.seed;
  const double noise_threshold = context.noise_threshold;
  const auto started = std::chrono::steady_clock::now();
  const bool rss_reset = reset_peak_rss();
  const CpuSample before = cpu_sample();
  const Script& script = c.script.script;
  const PolicyConfig& policy = *c.policy;
  Recorder recorder;
  kv::CacheConfig cache_config = policy.cache;
  if (cache_config.memory.l1_bytes > 0) cache_config.memory.l2.dir = *context.l2_dir;
  if (context.l2_io != nullptr) cache_config.memory.l2.io = context.l2_io;
  ExecutionOptions execution;
  execution.stop = context.stop;
  execution.test_slowdown = policy.test_slowdown;
  StepCollector steps(recorder);
  execution.on_step = [&steps](const StepDone& done) { steps.on_step(done); };
  kv::ThreadPool pool(cache_config.threads);
  kv::soc::ModelWork model_work_per_token;
  RepetitionFacts facts;
  ExecutionResult result;
  std::optional<kv::PageLayout> layout, f16_layout;
  const auto fill_cache_facts = [&](kv::KVCache& cache, const kv::SparseDecoder& decoder) {
    facts.cache = cache.stats();
    facts.token_drop_ratio = decoder.token_drop_ratio();
    layout = cache.layout();
    kv::PageLayoutSpec spec{cache_config.page_tokens, cache_config.geometry.head_dim, kv::Format::F16, kv::Format::F16,
                            cache_config.v_group, cache_config.pad_pages_to_4k};
    f16_layout = kv::PageLayout::make(spec);
    facts.kv_heads = cache_config.geometry.kv_heads;
  };
  if (c.model->preset != nullptr) {
    const kv::SyntheticPreset& preset = *c.model->preset;
    kv::SyntheticConfig synthetic;
    synthetic.seed = seed;
    synthetic.calibration_ctx = std::max(script.positions, 1024);
    synthetic.needles = script.needles;
    synthetic.window = std::min(synthetic.window, synthetic.calibration_ctx / 4);
    const int samples = std::min(c.model->config->sample_layers, preset.layers);
    // Budgets are the whole model's; the executed layers get their share.
    const auto share = [&](std::size_t bytes) {
      return static_cast<std::size_t>(static_cast<double>(bytes) * samples / preset.layers);
    };
    cache_config.memory.l1_bytes = share(cache_config.memory.l1_bytes);
    cache_config.memory.l2.max_bytes = share(cache_config.memory.l2.max_bytes);
    kv::SyntheticModel model(preset, synthetic, sampled_layers(preset.layers, samples), script.positions, pool);
    cache_config.geometry = model.geometry();
    kv::KVCache cache(cache_config, &recorder);
    kv::SparseDecoder decoder(cache, policy.sparse, &recorder, &model);
    Executor executor(model, cache, decoder, static_cast<double>(preset.layers) / samples, [&](int i) { model.ask_needle(i); },
                      std::nullopt, execution);
    result = executor.run(script);
    fill_cache_facts(cache, decoder);
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
    reference_config.threads = cache_config.threads;
    kv::KVCache cache(cache_config, &recorder);
    kv::KVCache reference_cache(reference_config);
    kv::SparseDecoder decoder(cache, policy.sparse, &recorder, nullptr);
    const std::vector<int>& tokens = c.model->texts.at(c.text);
    Executor executor(tested, cache, decoder, 1.0, {}, LlamaRun{&tested, &reference, &reference_cache, &tokens}, execution);
    result = executor.run(script);
    fill_cache_facts(cache, decoder);
    facts.model_layers = weights->config.layers;
    model_work_per_token = model_work(weights->config);
  }
  facts.execution = &result;
  facts.recorder = &recorder;
  facts.synthetic = c.model->preset != nullptr;
  facts.has_needles = !script.needles.empty();
  facts.layout = &*layout;
  facts.f16_layout = &*f16_layout;
  facts.ttft_target_ms = c.workload.ttft_target_ms;
  facts.tpot_target_ms = c.workload.tpot_target_ms;
  facts.peak_rss_bytes = rss_reset ? peak_rss_bytes() : 0;
  facts.noise = noise_between(before, cpu_sample());
  facts.noisy = facts.noise.cpu_share > noise_threshold;

  Repetition rep;
  RepetitionRecord& record = rep.record;
  record.repetition = repetition;
  record.metrics = contract_metrics(facts, repetition);
  // The same repetition priced by the case's SoC profile: the model clock.
  PricedCase priced;
  priced.steps = &steps.steps();
  priced.layer_scale = result.layer_scale;
  priced.prefill_extrapolated = steps.prefill_extrapolated();
  priced.model = model_work_per_token;
  for (const MetricRecord& m : record.metrics) {
    if (m.name == "peak_l1_bytes" && m.value) priced.kv_resident_bytes = static_cast<std::uint64_t>(*m.value);
  }
  priced.ttft_target_ms = c.workload.ttft_target_ms;
  priced.tpot_target_ms = c.workload.tpot_target_ms;
  for (MetricRecord& m : modelled_metrics(priced, *context.profile, repetition)) record.metrics.push_back(std::move(m));
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
  record.series.assign(series.begin(), series.end());
  const auto histograms = recorder.histograms();
  record.histograms.assign(histograms.begin(), histograms.end());
  std::size_t dropped = 0;
  for (const RecordedEvent& e : recorder.events()) {
    if (record.events.size() >= kMaxEvents && !is_degradation_event(e.kind)) {
      ++dropped;
      continue;
    }
    record.events.push_back({e.step, e.kind, e.detail});
  }
  if (dropped > 0) record.events.push_back({0, "events_truncated", fmt::format("{} more events not stored", dropped)});
  rep.degraded = !degradation_lines(record.metrics, record.events).empty();
  return rep;
}

// A whole-model L1 budget must hold what no demotion can free; otherwise the run could only
// overflow its cap, so it is refused before anything is written.
void check_l1_budget(const SuiteConfig& suite, const Case& c) {
  const kv::MemoryConfig& memory = c.policy->cache.memory;
  if (memory.l1_bytes == 0) return;
  // The executed layers' minimum at their share of the budget, stated for the whole model.
  kv::CacheConfig executed = c.policy->cache;
  int layers = 0, samples = 0;
  const int positions = c.script.script.positions;
  if (c.model->preset != nullptr) {
    const kv::SyntheticPreset& p = *c.model->preset;
    layers = p.layers;
    samples = std::min(c.model->config->sample_layers, p.layers);
    executed.geometry = {samples, p.q_heads, p.kv_heads, p.head_dim, positions};
  } else {
    const kv::LlamaConfig& l = c.model->llama.weights->config;
    layers = samples = l.layers;
    executed.geometry = {l.layers, l.heads, l.kv_heads, l.head_dim(), positions};
  }
  const kv::L1Minimum m = kv::minimum_l1_bytes(executed, positions);
  const auto whole = static_cast<std::uint64_t>(std::ceil(static_cast<double>(m.bytes) * layers / samples));
  if (memory.l1_bytes >= whole) return;
  const auto index = static_cast<std::size_t>(c.policy - suite.policies.data());
  throw kv::InputError(suite.file, fmt::format("/policies/{}/memory/l1_bytes", index),
                       fmt::format("{} bytes ({:.1f} MiB) is below the {} bytes ({:.1f} MiB) that case {} needs for the whole "
                                   "model: {} layers x {} kv heads, each with {} pinned pages (sinks and window), {} residual "
                                   "pages and the page summaries of {} tokens, which no demotion can free, plus one page "
                                   "position of the attention call in flight",
                                   memory.l1_bytes, static_cast<double>(memory.l1_bytes) / (1 << 20), whole,
                                   static_cast<double>(whole) / (1 << 20), c.info.name(), layers, executed.geometry.kv_heads,
                                   m.pinned_pages, m.residual_pages, positions));
}

// The run's own L2 subdirectories, removed with everything in them when the run ends.
class RunL2Dirs {
 public:
  RunL2Dirs() = default;
  RunL2Dirs(const RunL2Dirs&) = delete;
  RunL2Dirs& operator=(const RunL2Dirs&) = delete;
  ~RunL2Dirs() {
    for (const fs::path& dir : dirs_) {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  }
  std::string create(const std::string& base, std::int64_t run_id) {
    const fs::path dir = fs::path(base) / fmt::format("kvbench-run-{}-{}", ::getpid(), run_id);
    std::error_code ec;
    if (!fs::create_directory(dir, ec)) {
      throw kv::InputError(base, "l2_dir", fmt::format("cannot create the run's L2 directory {}: {}", dir.string(),
                                                       ec ? ec.message() : "it already exists"));
    }
    dirs_.push_back(dir);
    return dir.string();
  }

 private:
  std::vector<fs::path> dirs_;
};

std::string config_hash(const std::string& json) {
  return fmt::format("{:016x}", XXH3_64bits(json.data(), json.size()));
}

}  // namespace

std::string resolve_models_dir(const std::string& flag) {
  if (!flag.empty()) return flag;
  if (const char* env = std::getenv("KVBENCH_MODELS_DIR"); env != nullptr && *env != '\0') return env;
  return KVBENCH_DEFAULT_MODELS_DIR;
}

RunSummary run_suite(const SuiteConfig& suite, const RunOptions& options) {
  const std::string models_dir = resolve_models_dir(options.models_dir);
  std::optional<std::regex> filter;
  if (!options.filter.empty()) {
    try {
      filter.emplace(options.filter, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      throw kv::InputError("--filter", options.filter, std::string("not a regular expression: ") + e.what());
    }
  }
  const int repetitions = options.repetitions > 0 ? options.repetitions : suite.repetitions;

  // The cases to run, after the filter; models load only when a kept case needs them.
  std::vector<Case> cases;
  for (std::size_t m = 0; m < suite.models.size(); ++m) {
    for (std::size_t w = 0; w < suite.workloads.size(); ++w) {
      for (std::size_t p = 0; p < suite.policies.size(); ++p) {
        for (const std::string& soc : suite.socs) {
          CaseInfo info{suite.models[m].name, suite.workloads[w].name, suite.policies[p].name, soc, ""};
          if (filter && !std::regex_search(info.name(), *filter)) continue;
          Case c;
          c.info = info;
          c.policy = &suite.policies[p];
          c.model_index = m;
          c.workload_index = w;
          cases.push_back(std::move(c));
        }
      }
    }
  }
  if (cases.empty()) throw kv::InputError("--filter", options.filter, "matches no case of suite '" + suite.name + "'");

  // Preflight: every problem that can be found before running is an error now.
  std::vector<std::unique_ptr<Model>> models(suite.models.size());
  for (Case& c : cases) {
    const std::size_t m = c.model_index;
    const ModelConfig& config = suite.models[m];
    if (!models[m]) {
      auto model = std::make_unique<Model>();
      model->config = &config;
      if (config.backend == "synthetic") {
        model->preset = &kv::find_synthetic_preset(config.preset, "preset");
        model->max_positions = model->preset->max_seq_long;
        if (config.sample_layers > model->preset->layers) {
          throw kv::InputError(suite.file, "/models/" + std::to_string(m) + "/sample_layers",
                               fmt::format("{} exceeds the {} layers of preset {}", config.sample_layers, model->preset->layers,
                                           config.preset));
        }
      } else {
        model->llama = load_llama(resolve_path(config.path, models_dir, suite.base_dir),
                                  config.tokenizer.empty() ? "" : resolve_path(config.tokenizer, models_dir, suite.base_dir));
        model->max_positions = model->llama.weights->config.seq_len;
      }
      for (std::size_t p = 0; p < suite.policies.size(); ++p) {
        if (suite.policies[p].sparse.window > model->max_positions) {
          throw kv::InputError(suite.file, "/policies/" + std::to_string(p) + "/sparse/window",
                               fmt::format("window {} is larger than model '{}' context ({} tokens)", suite.policies[p].sparse.window,
                                           config.name, model->max_positions));
        }
      }
      models[m] = std::move(model);
    }
    Model& model = *models[m];
    c.model = &model;
    c.workload = with_defaults(suite.workloads[c.workload_index], model.max_positions);
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
    c.info.skipped_reason = c.script.skipped;
    if (c.script.skipped.empty()) check_l1_budget(suite, c);
  }

  // The L2 directories: an explicit one must exist; the default one beside the database is
  // created, and only when some policy offloads.
  const fs::path db_path(options.db_path);
  const std::string l2_base = options.l2_dir.empty()
                                  ? (db_path.has_parent_path() ? db_path.parent_path() / "l2" : fs::path("l2")).string()
                                  : options.l2_dir;
  if (!options.l2_dir.empty()) {
    std::error_code ec;
    const fs::file_status status = fs::status(options.l2_dir, ec);
    if (!fs::exists(status)) throw kv::InputError(options.l2_dir, "--l2-dir", "does not exist");
    if (!fs::is_directory(status)) throw kv::InputError(options.l2_dir, "--l2-dir", "is not a directory");
  }
  std::vector<std::string> l2_bases;  // distinct, in first-use order
  for (const Case& c : cases) {
    if (!c.script.skipped.empty() || c.policy->cache.memory.l1_bytes == 0) continue;
    const std::string& own = c.policy->cache.memory.l2.dir;
    const std::string base = own.empty() ? l2_base : own;
    if (std::find(l2_bases.begin(), l2_bases.end(), base) == l2_bases.end()) l2_bases.push_back(base);
  }
  if (options.stop != nullptr && options.stop->load()) throw RunInterrupted();

  // The database, then the run's own L2 subdirectories.
  if (db_path.has_parent_path()) {
    std::error_code ec;
    fs::create_directories(db_path.parent_path(), ec);
    if (ec) throw kv::InputError(options.db_path, "--db", "cannot create its directory: " + ec.message());
  }
  if (options.l2_dir.empty() && std::find(l2_bases.begin(), l2_bases.end(), l2_base) != l2_bases.end()) {
    std::error_code ec;
    fs::create_directories(l2_base, ec);
    if (ec) throw kv::InputError(l2_base, "l2_dir", "cannot create the L2 directory beside the database: " + ec.message());
    if (!fs::is_directory(l2_base)) throw kv::InputError(l2_base, "l2_dir", "is not a directory (the L2 directory beside the database)");
  }
  // The SoC profiles that price the cases: a malformed one stops the run before it starts.
  std::map<std::string, kv::soc::SocProfile> profiles;
  for (const std::string& soc : suite.socs) profiles.emplace(soc, load_soc_profile(soc, options.db_path));
  ResultsStore store(options.db_path);

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
  meta["repetitions"] = repetitions;
  meta["models_dir"] = models_dir;
  meta["kernel_path"] = kv::isa_name(kv::best_isa());
  meta["l2_dir"] = l2_base;
  meta["l2_fs_type"] = l2_bases.empty() ? std::string("none (no policy offloads)") : kv::filesystem_type(l2_bases.front());
  nlohmann::json used = nlohmann::json::object();
  for (const auto& [soc, profile] : profiles) used[soc] = {{"origin", profile.origin}, {"hash", profile.hash}};
  meta["soc_profiles"] = used;
  info.meta_json = meta.dump();

  RunSummary summary;
  summary.db = options.db_path;
  summary.run_id = store.begin_run(info);
  // Each run writes L2 files only inside its own subdirectories, removed whatever the outcome:
  // a concurrent run's files and the directories the user gave are never touched.
  RunL2Dirs l2_dirs;
  std::map<std::string, std::string> l2_run_dir;  // base -> the run's subdirectory
  try {
    for (const std::string& base : l2_bases) l2_run_dir[base] = l2_dirs.create(base, summary.run_id);
  } catch (...) {
    store.finish_run(summary.run_id, RunStatus::Failed);
    throw;
  }
  const auto case_l2_dir = [&](const Case& c) -> std::string {
    if (c.policy->cache.memory.l1_bytes == 0) return "";
    const std::string& own = c.policy->cache.memory.l2.dir;
    return l2_run_dir.at(own.empty() ? l2_base : own);
  };

  // The ETA weighs each repetition by the positions it processes.
  const int units_per_case = repetitions + suite.warmup;
  const auto work_of = [](const Case& c) { return static_cast<double>(std::max(c.script.script.positions, 1)); };
  double work = 0.0;
  for (const Case& c : cases) work += work_of(c) * units_per_case;
  Progress progress(static_cast<int>(cases.size()), work, Progress::mode_for(stderr, options.progress));
  const auto stopped = [&] { return options.stop != nullptr && options.stop->load(); };
  try {
    // A stop seen between cases interrupts the next one before its first repetition.
    for (std::size_t i = 0; i < cases.size() && !summary.interrupted; ++i) {
      const Case& c = cases[i];
      const int index = static_cast<int>(i) + 1;
      const auto case_started = std::chrono::steady_clock::now();
      const auto wall_s = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - case_started).count(); };
      const std::int64_t case_id = store.add_case(summary.run_id, c.info);
      ++summary.cases;
      if (!c.script.skipped.empty()) {
        ++summary.skipped;
        summary.lines.push_back({c.info.name(), "skipped", c.script.skipped});
        progress.skip(work_of(c) * units_per_case);
        progress.case_done(index, c.info.name(), "skipped", 0.0);
        continue;
      }
      const std::string l2_dir = case_l2_dir(c);
      const RepetitionContext context{suite.seed, suite.noise_threshold, &l2_dir, options.l2_io, options.stop,
                                      &profiles.at(c.info.soc)};
      bool degraded = false;
      try {
        for (int r = 1 - suite.warmup; r <= repetitions; ++r) {
          if (stopped()) throw ExecutionStopped();
          progress.start(index, c.info.name(), r < 1 ? "warmup" : fmt::format("repetition {}/{}", r, repetitions));
          Repetition rep = run_repetition(c, context, std::max(r, 1));
          progress.done(work_of(c));
          if (r < 1) continue;  // warmup: not stored
          degraded = degraded || rep.degraded;
          store.add_repetition(case_id, rep.record);
          ++summary.stored_repetitions;
          store.heartbeat(summary.run_id);
        }
        store.finish_case(case_id, CaseStatus::Complete);
        summary.lines.push_back({c.info.name(), "complete", ""});
        summary.degraded += degraded ? 1 : 0;
        progress.case_done(index, c.info.name(), degraded ? "complete (degraded)" : "complete", wall_s());
      } catch (const ExecutionStopped&) {
        store.finish_case(case_id, CaseStatus::Failed, "interrupted");
        ++summary.failed;
        summary.interrupted = true;
        summary.lines.push_back({c.info.name(), "failed", "interrupted"});
        progress.case_done(index, c.info.name(), "interrupted", wall_s());
      } catch (const std::exception& e) {
        // A case that fails is recorded with its error; the others still run.
        store.finish_case(case_id, CaseStatus::Failed, e.what());
        ++summary.failed;
        summary.lines.push_back({c.info.name(), "failed", e.what()});
        progress.clear();
        fmt::print(stderr, "kvbench: case {} failed: {}\n", c.info.name(), e.what());
        progress.case_done(index, c.info.name(), "failed", wall_s());
      }
    }
  } catch (...) {
    progress.clear();
    store.finish_run(summary.run_id, RunStatus::Failed);
    throw;
  }
  progress.clear();
  summary.status = summary.interrupted ? RunStatus::Interrupted : summary.failed > 0 ? RunStatus::Failed : RunStatus::Complete;
  store.finish_run(summary.run_id, summary.status);
  return summary;
}

}  // namespace kvbench
