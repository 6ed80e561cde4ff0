// Attention and page sealing on the registry's cases (bench/cases/kernel_cases.h), one layer of
// the 7B-class shape, all engine threads:
// BM_DecodeAttention/<fmt>/<ctx>: one decode step over a context already in the cache; copies of
// the context cycled so that KV is not in cache when a call starts (bytes_per_second: the KV
// bytes the kernel reads, payloads and the scales it needs).
// BM_VerifyAttention/<fmt>/<k>/<ctx>: k draft queries at the sequence's end, as speculative
// decoding verifies them; read beside BM_DecodeAttention/<fmt>/<ctx>.
// BM_PrefillAttention/<fmt>/<chunk>/<ctx>: the sequence's last `chunk` tokens as queries, causal
// among themselves, everything earlier visible (flops_per_second: 4 x head_dim flops per
// visible query-key pair and q head).
// BM_Quantize/<fmt>/<tokens>: f32 K and V of `tokens` tokens appended into pages of the format
// (bytes_per_second: the f32 input).
#include <string>

#include "bench_common.h"
#include "kernel_benchmarks.h"

namespace kvbench::micro {

namespace {

// Visible (query, key) pairs of `queries` causal queries at the end of `ctx` tokens.
double visible_pairs(int queries, int ctx) {
  const double first = static_cast<double>(ctx - queries);
  return queries * first + static_cast<double>(queries) * (queries + 1) / 2.0;
}

}  // namespace

void attention_benchmark(benchmark::State& state, const cases::AttentionCase& c) {
  const cases::LayerShape& s = cases::kLayer;
  ColdContexts& setup = cold_contexts(c.format, c.ctx, c.residency);
  const auto q = bench_values(static_cast<std::size_t>(c.queries) * s.q_heads * s.head_dim, 13, false);
  std::vector<float> out(q.size());
  // Untimed first, once over every copy: workspaces, and a fresh copy's first pass is slower than
  // a run's steady decode (the kernel's page handling).
  for (std::size_t i = 0; i < setup.copies.size(); ++i) setup.cache->attend(setup.take(), 0, q.data(), c.queries, out.data());
  for (auto _ : state) {
    setup.cache->attend(setup.take(), 0, q.data(), c.queries, out.data());
    benchmark::DoNotOptimize(out.data());
  }
  const auto iterations = static_cast<double>(state.iterations());
  if (c.kind == cases::AttentionKind::Prefill) {
    state.counters["flops_per_second"] =
        benchmark::Counter(iterations * 4.0 * s.head_dim * s.q_heads * visible_pairs(c.queries, c.ctx), benchmark::Counter::kIsRate);
  } else {
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(setup.kv_bytes_per_copy));
  }
  state.counters["copies"] = static_cast<double>(setup.copies.size());
  state.SetLabel(std::string(kv::isa_name(setup.cache->isa())));
}

void seal_benchmark(benchmark::State& state, const cases::SealCase& c) {
  const cases::LayerShape& s = cases::kLayer;
  kv::KVCache cache(decode_shape_config(c.format, c.tokens));
  const std::size_t count = static_cast<std::size_t>(c.tokens) * s.kv_heads * s.head_dim;
  const auto k = bench_values(count, 1, true);
  const auto v = bench_values(count, 2, false);
  {
    const kv::SeqId first = cache.create_sequence();  // untimed first: the pool's pages
    cache.append(first, 0, k.data(), v.data(), c.tokens);
    cache.release(first);
  }
  for (auto _ : state) {
    const kv::SeqId seq = cache.create_sequence();
    cache.append(seq, 0, k.data(), v.data(), c.tokens);
    cache.release(seq);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(2 * count * sizeof(float)));
  state.SetLabel(std::string(kv::isa_name(cache.isa())));
}

}  // namespace kvbench::micro
