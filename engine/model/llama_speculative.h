// Speculative decoding on the llama backend: a draft proposes k tokens, the target verifies them
// in one step of k + 1 queries (the multi-query decode kernel), the accepted prefix and the
// target's own next token are committed, the rest rolled back (KVCache::begin_tentative,
// plan_commit, apply_commit).
//
// Two drafts, both the target's own weights:
// - layers:N (self-speculative): the target's first N layers and its output head. Its K/V are
//   the target's own - written into the target's sequence as tentative tokens - so in those
//   layers the verify step appends only its last token (it still computes every row's
//   hidden state for its queries); a draft step costs N layers and the head
//   (layers_draft_dense_share).
// - kv: the whole model reading its own copy of the context in a more aggressive KV format
//   (its own KVCache). The prompt and plain steps write the target's K/V into that copy (stored
//   in the draft's format); the draft's proposals, and a last accepted proposal it catches up
//   on, write its own K/V, kept where the commit keeps their tokens.
//
// Greedy acceptance keeps the longest prefix on which the draft's argmax equals the target's;
// sampling uses the standard rejection rule (accept a draft token x with probability
// min(1, p_target(x) / p_draft(x)), else draw from the normalised max(0, p_target - p_draft)),
// which leaves the output distributed as the target's.
#pragma once

#include <cstdint>
#include <vector>

#include "kv_cache.h"
#include "model/llama_model.h"

namespace kv {

struct LlamaDraft {
  enum class Kind : std::uint8_t { Layers, Kv };
  Kind kind = Kind::Layers;
  int layers = 0;            // Layers: the first N layers, 1 <= N < the model's layers
  KVCache* cache = nullptr;  // Kv: the draft's own copy of the context
};

struct SpeculativeSampling {
  float temperature = 0.0f;  // 0: greedy
  std::uint64_t seed = 1;
};

struct SpeculativeDecodeStats {
  std::uint64_t verify_steps = 0;
  std::uint64_t proposed = 0;   // draft tokens proposed
  std::uint64_t accepted = 0;   // of them, accepted
  std::uint64_t committed = 0;  // tokens committed by verify steps (accepted + the target's own)
  std::uint64_t draft_steps = 0;  // the draft's forward passes (proposals and catch-up)
  double accept_rate() const { return proposed == 0 ? 0.0 : static_cast<double>(accepted) / static_cast<double>(proposed); }
  double tokens_per_verify() const {
    return verify_steps == 0 ? 0.0 : static_cast<double>(committed) / static_cast<double>(verify_steps);
  }
};

// generate_greedy's contract (run.c semantics: `steps` forward positions from 0, the prompt
// echoed while it lasts, a stop before BOS) through speculative decoding with up to k draft
// tokens a round (1 <= k < kMaxVerifyQueries). The prompt runs one token a step, as in
// generate_greedy. Throws InputError for a draft that does not fit the model or the cache.
std::vector<int> generate_speculative(LlamaModel& model, KVCache& cache, const LlamaDraft& draft,
                                      const std::vector<int>& prompt, int steps, int k,
                                      SpeculativeDecodeStats* stats = nullptr, const SpeculativeSampling& sampling = {});

// The share of a decode step's dense multiply-adds that a layers:N draft step does: N layers'
// matrices and the output head, against all layers' and the head.
double layers_draft_dense_share(const LlamaConfig& config, int layers);

// The rejection rule's parts over two distributions of one vocabulary: the probability of
// accepting draft token x, and the distribution to draw from after a rejection (the
// normalised max(0, p_target - p_draft); p_target itself where the two are equal).
double speculative_accept_probability(const std::vector<float>& p_target, const std::vector<float>& p_draft, int x);
std::vector<double> speculative_residual(const std::vector<float>& p_target, const std::vector<float>& p_draft);

}  // namespace kv
