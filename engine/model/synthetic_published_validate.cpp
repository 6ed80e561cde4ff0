// The published heads' config checks: every field in range, and the channels the features
// need fit the preset's head (the layout in synthetic_published_internal.h).
#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "model/synthetic_published.h"
#include "model/synthetic_published_internal.h"
#include "runtime/error.h"

namespace kv {

void validate_published_heads(const SyntheticConfig& c, const SyntheticPreset& p) {
  using published::content_needed;
  using published::group_of;
  const std::string where = "synthetic config";
  auto fail = [&](const std::string& field, const std::string& reason) { throw InputError(where, field, reason); };
  const HeadMix& m = c.mix;
  if (c.sinks < 1) fail("sinks", "at least one sink token");
  if (c.window < 16) fail("window", "must be at least 16 tokens");
  if (c.outlier_channels < 0 || c.outlier_channels > p.head_dim / 8) fail("outlier_channels", "must be in 0..head_dim/8");
  if (!(c.outlier_gain_min >= 1.0f && c.outlier_gain_min <= 1000.0f)) fail("outlier_gain_min", "must be in 1..1000");
  if (!(c.outlier_gain_max >= c.outlier_gain_min && c.outlier_gain_max <= 1000.0f)) fail("outlier_gain_max", "must be in outlier_gain_min..1000");
  if (!(c.query_similarity > 0.0f && c.query_similarity < 1.0f)) fail("query_similarity", "must be in (0, 1)");
  if (!(c.head_variation >= 0.0f && c.head_variation < 0.5f)) fail("head_variation", "must be in [0, 0.5)");
  const std::pair<const char*, float> shares[] = {
      {"streaming_share", m.streaming_share}, {"retrieval_share", m.retrieval_share}, {"diffuse_share", m.diffuse_share}};
  for (const auto& [name, share] : shares) {
    if (!(share >= 0.0f && share <= 1.0f)) fail(name, "must be in [0, 1]");
  }
  if (std::fabs(m.streaming_share + m.retrieval_share + m.diffuse_share - 1.0f) > 1e-3f) {
    fail("streaming_share", "streaming_share + retrieval_share + diffuse_share must be 1");
  }
  if (m.dense_layers < 0) fail("dense_layers", "must be >= 0");
  const std::pair<const char*, const HeadTypeMasses*> types[] = {
      {"streaming", &m.streaming}, {"retrieval", &m.retrieval}, {"diffuse", &m.diffuse}};
  for (const auto& [name, t] : types) {
    const std::string field = name;
    if (!(t->sink > 0.0f && t->sink < 1.0f)) fail(field + ".sink_mass", "must be in (0, 1)");
    if (!(t->window > 0.0f && t->window < 1.0f)) fail(field + ".window_mass", "must be in (0, 1)");
    if (!(t->span >= 0.0f && t->span < 1.0f)) fail(field + ".span_mass", "must be in [0, 1)");
    if (!(t->floor() >= 0.01f)) fail(field + ".sink_mass", "sink, window and span masses must leave at least 0.01 for the floor");
    if (!(t->coverage > 0.0f && t->coverage < 0.25f)) fail(field + ".span_coverage", "must be in (0, 0.25)");
  }
  if (!(m.group_shared_spans > 0.0f && m.group_shared_spans <= 1.0f)) fail("group_shared_spans", "must be in (0, 1]");
  if (!(m.streaming.coverage <= m.group_shared_spans * m.retrieval.coverage)) {
    fail("streaming.span_coverage", "must not exceed group_shared_spans x retrieval.span_coverage (streaming spans are shared ones)");
  }
  if (!(m.retrieval.coverage <= m.diffuse.coverage)) fail("diffuse.span_coverage", "must be >= retrieval.span_coverage");
  // Every class's spans together (each q head's own retrieval spans among them) must leave the
  // context mostly plain, or spans that may not overlap would fall short of their coverage.
  const float covered = m.diffuse.coverage + static_cast<float>(group_of(p) - 1) * (1.0f - m.group_shared_spans) * m.retrieval.coverage;
  if (covered > 0.5f) {
    fail("retrieval.span_coverage", "the spans of every class would cover " + std::to_string(covered) +
                                         " of the context with this preset's " + std::to_string(group_of(p)) +
                                         " q heads per kv head; at most 0.5");
  }
  if (!(m.sink_concentration >= 2.0f && m.sink_concentration <= 1000.0f)) fail("sink_concentration", "must be in 2..1000");
  if (!(m.span_max >= 1 && m.span_max <= 1024)) fail("span_max", "must be in 1..1024");
  if (!(m.span_median >= 1.0f && m.span_median <= static_cast<float>(m.span_max))) fail("span_median", "must be in 1..span_max");
  if (!(m.span_zipf_ranks >= 1.0f && m.span_zipf_ranks <= 1e6f)) fail("span_zipf_ranks", "must be in 1..1e6");
  const std::pair<const char*, float> sigmas[] = {{"span_sigma", m.span_sigma},
                                                  {"token_jitter", m.token_jitter},
                                                  {"step_sigma", m.step_sigma},
                                                  {"turnover_sigma", m.turnover_sigma}};
  for (const auto& [name, value] : sigmas) {
    if (!(value >= 0.0f && value <= 3.0f)) fail(name, "must be in [0, 3]");
  }
  if (!(m.span_turnover >= 0.0f && m.span_turnover <= 1.0f)) fail("span_turnover", "must be in [0, 1]");
  if (!(m.far_layer_share > 0.0f && m.far_layer_share < m.adjacent_layer_share && m.adjacent_layer_share < 1.0f)) {
    fail("adjacent_layer_share", "need 0 < far_layer_share < adjacent_layer_share < 1");
  }
  if (!(m.needle_mass > 0.0f && m.needle_mass < 1.0f)) fail("needle_mass", "must be in (0, 1)");
  if (m.needle_tokens < 1 || m.needle_tokens > 256) fail("needle_tokens", "must be in 1..256");
  if (m.image_region < 1 || m.image_region > 64) fail("image_region", "must be in 1..64");
  if (!(m.image_suppression >= 0.0f && m.image_suppression <= 30.0f)) fail("image_suppression", "must be in [0, 30]");
  if (p.head_dim < 32) fail("preset", "the published statistics need head_dim >= 32");
  if (p.head_dim > 1024) fail("preset", "the published statistics take head_dim <= 1024");
  const int content = p.head_dim / 2;
  if (content_needed(p, c.needles.size(), c.outlier_channels) > content) {
    const int most = content - content_needed(p, 0, c.outlier_channels);
    fail("needles", std::to_string(c.needles.size()) + " needles need a channel each; head_dim " + std::to_string(p.head_dim) +
                        " with " + std::to_string(group_of(p)) + " q heads per kv head holds at most " + std::to_string(std::max(0, most)));
  }
  for (int pos : c.needles) {
    if (pos < c.sinks) fail("needles", "needle position " + std::to_string(pos) + " is a sink or negative");
  }
  int last = 0;
  for (const ImageRange& image : c.images) {
    if (image.begin < std::max(last, c.sinks) || image.end <= image.begin) {
      fail("images", "image tokens must be after the sinks, non-empty, in order and apart");
    }
    last = image.end;
  }
}

}  // namespace kv
