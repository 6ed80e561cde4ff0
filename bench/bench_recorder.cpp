// BM_RecorderOverhead/recorder:<0|1>: one whole case repetition - the rag workload at 4K
// context with 64 generated tokens on one sampled llama-7b-gqa layer, q4 K/V, hybrid selection
// at 25% with quality checks every 8 steps - run by the harness's executor with the engine's
// telemetry sink null or the Recorder. Model and cache construction are outside the timing;
// compare the two real_time figures for the recorder's overhead, per-step operation counts
// included (target: under 3%).
#include <benchmark/benchmark.h>

#include <memory>

#include "bench_common.h"
#include "bench_options.h"
#include "case_pricing.h"
#include "executor.h"
#include "model/synthetic.h"
#include "recorder.h"
#include "sparse/sparse_decoder.h"

namespace {

using namespace kvbench::micro;

void BM_RecorderOverhead(benchmark::State& state) {
  const bool record = state.range(0) != 0;
  const kv::SyntheticPreset& preset = kv::find_synthetic_preset("llama-7b-gqa", "bench");
  kvbench::WorkloadConfig w;
  w.name = w.kind = "rag";
  w.context_tokens = 4096;
  w.gen_tokens = 64;
  kvbench::ScriptTarget target;
  target.max_positions = preset.max_seq_long;
  const kvbench::Script script = kvbench::build_script(kvbench::with_defaults(w, target.max_positions), target).script;
  kv::SparsePolicy policy;
  policy.selector = kv::Selector::Hybrid;
  policy.budget = 0.25f;
  policy.sample_every = 8;
  double events = 0.0;
  for (auto _ : state) {
    state.PauseTiming();
    auto pool = std::make_unique<kv::ThreadPool>(options().threads);
    kv::SyntheticConfig config;
    config.calibration_ctx = 4096;
    config.needles = script.needles;
    auto model = std::make_unique<kv::SyntheticModel>(preset, config, std::vector<int>{preset.layers / 2}, script.positions, *pool);
    auto recorder = std::make_unique<kvbench::Recorder>();
    kv::Telemetry* sink = record ? recorder.get() : nullptr;
    kv::CacheConfig cache_config;
    cache_config.geometry = model->geometry();
    cache_config.k_format = cache_config.v_format = kv::Format::Q4;
    cache_config.residual_tokens = 64;
    cache_config.threads = options().threads;
    auto cache = std::make_unique<kv::KVCache>(cache_config, sink);
    auto decoder = std::make_unique<kv::SparseDecoder>(*cache, policy, sink);
    auto quality = std::make_unique<kvbench::QualityMonitor>(*model, policy, sink);
    // Recording includes the per-step operation counts the cost model prices.
    auto steps = std::make_unique<kvbench::StepCollector>(*recorder);
    kvbench::ExecutionOptions execution;
    execution.quality = quality.get();
    if (record) execution.on_step = [&](const kvbench::StepDone& done) { steps->on_step(done); };
    kvbench::Executor executor(*model, *cache, *decoder, 1.0, [&](int i) { model->ask_needle(i); }, std::nullopt, execution);
    state.ResumeTiming();
    const kvbench::ExecutionResult result = executor.run(script);
    benchmark::DoNotOptimize(result.tpot_ms.data());
    state.PauseTiming();
    events = static_cast<double>(recorder->events().size());
    decoder.reset();
    cache.reset();
    model.reset();
    state.ResumeTiming();
  }
  state.counters["events"] = events;
  state.SetLabel(record ? "recorder" : "null");
}
BENCHMARK(BM_RecorderOverhead)->ArgName("recorder")->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
