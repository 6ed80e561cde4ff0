// Real-model accuracy against the same model with an F32 KV cache and full attention: the set
// users know from llama.cpp's KL-divergence report. All figures are `exact` (deterministic for
// a given model, text and configuration).
//   ppl            exp(mean NLL of the true next token) under the tested cache
//   ppl_delta_pct  100 * (ppl / reference ppl - 1)
//   kl_mean/p99/max  KL(reference || tested) of the next-token distributions, nats
//   top1_agree     share of positions whose most likely token is the same
//   dp_rms         RMS of the change in the probability of the true next token
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "kv_cache.h"
#include "model/llama_weights.h"
#include "runtime/thread_pool.h"
#include "sparse/policy.h"

namespace kvbench {

struct AccuracyReport {
  std::size_t predictions = 0;
  double mean_nll = 0.0;
  double reference_mean_nll = 0.0;
  double ppl = 0.0;
  double reference_ppl = 0.0;
  double ppl_delta_pct = 0.0;
  double kl_mean = 0.0;
  double kl_p99 = 0.0;
  double kl_max = 0.0;
  double top1_agree = 0.0;
  double dp_rms = 0.0;
};

class AccuracyAccumulator {
 public:
  explicit AccuracyAccumulator(int vocab_size) : vocab_(vocab_size) {}
  // One predicted position: both models' logits [vocab] and the true next token.
  void add(const float* reference_logits, const float* test_logits, int target);
  AccuracyReport report() const;

 private:
  int vocab_;
  double nll_ = 0.0, reference_nll_ = 0.0, dp_squares_ = 0.0;
  std::size_t agree_ = 0;
  std::vector<double> kl_;
};

struct ScoringConfig {
  int window = 512;     // tokens per window; each window starts from an empty cache at position 0
  int chunk = 1;        // tokens fed per step: 1 = as decoding does; more = prefill chunks
  int max_windows = 0;  // 0: every window
  // The tested model's decode steps attend through this policy (full = dense).
  kv::SparsePolicy sparse;
};

// Teacher-forced scoring of a token stream (the protocol of test vector 4 in models/README.md):
// consecutive non-overlapping windows, -log p(t[i+1] | t[0..i]) within each. The reference
// cache config (f32, full attention) and the tested one run in lockstep on the same tokens
// (LockstepScorer).
AccuracyReport score_tokens(std::shared_ptr<const kv::LlamaWeights> weights, const kv::CacheConfig& reference,
                            const kv::CacheConfig& tested, const std::vector<int>& tokens, const ScoringConfig& scoring,
                            kv::ThreadPool& pool);

}  // namespace kvbench
