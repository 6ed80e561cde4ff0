// Shapes and helpers shared by the engine microbenchmarks.
#pragma once

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "bench_options.h"
#include "kv_cache.h"

namespace kvbench::micro {

// One layer of a 7B-class GQA model: 32 q heads, 8 kv heads, head_dim 128, pages of 64.
inline kv::CacheConfig decode_shape_config(kv::Format format, int max_seq) {
  kv::CacheConfig c;
  c.geometry = {1, 32, 8, 128, max_seq};
  c.k_format = format;
  c.v_format = format;
  c.page_tokens = 64;
  c.residual_tokens = 0;
  c.threads = options().threads;
  c.isa = options().isa;
  return c;
}

// Key-like data: normal values with every 16th channel an offset outlier.
inline std::vector<float> bench_values(std::size_t count, unsigned seed, bool keys) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(count);
  for (std::size_t i = 0; i < count; ++i) {
    values[i] = normal(rng);
    if (keys && i % 16 == 3) values[i] = 8.0f + values[i];
  }
  return values;
}

inline constexpr std::size_t kColdBytes = 256ull << 20;  // > 4x a large L3

// Several copies of one context in a decode-shaped cache, cycled by the attention benchmarks so
// that their total exceeds the L3 and KV is not in cache when a call starts. The last setup is
// kept across Google Benchmark's repeated calls.
struct ColdContexts {
  kv::Format format = kv::Format::F32;
  int ctx = 0;
  std::unique_ptr<kv::KVCache> cache;
  std::vector<kv::SeqId> copies;
  std::size_t kv_bytes_per_copy = 0;  // what one full pass reads: payloads and the scales it needs
};

inline ColdContexts& cold_contexts(kv::Format format, int ctx) {
  static ColdContexts setup;
  if (setup.cache && setup.format == format && setup.ctx == ctx) return setup;
  setup = ColdContexts{};
  setup.format = format;
  setup.ctx = ctx;
  setup.cache = std::make_unique<kv::KVCache>(decode_shape_config(format, ctx));
  const kv::PageLayout& layout = setup.cache->layout();
  const std::size_t pages = static_cast<std::size_t>(ctx / 64) * 8;
  setup.kv_bytes_per_copy = pages * (layout.k_read_bytes(64) + layout.v_read_bytes(64));
  const std::size_t copies = std::max<std::size_t>(2, (kColdBytes + pages * layout.bytes - 1) / (pages * layout.bytes));
  const std::size_t count = static_cast<std::size_t>(ctx) * 8 * 128;
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
