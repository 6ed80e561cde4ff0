// What the speculative-decoding tests of both llama models share: plain greedy decoding with the
// top-2 logit gap at every position, and the check that speculation's tokens equal it up to a
// near-tie.
#pragma once

#include <string>
#include <vector>

#include "kv_cache.h"
#include "model/llama_model.h"
#include "model/llama_speculative.h"

namespace kvtest {

struct Greedy {
  std::vector<int> tokens;
  std::vector<float> gap;  // per output token: its best logit minus the second (infinite in the prompt)
};

// generate_greedy's tokens, with the gaps.
Greedy plain_greedy(kv::LlamaModel& model, kv::KVCache& cache, const std::vector<int>& prompt, int steps);

// A near-tie: plain decoding's two best logits closer than this; rounding may flip the choice.
inline constexpr float kNearTieGap = 1e-4f;

// A target or draft cache of the tests: pages of 16 tokens, K and V in their formats.
kv::CacheConfig speculative_cache_config(const kv::ModelGeometry& geometry, kv::Format k, kv::Format v, int v_group, int threads);

// The draft a test names: "kv" (its copy in draft_cache) or "layers:N".
kv::LlamaDraft named_draft(const std::string& name, kv::KVCache& draft_cache);

// Where `speculative` first differs from plain decoding's tokens: -1 when it does not. A
// difference fails the test unless plain decoding had a near-tie there.
int first_divergence(const Greedy& plain, const std::vector<int>& speculative);

}  // namespace kvtest
