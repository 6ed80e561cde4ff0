// The synthetic backend: model-shaped Q/K/V with the statistics that matter to KV compression,
// deterministic from a seed, regenerable for any (layer, head, position) without storing it.
//
// Two statistics models (SyntheticConfig::statistics):
//   published      head types measured on real models (streaming, retrieval and diffuse heads,
//                  heavy hitters in spans that persist across steps and layers, questions and
//                  image regions): synthetic_published.h. The default.
//   uniform-heads  every head alike (sinks, window, single-token heavy hitters hashed per layer,
//                  a uniform tail): synthetic_uniform.h, benchmark definitions 1-3.
// kvbench synth-stats measures either on its own output.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "model/backend.h"
#include "model/synthetic_generator.h"
#include "model/synthetic_presets.h"
#include "sparse/exact_kv.h"
#include "runtime/thread_pool.h"

namespace kv {

enum class SyntheticStatistics { Published, UniformHeads };

std::string_view statistics_name(SyntheticStatistics statistics);

// One head type's attention: the shares of a decode query's mass on the sinks, the window and
// its heavy-hitter spans, and the share of the context those spans cover. The floor (every
// other token, evenly) takes the rest.
struct HeadTypeMasses {
  float sink = 0.0f;
  float window = 0.0f;
  float span = 0.0f;
  float coverage = 0.0f;
  float floor() const { return 1.0f - sink - window - span; }
};

// The published mix (docs/synthetic.md gives each default's source).
struct HeadMix {
  float streaming_share = 0.65f;  // of the heads in layers >= dense_layers
  float retrieval_share = 0.27f;
  float diffuse_share = 0.08f;
  int dense_layers = 2;           // layers whose heads are all diffuse
  HeadTypeMasses streaming{0.55f, 0.35f, 0.07f, 0.003f};
  HeadTypeMasses retrieval{0.25f, 0.15f, 0.52f, 0.015f};
  HeadTypeMasses diffuse{0.15f, 0.10f, 0.35f, 0.03f};
  float sink_concentration = 20.0f;  // a head's sink mass ~ Beta with this a + b around its type's mean
  float group_shared_spans = 0.5f;   // share of a retrieval head's span coverage its GQA group shares
  float span_median = 12.0f;         // lognormal span length, tokens
  float span_sigma = 0.8f;
  int span_max = 128;
  float span_zipf_ranks = 64.0f;     // span weights 1/r, r uniform in 1..this
  float token_jitter = 0.5f;         // lognormal sigma of a token's weight inside its span
  float step_sigma = 0.3f;           // lognormal sigma of a span's weight, redrawn every step
  float span_turnover = 0.02f;       // share of span weight renewed per step
  float turnover_sigma = 0.7f;       // lognormal sigma of that slow drift
  float adjacent_layer_share = 0.8f; // spans shared by layers l and l+1
  float far_layer_share = 0.3f;      // ... and by layers l and l+10
  float needle_mass = 0.5f;          // a retrieval head's mass on the needle it is asked about
  int needle_tokens = 8;             // a text needle's span
  int image_region = 4;              // an image needle: a region of this many patches square
  float image_suppression = 6.0f;    // logits off the rest of an image its question is about
};

using ImageRange = ExactKV::TokenRange;  // visual tokens [begin, end)

struct SyntheticConfig {
  SyntheticStatistics statistics = SyntheticStatistics::Published;
  std::uint64_t seed = 1;
  int calibration_ctx = 32768;  // uniform-heads: context at which the attention-mass targets hold
  int outlier_channels = 4;     // per head
  float outlier_gain_min = 10.0f;
  float outlier_gain_max = 20.0f;
  int sinks = 4;
  int window = 256;
  float query_similarity = 0.9f;
  float head_variation = 0.10f;  // relative jitter of the mass targets per head
  // uniform-heads only:
  float sink_mass = 0.25f;
  float window_mass = 0.35f;
  float heavy_fraction = 0.01f;
  float heavy_mass = 0.20f;
  float needle_strength = 4.0f;  // a question's logit on its needle, over ln(calibration_ctx)
  // published only:
  HeadMix mix;
  std::vector<ImageRange> images;  // visual tokens (no text spans; questions about them are regions)
  std::vector<int> needles;        // planted positions
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
  void reuse_prefix(const int* tokens, int n_tokens) override;

