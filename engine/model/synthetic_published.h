// The published statistics: head types, heavy hitters in spans that persist, and questions.
//
// Each (layer, q head) is a streaming, retrieval or diffuse head (layers below dense_layers are
// all diffuse), with its own shares of mass on the sinks, the window, its heavy-hitter spans and
// an even floor. A query solves its gains for its own context length, so the shares hold at any
// context, not at one calibration point.
//
// Channels of a head (post-RoPE, D = head_dim):
//   [0, D/2)   D/4 locality pairs rotating at frequencies between 1/window and 4/window: the
//              key carries A_loc R(j) phi, the query G(t) R(t) phi, so q.k = G K(t - j) with K
//              the mean cosine of the pairs - a RoPE kernel whose bump is the window;
//   then       sink, span log-weight and visual indicators; one indicator per span class (A:
//              every head's, B0: the GQA group's shared retrieval spans, C: the diffuse extra,
//              B1..BG: each q head's own); a code subspace where every span has a random unit
//              code, so a query's random vector there redraws each span's weight per step and
//              drifts it slowly (turnover); one channel per planted needle; free channels carry
//              the outlier offsets and the query noise (for consecutive-query similarity).
// The features' channels are then turned by one random orthogonal basis, so that no feature is a
// lone spike on one channel (q.k is unchanged). Logit noise stays small because each feature's
// key amplitude is large against the unit key noise and the query scales down by the same factor.
#pragma once

#include <cstdint>
#include <vector>

#include "model/span_layout.h"
#include "model/synthetic.h"

namespace kv {

void validate_published_heads(const SyntheticConfig& config, const SyntheticPreset& preset);

class PublishedHeads : public HeadGenerator {
 public:
  // layers: the model layers whose spans are placed (the ones the model will be asked about).
  PublishedHeads(const SyntheticPreset& preset, const SyntheticConfig& config, const std::vector<int>& layers, int max_seq);
  ~PublishedHeads() override;

  const std::vector<double>& frequencies() const override { return frequencies_; }
  void key(int layer, int kv_head, int pos, std::uint64_t context, const float* cos_pos, const float* sin_pos,
           float* out) const override;
  void value(int layer, int kv_head, int pos, std::uint64_t context, float* out) const override;
  void query(int layer, int q_head, int pos, int needle, const float* cos_pos, const float* sin_pos,
             float* out) const override;
  HeadType head_type(int layer, int q_head) const override;
  bool heavy_for(int layer, int q_head, int pos) const override;
  bool answers_questions(int layer, int kv_head) const override;
  std::vector<int> needle_tokens(int needle) const override;

  // The mass targets of one q head (after its own jitter).
  HeadTypeMasses targets(int layer, int q_head) const;
  const SpanLayout& spans(int layer, int kv_head) const;

 private:
  struct Gains {
    float window = 0, sink = 0, span = 0, needle = 0;
  };
  // The logit gains a query at position t uses, solved for its context of t + 1 tokens.
  Gains gains(int layer, int q_head, int t, int needle) const;
  struct QHead;
  struct KvHead;
  const QHead& qhead(int layer, int q_head) const;
  const KvHead& kvhead(int layer, int kv_head) const;
  // Sum over d in [0, x) of e^{g K(d)}, interpolated.
  double kernel_sum(double g, double x) const;
  double kernel_at(int d) const;  // K(d), the mean cosine of the locality pairs
  std::vector<int> active_classes(int layer, int q_head, int needle) const;
  int image_of(int pos) const;
  bool needle_in_image(int needle) const;
  // out[0..n) += the features f[0..n) in channel coordinates (feature_basis_).
  void to_channels(const float* features, int n, float* out) const;
  // Construction steps, in the order the constructor runs them (later ones read earlier ones).
  void build_kernel_sums();
  void draw_qheads(float persistent, float renew);
  HeadType draw_type(int layer, int q_head, float persistent, float renew) const;
  SpanPlacement span_placement(float persistent, float renew) const;
  void draw_kvheads();
  void place_spans(const std::vector<int>& layers, const SpanPlacement& placement);
  void place_needles();
  std::vector<int> image_needle_tokens(const ImageRange& image, int pos) const;

  SyntheticPreset preset_;
  SyntheticConfig config_;
  int max_seq_ = 0;
  int pairs_ = 0;            // locality pairs
  int ch_sink_ = 0, ch_code_ = 0, ch_needle_ = 0, ch_free_ = 0;  // channel offsets: features from ch_sink_, free from ch_free_
  int classes_ = 0, code_dims_ = 0;
  std::vector<double> frequencies_;
  std::vector<QHead> qheads_;                 // [layer][q head]
  std::vector<KvHead> kvheads_;               // [layer][kv head]
  std::vector<std::vector<int>> needle_tokens_;
  std::vector<double> kernel_cum_;            // [gain grid][checkpoint]
  std::vector<float> feature_basis_;          // [feature][channel]: an orthogonal basis of the feature channels
  int checkpoints_ = 0;
};

}  // namespace kv
