// Selection and sparse decode bodies for calibrate and kvbench-micro: the Quest bounds and plan of
// one hybrid step on their own, and whole SparseDecoder steps on a q4 context of the layer shape,
// with or without an L1 cap over an L2 directory.
#include <memory>
#include <random>

#include "bench_common.h"
#include "kernel_benchmarks.h"
#include "runtime/thread_pool.h"
#include "sparse/quest.h"
#include "sparse/selection.h"
#include "sparse/sparse_decoder.h"

namespace kvbench::micro {

void selection_benchmark(benchmark::State& state, int ctx) {
  const cases::LayerShape& s = cases::kLayer;
  ColdContexts& setup = cold_contexts(kv::Format::Q4, ctx, cases::Residency::TwoLayers);
  kv::ThreadPool pool(options().threads);
  const auto q = bench_values(static_cast<std::size_t>(s.q_heads) * s.head_dim, 15, false);
  kv::SparsePolicy policy;
  policy.selector = kv::Selector::Hybrid;
  policy.budget = 0.10f;
  std::vector<kv::HeadKeyBounds> bounds;
  setup.cache->key_bounds(setup.copies[0], 0, bounds);
  const std::size_t pages = bounds[0].pages(s.head_dim);
  std::vector<std::vector<float>> accumulated(static_cast<std::size_t>(s.kv_heads), std::vector<float>(pages, 0.0f));
  std::mt19937 rng(4);
  std::uniform_real_distribution<float> mass(0.0f, 1.0f);
  for (auto& head : accumulated) {
    for (float& x : head) x = mass(rng);
  }
  const auto& kernels = kv::page_kernels(setup.cache->isa());
  for (auto _ : state) {
    const auto b = kv::quest_bounds(bounds, s.head_dim, q.data(), s.q_heads, kernels, &pool);
    const kv::SelectionInput input{ctx, s.page_tokens, s.kv_heads, &b, &accumulated};
    benchmark::DoNotOptimize(kv::plan_selection(policy, input, &pool));
  }
  state.counters["bound_products"] = static_cast<double>(pages) * s.q_heads * s.head_dim;
}

void sparse_decode_benchmark(benchmark::State& state, const SparseDecodeCase& c) {
  const cases::LayerShape& s = cases::kLayer;
  kv::CacheConfig config = decode_shape_config(kv::Format::Q4, c.ctx);
  config.memory = c.memory;
  kv::KVCache cache(config, c.telemetry);
  // Two copies taking turns, as two sampled layers do; one when the pool is capped (a swapping
  // case measures one sequence's traffic).
  const int copies = c.memory.l1_bytes > 0 && c.new_query_each_call ? 1 : 2;
  const std::size_t count = static_cast<std::size_t>(c.ctx) * s.kv_heads * s.head_dim;
  std::vector<kv::SeqId> seqs;
  {
    const auto k = bench_values(count, 41, true), v = bench_values(count, 42, false);
    for (int i = 0; i < copies; ++i) {
      seqs.push_back(cache.create_sequence());
      cache.append(seqs.back(), 0, k.data(), v.data(), c.ctx);
    }
  }
  cache.set_phase(kv::Phase::Decode);  // what follows is decode, as in a run (the sink may count by phase)
  kv::SparseDecoder decoder(cache, c.policy, c.telemetry);
  std::vector<std::vector<float>> queries;
  for (unsigned i = 0; i < (c.new_query_each_call ? 16u : 1u); ++i) {
    queries.push_back(bench_values(static_cast<std::size_t>(s.q_heads) * s.head_dim, 100 + i, false));
  }
  std::vector<float> out(queries[0].size());
  std::size_t calls = 0;
  const auto call = [&] {
    decoder.attend(seqs[calls % seqs.size()], 0, queries[calls % queries.size()].data(), out.data());
    decoder.end_step();
    ++calls;
  };
  for (int i = 0; i < c.warm_calls; ++i) call();
  const std::uint64_t wait_before = cache.stats().memory.dma_wait_ns;
  for (auto _ : state) call();
  const double waited = static_cast<double>(cache.stats().memory.dma_wait_ns - wait_before) * 1e-9;
  state.counters["dma_wait_s"] = benchmark::Counter(waited, benchmark::Counter::kAvgIterations);
  state.counters["calls"] = static_cast<double>(calls);
}

}  // namespace kvbench::micro