  // The token context of a position: a chain hash of the token ids up to and including it (the
  // ids given to begin_step or reuse_prefix; a position never given one holds token id = its
  // position). Keys and values of the published statistics draw their noise from it, so two
  // sequences with the same tokens up to a position hold the same K/V there.
  std::uint64_t token_context(int pos) const;

  // Queries of later steps ask for needle `index` (config.needles order); -1 stops asking.
  void ask_needle(int index) { asked_needle_ = index; }
  int asked_needle() const { return asked_needle_; }

  // Stateless regeneration, by model layer index (not the sampled index).
  void key(int model_layer, int kv_head, int pos, float* out) const;
  void value(int model_layer, int kv_head, int pos, float* out) const;
  void query(int model_layer, int q_head, int pos, float* out) const { query_asking(model_layer, q_head, pos, asked_needle_, out); }
  // The query as if needle `needle` were asked (-1: none), without touching the model's state:
  // threads that regenerate queries concurrently must not see each other's questions.
  void query_asking(int model_layer, int q_head, int pos, int needle, float* out) const;
  HeadType head_type(int model_layer, int q_head) const { return generator_->head_type(model_layer, q_head); }
  bool heavy_for(int model_layer, int q_head, int pos) const { return generator_->heavy_for(model_layer, q_head, pos); }
  std::vector<int> needle_tokens(int needle) const { return generator_->needle_tokens(needle); }

  // ExactKV, by the cache's (sampled) layer index: the generator's exact F32 K/V.
  void exact_key(int layer, int kv_head, int pos, float* out) const override {
    key(sampled_[static_cast<std::size_t>(layer)], kv_head, pos, out);
  }
  void exact_value(int layer, int kv_head, int pos, float* out) const override {
    value(sampled_[static_cast<std::size_t>(layer)], kv_head, pos, out);
  }
  std::vector<std::vector<int>> asked_needles() const override;
  std::vector<TokenRange> image_tokens() const override;
  bool answers_questions(int layer, int kv_head) const override {
    return generator_->answers_questions(sampled_[static_cast<std::size_t>(layer)], kv_head);
  }

  int model_layers() const { return preset_.layers; }
  const std::vector<int>& sampled_layers() const { return sampled_; }
  // True when only some layers run: whole-model figures scaled from them are extrapolated.
  bool extrapolated() const { return static_cast<int>(sampled_.size()) < preset_.layers; }
  NonAttentionCost non_attention_per_token() const;
  const SyntheticPreset& preset() const { return preset_; }
  const SyntheticConfig& config() const { return config_; }

 private:
  void rope_tables(int pos, int n);
  // Records token ids for positions pos .. pos + n - 1 (null: token id = position).
  void record_tokens(const int* tokens, int n, int pos);
  // cos/sin of position pos: the step's tables, the all-positions table, or computed into the buffers.
  void rope_for(int pos, const float*& cos_pos, const float*& sin_pos, float* cos_buf, float* sin_buf) const;

  SyntheticPreset preset_;
  SyntheticConfig config_;
  std::vector<int> sampled_;
  ModelGeometry geometry_;
  ThreadPool& pool_;
  std::unique_ptr<HeadGenerator> generator_;
  std::vector<std::uint64_t> contexts_;  // [max_seq]: token_context
  int asked_needle_ = -1;
  int skip_query_rows_ = 0;
  int pos_ = 0;
  int n_ = 0;
  std::vector<float> cos_, sin_;  // [n][head_dim / 2] for the step's positions
  mutable std::once_flag rope_all_once_;
  mutable std::vector<float> rope_all_cos_, rope_all_sin_;  // [max_seq][head_dim / 2], on first use
};

}  // namespace kv
