#include "engine/model/speculative_check.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>

namespace kvtest {

Greedy plain_greedy(kv::LlamaModel& model, kv::KVCache& cache, const std::vector<int>& prompt, int steps) {
  Greedy g;
  const kv::SeqId seq = cache.create_sequence();
  kv::StepBuffers buffers;
  int token = prompt[0];
  for (int pos = 0; pos < steps; ++pos) {
    kv::run_step(model, cache, seq, &token, 1, pos, buffers);
    const std::vector<float>& logits = model.logits();
    const bool in_prompt = pos + 1 < static_cast<int>(prompt.size());
    const int next = in_prompt ? prompt[static_cast<std::size_t>(pos) + 1]
                               : static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    if (next == 1) break;
    std::vector<float> sorted(logits.begin(), logits.end());
    std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<>());
    g.tokens.push_back(next);
    g.gap.push_back(in_prompt ? INFINITY : sorted[0] - sorted[1]);
    token = next;
  }
  cache.release(seq);
  return g;
}

kv::CacheConfig speculative_cache_config(const kv::ModelGeometry& geometry, kv::Format k, kv::Format v, int v_group, int threads) {
  kv::CacheConfig c;
  c.geometry = geometry;
  c.k_format = k;
  c.v_format = v;
  c.v_group = v_group;
  c.page_tokens = 16;
  c.threads = threads;
  return c;
}

kv::LlamaDraft named_draft(const std::string& name, kv::KVCache& draft_cache) {
  kv::LlamaDraft draft;
  if (name == "kv") {
    draft.kind = kv::LlamaDraft::Kind::Kv;
    draft.cache = &draft_cache;
  } else {
    draft.layers = std::stoi(name.substr(name.find(':') + 1));
  }
  return draft;
}

int first_divergence(const Greedy& plain, const std::vector<int>& speculative) {
  const std::size_t n = std::min(plain.tokens.size(), speculative.size());
  for (std::size_t i = 0; i < n; ++i) {
    if (plain.tokens[i] != speculative[i]) {
      INFO("output token " << i << ": plain " << plain.tokens[i] << ", speculative " << speculative[i]
                           << ", plain's top-2 logit gap " << plain.gap[i]);
      CHECK(plain.gap[i] < kNearTieGap);
      return static_cast<int>(i);
    }
  }
  CHECK(plain.tokens.size() == speculative.size());
  return -1;
}

}  // namespace kvtest
