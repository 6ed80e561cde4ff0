// BM_Quantize/<fmt>/<tokens>: F32 K and V of `tokens` tokens (8 kv heads x 128) appended into
// pages of the format; bytes_per_second counts the F32 input.
#include <benchmark/benchmark.h>

#include "bench_common.h"

namespace {

using namespace kvbench::micro;

void quantize(benchmark::State& state, kv::Format format, int tokens) {
  kv::CacheConfig config = decode_shape_config(format, tokens);
  kv::KVCache cache(config);
  const std::size_t count = static_cast<std::size_t>(tokens) * 8 * 128;
  const auto k = bench_values(count, 1, true);
  const auto v = bench_values(count, 2, false);
  for (auto _ : state) {
    const kv::SeqId seq = cache.create_sequence();
    cache.append(seq, 0, k.data(), v.data(), tokens);
    cache.release(seq);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(2 * count * sizeof(float)));
  state.SetLabel(std::string(kv::isa_name(cache.isa())));
}

struct Register {
  Register() {
    for (kv::Format f : kv::kAllFormats) {
      for (int tokens : {4096}) {
        const std::string name = "BM_Quantize/" + std::string(kv::format_name(f)) + "/" + std::to_string(tokens);
        benchmark::RegisterBenchmark(name.c_str(), quantize, f, tokens)->UseRealTime()->Unit(benchmark::kMillisecond);
      }
    }
  }
} registrar;

}  // namespace
