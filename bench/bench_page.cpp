// Compute ceilings, on one core with hot caches:
// BM_FmaPeak: ten independent 256-bit FMA chains (what the machine can multiply-add at best);
// BM_FmaPeak/avx512: the same at 512 bits;
// BM_DecodePage/<fmt>: the decode kernel on one page (64 tokens x 4 q heads x 128 channels, 32768
// multiply-adds each for q.k and p.v; BM_DecodePageRows/q4/<rows> with more q-head rows), so kernel efficiency reads as a share of BM_FmaPeak (float
// paths) or BM_Int8DotPeak (q4's integer dot products).
#include <benchmark/benchmark.h>

#include <random>
#include <string>
#include <vector>

#include "attention/page_kernels.h"
#include "attention/softmax_state.h"
#include "bench_common.h"
#include "quant/quantizer.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace {

using namespace kvbench::micro;

#if defined(__x86_64__)
// Named variables, not an array: an array of chains ends up in memory.
__attribute__((target("avx2,fma"))) float fma_chains(long iterations) {
  __m256 a0 = _mm256_set1_ps(1.000f), a1 = _mm256_set1_ps(1.001f), a2 = _mm256_set1_ps(1.002f);
  __m256 a3 = _mm256_set1_ps(1.003f), a4 = _mm256_set1_ps(1.004f), a5 = _mm256_set1_ps(1.005f);
  __m256 a6 = _mm256_set1_ps(1.006f), a7 = _mm256_set1_ps(1.007f), a8 = _mm256_set1_ps(1.008f);
  __m256 a9 = _mm256_set1_ps(1.009f);
  const __m256 m = _mm256_set1_ps(0.999999f), c = _mm256_set1_ps(1e-7f);
  for (long it = 0; it < iterations; ++it) {
    a0 = _mm256_fmadd_ps(a0, m, c), a1 = _mm256_fmadd_ps(a1, m, c), a2 = _mm256_fmadd_ps(a2, m, c);
    a3 = _mm256_fmadd_ps(a3, m, c), a4 = _mm256_fmadd_ps(a4, m, c), a5 = _mm256_fmadd_ps(a5, m, c);
    a6 = _mm256_fmadd_ps(a6, m, c), a7 = _mm256_fmadd_ps(a7, m, c), a8 = _mm256_fmadd_ps(a8, m, c);
    a9 = _mm256_fmadd_ps(a9, m, c);
    // Keep the loop alive: its result is otherwise foldable.
    __asm__ volatile("" : "+x"(a0), "+x"(a1), "+x"(a2), "+x"(a3), "+x"(a4), "+x"(a5), "+x"(a6), "+x"(a7), "+x"(a8),
                     "+x"(a9));
  }
  const __m256 sum = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)),
                                   _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7)),
                                                 _mm256_add_ps(a8, a9)));
  return _mm256_cvtss_f32(sum);
}

// Runs `chains` (fma_chains, maddubs_chains) and reports fma_per_s: multiply-adds per second,
// `per_iteration` of them per loop iteration.
template <typename Chains>
void run_peak(benchmark::State& state, Chains chains, double per_iteration) {
  if (!kv::isa_supported(kv::Isa::Avx2)) {
    state.SkipWithError("needs AVX2 and FMA");
    return;
  }
  constexpr long kIterations = 1 << 20;
  for (auto _ : state) benchmark::DoNotOptimize(chains(kIterations));
  state.counters["fma_per_s"] = benchmark::Counter(static_cast<double>(state.iterations()) * kIterations * per_iteration,
                                                   benchmark::Counter::kIsRate);
}

void BM_FmaPeak(benchmark::State& state) { run_peak(state, fma_chains, 10 * 8); }  // 10 chains x 8 lanes
BENCHMARK(BM_FmaPeak);

// The 512-bit twin: twelve chains, enough to cover two FMA ports of four cycles' latency.
__attribute__((target("avx512f"))) float fma_chains512(long iterations) {
  __m512 a0 = _mm512_set1_ps(1.000f), a1 = _mm512_set1_ps(1.001f), a2 = _mm512_set1_ps(1.002f);
  __m512 a3 = _mm512_set1_ps(1.003f), a4 = _mm512_set1_ps(1.004f), a5 = _mm512_set1_ps(1.005f);
  __m512 a6 = _mm512_set1_ps(1.006f), a7 = _mm512_set1_ps(1.007f), a8 = _mm512_set1_ps(1.008f);
  __m512 a9 = _mm512_set1_ps(1.009f), a10 = _mm512_set1_ps(1.010f), a11 = _mm512_set1_ps(1.011f);
  const __m512 m = _mm512_set1_ps(0.999999f), c = _mm512_set1_ps(1e-7f);
  for (long it = 0; it < iterations; ++it) {
    a0 = _mm512_fmadd_ps(a0, m, c), a1 = _mm512_fmadd_ps(a1, m, c), a2 = _mm512_fmadd_ps(a2, m, c);
    a3 = _mm512_fmadd_ps(a3, m, c), a4 = _mm512_fmadd_ps(a4, m, c), a5 = _mm512_fmadd_ps(a5, m, c);
    a6 = _mm512_fmadd_ps(a6, m, c), a7 = _mm512_fmadd_ps(a7, m, c), a8 = _mm512_fmadd_ps(a8, m, c);
    a9 = _mm512_fmadd_ps(a9, m, c), a10 = _mm512_fmadd_ps(a10, m, c), a11 = _mm512_fmadd_ps(a11, m, c);
    __asm__ volatile("" : "+v"(a0), "+v"(a1), "+v"(a2), "+v"(a3), "+v"(a4), "+v"(a5), "+v"(a6), "+v"(a7), "+v"(a8),
                     "+v"(a9), "+v"(a10), "+v"(a11));
  }
  const __m512 sum = _mm512_add_ps(
      _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)), _mm512_add_ps(a4, a5)),
      _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a6, a7), _mm512_add_ps(a8, a9)), _mm512_add_ps(a10, a11)));
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, sum);
  return lanes[0] + lanes[15];
}

