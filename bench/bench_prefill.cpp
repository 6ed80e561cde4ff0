// Many queries over a context already in the cache, one layer of the BM_DecodeAttention shape
// (32 q heads, 8 kv heads, head_dim 128, pages of 64), all engine threads, copies of the context
// cycled so that KV is not in cache when a call starts (bench_common.h).
// BM_PrefillAttention/<fmt>/<chunk>/<ctx>: the sequence's last `chunk` tokens as queries, causal
// among themselves, everything earlier visible. flops_per_second counts 4 x head_dim flops
// (q.k and p.v, a multiply and an add each) per visible (query, key) pair and q head.
// BM_VerifyAttention/<fmt>/<k>/<ctx>: k draft queries at the sequence's end, as speculative
// decoding verifies them; read beside BM_DecodeAttention/<fmt>/<ctx>. bytes_per_second counts
// the KV bytes one pass reads.
#include <benchmark/benchmark.h>

#include <string>

#include "bench_common.h"

namespace {

using namespace kvbench::micro;

constexpr int kQHeads = 32;
constexpr int kHeadDim = 128;

// Visible (query, key) pairs of `queries` causal queries at the end of `ctx` tokens.
double visible_pairs(int queries, int ctx) {
  const double first = static_cast<double>(ctx - queries);
  return queries * first + static_cast<double>(queries) * (queries + 1) / 2.0;
}

void attend_queries(benchmark::State& state, kv::Format format, int queries, int ctx, bool prefill) {
  ColdContexts& setup = cold_contexts(format, ctx);
  const auto q = bench_values(static_cast<std::size_t>(queries) * kQHeads * kHeadDim, 13, false);
  std::vector<float> out(q.size());
  std::size_t next = 0;
  for (auto _ : state) {
    setup.cache->attend(setup.copies[next], 0, q.data(), queries, out.data());
    next = (next + 1) % setup.copies.size();
    benchmark::DoNotOptimize(out.data());
  }
  const auto iterations = static_cast<double>(state.iterations());
  if (prefill) {
    state.counters["flops_per_second"] = benchmark::Counter(
        iterations * 4.0 * kHeadDim * kQHeads * visible_pairs(queries, ctx), benchmark::Counter::kIsRate);
  } else {
    state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(setup.kv_bytes_per_copy));
  }
  state.counters["copies"] = static_cast<double>(setup.copies.size());
  state.SetLabel(std::string(kv::isa_name(setup.cache->isa())));
}

struct Register {
  Register() {
    for (kv::Format f : {kv::Format::F16, kv::Format::Q8, kv::Format::Q4}) {
      const std::string name = "BM_PrefillAttention/" + std::string(kv::format_name(f)) + "/512/16384";
      benchmark::RegisterBenchmark(name.c_str(), attend_queries, f, 512, 16384, true)
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
    }
    for (kv::Format f : kv::kAllFormats) {
      for (int k : {4, 8}) {
        const std::string name =
            "BM_VerifyAttention/" + std::string(kv::format_name(f)) + "/" + std::to_string(k) + "/32768";
        benchmark::RegisterBenchmark(name.c_str(), attend_queries, f, k, 32768, false)
            ->UseRealTime()
            ->Unit(benchmark::kMicrosecond);
      }
    }
  }
} registrar;

}  // namespace
