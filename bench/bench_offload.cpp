// BM_OffloadDecode/<prefetch_on|prefetch_off>/<ctx>: one decode step of one llama-7b-gqa layer
// (synthetic backend: 32 q heads, 8 kv heads, head_dim 128; q4 pages of 64 tokens; hybrid
// selection at a 10% budget, 4 sinks, a 256-token window) with L1 capped at 64 MiB and the
// rest of the context in L2 files under --l2-dir. The context is prefilled once (append only)
// before timing, and the first decode step runs untimed: with no selection history yet it
// loads most of its pages from L2 on demand (cold_start_loads, cold_start_ms - a cost of the
// first token after a long prefill, not of decode). Every iteration appends the next token and
// attends. Counters:
// prefetch_hit_rate, l1_cache_hit_rate, dma_wait_share (dma_wait over the timed decode time),
// demand_loads and swap_in_mib per step, peak_l1_mib, peak_rss_mib (the process's, so run the
// benchmark alone with --benchmark_filter to read it against the cap).
#include <benchmark/benchmark.h>

#include <sys/resource.h>

#include <chrono>

#include "bench_common.h"
#include "model/backend.h"
#include "runtime/error.h"
#include "model/synthetic.h"
#include "sparse/sparse_decoder.h"

namespace {

using namespace kvbench::micro;

constexpr std::size_t kL1Bytes = 64u << 20;
constexpr int kSteps = 256;
constexpr int kPrefillChunk = 256;  // small, so the prefill buffers do not dominate peak RSS

struct OffloadRun {
  std::unique_ptr<kv::ThreadPool> pool;
  std::unique_ptr<kv::SyntheticModel> model;
  std::unique_ptr<kv::KVCache> cache;
  std::unique_ptr<kv::SparseDecoder> decoder;
  kv::SeqId seq = 0;
  int pos = 0;
};

std::unique_ptr<OffloadRun> prepare(bool prefetch, int ctx) {
  auto run = std::make_unique<OffloadRun>();
  const kv::SyntheticPreset& preset = kv::find_synthetic_preset("llama-7b-gqa", "BM_OffloadDecode");
  kv::SyntheticConfig synthetic;
  synthetic.calibration_ctx = ctx;
  run->pool = std::make_unique<kv::ThreadPool>(options().threads);
  run->model = std::make_unique<kv::SyntheticModel>(preset, synthetic, std::vector<int>{preset.layers / 2}, ctx + kSteps + 64,
                                                    *run->pool);
  kv::CacheConfig config = decode_shape_config(kv::Format::Q4, ctx + kSteps + 64);
  config.geometry = run->model->geometry();
  config.memory.l1_bytes = kL1Bytes;
  config.memory.l2.dir = l2_dir();
  config.memory.prefetch_lookahead = prefetch ? 2 : 0;
  config.memory.pin_sink_tokens = 4;
  config.memory.pin_window_tokens = 256;
  run->cache = std::make_unique<kv::KVCache>(config);
  run->seq = run->cache->create_sequence();
  kv::StepBuffers buffers;
  for (int at = 0; at < ctx; at += kPrefillChunk) {
    kv::run_step(*run->model, *run->cache, run->seq, nullptr, std::min(kPrefillChunk, ctx - at), at, buffers,
                 kv::StepAttention::AppendOnly);
  }
  run->cache->drain_memory();
  kv::SparsePolicy policy;
  policy.selector = kv::Selector::Hybrid;
  policy.budget = 0.1f;
  policy.sinks = 4;
  policy.window = 256;
  run->decoder = std::make_unique<kv::SparseDecoder>(*run->cache, policy);
  run->pos = ctx;
  return run;
}

void decode_step(OffloadRun& run, std::vector<float>& q, std::vector<float>& k, std::vector<float>& v, std::vector<float>& out) {
  const kv::ModelGeometry& g = run.cache->config().geometry;
  const int dim = g.head_dim;
  for (int h = 0; h < g.kv_heads; ++h) {
    run.model->exact_key(0, h, run.pos, k.data() + static_cast<std::size_t>(h) * dim);
    run.model->exact_value(0, h, run.pos, v.data() + static_cast<std::size_t>(h) * dim);
  }
  run.decoder->apply(run.cache->append(run.seq, 0, k.data(), v.data(), 1));
  for (int h = 0; h < g.q_heads; ++h) {
    run.model->query(run.model->sampled_layers()[0], h, run.pos, q.data() + static_cast<std::size_t>(h) * dim);
  }
  run.decoder->attend(run.seq, 0, q.data(), out.data());
  run.decoder->end_step();
  ++run.pos;
}

void offload_decode(benchmark::State& state, bool prefetch, int ctx) {
  std::unique_ptr<OffloadRun> run;
  try {
    run = prepare(prefetch, ctx);
  } catch (const kv::InputError& error) {  // an unusable --l2-dir
    state.SkipWithError(error.what());
    return;
  }
  const kv::ModelGeometry& g = run->cache->config().geometry;
  const int dim = g.head_dim;
  const kv::MemoryStats prefilled = run->cache->stats().memory;
  std::vector<float> q(static_cast<std::size_t>(g.q_heads) * dim), out(q.size());
  std::vector<float> k(static_cast<std::size_t>(g.kv_heads) * dim), v(k.size());
  const auto cold_start = std::chrono::steady_clock::now();
  decode_step(*run, q, k, v, out);
  const double cold_start_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - cold_start).count();
  const kv::MemoryStats before = run->cache->stats().memory;
  std::uint64_t decode_ns = 0;
  for (auto _ : state) {
    const auto start = std::chrono::steady_clock::now();
    decode_step(*run, q, k, v, out);
    decode_ns += static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count());
    benchmark::DoNotOptimize(out.data());
  }
  const kv::MemoryStats m = run->cache->stats().memory;
  const double steps = static_cast<double>(state.iterations());
  const std::uint64_t hits = m.prefetch_hits - before.prefetch_hits;
  const std::uint64_t demand = m.demand_loads - before.demand_loads;
  const std::uint64_t cold = m.cold_reads - before.cold_reads;
  state.counters["prefetch_hit_rate"] = hits + demand > 0 ? static_cast<double>(hits) / static_cast<double>(hits + demand) : 1.0;
  state.counters["l1_cache_hit_rate"] = cold > 0 ? static_cast<double>(m.cold_hits - before.cold_hits) / static_cast<double>(cold) : 1.0;
  state.counters["dma_wait_share"] = decode_ns > 0 ? static_cast<double>(m.dma_wait_ns - before.dma_wait_ns) / static_cast<double>(decode_ns) : 0.0;
  state.counters["demand_loads"] = static_cast<double>(demand) / steps;
  state.counters["swap_in_mib"] = static_cast<double>(m.swap_in_bytes - before.swap_in_bytes) / steps / (1u << 20);
  state.counters["cold_start_loads"] = static_cast<double>(before.demand_loads - prefilled.demand_loads);
  state.counters["cold_start_ms"] = cold_start_ms;
  state.counters["peak_l1_mib"] = static_cast<double>(m.peak_l1_bytes) / (1u << 20);
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  state.counters["peak_rss_mib"] = static_cast<double>(usage.ru_maxrss) / 1024.0;
  state.SetLabel(m.l2_mode + " on " + m.l2_fs_type + (m.l2_on_ram ? " (RAM, not flash!)" : ""));
}

struct RegisterOffloadBenchmarks {
  RegisterOffloadBenchmarks() {
    for (int ctx : {32768, 131072}) {
      for (bool prefetch : {true, false}) {
        const std::string name = std::string("BM_OffloadDecode/") + (prefetch ? "prefetch_on/" : "prefetch_off/") + std::to_string(ctx);
        benchmark::RegisterBenchmark(name.c_str(), offload_decode, prefetch, ctx)
            ->Iterations(kSteps)
            ->UseRealTime()
            ->Unit(benchmark::kMillisecond);
      }
    }
  }
} register_offload_benchmarks;

}  // namespace