// BM_FmaPeak/avx512: the ceiling of the AVX-512 kernels (skipped where the CPU has none).
void BM_FmaPeak512(benchmark::State& state) {
  if (!kv::isa_supported(kv::Isa::Avx512)) {
    state.SkipWithError("needs AVX-512");
    return;
  }
  run_peak(state, fma_chains512, 12 * 16);  // 12 chains x 16 lanes
}
BENCHMARK(BM_FmaPeak512)->Name("BM_FmaPeak/avx512");

// The integer twin of fma_chains: vpmaddubsw, the instruction of the q4 kernels' dot products
// (32 byte products, summed in pairs, per instruction).
__attribute__((target("avx2"))) int maddubs_chains(long iterations) {
  __m256i a0 = _mm256_set1_epi8(1), a1 = _mm256_set1_epi8(2), a2 = _mm256_set1_epi8(3), a3 = _mm256_set1_epi8(4);
  __m256i a4 = _mm256_set1_epi8(5), a5 = _mm256_set1_epi8(6), a6 = _mm256_set1_epi8(7), a7 = _mm256_set1_epi8(8);
  __m256i a8 = _mm256_set1_epi8(9), a9 = _mm256_set1_epi8(10);
  const __m256i m = _mm256_set1_epi8(3);
  for (long it = 0; it < iterations; ++it) {
    a0 = _mm256_maddubs_epi16(a0, m), a1 = _mm256_maddubs_epi16(a1, m), a2 = _mm256_maddubs_epi16(a2, m);
    a3 = _mm256_maddubs_epi16(a3, m), a4 = _mm256_maddubs_epi16(a4, m), a5 = _mm256_maddubs_epi16(a5, m);
    a6 = _mm256_maddubs_epi16(a6, m), a7 = _mm256_maddubs_epi16(a7, m), a8 = _mm256_maddubs_epi16(a8, m);
    a9 = _mm256_maddubs_epi16(a9, m);
    __asm__ volatile("" : "+x"(a0), "+x"(a1), "+x"(a2), "+x"(a3), "+x"(a4), "+x"(a5), "+x"(a6), "+x"(a7), "+x"(a8),
                     "+x"(a9));
  }
  const __m256i sum = _mm256_add_epi16(_mm256_add_epi16(_mm256_add_epi16(a0, a1), _mm256_add_epi16(a2, a3)),
                                       _mm256_add_epi16(_mm256_add_epi16(_mm256_add_epi16(a4, a5), _mm256_add_epi16(a6, a7)),
                                                        _mm256_add_epi16(a8, a9)));
  return _mm256_extract_epi32(sum, 0);
}

// BM_Int8DotPeak: one core's rate of byte multiply-adds through vpmaddubsw, the ceiling of the
// q4 kernels' dot products (BM_DecodePage/q4's fma_per_s reads as a share of it).
void BM_Int8DotPeak(benchmark::State& state) { run_peak(state, maddubs_chains, 10 * 32); }  // 10 chains x 32 bytes
BENCHMARK(BM_Int8DotPeak);
#endif

void decode_page(benchmark::State& state, kv::Format format, int rows) {
  const kv::PageLayout layout = kv::PageLayout::make({64, 128, format, format, 32, false});
  std::vector<std::byte> page(layout.bytes);
  const auto k = bench_values(64 * 128, 21, true);
  const auto v = bench_values(64 * 128, 22, false);
  kv::quantize_page(layout, k.data(), v.data(), 64, page.data(), nullptr);
  auto q = bench_values(static_cast<std::size_t>(rows) * 128, 23, false);
  for (float& x : q) x *= 0.088f;  // the softmax scale 1/sqrt(128)
  std::vector<float> states(static_cast<std::size_t>(rows) * kv::SoftmaxState::stride(128));
  for (int g = 0; g < rows; ++g) kv::SoftmaxState(states.data() + g * kv::SoftmaxState::stride(128), 128).reset();
  const kv::PageKernels& kernels = kv::page_kernels(kv::resolve_isa(options().isa));
  for (auto _ : state) {
    kernels.decode_page({&layout, page.data(), 64}, q.data(), rows, states.data(), nullptr);
    benchmark::ClobberMemory();
  }
  state.counters["fma_per_s"] = benchmark::Counter(static_cast<double>(state.iterations()) * 2 * 64 * rows * 128,
                                                   benchmark::Counter::kIsRate);
  state.SetLabel(std::string(kv::isa_name(kernels.isa)));
}

struct RegisterPageBenchmarks {
  RegisterPageBenchmarks() {
    for (kv::Format f : kv::kAllFormats) {
      const std::string name = "BM_DecodePage/" + std::string(kv::format_name(f));
      benchmark::RegisterBenchmark(name.c_str(), decode_page, f, 4);
    }
    // BM_DecodePageRows/q4/<rows>: one page against more rows than a GQA group of four, as
    // verification reads it (k draft queries x the group): the per-page cost of k.
    for (int rows : {4, 8, 16, 32}) {
      const std::string name = "BM_DecodePageRows/q4/" + std::to_string(rows);
      benchmark::RegisterBenchmark(name.c_str(), decode_page, kv::Format::Q4, rows);
    }
  }
} register_page_benchmarks;

}  // namespace
