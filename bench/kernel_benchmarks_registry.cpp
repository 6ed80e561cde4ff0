// kvbench-micro's benchmarks of the registry's micro cases (bench/cases/kernel_cases.h).
#include "bench_options.h"
#include "kernel_benchmarks.h"

namespace kvbench::micro {

void register_kernel_benchmarks() {
  for (const cases::AttentionCase& c : cases::micro_attention_cases()) {
    benchmark::RegisterBenchmark(c.name().c_str(), attention_benchmark, c)
        ->UseRealTime()
        ->Unit(c.kind == cases::AttentionKind::Prefill ? benchmark::kMillisecond : benchmark::kMicrosecond);
  }
  for (const cases::SealCase& c : cases::micro_seal_cases()) {
    benchmark::RegisterBenchmark(c.name().c_str(), seal_benchmark, c)->UseRealTime()->Unit(benchmark::kMillisecond);
  }
  for (const cases::DenseCase& c : cases::micro_dense_cases()) {
    benchmark::RegisterBenchmark(c.name().c_str(), dense_benchmark, c)
        ->UseRealTime()
        ->Unit(c.tokens == 1 ? benchmark::kMicrosecond : benchmark::kMillisecond);
    if (c.tokens == 1 && c.format != kv::DenseFormat::F32) {
      const std::string name = "BM_DenseDequantize/" + std::string(kv::dense_format_name(c.format)) + "/" + std::to_string(c.out_dim) + "/" +
                               std::to_string(c.in_dim);
      benchmark::RegisterBenchmark(name.c_str(), dense_dequantize_benchmark, c)->UseRealTime()->Unit(benchmark::kMicrosecond);
    }
  }
  constexpr std::size_t kStreamBytes = 256u << 20;
  benchmark::RegisterBenchmark("BM_StreamRead/268435456", stream_benchmark, StreamKind::Read, kStreamBytes, options().threads)
      ->UseRealTime()
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("BM_Memcpy/268435456", memcpy_benchmark, kStreamBytes)->UseRealTime()->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("BM_L2Read4K", l2_4k_read_benchmark, l2_dir(), std::size_t{64} << 20)->UseRealTime()->Unit(benchmark::kMicrosecond);
}

}  // namespace kvbench::micro
