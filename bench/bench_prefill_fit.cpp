// BM_PrefillProbeFit/<fmt>/4096: how far the synthetic executor's probe-and-fit prefill time is
// from a full prefill of the same prompt. A 4096-token rag prompt on one layer of the
// llama-7b-gqa preset runs twice per iteration: every query attended (full_prefill_positions
// 4096, what the built-in suites do up to that size), then probed (0: what they do past it,
// a + b * position fitted over the probes). Counters: full_attend_ms and probed_attend_ms
// (prefill attention per layer, clock host; the probed one extrapolated) and fit_error,
// probed / full - 1.
#include <benchmark/benchmark.h>

#include <string>
#include <thread>

#include "bench_common.h"
#include "executor.h"
#include "model/synthetic.h"
#include "workload.h"

namespace {

using namespace kvbench::micro;

double prefill_attend_ms(kv::Format format, int full_positions, int prompt) {
  const kv::SyntheticPreset& preset = kv::find_synthetic_preset("llama-7b-gqa", "BM_PrefillProbeFit");
  kvbench::WorkloadConfig w;
  w.name = w.kind = "rag";
  w.context_tokens = prompt;
  w.gen_tokens = 1;
  kvbench::ScriptTarget target;
  target.max_positions = 2 * prompt;
  const kvbench::Script script = kvbench::build_script(kvbench::with_defaults(w, 2 * prompt), target).script;
  kv::SyntheticConfig config;
  config.calibration_ctx = prompt;
  config.needles = script.needles;
  kv::CacheConfig cache_config;
  kv::ThreadPool pool(options().threads > 0 ? options().threads : static_cast<int>(std::thread::hardware_concurrency()));
  kv::SyntheticModel model(preset, config, {0}, script.positions, pool);
  cache_config.geometry = model.geometry();
  cache_config.k_format = cache_config.v_format = format;
  cache_config.threads = options().threads;
  cache_config.isa = options().isa;
  kv::KVCache cache(cache_config);
  kv::SparseDecoder decoder(cache, kv::SparsePolicy{});
  kvbench::ExecutionOptions run_options;
  run_options.full_prefill_positions = full_positions;
  kvbench::Executor executor(model, cache, decoder, 1.0, [&](int i) { model.ask_needle(i); }, std::nullopt, run_options);
  return executor.run(script).prefill.attend_ms;
}

void probe_fit(benchmark::State& state, kv::Format format, int prompt) {
  double full = 0.0, probed = 0.0;
  for (auto _ : state) {
    full += prefill_attend_ms(format, prompt, prompt);
    probed += prefill_attend_ms(format, 0, prompt);
  }
  const auto n = static_cast<double>(state.iterations());
  state.counters["full_attend_ms"] = full / n;
  state.counters["probed_attend_ms"] = probed / n;
  state.counters["fit_error"] = full > 0.0 ? probed / full - 1.0 : 0.0;
}

struct RegisterPrefillFitBenchmarks {
  RegisterPrefillFitBenchmarks() {
    for (kv::Format f : {kv::Format::F16, kv::Format::Q4}) {
      const std::string name = "BM_PrefillProbeFit/" + std::string(kv::format_name(f)) + "/4096";
      benchmark::RegisterBenchmark(name.c_str(), probe_fit, f, 4096)->Unit(benchmark::kMillisecond)->Iterations(3);
    }
  }
} register_prefill_fit_benchmarks;

}  // namespace
