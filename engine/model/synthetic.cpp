#include "model/synthetic.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "model/synthetic_published.h"
#include "model/synthetic_random.h"
#include "model/synthetic_uniform.h"
#include "runtime/error.h"

namespace kv {

std::string_view statistics_name(SyntheticStatistics statistics) {
  return statistics == SyntheticStatistics::Published ? "published" : "uniform-heads";
}

std::string_view head_type_name(HeadType type) {
  switch (type) {
    case HeadType::Streaming:
      return "streaming";
    case HeadType::Retrieval:
      return "retrieval";
    case HeadType::Diffuse:
      return "diffuse";
    default:
      return "uniform";
  }
}

void validate_synthetic_config(const SyntheticConfig& config, const SyntheticPreset& preset) {
  if (config.statistics == SyntheticStatistics::UniformHeads) {
    validate_uniform_heads(config, preset);
  } else {
    validate_published_heads(config, preset);
  }
}

namespace {
void rope_row(const std::vector<double>& frequency, int pos, float* cos_out, float* sin_out) {
  for (std::size_t i = 0; i < frequency.size(); ++i) {
    const double angle = frequency[i] * pos;
    cos_out[i] = static_cast<float>(std::cos(angle));
    sin_out[i] = static_cast<float>(std::sin(angle));
  }
}
}  // namespace

SyntheticModel::SyntheticModel(const SyntheticPreset& preset, const SyntheticConfig& config,
                               std::vector<int> sampled_layers, int max_seq, ThreadPool& pool)
    : preset_(preset), config_(config), sampled_(std::move(sampled_layers)), pool_(pool) {
  validate_synthetic_config(config_, preset_);
  if (sampled_.empty()) {
    for (int l = 0; l < preset_.layers; ++l) sampled_.push_back(l);
  }
  for (int l : sampled_) {
    if (l < 0 || l >= preset_.layers) {
      throw InputError("synthetic config", "sample_layers", "layer " + std::to_string(l) + " is outside the model");
    }
  }
  geometry_ = {static_cast<int>(sampled_.size()), preset_.q_heads, preset_.kv_heads, preset_.head_dim, max_seq};
  if (config_.statistics == SyntheticStatistics::UniformHeads) {
    generator_ = std::make_unique<UniformHeads>(preset_, config_);
  } else {
    generator_ = std::make_unique<PublishedHeads>(preset_, config_, sampled_, max_seq);
  }
  contexts_.resize(static_cast<std::size_t>(std::max(0, max_seq)));
  record_tokens(nullptr, max_seq, 0);
}

namespace {
constexpr std::uint64_t kContextRoot = 0x746f6b656e637478ull;
std::uint64_t chain_context(std::uint64_t before, int token, int pos) {
  return synth::splitmix(before ^ synth::splitmix((static_cast<std::uint64_t>(static_cast<std::uint32_t>(pos)) << 32) |
                                                  static_cast<std::uint32_t>(token)));
}
}  // namespace

void SyntheticModel::record_tokens(const int* tokens, int n, int pos) {
  const int end = std::min(pos + n, static_cast<int>(contexts_.size()));
  for (int p = std::max(pos, 0); p < end; ++p) {
    const std::uint64_t before = p == 0 ? kContextRoot : contexts_[static_cast<std::size_t>(p - 1)];
    contexts_[static_cast<std::size_t>(p)] = chain_context(before, tokens != nullptr ? tokens[p - pos] : p, p);
  }
}

std::uint64_t SyntheticModel::token_context(int pos) const {
  if (pos >= 0 && pos < static_cast<int>(contexts_.size())) return contexts_[static_cast<std::size_t>(pos)];
  return chain_context(kContextRoot, pos, pos);  // past the sequences the model was built for
}

void SyntheticModel::reuse_prefix(const int* tokens, int n_tokens) { record_tokens(tokens, n_tokens, 0); }

SyntheticModel::~SyntheticModel() = default;

std::vector<std::vector<int>> SyntheticModel::asked_needles() const {
  if (asked_needle_ < 0 || asked_needle_ >= static_cast<int>(config_.needles.size())) return {};
  return {generator_->needle_tokens(asked_needle_)};
}

std::vector<ExactKV::TokenRange> SyntheticModel::image_tokens() const { return config_.images; }

void SyntheticModel::key(int model_layer, int kv_head, int pos, float* out) const {
  float c[256], s[256];  // head_dim <= 512: at most 256 RoPE pairs
  const float* cos_pos = nullptr;
  const float* sin_pos = nullptr;
  rope_for(pos, cos_pos, sin_pos, c, s);
  generator_->key(model_layer, kv_head, pos, token_context(pos), cos_pos, sin_pos, out);
}

void SyntheticModel::value(int model_layer, int kv_head, int pos, float* out) const {
  generator_->value(model_layer, kv_head, pos, token_context(pos), out);
}

void SyntheticModel::query_asking(int model_layer, int q_head, int pos, int needle, float* out) const {
  float c[256], s[256];
  const float* cos_pos = nullptr;
  const float* sin_pos = nullptr;
  rope_for(pos, cos_pos, sin_pos, c, s);
  generator_->query(model_layer, q_head, pos, needle, cos_pos, sin_pos, out);
}

void SyntheticModel::rope_for(int pos, const float*& cos_pos, const float*& sin_pos, float* cos_buf, float* sin_buf) const {
  const std::vector<double>& frequencies = generator_->frequencies();
  const std::size_t pairs = frequencies.size();
  if (pos >= pos_ && pos < pos_ + n_) {  // the step's own positions
    cos_pos = cos_.data() + static_cast<std::size_t>(pos - pos_) * pairs;
    sin_pos = sin_.data() + static_cast<std::size_t>(pos - pos_) * pairs;
    return;
  }
  if (pos >= 0 && pos < geometry_.max_seq) {
    // Regenerating earlier positions (exact K for quality checks) would otherwise pay a sincos
    // per pair and call: one table for every position, built on first use.
    std::call_once(rope_all_once_, [&] {
      rope_all_cos_.resize(static_cast<std::size_t>(geometry_.max_seq) * pairs);
      rope_all_sin_.resize(rope_all_cos_.size());
      for (int t = 0; t < geometry_.max_seq; ++t) {
        rope_row(frequencies, t, rope_all_cos_.data() + static_cast<std::size_t>(t) * pairs,
                 rope_all_sin_.data() + static_cast<std::size_t>(t) * pairs);
      }
    });
    cos_pos = rope_all_cos_.data() + static_cast<std::size_t>(pos) * pairs;
    sin_pos = rope_all_sin_.data() + static_cast<std::size_t>(pos) * pairs;
    return;
  }
  rope_row(frequencies, pos, cos_buf, sin_buf);
  cos_pos = cos_buf;
  sin_pos = sin_buf;
}

void SyntheticModel::rope_tables(int pos, int n) {
  const std::vector<double>& frequencies = generator_->frequencies();
  const std::size_t pairs = frequencies.size();
  cos_.resize(static_cast<std::size_t>(n) * pairs);
  sin_.resize(cos_.size());
  for (int t = 0; t < n; ++t) rope_row(frequencies, pos + t, cos_.data() + t * pairs, sin_.data() + t * pairs);
}

void SyntheticModel::begin_step(const int* tokens, int n_tokens, int pos) {
  KV_ASSERT(n_tokens > 0, "a step has at least one token");
  record_tokens(tokens, n_tokens, pos);
  pos_ = pos;
  n_ = n_tokens;
  rope_tables(pos, n_tokens);
}

void SyntheticModel::layer_qkv(int layer, float* q, float* k, float* v) {
  const int model_layer = sampled_[static_cast<std::size_t>(layer)];
  const ModelGeometry& g = geometry_;
  const auto dim = static_cast<std::size_t>(g.head_dim);
  // Work items: each token's kv heads (K and V), then each token's q heads.
  const std::size_t kv_items = static_cast<std::size_t>(n_) * g.kv_heads;
  // Query rows the caller will not read are left unwritten (sampled prefill).
  const std::size_t q_skipped = static_cast<std::size_t>(std::min(skip_query_rows_, n_)) * g.q_heads;
  const std::size_t q_items = static_cast<std::size_t>(n_) * g.q_heads - q_skipped;
  const std::size_t block = 64;  // items per task
  const std::size_t tasks = (kv_items + q_items + block - 1) / block;
  pool_.parallel_for(tasks, [&](std::size_t task) {
    for (std::size_t item = task * block; item < std::min((task + 1) * block, kv_items + q_items); ++item) {
      if (item < kv_items) {
        const int t = static_cast<int>(item) / g.kv_heads, h = static_cast<int>(item) % g.kv_heads;
        key(model_layer, h, pos_ + t, k + item * dim);
        value(model_layer, h, pos_ + t, v + item * dim);
      } else {
        const std::size_t qi = item - kv_items + q_skipped;
        const int t = static_cast<int>(qi) / g.q_heads, h = static_cast<int>(qi) % g.q_heads;
        query(model_layer, h, pos_ + t, q + qi * dim);
      }
    }
  });
}

void SyntheticModel::layer_output(int /*layer*/, const float* /*attn*/) {
  // The synthetic model's next layer does not depend on this one's output.
}

NonAttentionCost SyntheticModel::non_attention_per_token() const {
  NonAttentionCost cost;
  cost.macs = preset_.non_attention_macs_per_token();
  cost.weight_bytes = 2 * cost.macs;
  return cost;
}

}  // namespace kv
