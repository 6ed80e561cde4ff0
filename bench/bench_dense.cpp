// The dense calls of the llama backend (engine/model/dense.h) on the registry's cases, on the
// engine's pool:
// BM_DenseGemm/<fmt>/<out>/<in>/<tokens>: a prompt chunk of `tokens` through an out x in weight
// (flops_per_second: 2 x out x in x tokens a call, against BM_FmaPeak);
// BM_DenseGemv/<fmt>/<out>/<in>: one decode token through it (bytes_per_second: the weight's
// bytes in its format, against BM_StreamRead);
// BM_DenseDequantize/<fmt>/<out>/<in>: the f32 panels an f16 or q8 weight becomes before each
// product (values_per_second), what those formats cost beyond the BLAS call.
// f16 and q8 weights are dequantized slice by slice into f32 panels (OpenBLAS has no quantized
// GEMM). A one-token case reads its weight from memory, as a model's decode does: weight copies
// whose total exceeds BM_StreamRead's 256 MiB buffer are read in turn.
#include <algorithm>
#include <string>
#include <vector>

#include "bench_common.h"
#include "kernel_benchmarks.h"
#include "model/dense.h"
#include "runtime/thread_pool.h"

namespace kvbench::micro {

namespace {

// The case's weight in `copies` copies (the same values: what matters is distinct memory), kept
// across Google Benchmark's repeated calls of a body.
const std::vector<kv::DenseMatrix>& weights(const cases::DenseCase& c, std::size_t copies) {
  static std::string kept_for;
  static std::vector<kv::DenseMatrix> kept;
  const std::string key = c.name() + "/" + std::to_string(copies);
  if (key == kept_for) return kept;
  kept.clear();
  kept_for = key;
  const auto w = bench_values(static_cast<std::size_t>(c.out_dim) * c.in_dim, 31, false);
  const kv::DenseMatrix first(c.format, static_cast<std::size_t>(c.out_dim), c.in_dim, kv::dense_encode(c.format, w.data(), static_cast<std::size_t>(c.out_dim), c.in_dim));
  kept.assign(copies, first);
  return kept;
}

}  // namespace

void dense_benchmark(benchmark::State& state, const cases::DenseCase& c) {
  kv::ThreadPool pool(options().threads);
  const std::size_t weight_bytes = static_cast<std::size_t>(c.out_dim) * kv::dense_row_bytes(c.format, c.in_dim);
  const std::size_t copies = c.tokens == 1 && c.residency == cases::Residency::Cold ? kColdBytes / weight_bytes + 1 : 1;
  const std::vector<kv::DenseMatrix>& w = weights(c, copies);
  const auto x = bench_values(static_cast<std::size_t>(c.tokens) * c.in_dim, 32, false);
  std::vector<float> y(static_cast<std::size_t>(c.tokens) * c.out_dim);
  // Untimed first, once over every copy: a thread's first BLAS call sets up its buffers, and a
  // fresh weight's first pass is slower than a model's steady decode (the kernel's page handling).
  for (const kv::DenseMatrix& m : w) kv::dense(pool, x.data(), c.tokens, m.view(0, c.out_dim), y.data());
  std::size_t next = 0;
  for (auto _ : state) {
    kv::dense(pool, x.data(), c.tokens, w[next].view(0, c.out_dim), y.data());
    next = (next + 1) % copies;
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  const double calls = static_cast<double>(state.iterations());
  const double macs = static_cast<double>(c.out_dim) * c.in_dim * c.tokens;
  state.counters["flops_per_second"] = benchmark::Counter(calls * 2.0 * macs, benchmark::Counter::kIsRate);
  state.counters["bytes_per_second"] = benchmark::Counter(calls * static_cast<double>(weight_bytes), benchmark::Counter::kIsRate);
  state.counters["copies"] = static_cast<double>(copies);
  state.counters["threads"] = pool.size();
  state.SetLabel("OpenBLAS " + kv::dense_blas_core());
}

void dense_dequantize_benchmark(benchmark::State& state, const cases::DenseCase& c) {
  kv::ThreadPool pool(options().threads);
  const kv::DenseMatrix& w = weights(c, 1).front();
  const int slices = (c.out_dim + kv::kDenseSliceRows - 1) / kv::kDenseSliceRows;
  for (auto _ : state) {
    pool.parallel_for(static_cast<std::size_t>(slices), [&](std::size_t slice) {
      const int begin = static_cast<int>(slice) * kv::kDenseSliceRows;
      const int rows = std::min(kv::kDenseSliceRows, c.out_dim - begin);
      thread_local std::vector<float> panel;  // one per thread, as dense() keeps them
      panel.resize(static_cast<std::size_t>(kv::kDenseSliceRows) * c.in_dim);
      kv::dense_dequantize(w.view(0, c.out_dim), begin, rows, panel.data());
      benchmark::DoNotOptimize(panel.data());
    });
    benchmark::ClobberMemory();
  }
  state.counters["values_per_second"] =
      benchmark::Counter(static_cast<double>(state.iterations()) * c.out_dim * c.in_dim, benchmark::Counter::kIsRate);
  state.counters["threads"] = pool.size();
}

}  // namespace kvbench::micro
