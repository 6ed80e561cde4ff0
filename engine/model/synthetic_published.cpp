#include "model/synthetic_published.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "model/synthetic_published_internal.h"
#include "model/synthetic_random.h"
#include "runtime/error.h"

namespace kv {

namespace {

using synth::kTagKey;
using synth::kTagQuery;
using synth::kTagValue;
constexpr std::uint64_t kTagQHead = 0x71, kTagKvHead = 0x50, kTagStep = 0x73, kTagDrift = 0x64, kTagCode = 0x63,
                        kTagQHeadType = 0x74, kTagBasis = 0x42;
constexpr int kMaxFeatures = 512;  // feature channels of a head (head_dim <= 1024: at most 512)
// Key amplitude of each feature against the unit key noise: a query scales its gain down by
// the same factor, so the noise a feature adds to every logit is gain / amplitude.
constexpr float kAmpLocality = 8.0f, kAmpSink = 64.0f, kAmpClass = 48.0f, kAmpLogWeight = 8.0f, kAmpCode = 8.0f,
                kAmpNeedle = 64.0f, kAmpVisual = 32.0f;
constexpr double kGainStep = 0.25;  // the window gain grid of the kernel sums
constexpr int kGains = 81;          // 0 .. 20
constexpr int kCheckpoint = 64;     // positions between kernel-sum checkpoints
// The channel layout, shared with the config checks (synthetic_published_internal.h).
using published::code_dims_for;
using published::group_of;
using published::kClassAll;
using published::kClassDiffuse;
using published::kClassOwn;
using published::kClassShared;
using published::kFeatureClass;
using published::kFeatureLogWeight;
using published::kFeatureSink;
using published::kFeatureVisual;
using published::kMinFree;

float unit_of(std::uint64_t h) { return static_cast<float>(h >> 40) * (1.0f / 16777216.0f); }

// A random orthogonal n x n basis (rows), Gram-Schmidt in double on the seed's normals.
std::vector<float> orthogonal_basis(int n, std::uint64_t seed) {
  std::vector<double> basis(static_cast<std::size_t>(n) * n);
  synth::NormalStream rng(synth::hash_of(seed, 0, 0, 0, kTagBasis));
  for (int r = 0; r < n; ++r) {
    double* row = basis.data() + static_cast<std::size_t>(r) * n;
    for (int j = 0; j < n; ++j) row[j] = rng.next();
    for (int k = 0; k < r; ++k) {
      for (int pass = 0; pass < 2; ++pass) {  // twice, for accuracy
        const double* other = basis.data() + static_cast<std::size_t>(k) * n;
        double dot = 0.0;
        for (int j = 0; j < n; ++j) dot += row[j] * other[j];
        for (int j = 0; j < n; ++j) row[j] -= dot * other[j];
      }
    }
    double norm = 0.0;
    for (int j = 0; j < n; ++j) norm += row[j] * row[j];
    for (int j = 0; j < n; ++j) row[j] /= std::sqrt(norm);
  }
  return {basis.begin(), basis.end()};
}

// An exact Beta(a, b) draw for integer a, b: the a-th smallest of a + b - 1 uniforms.
float beta_draw(synth::NormalStream& rng, int a, int b) {
  std::vector<float> u(static_cast<std::size_t>(a + b - 1));
  for (float& x : u) x = rng.uniform();
  std::nth_element(u.begin(), u.begin() + (a - 1), u.end());
  return u[static_cast<std::size_t>(a - 1)];
}

}  // namespace

struct PublishedHeads::QHead {
  HeadType type = HeadType::Diffuse;
  HeadTypeMasses masses;
};

struct PublishedHeads::KvHead {
  std::vector<float> phase;    // [dim]: A_loc (cos phi, sin phi) on the locality pairs, 0 elsewhere
  std::vector<float> v_scale;  // [dim]
  std::vector<int> outliers;
  std::vector<float> offsets;
  bool answers = false;
  std::unique_ptr<SpanLayout> spans;  // placed for the layers asked for
};

PublishedHeads::PublishedHeads(const SyntheticPreset& preset, const SyntheticConfig& config, const std::vector<int>& layers,
                               int max_seq)
    : preset_(preset), config_(config), max_seq_(max_seq) {
  const int dim = preset_.head_dim;
  pairs_ = dim / 4;
  ch_sink_ = 2 * pairs_;
  classes_ = kClassOwn + group_of(preset_);
  ch_code_ = ch_sink_ + kFeatureClass + classes_;
  code_dims_ = code_dims_for(dim);
  ch_needle_ = ch_code_ + code_dims_;
  ch_free_ = ch_needle_ + static_cast<int>(config_.needles.size());
  KV_ASSERT(ch_free_ + config_.outlier_channels + kMinFree <= dim, "validated: the channels fit the head");
  KV_ASSERT(code_dims_ <= 64, "validated: head_dim <= 1024");
  KV_ASSERT(ch_free_ - ch_sink_ <= kMaxFeatures, "validated: the features fit");
  // The features' channels are one random orthogonal basis: q.k is unchanged, but no feature is
  // a lone spike on one channel of a few tokens (a K quantizer with per-channel ranges would see
  // a range as wide as the spike on every token of its page, which real keys do not show).
  feature_basis_ = orthogonal_basis(ch_free_ - ch_sink_, config_.seed);

  // Locality pairs: geometric between 4/window and 1/window, so the kernel's bump covers the
  // window and the pairs decorrelate beyond it; the other pairs never rotate anything.
  frequencies_.resize(static_cast<std::size_t>(dim / 2));
  const double hi = 4.0 / config_.window, lo = 1.0 / config_.window;
  for (int i = 0; i < dim / 2; ++i) {
    frequencies_[static_cast<std::size_t>(i)] =
        i < pairs_ ? hi * std::pow(lo / hi, static_cast<double>(i) / std::max(1, pairs_ - 1)) : std::pow(preset_.rope_theta, -2.0 * i / dim);
  }
  build_kernel_sums();

  float persistent = 0.0f, renew = 0.0f;
  layer_sharing(config_.mix.adjacent_layer_share, config_.mix.far_layer_share, persistent, renew);
  draw_qheads(persistent, renew);
  const SpanPlacement placement = span_placement(persistent, renew);
  draw_kvheads();
  place_spans(layers, placement);
  place_needles();
}

// Cumulative sums of e^{g K(d)} on the gain grid, every kCheckpoint positions: what kernel_sum
// interpolates, so a query's gain solve does not sum the kernel over its whole context.
void PublishedHeads::build_kernel_sums() {
  checkpoints_ = max_seq_ / kCheckpoint + 1;
  kernel_cum_.assign(static_cast<std::size_t>(kGains) * static_cast<std::size_t>(checkpoints_ + 1), 0.0);
  std::vector<double> running(kGains, 0.0);
  for (int d = 0; d <= checkpoints_ * kCheckpoint; ++d) {
    if (d % kCheckpoint == 0) {
      for (int gi = 0; gi < kGains; ++gi) {
        kernel_cum_[static_cast<std::size_t>(gi) * (checkpoints_ + 1) + static_cast<std::size_t>(d / kCheckpoint)] = running[static_cast<std::size_t>(gi)];
      }
      if (d / kCheckpoint == checkpoints_) break;
    }
    const double step = std::exp(kGainStep * kernel_at(d));
    double v = 1.0;
    for (int gi = 0; gi < kGains; ++gi) {
      running[static_cast<std::size_t>(gi)] += v;
      v *= step;
    }
  }
}

// A q head's type at `layer`; types persist across layers, so this is not a per-head draw.
HeadType PublishedHeads::draw_type(int layer, int q_head, float persistent, float renew) const {
  const HeadMix& mix = config_.mix;
  // A q head keeps its type from one layer to the next as span slots keep their spans, so
  // adjacent layers attend alike; the type draw is the one of the layer it last renewed at.
  int epoch = mix.dense_layers;
  const auto head_key = synth::hash_of(config_.seed, 0, static_cast<std::uint64_t>(q_head), 0, kTagQHeadType);
  if (unit_of(head_key) >= persistent) {
    for (int l = layer; l > mix.dense_layers; --l) {
      if (unit_of(synth::hash_of(config_.seed, head_key, static_cast<std::uint64_t>(l), 0, kTagQHeadType)) < renew) {
        epoch = l;
        break;
      }
    }
  }
  const float u = unit_of(synth::hash_of(config_.seed, head_key, static_cast<std::uint64_t>(epoch), 1, kTagQHeadType));
  if (layer < mix.dense_layers) return HeadType::Diffuse;
  if (u < mix.streaming_share) return HeadType::Streaming;
  if (u < mix.streaming_share + mix.retrieval_share) return HeadType::Retrieval;
  return HeadType::Diffuse;
}

// Each q head's type, then its mass targets drawn around the type's (one stream per q head).
void PublishedHeads::draw_qheads(float persistent, float renew) {
  const HeadMix& mix = config_.mix;
  qheads_.resize(static_cast<std::size_t>(preset_.layers) * preset_.q_heads);
  for (int layer = 0; layer < preset_.layers; ++layer) {
    for (int h = 0; h < preset_.q_heads; ++h) {
      QHead& q = qheads_[static_cast<std::size_t>(layer) * preset_.q_heads + h];
      synth::NormalStream rng(synth::hash_of(config_.seed, static_cast<std::uint64_t>(layer), static_cast<std::uint64_t>(h), 0, kTagQHead));
      q.type = draw_type(layer, h, persistent, renew);
      const HeadTypeMasses& t = q.type == HeadType::Streaming ? mix.streaming : q.type == HeadType::Retrieval ? mix.retrieval : mix.diffuse;
      const int a = std::max(1, static_cast<int>(std::lround(t.sink * mix.sink_concentration)));
      const int b = std::max(1, static_cast<int>(std::lround((1.0f - t.sink) * mix.sink_concentration)));
      // The sink share from a Beta around the type's mean; the other shares make room in
      // proportion, so a head's floor stays its type's floor relative to the rest.
      q.masses.sink = beta_draw(rng, a, b);
      const float rest = (1.0f - q.masses.sink) / (1.0f - t.sink);
      auto jitter = [&](float target) { return target * (1.0f + config_.head_variation * (2.0f * rng.uniform() - 1.0f)); };
      q.masses.window = rest * jitter(t.window);
      q.masses.span = rest * jitter(t.span);
      q.masses.coverage = t.coverage;
      // Keep at least 0.01 (or the type's floor, if less) for the floor.
      const float room = 1.0f - q.masses.sink - std::min(0.01f, t.floor());
      const float want = q.masses.window + q.masses.span;
      if (want > room) {
        const float scale = std::max(0.0f, room) / want;
        q.masses.window *= scale;
        q.masses.span *= scale;
      }
    }
  }
}

// Span classes' shares of the context, and how spans are drawn: what every kv head's SpanLayout
// is placed from.
SpanPlacement PublishedHeads::span_placement(float persistent, float renew) const {
  const HeadMix& mix = config_.mix;
  SpanPlacement placement;
  placement.seed = config_.seed;
  placement.sinks = config_.sinks;
  placement.max_seq = max_seq_;
  placement.images = config_.images;
  placement.median = mix.span_median;
  placement.sigma = mix.span_sigma;
  placement.max_len = mix.span_max;
  placement.zipf_ranks = mix.span_zipf_ranks;
  placement.token_jitter = mix.token_jitter;
  placement.persistent = persistent;
  placement.renew = renew;
  placement.class_density.assign(static_cast<std::size_t>(classes_), 0.0f);
  placement.class_density[kClassAll] = mix.streaming.coverage;
  placement.class_density[kClassShared] = mix.group_shared_spans * mix.retrieval.coverage - mix.streaming.coverage;
  placement.class_density[kClassDiffuse] = mix.diffuse.coverage - mix.retrieval.coverage;
  for (int g = 0; g < group_of(preset_); ++g) placement.class_density[static_cast<std::size_t>(kClassOwn + g)] = (1.0f - mix.group_shared_spans) * mix.retrieval.coverage;
  return placement;
}

// Each kv head's locality phases, value scales and outliers (one stream per kv head); it answers
// questions when one of its q heads is a retrieval head (the q heads are drawn first).
void PublishedHeads::draw_kvheads() {
  const int dim = preset_.head_dim;
  const int group = group_of(preset_);
  // Outlier offsets scale with the typical |k| of the median channel: E|n + r cos| is about
  // sqrt(2/pi + r^2/2), r the locality amplitude on the locality channels and 0 elsewhere.
  std::vector<float> typical(static_cast<std::size_t>(dim), std::sqrt(0.63662f));
  for (int c = 0; c < 2 * pairs_; ++c) typical[static_cast<std::size_t>(c)] = std::sqrt(0.63662f + 0.5f * kAmpLocality * kAmpLocality);
  std::nth_element(typical.begin(), typical.begin() + dim / 2, typical.end());
  const float median = typical[static_cast<std::size_t>(dim / 2)];
  kvheads_.resize(static_cast<std::size_t>(preset_.layers) * preset_.kv_heads);
  for (int layer = 0; layer < preset_.layers; ++layer) {
    for (int h = 0; h < preset_.kv_heads; ++h) {
      KvHead& kv = kvheads_[static_cast<std::size_t>(layer) * preset_.kv_heads + h];
      synth::NormalStream rng(synth::hash_of(config_.seed, static_cast<std::uint64_t>(layer), static_cast<std::uint64_t>(h), 0, kTagKvHead));
      kv.phase.assign(static_cast<std::size_t>(dim), 0.0f);
      for (int i = 0; i < pairs_; ++i) {
        const float angle = 6.2831853f * rng.uniform();
        kv.phase[static_cast<std::size_t>(2 * i)] = kAmpLocality * std::cos(angle);
        kv.phase[static_cast<std::size_t>(2 * i + 1)] = kAmpLocality * std::sin(angle);
      }
      kv.v_scale.resize(static_cast<std::size_t>(dim));
      for (float& s : kv.v_scale) s = 0.5f + rng.uniform();
      // Outliers sit on free channels (the query stays off them).
      std::vector<int> candidates;
      for (int c = ch_free_; c < dim; ++c) candidates.push_back(c);
      for (int i = 0; i < config_.outlier_channels && !candidates.empty(); ++i) {
        const auto pick = std::min(static_cast<std::size_t>(rng.uniform() * static_cast<float>(candidates.size())), candidates.size() - 1);
        const int channel = candidates[pick];
        candidates.erase(candidates.begin() + static_cast<std::ptrdiff_t>(pick));
        const float gain = config_.outlier_gain_min + (config_.outlier_gain_max - config_.outlier_gain_min) * rng.uniform();
        kv.outliers.push_back(channel);
        kv.offsets.push_back((rng.uniform() < 0.5f ? -1.0f : 1.0f) * gain * median);
      }
      for (int g = 0; g < group; ++g) kv.answers = kv.answers || qhead(layer, h * group + g).type == HeadType::Retrieval;
    }
  }
}

// Spans only for the layers asked for: placing them is the costly part of construction.
void PublishedHeads::place_spans(const std::vector<int>& layers, const SpanPlacement& placement) {
  std::vector<int> placed = layers;
  std::sort(placed.begin(), placed.end());
  placed.erase(std::unique(placed.begin(), placed.end()), placed.end());
  for (int layer : placed) {
    for (int h = 0; h < preset_.kv_heads; ++h) {
      kvheads_[static_cast<std::size_t>(layer) * preset_.kv_heads + h].spans = std::make_unique<SpanLayout>(placement, layer, h);
    }
  }
}

// Needles: a span of text, or a square region of an image's patch grid.
void PublishedHeads::place_needles() {
  for (int pos : config_.needles) {
    std::vector<int> tokens;
    const int image = image_of(pos);
    if (image >= 0) {
      tokens = image_needle_tokens(config_.images[static_cast<std::size_t>(image)], pos);
    } else {
      for (int t = pos; t < std::min(max_seq_, pos + config_.mix.needle_tokens); ++t) {  // stops at an image
        if (image_of(t) >= 0) break;
        tokens.push_back(t);
      }
    }
    needle_tokens_.push_back(std::move(tokens));  // empty for a needle past max_seq: never planted
  }
}

// The square of patches (image_region on a side, clipped to the image's grid) a needle at `pos`
// inside image `r` occupies: an image's needle is a region, not a run of tokens.
std::vector<int> PublishedHeads::image_needle_tokens(const ImageRange& r, int pos) const {
  std::vector<int> tokens;
  const int count = r.end - r.begin;
  const int width = std::max(1, static_cast<int>(std::lround(std::sqrt(static_cast<double>(count)))));
  const int rows = (count + width - 1) / width;
  const int side = std::min({config_.mix.image_region, width, rows});
  const int row = std::min((pos - r.begin) / width, rows - side), col = std::min((pos - r.begin) % width, width - side);
  for (int i = 0; i < side; ++i) {
    for (int j = 0; j < side; ++j) {
      const int t = r.begin + (row + i) * width + col + j;
      if (t < r.end) tokens.push_back(t);
    }
  }
  return tokens;
}

PublishedHeads::~PublishedHeads() = default;

const PublishedHeads::QHead& PublishedHeads::qhead(int layer, int q_head) const {
  return qheads_[static_cast<std::size_t>(layer) * preset_.q_heads + q_head];
}

const PublishedHeads::KvHead& PublishedHeads::kvhead(int layer, int kv_head) const {
  return kvheads_[static_cast<std::size_t>(layer) * preset_.kv_heads + kv_head];
}

const SpanLayout& PublishedHeads::spans(int layer, int kv_head) const {
  const KvHead& kv = kvhead(layer, kv_head);
  KV_ASSERT(kv.spans != nullptr, "spans are placed for the layers the model was built for");
  return *kv.spans;
}

HeadType PublishedHeads::head_type(int layer, int q_head) const { return qhead(layer, q_head).type; }

HeadTypeMasses PublishedHeads::targets(int layer, int q_head) const { return qhead(layer, q_head).masses; }

bool PublishedHeads::answers_questions(int layer, int kv_head) const { return kvhead(layer, kv_head).answers; }

std::vector<int> PublishedHeads::needle_tokens(int needle) const {
  if (needle < 0 || needle >= static_cast<int>(needle_tokens_.size())) return {};
  return needle_tokens_[static_cast<std::size_t>(needle)];
}

void PublishedHeads::to_channels(const float* features, int n, float* out) const {
  // out += B^T f: feature j is basis row j.
  for (int j = 0; j < n; ++j) {
    if (features[j] == 0.0f) continue;
    const float* row = feature_basis_.data() + static_cast<std::size_t>(j) * n;
    for (int i = 0; i < n; ++i) out[i] += features[j] * row[i];
  }
}

bool PublishedHeads::needle_in_image(int needle) const {
  const auto& tokens = needle_tokens_[static_cast<std::size_t>(needle)];
  return !tokens.empty() && image_of(tokens.front()) >= 0;
}

int PublishedHeads::image_of(int pos) const {
  for (std::size_t i = 0; i < config_.images.size(); ++i) {
    if (pos >= config_.images[i].begin && pos < config_.images[i].end) return static_cast<int>(i);
  }
  return -1;
}

std::vector<int> PublishedHeads::active_classes(int layer, int q_head, int needle) const {
  const int group = group_of(preset_);
  const int own = q_head % group;
  switch (qhead(layer, q_head).type) {
    case HeadType::Streaming:
      return {kClassAll};
    case HeadType::Retrieval: {
      // A question moves a retrieval head's own spans (its unshared part) to another q head's.
      const int moved = needle >= 0 && group > 1 ? (own + 1 + needle % (group - 1)) % group : own;
      return {kClassAll, kClassShared, kClassOwn + moved};
    }
    default:
      return {kClassAll, kClassShared, kClassDiffuse, kClassOwn + own};
  }
}

bool PublishedHeads::heavy_for(int layer, int q_head, int pos) const {
  const std::vector<int> active = active_classes(layer, q_head, -1);
  bool heavy = false;
  spans(layer, q_head / group_of(preset_)).for_each_at(pos, [&](const SpanLayout::Span& s) {
    heavy = heavy || std::find(active.begin(), active.end(), s.cls) != active.end();
  });
  return heavy;
}

double PublishedHeads::kernel_at(int d) const {
  double k = 0.0;
  for (int i = 0; i < pairs_; ++i) k += std::cos(frequencies_[static_cast<std::size_t>(i)] * d);
  return k / pairs_;
}

double PublishedHeads::kernel_sum(double g, double x) const {
  if (x <= 0.0) return 0.0;
  x = std::min(x, static_cast<double>(checkpoints_ * kCheckpoint));
  const double gx = std::clamp(g / kGainStep, 0.0, static_cast<double>(kGains - 1));
  const int gi = std::min(static_cast<int>(gx), kGains - 2);
  const double gf = gx - gi;
  const int m = std::min(static_cast<int>(x / kCheckpoint), checkpoints_ - 1);
  const double xf = (x - m * kCheckpoint) / kCheckpoint;
  auto at = [&](int grid) {
    const double* row = kernel_cum_.data() + static_cast<std::size_t>(grid) * (checkpoints_ + 1);
    return row[m] + xf * (row[m + 1] - row[m]);
  };
  const double a = at(gi), b = at(gi + 1);
  return std::exp((1.0 - gf) * std::log(a) + gf * std::log(b));
}

PublishedHeads::Gains PublishedHeads::gains(int layer, int q_head, int t, int needle) const {
  const QHead& q = qhead(layer, q_head);
  const HeadMix& mix = config_.mix;
  const int n = t + 1;
  const int sinks = std::min(config_.sinks, n);
  const int non_sink = n - sinks;
  const int window = std::min(config_.window, non_sink);
  const int far = non_sink - window;
  const int far_end = sinks + far;  // positions below this are outside the window
  const bool asking = needle >= 0 && needle < static_cast<int>(needle_tokens_.size()) && q.type == HeadType::Retrieval;
  const std::vector<int> active = active_classes(layer, q_head, asking ? needle : -1);
  const SpanLayout& layout = spans(layer, q_head / group_of(preset_));
  double active_weight = 0.0, other_tokens = 0.0, other_weight = 0.0;
  // A head's spans share its span mass wherever they are, inside the window too; other heads'
  // spans outside the window are part of its floor.
  double active_far_tokens = 0.0;
  for (int cls = 0; cls < classes_; ++cls) {
    const bool on = std::find(active.begin(), active.end(), cls) != active.end();
    const SpanLayout::Total far_total = layout.before(cls, far_end);
    if (on) {
      active_weight += layout.before(cls, n).weight;
      active_far_tokens += far_total.tokens;
    } else {
      other_tokens += far_total.tokens;
      other_weight += far_total.weight;
    }
  }
  // A span's step jitter and drift: E[e^x] of their normal sum.
  const int period = mix.span_turnover > 0.0f ? std::max(1, static_cast<int>(std::lround(1.0 / mix.span_turnover))) : 0;
  const double frac = period > 0 ? static_cast<double>(t % period) / period : 0.0;
  const double code_var = static_cast<double>(mix.step_sigma) * mix.step_sigma +
                          (period > 0 ? static_cast<double>(mix.turnover_sigma) * mix.turnover_sigma * ((1 - frac) * (1 - frac) + frac * frac) : 0.0);
  const double code_factor = std::exp(0.5 * code_var);
  // Plain tokens carry the locality features (their far-field texture averages to E_far);
  // sinks, span and needle tokens do not, so a few of them at one distance get exactly their
  // share.
  double plain = far - active_far_tokens - other_tokens;
  const bool in_image = asking && needle_in_image(needle);
  if (in_image) {
    double image_far = 0.0;
    for (const ImageRange& r : config_.images) image_far += std::max(0, std::min(r.end, far_end) - std::max(r.begin, sinks));
    plain -= image_far * (1.0 - std::exp(-static_cast<double>(mix.image_suppression)));
  }
  plain = std::max(plain, 0.0);
  const double floor_mass = q.masses.floor();
  auto floor_sum = [&](double gain) {
    const double e_far = far > 0 ? (kernel_sum(gain, non_sink) - kernel_sum(gain, window)) / far : 1.0;
    return std::max(plain * e_far + other_weight * code_factor, 1.0);
  };
  Gains g;
  // The window: sum_{d < window} e^{G K(d)} = (window / floor) x the floor's sum at G.
  auto excess = [&](double gain) { return std::log(kernel_sum(gain, window)) - std::log(q.masses.window / floor_mass * floor_sum(gain)); };
  double lo = 0.0, hi = (kGains - 1) * kGainStep;
  if (window <= 0 || excess(lo) >= 0.0) {
    hi = lo;
  } else if (excess(hi) <= 0.0) {
    lo = hi;
  }
  for (int i = 0; i < 40 && hi - lo > 1e-4; ++i) {
    const double mid = 0.5 * (lo + hi);
    (excess(mid) < 0.0 ? lo : hi) = mid;
  }
  g.window = static_cast<float>(0.5 * (lo + hi));
  const double floor_total = floor_sum(g.window);
  g.sink = static_cast<float>(std::clamp(std::log(q.masses.sink / floor_mass * floor_total / sinks), -10.0, 30.0));
  g.span = active_weight > 0.0
               ? static_cast<float>(std::clamp(std::log(q.masses.span / floor_mass * floor_total / (active_weight * code_factor)), -10.0, 30.0))
               : 0.0f;
  if (asking) {
    int inside = 0;
    for (int tok : needle_tokens_[static_cast<std::size_t>(needle)]) inside += tok < n ? 1 : 0;
    if (inside > 0) {
      const double share = mix.needle_mass;
      g.needle = static_cast<float>(std::clamp(std::log(share / (1.0 - share) * floor_total / (floor_mass * inside)) +
                                                   (in_image ? mix.image_suppression : 0.0),
                                               -10.0, 40.0));
    }
  }
  return g;
}

void PublishedHeads::key(int layer, int kv_head, int pos, std::uint64_t context, const float* cos_pos, const float* sin_pos,
                         float* out) const {
  const KvHead& kv = kvhead(layer, kv_head);
  const int dim = preset_.head_dim;
  // The noise is the tokens' (their context); the features are the position's (sinks, spans,
  // needles, images: where the statistics put them).
  synth::NormalStream noise(synth::hash_of(config_.seed, static_cast<std::uint64_t>(layer), static_cast<std::uint64_t>(kv_head),
                                           context, kTagKey));
  for (int i = 0; i < dim; ++i) out[i] = noise.next();
  // The features in their own coordinates, then turned into the channels (see feature_basis_).
  float f[kMaxFeatures] = {};
  const int features = ch_free_ - ch_sink_;
  bool plain = true;
  if (pos < config_.sinks) {
    f[kFeatureSink] += kAmpSink;
    plain = false;
  }
  KV_ASSERT(kv.spans != nullptr, "spans are placed for the layers the model was built for");
  kv.spans->for_each_at(pos, [&](const SpanLayout::Span& s) {
    plain = false;
    f[kFeatureClass + s.cls] += kAmpClass;
    f[kFeatureLogWeight] += kAmpLogWeight * kv.spans->token_log_weight(s, pos);
    synth::NormalStream code(s.id ^ kTagCode);
    float v[64];
    double norm = 0.0;
    for (int i = 0; i < code_dims_; ++i) {
      v[i] = code.next();
      norm += static_cast<double>(v[i]) * v[i];
    }
    const auto scale = static_cast<float>(kAmpCode / std::sqrt(std::max(norm, 1e-12)));
    for (int i = 0; i < code_dims_; ++i) f[ch_code_ - ch_sink_ + i] += scale * v[i];
  });
  for (std::size_t k = 0; k < needle_tokens_.size(); ++k) {
    const auto& tokens = needle_tokens_[k];
    if (std::find(tokens.begin(), tokens.end(), pos) != tokens.end()) {
      f[ch_needle_ - ch_sink_ + static_cast<int>(k)] += kAmpNeedle;
      plain = false;
    }
  }
  if (plain) synth::add_rotated(kv.phase.data(), 2 * pairs_, 1.0f, cos_pos, sin_pos, out);
  if (image_of(pos) >= 0) f[kFeatureVisual] += kAmpVisual;
  to_channels(f, features, out + ch_sink_);
  for (std::size_t k = 0; k < kv.outliers.size(); ++k) out[kv.outliers[k]] += kv.offsets[k];
}

void PublishedHeads::value(int layer, int kv_head, int /*pos*/, std::uint64_t context, float* out) const {
  const KvHead& kv = kvhead(layer, kv_head);
  synth::NormalStream noise(synth::hash_of(config_.seed, static_cast<std::uint64_t>(layer), static_cast<std::uint64_t>(kv_head),
                                           context, kTagValue));
  for (int i = 0; i < preset_.head_dim; ++i) out[i] = noise.next() * kv.v_scale[static_cast<std::size_t>(i)];
}

void PublishedHeads::query(int layer, int q_head, int pos, int needle, const float* cos_pos, const float* sin_pos,
                           float* out) const {
  const int dim = preset_.head_dim;
  const QHead& q = qhead(layer, q_head);
  const HeadMix& mix = config_.mix;
  const KvHead& kv = kvhead(layer, q_head / group_of(preset_));
  const bool asking = needle >= 0 && needle < static_cast<int>(needle_tokens_.size()) && q.type == HeadType::Retrieval;
  const Gains g = gains(layer, q_head, pos, needle);
  const float c = std::sqrt(static_cast<float>(dim));
  for (int i = 0; i < dim; ++i) out[i] = 0.0f;
  // q.k / sqrt(D) = sum over pairs of (G / pairs) cos(w (t - j)): the kernel at gain G.
  synth::add_rotated(kv.phase.data(), 2 * pairs_, c * g.window / (static_cast<float>(pairs_) * kAmpLocality * kAmpLocality),
                     cos_pos, sin_pos, out);
  float f[kMaxFeatures] = {};
  const int features = ch_free_ - ch_sink_;
  f[kFeatureSink] = c * g.sink / kAmpSink;
  f[kFeatureLogWeight] = c / kAmpLogWeight;
  for (int cls : active_classes(layer, q_head, asking ? needle : -1)) f[kFeatureClass + cls] = c * g.span / kAmpClass;
  // Span weights: a fresh draw every step, plus a slow drift through knots every 1/turnover steps.
  synth::NormalStream step(synth::hash_of(config_.seed, static_cast<std::uint64_t>(layer), static_cast<std::uint64_t>(q_head),
                                          static_cast<std::uint64_t>(pos), kTagStep));
  const int period = mix.span_turnover > 0.0f ? std::max(1, static_cast<int>(std::lround(1.0 / mix.span_turnover))) : 0;
  const int knot = period > 0 ? pos / period : 0;
  const float frac = period > 0 ? static_cast<float>(pos % period) / static_cast<float>(period) : 0.0f;
  // The drift is the q head's across layers (as adjacent layers' queries are alike); the step
  // draw is each layer's own.
  synth::NormalStream before(synth::hash_of(config_.seed, 0, static_cast<std::uint64_t>(q_head), static_cast<std::uint64_t>(knot), kTagDrift));
  synth::NormalStream after(synth::hash_of(config_.seed, 0, static_cast<std::uint64_t>(q_head), static_cast<std::uint64_t>(knot + 1), kTagDrift));
  for (int i = 0; i < code_dims_; ++i) {
    float e = mix.step_sigma * step.next();
    const float a = before.next(), b = after.next();
    if (period > 0) e += mix.turnover_sigma * ((1.0f - frac) * a + frac * b);
    f[ch_code_ - ch_sink_ + i] = c * e / kAmpCode;
  }
  if (asking) {
    f[ch_needle_ - ch_sink_ + needle] = c * g.needle / kAmpNeedle;
    if (needle_in_image(needle)) f[kFeatureVisual] = -c * mix.image_suppression / kAmpVisual;
  }
  to_channels(f, features, out + ch_sink_);
  // Noise on the free channels sets consecutive queries' cosine near query_similarity.
  double signal = 0.0;
  for (int i = 0; i < dim; ++i) signal += static_cast<double>(out[i]) * out[i];
  const int free_channels = dim - ch_free_ - static_cast<int>(kv.outliers.size());  // >= kMinFree, validated
  const auto sigma = static_cast<float>(std::sqrt(signal * (1.0 / config_.query_similarity - 1.0) / free_channels));
  synth::NormalStream noise(synth::hash_of(config_.seed, static_cast<std::uint64_t>(layer), static_cast<std::uint64_t>(q_head),
                                           static_cast<std::uint64_t>(pos), kTagQuery));
  for (int i = ch_free_; i < dim; ++i) out[i] = sigma * noise.next();
  // Queries stay off the outlier channels: an offset there would add a constant to every score
  // of the head (harmless to its softmax) that differs between the heads of a group, and a
  // page estimate that takes the best head per page would be ranked by those constants.
  for (int channel : kv.outliers) out[channel] = 0.0f;
}

}  // namespace kv
