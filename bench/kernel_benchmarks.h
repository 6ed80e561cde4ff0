// The benchmark bodies that kvbench-micro and `kvbench calibrate` share: each times the engine's
// own calls on a case of the registry (bench/cases/kernel_cases.h), one call per iteration, and
// sets the counters its figure needs. Threads and kernel path come from micro::options().
#pragma once

#include <benchmark/benchmark.h>

#include <cstddef>
#include <string>

#include "cases/kernel_cases.h"
#include "kv_cache.h"
#include "sparse/policy.h"

namespace kvbench::micro {

// KVCache::attend of the case's queries over its context. Decode and verify count the KV bytes
// one pass reads (bytes_per_second); prefill its flops (flops_per_second: 4 x head_dim per
// visible query-key pair and q head).
void attention_benchmark(benchmark::State& state, const cases::AttentionCase& c);
// KVCache::append of the case's tokens into fresh pages (bytes_per_second: the f32 input).
void seal_benchmark(benchmark::State& state, const cases::SealCase& c);
// kv::dense as the llama backend calls it: flops_per_second, bytes_per_second (the weight's
// bytes in its format). One-token cases cycle weight copies past the caches, as a model's
// decode reads its weights from memory.
void dense_benchmark(benchmark::State& state, const cases::DenseCase& c);
// Dequantizing the case's whole weight to f32 panels, as dense() does slice by slice: what
// f16 and q8 weights cost beyond the f32 product (values_per_second).
void dense_dequantize_benchmark(benchmark::State& state, const cases::DenseCase& c);

enum class StreamKind { Read, Write, Copy };
// Streaming over a buffer of `bytes` on `threads` threads (0: all): bytes_per_second counts the
// bytes touched (a copy's read and written).
void stream_benchmark(benchmark::State& state, StreamKind kind, std::size_t bytes, int threads);
// memcpy of `bytes` on one core (bytes_per_second: bytes copied).
void memcpy_benchmark(benchmark::State& state, std::size_t bytes);
// Dependent loads over a random cycle of cache lines spanning `bytes`: ns_per_load.
void chase_benchmark(benchmark::State& state, std::size_t bytes);
// std::exp over 64K floats on one core: exp_per_second.
void exp_benchmark(benchmark::State& state);
// quest_bounds and plan_selection (hybrid, 10%) from a q4 context's key bounds: bound_products
// per call.
void selection_benchmark(benchmark::State& state, int ctx);

// SparseDecoder::attend then end_step on a q4 context of the layer shape. The telemetry sink,
// if any, receives the engine's operation counts of every call.
struct SparseDecodeCase {
  kv::SparsePolicy policy;
  int ctx = 1024;
  kv::MemoryConfig memory;       // an L1 cap and an L2 directory, or none
  bool new_query_each_call = false;  // a different query every call: every call needs other pages
  int warm_calls = 0;            // untimed calls first (the pool settles into its working set)
  kv::Telemetry* telemetry = nullptr;
};
// Counters: calls, dma_wait_s (waits for L2 loads over the timed calls, per call).
void sparse_decode_benchmark(benchmark::State& state, const SparseDecodeCase& c);

// The L2 store in `dir`: appends of `total` bytes of `page`-byte pages flushed to the device
// (bytes_per_second), reading them back in order, or some of them in random order (us_per_page),
// alone or while a second thread appends and flushes batches to the same store without pause,
// as the migrator's demotions do.
enum class L2Access { Write, ReadInOrder, ReadRandom, ReadRandomUnderWrites };
void l2_benchmark(benchmark::State& state, const std::string& dir, L2Access access, std::size_t page, std::size_t total);
// Random 4 KiB reads through FileIo of a file of `bytes`, page cache bypassed as the store does
// (O_DIRECT where the filesystem takes it): reads_per_second.
void l2_4k_read_benchmark(benchmark::State& state, const std::string& dir, std::size_t bytes);

// Registers kvbench-micro's benchmarks of the registry's micro cases.
void register_kernel_benchmarks();

}  // namespace kvbench::micro
