// Shapes and helpers shared by the engine microbenchmarks.
#pragma once

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

}  // namespace kvbench::micro
