// Sparse attention's quality on sampled decode steps, measured beside the engine: every
// `sample_every`-th step's plan is compared with exact attention over exact K/V (kv::ExactKV:
// regenerated or kept for the purpose, never the dequantized pages) - attn_mass_recall and its
// oracle ceiling, critical_miss_rate over the exact top `top_m` tokens, needles kept,
// attn_rel_error and attn_cosine of the output - and every critical token dropped is a
// TokenDropped event. The caller runs a check after the step's timed region: it costs far more
// than the step.
#pragma once

#include <optional>

#include "sparse/exact_kv.h"
#include "sparse/sparse_decoder.h"
#include "telemetry.h"

namespace kvbench {

class QualityMonitor {
 public:
  // `sink` (may be null) receives the drops and each check's SelectionQuality.
  QualityMonitor(const kv::ExactKV& exact, const kv::SparsePolicy& policy, kv::Telemetry* sink)
      : exact_(exact), sample_every_(policy.sample_every), top_m_(policy.top_m), sink_(sink) {}

  // The check of the decoder's last decode step, when that step is sampled and not yet checked,
  // with the step's q and out ([q_heads][head_dim]).
  std::optional<kv::SelectionQuality> check(kv::KVCache& cache, const kv::SparseDecoder& decoder, const float* q, const float* out);

 private:
  kv::SelectionQuality measure(kv::KVCache& cache, const kv::SelectionPlan& plan, int step, int layer, int context, const float* q,
                               const float* out) const;

  const kv::ExactKV& exact_;
  int sample_every_;
  int top_m_;
  kv::Telemetry* sink_;
  std::optional<std::pair<int, int>> checked_;  // (step, layer) of the last check
};

}  // namespace kvbench
