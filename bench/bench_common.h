// Shapes and helpers shared by the engine microbenchmarks: the registry's layer shape and case
// data (bench/cases/kernel_cases.h) with kvbench-micro's --isa and --threads.
#pragma once

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "bench_options.h"
#include "cases/kernel_cases.h"
#include "kv_cache.h"

namespace kvbench::micro {

inline kv::CacheConfig decode_shape_config(kv::Format format, int max_seq) {
  return cases::layer_config(format, max_seq, options().threads, options().isa);
}

inline std::vector<float> bench_values(std::size_t count, unsigned seed, bool keys) { return cases::case_values(count, seed, keys); }

inline constexpr std::size_t kColdBytes = 256ull << 20;  // > 4x a large L3

// Copies of one context in a layer-shaped cache, cycled by the attention benchmarks: enough that
// their total exceeds the L3 (Residency::Cold) or two (Residency::TwoLayers). The last setup is
// kept across Google Benchmark's repeated calls.
struct ColdContexts {
  kv::Format format = kv::Format::F32;
  int ctx = 0;
  cases::Residency residency = cases::Residency::Cold;
  int threads = 0;
  kv::Isa isa = kv::Isa::Auto;
  std::unique_ptr<kv::KVCache> cache;
  std::vector<kv::SeqId> copies;
  std::size_t kv_bytes_per_copy = 0;  // what one full pass reads: payloads and the scales it needs
  std::size_t next = 0;
  kv::SeqId take() {
    const kv::SeqId seq = copies[next];
    next = (next + 1) % copies.size();
    return seq;
  }
};

inline ColdContexts& cold_contexts_slot() {
  static ColdContexts setup;
  return setup;
}

// Frees the kept setup (calibrate, between measurements).
inline void release_cold_contexts() { cold_contexts_slot() = ColdContexts{}; }

inline ColdContexts& cold_contexts(kv::Format format, int ctx, cases::Residency residency = cases::Residency::Cold) {
  ColdContexts& setup = cold_contexts_slot();
  if (setup.cache && setup.format == format && setup.ctx == ctx && setup.residency == residency && setup.threads == options().threads &&
      setup.isa == options().isa) {
    return setup;
  }
  setup = ColdContexts{};
  setup.format = format;
  setup.ctx = ctx;
  setup.residency = residency;
  setup.threads = options().threads;
  setup.isa = options().isa;
  setup.cache = std::make_unique<kv::KVCache>(decode_shape_config(format, ctx));
  const cases::LayerShape& s = cases::kLayer;
  const kv::PageLayout& layout = setup.cache->layout();
  const std::size_t pages = static_cast<std::size_t>((ctx + s.page_tokens - 1) / s.page_tokens) * s.kv_heads;
  setup.kv_bytes_per_copy = pages * (layout.k_read_bytes(s.page_tokens) + layout.v_read_bytes(s.page_tokens));
  const std::size_t copies = residency == cases::Residency::TwoLayers
                                 ? 2
                                 : std::max<std::size_t>(2, (kColdBytes + pages * layout.bytes - 1) / (pages * layout.bytes));
  const std::size_t count = static_cast<std::size_t>(ctx) * s.kv_heads * s.head_dim;
  const auto k = bench_values(count, 11, true);
  const auto v = bench_values(count, 12, false);
  for (std::size_t i = 0; i < copies; ++i) {
    const kv::SeqId seq = setup.cache->create_sequence();
    setup.cache->append(seq, 0, k.data(), v.data(), ctx);
    setup.copies.push_back(seq);
  }
  return setup;
}

}  // namespace kvbench::micro
