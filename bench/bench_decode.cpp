// Sparse decode on the BM_DecodeAttention shape (bench_attention.cpp), contexts cycled likewise.
// BM_DecodeAttentionReference/<ctx>: the exact reference on the same shape (dense F32).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "attention/attention_ref.h"
#include "bench_common.h"
#include "sparse/quest.h"
#include "sparse/selection.h"
#include "sparse/sparse_decoder.h"

namespace {

using namespace kvbench::micro;

// BM_SparseDecode/<selector>/<budget_pct>/<ctx>: the same q4 shape through the sparse decoder
// (selection plan, Quest bounds, H2O bookkeeping and attention over the kept pages).
void sparse_decode(benchmark::State& state, kv::Selector selector, int budget_pct, int ctx) {
  ColdContexts& setup = cold_contexts(kv::Format::Q4, ctx);
  kv::SparsePolicy policy;
  policy.selector = selector;
  policy.budget = selector == kv::Selector::Window ? 0.0f : static_cast<float>(budget_pct) / 100.0f;
  policy.sinks = 4;
  policy.window = 256;
  kv::SparseDecoder decoder(*setup.cache, policy);
  const auto q = bench_values(32 * 128, 13, false);
  std::vector<float> out(q.size());
  std::size_t next = 0;
  for (auto _ : state) {
    decoder.attend(setup.copies[next], 0, q.data(), out.data());
    decoder.end_step();
    next = (next + 1) % setup.copies.size();
    benchmark::DoNotOptimize(out.data());
  }
  // The last step's share of context tokens left out, over kv heads (a telemetry sink would put
  // its bookkeeping inside the timed loop; the harness's recorder owns the run's mean).
  double dropped = 0.0;
  const kv::SelectionPlan& plan = decoder.last_plan();
  const int page_tokens = setup.cache->config().page_tokens;
  for (const kv::HeadSelection& head : plan.heads) {
    int kept = 0;
    for (int p : head.pages) kept += std::min(page_tokens, ctx - p * page_tokens);
    dropped += 1.0 - static_cast<double>(kept) / ctx;
  }
  state.counters["token_drop_ratio"] = plan.heads.empty() ? 0.0 : dropped / static_cast<double>(plan.heads.size());
  state.SetLabel(std::string(kv::isa_name(setup.cache->isa())));
}

// BM_SparseStage/<stage>/<ctx>: one selection stage of BM_SparseDecode/hybrid/10 on its own,
// over the same cycled copies: `bounds` (KVCache::key_bounds and the Quest bounds of every
// page) and `plan` (plan_selection from bounds and accumulated scores). The rest of a sparse
// step is attention over the kept pages, which the cache views on their own.
enum class SparseStage { Bounds, Plan };

void sparse_stage(benchmark::State& state, SparseStage stage, int ctx) {
  ColdContexts& setup = cold_contexts(kv::Format::Q4, ctx);
  kv::KVCache& cache = *setup.cache;
  const kv::ModelGeometry& g = cache.config().geometry;
  const auto q = bench_values(32 * 128, 13, false);
  const auto& kernels = kv::page_kernels(cache.isa());
  kv::SparsePolicy policy;
  policy.selector = kv::Selector::Hybrid;
  policy.budget = 0.1f;
  policy.sinks = 4;
  policy.window = 256;
  std::vector<kv::HeadKeyBounds> key_bounds;
  cache.key_bounds(setup.copies[0], 0, key_bounds);
  const auto bounds = kv::quest_bounds(key_bounds, g.head_dim, q.data(), g.q_heads, kernels, &cache.pool());
  std::vector<std::vector<float>> accumulated(bounds.size());
  for (std::size_t h = 0; h < bounds.size(); ++h) accumulated[h] = bench_values(bounds[h].size(), 14 + static_cast<unsigned>(h), false);
  std::size_t next = 0;
  for (auto _ : state) {
    switch (stage) {
      case SparseStage::Bounds:
        cache.key_bounds(setup.copies[next], 0, key_bounds);
        benchmark::DoNotOptimize(kv::quest_bounds(key_bounds, g.head_dim, q.data(), g.q_heads, kernels, &cache.pool()));
        break;
      case SparseStage::Plan:
        benchmark::DoNotOptimize(kv::plan_selection(policy, {ctx, cache.config().page_tokens, g.kv_heads, &bounds, &accumulated}, &cache.pool()));
        break;
    }
    next = (next + 1) % setup.copies.size();
    benchmark::ClobberMemory();
  }
  state.SetLabel(std::string(kv::isa_name(cache.isa())));
}

void decode_reference(benchmark::State& state, int ctx) {
  const std::size_t count = static_cast<std::size_t>(ctx) * 8 * 128;
  const auto k = bench_values(count, 11, true);
  const auto v = bench_values(count, 12, false);
  const auto q = bench_values(32 * 128, 13, false);
  std::vector<float> out(q.size());
  const kv::AttentionShape shape{32, 8, 128, 1.0f / std::sqrt(128.0f)};
  for (auto _ : state) {
    kv::attention_ref(shape, q.data(), 1, k.data(), v.data(), ctx, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(2 * count * sizeof(float)));
}

struct RegisterDecodeBenchmarks {
  RegisterDecodeBenchmarks() {
    for (int ctx : {4096, 32768}) {
      const std::string ref = "BM_DecodeAttentionReference/" + std::to_string(ctx);
      benchmark::RegisterBenchmark(ref.c_str(), decode_reference, ctx)->UseRealTime()->Unit(benchmark::kMicrosecond);
      for (kv::Selector s : {kv::Selector::Hybrid, kv::Selector::Quest, kv::Selector::H2O, kv::Selector::Window}) {
        const int pct = 10;
        const std::string name = "BM_SparseDecode/" + std::string(kv::selector_name(s)) + "/" + std::to_string(pct) + "/" +
                                 std::to_string(ctx);
        benchmark::RegisterBenchmark(name.c_str(), sparse_decode, s, pct, ctx)->UseRealTime()->Unit(benchmark::kMicrosecond);
      }
      for (const auto& [stage, stage_name] : {std::pair{SparseStage::Bounds, "bounds"}, std::pair{SparseStage::Plan, "plan"}}) {
        const std::string name = "BM_SparseStage/" + std::string(stage_name) + "/" + std::to_string(ctx);
        benchmark::RegisterBenchmark(name.c_str(), sparse_stage, stage, ctx)->UseRealTime()->Unit(benchmark::kMicrosecond);
      }
    }
  }
} register_decode_benchmarks;

}  // namespace
