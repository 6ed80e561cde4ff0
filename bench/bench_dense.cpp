// The dense calls of the llama backend (engine/model/dense.h), on the engine's pool:
// BM_DenseGemm/f32/<out>/<in>/<tokens>: a prompt chunk of `tokens` through an out x in weight
// (flops_per_second: 2 x out x in x tokens a call, against BM_FmaPeak);
// BM_DenseGemv/f32/<out>/<in>: one decode token through it (bytes_per_second: the weight's
// bytes, against BM_StreamRead). The weight is larger than the caches, as a model's are.
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "bench_common.h"
#include "bench_options.h"
#include "model/dense.h"
#include "runtime/thread_pool.h"

namespace {

// Weight copies whose total exceeds BM_StreamRead's 256 MiB buffer, read in turn, so that a
// GEMV reads its weight from memory as a model's decode does, not from the last level cache.
constexpr std::size_t kColdBytes = std::size_t{256} << 20;

void dense(benchmark::State& state, int out_dim, int in_dim, int tokens) {
  kv::ThreadPool pool(kvbench::micro::options().threads);
  const std::size_t weight_floats = static_cast<std::size_t>(out_dim) * in_dim;
  const std::size_t copies = tokens == 1 ? kColdBytes / (weight_floats * sizeof(float)) + 1 : 1;
  std::vector<std::vector<float>> w;
  for (std::size_t c = 0; c < copies; ++c) w.push_back(kvbench::micro::bench_values(weight_floats, 31 + static_cast<unsigned>(c), false));
  const auto x = kvbench::micro::bench_values(static_cast<std::size_t>(tokens) * in_dim, 32, false);
  std::vector<float> y(static_cast<std::size_t>(tokens) * out_dim);
  std::size_t next = 0;
  for (auto _ : state) {
    kv::dense_f32(pool, x.data(), tokens, w[next].data(), out_dim, in_dim, y.data());
    next = (next + 1) % copies;
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  const double calls = static_cast<double>(state.iterations());
  const double macs = static_cast<double>(weight_floats) * tokens;
  state.counters["flops_per_second"] = benchmark::Counter(calls * 2.0 * macs, benchmark::Counter::kIsRate);
  state.counters["bytes_per_second"] =
      benchmark::Counter(calls * static_cast<double>(weight_floats * sizeof(float)), benchmark::Counter::kIsRate);
  state.counters["copies"] = static_cast<double>(copies);
  state.counters["threads"] = pool.size();
}

struct Register {
  Register() {
    benchmark::RegisterBenchmark("BM_DenseGemm/f32/4096/4096/512", dense, 4096, 4096, 512)->UseRealTime()->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark("BM_DenseGemv/f32/4096/4096", dense, 4096, 4096, 1)->UseRealTime()->Unit(benchmark::kMicrosecond);
  }
} registrar;

}  // namespace
