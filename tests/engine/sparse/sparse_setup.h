// A synthetic qwen-0.5b layer in a q8 cache for the sparse-attention tests: `ctx` tokens
// appended, and the next token's queries on demand; and a policy with 4 sinks and a 128-token
// window.
#pragma once

#include <utility>
#include <vector>

#include "kv_cache.h"
#include "model/synthetic.h"
#include "sparse/policy.h"

namespace kvtest {

using namespace kv;

// A synthetic qwen-0.5b layer holding `ctx` tokens in a q8 cache with 64-token pages.
struct Setup {
  ThreadPool pool{2};
  const SyntheticPreset& preset = find_synthetic_preset("qwen-0.5b-gqa", "test");
  SyntheticModel model;
  KVCache cache;
  SeqId seq;
  // images: visual tokens' positions (the generator makes them image patches).
  explicit Setup(int ctx, std::vector<ImageRange> images = {})
      : model(preset, config(ctx, std::move(images)), {4}, ctx + 64, pool), cache(cache_config(model.geometry())), seq(cache.create_sequence()) {
    StepBuffers buffers;
    run_step(model, cache, seq, nullptr, ctx, 0, buffers, StepAttention::AppendOnly);
  }
  static SyntheticConfig config(int ctx, std::vector<ImageRange> images = {}) {
    SyntheticConfig c;
    c.calibration_ctx = ctx;
    c.images = std::move(images);
    return c;
  }
  static CacheConfig cache_config(const ModelGeometry& g) {
    CacheConfig c;
    c.geometry = g;
    c.k_format = Format::Q8;
    c.v_format = Format::Q8;
    c.page_tokens = 64;
    c.threads = 2;
    return c;
  }
  // Appends the next token and returns its queries.
  std::vector<float> next_query() {
    const int pos = cache.length(seq, 0);
    std::vector<float> k(static_cast<std::size_t>(preset.kv_heads) * preset.head_dim), v(k.size());
    for (int h = 0; h < preset.kv_heads; ++h) {
      model.key(4, h, pos, k.data() + static_cast<std::size_t>(h) * preset.head_dim);
      model.value(4, h, pos, v.data() + static_cast<std::size_t>(h) * preset.head_dim);
    }
    cache.append(seq, 0, k.data(), v.data(), 1);
    std::vector<float> q(static_cast<std::size_t>(preset.q_heads) * preset.head_dim);
    for (int h = 0; h < preset.q_heads; ++h) model.query(4, h, pos, q.data() + static_cast<std::size_t>(h) * preset.head_dim);
    return q;
  }
};

inline SparsePolicy policy(Selector s, float budget) {
  SparsePolicy p;
  p.selector = s;
  p.budget = budget;
  p.sinks = 4;
  p.window = 128;
  return p;
}

}  // namespace kvtest
