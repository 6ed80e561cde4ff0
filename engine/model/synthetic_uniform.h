// The uniform-heads statistics of benchmark definitions 1-3, unchanged so their results
// reproduce: every (layer, kv head) alike up to a 10% jitter.
//
// Construction per (layer, kv head), over the RoPE channel pairs of a head (pair i rotates at
// theta^(-2i/head_dim), i = 0 fastest):
//   k_j = s*a_j*u + R(j)(s*g_k*m + mu) + n_j + outliers      q_t = (sqrt(D)/s)(u + R(t) g_q m) + xi_t
//   - u (unit, on the slow "content" pairs) carries a token's importance a_j: sinks and heavy
//     hitters (a hash-chosen share of positions) get a logit boost, the tail none;
//   - m (unit, on the pairs whose period spans the local window) is rotated by RoPE in both q and
//     k, so q.k carries g_q g_k K(t - j), K the RoPE kernel: real locality, not a mask;
//   - mu, a fixed pre-RoPE mean on the fast pairs, gives keys RoPE's oscillating channels;
//   - n_j, xi_t: noise (sum-of-uniforms normals, no libm, so every machine draws the same);
//   - outliers: `outlier_channels` fixed slow channels per head offset by 10-20x the typical
//     |k|, stable across tokens (they add the same amount to every score of a query);
//   - needles: planted positions whose keys carry an extra direction that a question's queries
//     match strongly: a question drops the locality term and gives its needle a logit of
//     ln(calibration_ctx) + needle_strength.
// The boosts and the kernel gain are solved per head so that, at `calibration_ctx`, the exact
// decode softmax puts about sink_mass on the sinks, window_mass on the last `window` tokens and
// heavy_mass on the heavy hitters (per-head targets jittered by head_variation); consecutive
// decode queries have cosine about query_similarity.
#pragma once

#include <cstdint>
#include <vector>

#include "model/synthetic.h"

namespace kv {

void validate_uniform_heads(const SyntheticConfig& config, const SyntheticPreset& preset);

class UniformHeads : public HeadGenerator {
 public:
  UniformHeads(const SyntheticPreset& preset, const SyntheticConfig& config);
  ~UniformHeads() override;

  const std::vector<double>& frequencies() const override { return frequencies_; }
  // The uniform heads keep benchmark definitions 1-3's keys and values: functions of the
  // position alone (the token context is not used).
  void key(int layer, int kv_head, int pos, std::uint64_t context, const float* cos_pos, const float* sin_pos,
           float* out) const override;
  void value(int layer, int kv_head, int pos, std::uint64_t context, float* out) const override;
  void query(int layer, int q_head, int pos, int needle, const float* cos_pos, const float* sin_pos,
             float* out) const override;
  HeadType head_type(int, int) const override { return HeadType::Uniform; }
  bool heavy_for(int layer, int q_head, int pos) const override {
    return is_heavy(layer, q_head / (preset_.q_heads / preset_.kv_heads), pos);
  }
  bool answers_questions(int, int) const override { return true; }
  std::vector<int> needle_tokens(int needle) const override;

  bool is_heavy(int layer, int kv_head, int pos) const;

  struct HeadParams;  // per (layer, kv head) directions, boosts and outliers

 private:
  const HeadParams& head(int layer, int kv_head) const;

  SyntheticPreset preset_;
  SyntheticConfig config_;
  std::vector<HeadParams> heads_;  // [model layer][kv head]
  std::vector<double> frequencies_;  // [head_dim / 2]
  float s_scale_ = 4.0f;
  float noise_q_ = 0.0f;
};

}  // namespace kv
