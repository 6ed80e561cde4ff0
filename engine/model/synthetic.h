// The synthetic backend: model-shaped Q/K/V with the statistics that matter to KV compression,
// deterministic from a seed, regenerable for any (layer, head, position) without storing it.
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
//     (ask_needle) match strongly: a question drops the locality term and gives its needle a
//     logit of ln(calibration_ctx) + needle_strength.
// The boosts and the kernel gain are solved per head so that, at `calibration_ctx`, the exact
// decode softmax puts about sink_mass on the sinks, window_mass on the last `window` tokens and
// heavy_mass on the heavy hitters (per-head targets jittered by head_variation); consecutive
// decode queries have cosine about query_similarity. kvbench synth-stats measures all of it.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "model/backend.h"
#include "model/synthetic_presets.h"
#include "sparse/exact_kv.h"
#include "runtime/thread_pool.h"

namespace kv {

struct SyntheticConfig {
  std::uint64_t seed = 1;
  int calibration_ctx = 32768;  // context at which the attention-mass targets hold
  int outlier_channels = 4;     // per head
  float outlier_gain_min = 10.0f;
  float outlier_gain_max = 20.0f;
  int sinks = 4;
  float sink_mass = 0.25f;
  int window = 256;
  float window_mass = 0.35f;
  float heavy_fraction = 0.01f;
  float heavy_mass = 0.20f;
  float query_similarity = 0.9f;
  float head_variation = 0.10f;  // relative jitter of the mass targets per (layer, head)
  std::vector<int> needles;      // planted positions
  float needle_strength = 4.0f;  // a question's logit on its needle, over ln(calibration_ctx)
};

// Throws InputError ("synthetic config: <field>: <reason>") for impossible values.
void validate_synthetic_config(const SyntheticConfig& config, const SyntheticPreset& preset);

struct NonAttentionCost {
  std::uint64_t macs = 0;          // per token, all layers
  std::uint64_t weight_bytes = 0;  // per token at 2 bytes per weight (f16/bf16 weights)
};

class SyntheticModel : public ModelBackend, public ExactKV {
 public:
  // sampled_layers: model layer indices to run for real (empty: all). The cache sees only those.
  SyntheticModel(const SyntheticPreset& preset, const SyntheticConfig& config, std::vector<int> sampled_layers,
                 int max_seq, ThreadPool& pool);
  ~SyntheticModel() override;

  const ModelGeometry& geometry() const override { return geometry_; }
  void begin_step(const int* tokens, int n_tokens, int pos) override;
  void layer_qkv(int layer, float* q, float* k, float* v) override;
  void layer_output(int layer, const float* attn) override;
  bool attention_feeds_next_layer() const override { return false; }
  void skip_query_rows(int rows) override { skip_query_rows_ = rows; }

  // Queries of later steps ask for needle `index` (config.needles order); -1 stops asking.
  void ask_needle(int index) { asked_needle_ = index; }

  // Stateless regeneration, by model layer index (not the sampled index).
  void key(int model_layer, int kv_head, int pos, float* out) const;
  void value(int model_layer, int kv_head, int pos, float* out) const;
  void query(int model_layer, int q_head, int pos, float* out) const { query_asking(model_layer, q_head, pos, asked_needle_, out); }
  // The query as if needle `needle` were asked (-1: none), without touching the model's state:
  // threads that regenerate queries concurrently must not see each other's questions.
  void query_asking(int model_layer, int q_head, int pos, int needle, float* out) const;
  bool is_heavy(int model_layer, int kv_head, int pos) const;

  // ExactKV, by the cache's (sampled) layer index: the generator's exact F32 K/V.
  void exact_key(int layer, int kv_head, int pos, float* out) const override {
    key(sampled_[static_cast<std::size_t>(layer)], kv_head, pos, out);
  }
  void exact_value(int layer, int kv_head, int pos, float* out) const override {
    value(sampled_[static_cast<std::size_t>(layer)], kv_head, pos, out);
  }
  std::vector<int> needle_positions() const override {
    if (asked_needle_ < 0 || asked_needle_ >= static_cast<int>(config_.needles.size())) return {};
    return {config_.needles[static_cast<std::size_t>(asked_needle_)]};
  }

  int model_layers() const { return preset_.layers; }
  const std::vector<int>& sampled_layers() const { return sampled_; }
  // True when only some layers run: whole-model figures scaled from them are extrapolated.
  bool extrapolated() const { return static_cast<int>(sampled_.size()) < preset_.layers; }
  NonAttentionCost non_attention_per_token() const;
  const SyntheticPreset& preset() const { return preset_; }
  const SyntheticConfig& config() const { return config_; }

  struct HeadParams;  // per (layer, kv head) directions, boosts and outliers

 private:
  const HeadParams& head(int model_layer, int kv_head) const;
  void rope_tables(int pos, int n);
  // cos/sin of position pos: the step's tables, the all-positions table, or computed into the buffers.
  void rope_for(int pos, const float*& cos_pos, const float*& sin_pos, float* cos_buf, float* sin_buf) const;

  SyntheticPreset preset_;
  SyntheticConfig config_;
  std::vector<int> sampled_;
  ModelGeometry geometry_;
  ThreadPool& pool_;
  std::vector<HeadParams> heads_;  // [model layer][kv head]
  std::vector<double> frequencies_;  // [head_dim / 2]
  float s_scale_ = 4.0f;
  float noise_q_ = 0.0f;
  int asked_needle_ = -1;
  int skip_query_rows_ = 0;
  int pos_ = 0;
  int n_ = 0;
  std::vector<float> cos_, sin_;  // [n][head_dim / 2] for the step's positions
  mutable std::once_flag rope_all_once_;
  mutable std::vector<float> rope_all_cos_, rope_all_sin_;  // [max_seq][head_dim / 2], on first use
};

}  // namespace kv
