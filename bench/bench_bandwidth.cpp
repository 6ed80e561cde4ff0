// The machine's bandwidth anchors: a multi-threaded streaming sum (how fast the decode kernel
// could read KV at best) and a memcpy.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "bench_options.h"
#include "runtime/thread_pool.h"

namespace {

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

std::unique_ptr<float, FreeDeleter> make_buffer(std::size_t bytes, float fill) {
  auto* p = static_cast<float*>(std::aligned_alloc(4096, bytes));
  for (std::size_t i = 0; i < bytes / sizeof(float); ++i) p[i] = fill;
  return std::unique_ptr<float, FreeDeleter>(p);
}

void BM_StreamRead(benchmark::State& state) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  const std::size_t floats = bytes / sizeof(float);
  auto buffer = make_buffer(bytes, 1.0f);
  kv::ThreadPool pool(kvbench::micro::options().threads);
  // Fixed chunks, summed with 8 independent accumulators so the loop is load-bound.
  constexpr std::size_t kChunk = 1 << 20;  // floats
  const std::size_t chunks = (floats + kChunk - 1) / kChunk;
  std::vector<float> partial(chunks);
  for (auto _ : state) {
    pool.parallel_for(chunks, [&](std::size_t c) {
      const float* p = buffer.get() + c * kChunk;
      const std::size_t n = std::min(kChunk, floats - c * kChunk);
      float acc[8] = {};
      for (std::size_t i = 0; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; ++j) acc[j] += p[i + j];
      partial[c] = acc[0] + acc[1] + acc[2] + acc[3] + acc[4] + acc[5] + acc[6] + acc[7];
    });
    float total = 0.0f;
    for (float x : partial) total += x;
    benchmark::DoNotOptimize(total);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(bytes));
}
BENCHMARK(BM_StreamRead)->Arg(256 << 20)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_Memcpy(benchmark::State& state) {
  const auto bytes = static_cast<std::size_t>(state.range(0));
  auto src = make_buffer(bytes, 1.0f);
  auto dst = make_buffer(bytes, 0.0f);
  for (auto _ : state) {
    std::memcpy(dst.get(), src.get(), bytes);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(bytes));
}
BENCHMARK(BM_Memcpy)->Arg(256 << 20)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
