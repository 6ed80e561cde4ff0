// The machine's anchors: streaming read, write and copy over a buffer larger than any cache on
// the engine's pool (how fast the decode kernel could read KV at best), memcpy on one core,
// dependent loads (latency) and exponentials.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include "bench_common.h"
#include "exp_kernels.h"
#include "kernel_benchmarks.h"
#include "runtime/thread_pool.h"

namespace kvbench::micro {

namespace {

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

std::unique_ptr<float, FreeDeleter> make_buffer(std::size_t bytes, float fill) {
  auto* p = static_cast<float*>(std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096));
  for (std::size_t i = 0; i < bytes / sizeof(float); ++i) p[i] = fill;
  return std::unique_ptr<float, FreeDeleter>(p);
}

}  // namespace

void stream_benchmark(benchmark::State& state, StreamKind kind, std::size_t bytes, int threads) {
  const std::size_t floats = bytes / sizeof(float);
  auto a = make_buffer(bytes, 1.0f);
  auto b = kind == StreamKind::Read ? nullptr : make_buffer(bytes, 2.0f);
  kv::ThreadPool pool(threads);
  // Fixed chunks; a read sums with 8 independent accumulators so the loop is load-bound.
  constexpr std::size_t kChunk = 1 << 20;  // floats
  const std::size_t chunks = (floats + kChunk - 1) / kChunk;
  std::vector<float> partial(chunks);
  float fill = 3.0f;
  for (auto _ : state) {
    fill += 1.0f;
    pool.parallel_for(chunks, [&](std::size_t c) {
      const std::size_t begin = c * kChunk, n = std::min(kChunk, floats - begin);
      switch (kind) {
        case StreamKind::Read: {
          const float* p = a.get() + begin;
          float acc[8] = {};
          for (std::size_t i = 0; i + 8 <= n; i += 8)
            for (int j = 0; j < 8; ++j) acc[j] += p[i + j];
          partial[c] = acc[0] + acc[1] + acc[2] + acc[3] + acc[4] + acc[5] + acc[6] + acc[7];
          break;
        }
        case StreamKind::Write: std::fill_n(b.get() + begin, n, fill); break;
        case StreamKind::Copy: std::memcpy(b.get() + begin, a.get() + begin, n * sizeof(float)); break;
      }
    });
    benchmark::DoNotOptimize(std::accumulate(partial.begin(), partial.end(), 0.0f));
    benchmark::ClobberMemory();
  }
  const std::int64_t touched = static_cast<std::int64_t>(bytes) * (kind == StreamKind::Copy ? 2 : 1);
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * touched);
  state.counters["threads"] = pool.size();
}

void memcpy_benchmark(benchmark::State& state, std::size_t bytes) {
  auto src = make_buffer(bytes, 1.0f);
  auto dst = make_buffer(bytes, 0.0f);
  for (auto _ : state) {
    std::memcpy(dst.get(), src.get(), bytes);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(bytes));
}

void chase_benchmark(benchmark::State& state, std::size_t bytes) {
  const std::size_t lines = bytes / 64;
  std::vector<std::size_t> order(lines);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937(5));
  std::vector<std::size_t> next(lines * 8);  // one index per 64-byte line
  for (std::size_t i = 0; i < lines; ++i) next[order[i] * 8] = order[(i + 1) % lines] * 8;
  constexpr std::size_t kLoads = 1 << 16;  // per iteration
  std::size_t at = order[0] * 8;
  for (auto _ : state) {
    for (std::size_t h = 0; h < kLoads; ++h) at = next[at];
    benchmark::DoNotOptimize(at);
  }
  state.counters["ns_per_load"] = benchmark::Counter(static_cast<double>(state.iterations()) * kLoads * 1e-9,
                                                     benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void exp_benchmark(benchmark::State& state) {
  // Softmax arguments: <= 0, as the kernels pass them (x - running max).
  std::vector<float> x = bench_values(1 << 16, 3, false);
  for (float& v : x) v = -std::fabs(v) * 4.0f;
  std::vector<float> y(x.size());
  const kv::Isa isa = kv::resolve_isa(options().isa);
  for (auto _ : state) {
#if defined(__x86_64__)
    if (isa == kv::Isa::Avx512) {
      exp_batch_avx512(x.data(), y.data(), x.size());
    } else if (isa == kv::Isa::Avx2) {
      exp_batch_avx2(x.data(), y.data(), x.size());
    } else
#endif
    {
      for (std::size_t i = 0; i < x.size(); ++i) y[i] = std::exp(x[i]);
    }
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.counters["exp_per_second"] = benchmark::Counter(static_cast<double>(state.iterations()) * static_cast<double>(x.size()),
                                                        benchmark::Counter::kIsRate);
  state.SetLabel(isa == kv::Isa::Avx512 || isa == kv::Isa::Avx2 ? std::string("the kernels' polynomial exp, ") + std::string(kv::isa_name(isa)) : "std::exp");
}

}  // namespace kvbench::micro
