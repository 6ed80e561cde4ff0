#include "model/synthetic_uniform.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "model/synthetic_random.h"
#include "runtime/error.h"

namespace kv {

using synth::hash_of;
using synth::NormalStream;
using synth::kTagKey;
using synth::kTagQuery;
using synth::kTagValue;

namespace {

constexpr std::uint64_t kTagHeavy = 0x48, kTagHead = 0x50;
constexpr float kNeedleQuery = 2.0f;  // magnitude of a question's needle direction (before sqrt(D)/s)

struct Bands {
  int mid_begin = 0, mid_end = 0;  // pairs [mid_begin, mid_end) carry the locality kernel
};

Bands pick_bands(const std::vector<double>& frequency, int window) {
  Bands b;
  const int pairs = static_cast<int>(frequency.size());
  int first = -1, last = -1;
  for (int i = 0; i < pairs; ++i) {
    const double phase = frequency[static_cast<std::size_t>(i)] * window;
    if (phase >= 0.2 && phase <= 2.5) {
      if (first < 0) first = i;
      last = i;
    }
  }
  if (first < 0 || last - first < 1) {  // too few pairs in the band: the two nearest 1.5 rad
    int best = 0;
    for (int i = 0; i < pairs; ++i) {
      if (std::fabs(std::log(frequency[static_cast<std::size_t>(i)] * window / 1.5)) <
          std::fabs(std::log(frequency[static_cast<std::size_t>(best)] * window / 1.5))) {
        best = i;
      }
    }
    first = std::max(0, std::min(best, pairs - 2));
    last = first + 1;
  }
  b.mid_begin = first;
  b.mid_end = last + 1;
  return b;
}

void normalize(std::vector<float>& v) {
  double norm = 0.0;
  for (float x : v) norm += static_cast<double>(x) * x;
  const auto inv = static_cast<float>(norm > 0.0 ? 1.0 / std::sqrt(norm) : 0.0);
  for (float& x : v) x *= inv;
}

}  // namespace

struct UniformHeads::HeadParams {
  std::vector<float> u;         // content direction (slow pairs)
  std::vector<float> m;         // locality direction (mid pairs), pre-RoPE
  std::vector<float> mu;        // fixed pre-RoPE key mean (fast pairs)
  std::vector<int> outliers;    // channels
  std::vector<float> offsets;   // their constant offsets
  std::vector<float> v_scale;   // per-channel value scale
  std::vector<std::vector<float>> needle_dirs;  // unit, orthogonal to u and to each other
  float alpha_sink = 0.0f;
  float alpha_heavy = 0.0f;
  float g_k = 0.0f;             // locality gain in the key (the query's is 1)
  std::uint64_t heavy_threshold = 0;
};

void validate_uniform_heads(const SyntheticConfig& c, const SyntheticPreset& p) {
  const std::string where = "synthetic config";
  auto fail = [&](const char* field, const std::string& reason) { throw InputError(where, field, reason); };
  if (c.calibration_ctx < c.sinks + c.window + 16) fail("calibration_ctx", "must exceed sinks + window by at least 16");
  if (c.outlier_channels < 0 || c.outlier_channels > p.head_dim / 8) fail("outlier_channels", "must be in 0..head_dim/8");
  if (!(c.outlier_gain_min >= 1.0f && c.outlier_gain_max >= c.outlier_gain_min)) fail("outlier_gain_min", "need 1 <= min <= max");
  if (!(c.outlier_gain_max <= 1000.0f)) fail("outlier_gain_max", "must be at most 1000");
  if (!(c.needle_strength >= 0.0f && c.needle_strength <= 100.0f)) fail("needle_strength", "must be in [0, 100]");
  if (c.sinks < 0 || c.window < 1) fail("window", "sinks >= 0 and window >= 1");
  if (!(c.heavy_fraction > 0.0f && c.heavy_fraction < 0.5f)) fail("heavy_fraction", "must be in (0, 0.5)");
  const float tail = 1.0f - c.sink_mass - c.window_mass - c.heavy_mass;
  if (!(c.sink_mass > 0.0f && c.window_mass > 0.0f && c.heavy_mass > 0.0f) || !(tail > 0.02f)) {
    fail("sink_mass", "sink, window and heavy masses must be > 0 and leave > 2% for the tail");
  }
  if (c.sinks == 0) fail("sinks", "at least one sink token");
  if (!(c.query_similarity > 0.0f && c.query_similarity < 1.0f)) fail("query_similarity", "must be in (0, 1)");
  if (!(c.head_variation >= 0.0f && c.head_variation < 0.5f)) fail("head_variation", "must be in [0, 0.5)");
  for (int pos : c.needles) {
    if (pos < c.sinks) fail("needles", "needle position " + std::to_string(pos) + " is a sink or negative");
  }
}

namespace {

// The grid of kernel gains the per-head solves interpolate on.
constexpr int kGrid = 401;
constexpr double kGridStep = 0.1;

// ln of the window and tail sums of e^{g K} at calibration_ctx, on the gain grid: the same for
// every head, so computed once for all of them.
struct KernelSums {
  std::vector<double> log_window, log_tail;
};

// The RoPE kernel of the locality direction (equal energy per mid pair):
// K(d) = mean over mid pairs of cos(theta_i d). It is the same for every head.
std::vector<float> locality_kernel(const std::vector<double>& frequencies, const Bands& bands, int n) {
  const int mid_pairs = bands.mid_end - bands.mid_begin;
  std::vector<float> kernel(static_cast<std::size_t>(n));
  for (int d = 0; d < n; ++d) {
    double sum = 0.0;
    for (int i = bands.mid_begin; i < bands.mid_end; ++i) sum += std::cos(frequencies[static_cast<std::size_t>(i)] * d);
    kernel[static_cast<std::size_t>(d)] = static_cast<float>(sum / mid_pairs);
  }
  return kernel;
}

KernelSums kernel_sums(const std::vector<float>& kernel, const SyntheticConfig& config) {
  const int n = static_cast<int>(kernel.size());
  KernelSums sums;
  sums.log_window.resize(kGrid);
  sums.log_tail.resize(kGrid);
  for (int gi = 0; gi < kGrid; ++gi) {
    const double g = gi * kGridStep;
    double window_sum = 0.0, tail_sum = 0.0;
    for (int d = 0; d < n - config.sinks; ++d) {
      const double w = std::exp(g * kernel[static_cast<std::size_t>(d)]);
      (d < config.window ? window_sum : tail_sum) += w;
    }
    sums.log_window[static_cast<std::size_t>(gi)] = std::log(window_sum);
    sums.log_tail[static_cast<std::size_t>(gi)] = std::log(tail_sum);
  }
  return sums;
}

// Outliers: distinct slow channels, removed from `slow`; returns their signed gains (the
// offsets are set once the typical |k| is known, see set_outlier_offsets).
std::vector<float> draw_outliers(NormalStream& rng, const SyntheticConfig& config, std::vector<int>& slow,
                                 UniformHeads::HeadParams& p) {
  std::vector<float> gains;
  for (int i = 0; i < config.outlier_channels; ++i) {
    const auto pick = static_cast<std::size_t>(rng.uniform() * static_cast<float>(slow.size()));
    const int channel = slow[std::min(pick, slow.size() - 1)];
    slow.erase(std::find(slow.begin(), slow.end(), channel));
    const float gain = config.outlier_gain_min + (config.outlier_gain_max - config.outlier_gain_min) * rng.uniform();
    p.outliers.push_back(channel);
    gains.push_back((rng.uniform() < 0.5f ? -1.0f : 1.0f) * gain);
  }
  return gains;
}

// The content direction u (slow channels), the locality direction m (mid pairs), the key mean mu
// (fast pairs) and the value scales, in the order the head's stream has always drawn them.
void draw_directions(NormalStream& rng, const Bands& bands, int dim, const std::vector<int>& slow, UniformHeads::HeadParams& p) {
  const int mid_pairs = bands.mid_end - bands.mid_begin;
  p.u.assign(static_cast<std::size_t>(dim), 0.0f);
  for (int c : slow) p.u[static_cast<std::size_t>(c)] = rng.next();
  normalize(p.u);
  p.m.assign(static_cast<std::size_t>(dim), 0.0f);
  for (int i = bands.mid_begin; i < bands.mid_end; ++i) {
    const float angle = 6.2831853f * rng.uniform();
    p.m[static_cast<std::size_t>(2 * i)] = std::cos(angle) / std::sqrt(static_cast<float>(mid_pairs));
    p.m[static_cast<std::size_t>(2 * i + 1)] = std::sin(angle) / std::sqrt(static_cast<float>(mid_pairs));
  }
  p.mu.assign(static_cast<std::size_t>(dim), 0.0f);
  for (int c = 0; c < 2 * bands.mid_begin; ++c) p.mu[static_cast<std::size_t>(c)] = rng.next();
  p.v_scale.resize(static_cast<std::size_t>(dim));
  for (float& s : p.v_scale) s = 0.5f + rng.uniform();
}

// Needle directions: orthogonal to u and to each other (Gram-Schmidt) on the slow channels.
void draw_needle_dirs(NormalStream& rng, std::size_t needles, int dim, const std::vector<int>& slow, UniformHeads::HeadParams& p) {
  for (std::size_t k = 0; k < needles; ++k) {
    std::vector<float> d(static_cast<std::size_t>(dim), 0.0f);
    for (int c : slow) d[static_cast<std::size_t>(c)] = rng.next();
    auto remove = [&](const std::vector<float>& base) {
      double dot = 0.0;
      for (std::size_t c = 0; c < d.size(); ++c) dot += static_cast<double>(d[c]) * base[c];
      for (std::size_t c = 0; c < d.size(); ++c) d[c] -= static_cast<float>(dot) * base[c];
    };
    remove(p.u);
    for (const auto& other : p.needle_dirs) remove(other);
    normalize(d);
    p.needle_dirs.push_back(std::move(d));
  }
}

// Mass targets for this head, jittered, then the boosts and the kernel gain that meet them at
// calibration_ctx (the kernel's length).
void solve_boosts(NormalStream& rng, const SyntheticConfig& config, const std::vector<float>& kernel, const KernelSums& sums,
                  UniformHeads::HeadParams& p) {
  const int n = static_cast<int>(kernel.size());
  const std::vector<double>& log_window = sums.log_window;
  const std::vector<double>& log_tail = sums.log_tail;
  auto jitter = [&](float target) { return target * (1.0f + config.head_variation * (2.0f * rng.uniform() - 1.0f)); };
  const double sink = jitter(config.sink_mass), window = jitter(config.window_mass), heavy = jitter(config.heavy_mass);
  const double tail = 1.0 - sink - window - heavy;
  const double f = config.heavy_fraction;
  const double heavy_boost = heavy / tail * (1.0 - f) / f;  // e^{alpha_heavy}
  // Window tokens include heavy hitters that fall inside it: ln S(g) + ln(1 + f(e^a - 1)).
  const double want = std::log(window / tail * (1.0 - f)) - std::log1p(f * (heavy_boost - 1.0));
  int gi = 0;
  while (gi + 1 < kGrid && log_window[static_cast<std::size_t>(gi + 1)] - log_tail[static_cast<std::size_t>(gi + 1)] < want) ++gi;
  double g = gi * kGridStep;
  if (gi + 1 < kGrid) {
    const double lo = log_window[static_cast<std::size_t>(gi)] - log_tail[static_cast<std::size_t>(gi)];
    const double hi = log_window[static_cast<std::size_t>(gi + 1)] - log_tail[static_cast<std::size_t>(gi + 1)];
    g += kGridStep * std::clamp((want - lo) / (hi - lo), 0.0, 1.0);
  }
  const double tail_weight = (1.0 - f) * std::exp(log_tail[static_cast<std::size_t>(gi)] +
                                                  (g - gi * kGridStep) / kGridStep *
                                                      (gi + 1 < kGrid ? log_tail[static_cast<std::size_t>(gi + 1)] -
                                                                            log_tail[static_cast<std::size_t>(gi)]
                                                                      : 0.0));
  double sink_kernel = 0.0;
  for (int j = 0; j < config.sinks; ++j) sink_kernel += std::exp(g * kernel[static_cast<std::size_t>(n - 1 - j)]);
  p.alpha_heavy = static_cast<float>(std::log(heavy_boost));
  p.alpha_sink = static_cast<float>(std::log(sink / tail * tail_weight / sink_kernel));
  p.g_k = static_cast<float>(g);
  p.heavy_threshold = static_cast<std::uint64_t>(f * 18446744073709551615.0);
}

// Typical |k|: the median over channels of E|noise + rotated constant of amplitude r|,
// about sqrt(2/pi + r^2/2); the outliers sit at gain x that, stable across tokens.
void set_outlier_offsets(const std::vector<float>& gains, float s_scale, int dim, UniformHeads::HeadParams& p) {
  std::vector<float> typical;
  for (int pair = 0; pair < dim / 2; ++pair) {
    const auto a = static_cast<std::size_t>(2 * pair);
    const float r2 = s_scale * s_scale * p.g_k * p.g_k * (p.m[a] * p.m[a] + p.m[a + 1] * p.m[a + 1]) +
                     p.mu[a] * p.mu[a] + p.mu[a + 1] * p.mu[a + 1];
    const float e = std::sqrt(0.63662f + 0.5f * r2);
    typical.push_back(e);
    typical.push_back(e);
  }
  std::nth_element(typical.begin(), typical.begin() + dim / 2, typical.end());
  for (float gain : gains) p.offsets.push_back(gain * typical[static_cast<std::size_t>(dim / 2)]);
}

}  // namespace

UniformHeads::UniformHeads(const SyntheticPreset& preset, const SyntheticConfig& config)
    : preset_(preset), config_(config) {
  const int dim = preset_.head_dim;
  const int pairs = dim / 2;
  frequencies_.resize(static_cast<std::size_t>(pairs));
  for (int i = 0; i < pairs; ++i) {
    frequencies_[static_cast<std::size_t>(i)] = std::pow(preset_.rope_theta, -2.0 * i / dim);
  }
  const Bands bands = pick_bands(frequencies_, config_.window);
  const int mid_pairs = bands.mid_end - bands.mid_begin;
  const int slow_begin = 2 * bands.mid_end;  // channels from here on are "slow"
  if (dim - slow_begin < config_.outlier_channels + 4) {
    throw InputError("synthetic config", "window", "leaves too few slow RoPE channels for content and outliers");
  }
  // cos(q_t, q_t+1) = |signal|^2 / (|signal|^2 + |noise|^2), signal energy 2 D / s^2, noise on
  // the channels outside the locality band less the content direction.
  const float noise_dims = static_cast<float>(dim - 2 * mid_pairs - 1);
  noise_q_ = std::sqrt(2.0f * static_cast<float>(dim) / (s_scale_ * s_scale_) * (1.0f / config_.query_similarity - 1.0f) /
                       noise_dims);
  const std::vector<float> kernel = locality_kernel(frequencies_, bands, config_.calibration_ctx);
  const KernelSums sums = kernel_sums(kernel, config_);

  heads_.resize(static_cast<std::size_t>(preset_.layers) * preset_.kv_heads);
  for (int layer = 0; layer < preset_.layers; ++layer) {
    for (int h = 0; h < preset_.kv_heads; ++h) {
      HeadParams& p = heads_[static_cast<std::size_t>(layer) * preset_.kv_heads + h];
      NormalStream rng(hash_of(config_.seed, static_cast<std::uint64_t>(layer), static_cast<std::uint64_t>(h), 0, kTagHead));
      // One stream per head: the helpers below draw from it in this order.
      std::vector<int> slow;
      for (int c = slow_begin; c < dim; ++c) slow.push_back(c);
      const std::vector<float> gains = draw_outliers(rng, config_, slow, p);
      draw_directions(rng, bands, dim, slow, p);
      draw_needle_dirs(rng, config_.needles.size(), dim, slow, p);
      solve_boosts(rng, config_, kernel, sums, p);
      set_outlier_offsets(gains, s_scale_, dim, p);
    }
  }
}

UniformHeads::~UniformHeads() = default;

const UniformHeads::HeadParams& UniformHeads::head(int model_layer, int kv_head) const {
  return heads_[static_cast<std::size_t>(model_layer) * preset_.kv_heads + kv_head];
}

bool UniformHeads::is_heavy(int model_layer, int kv_head, int pos) const {
  if (pos < config_.sinks) return false;
  return hash_of(config_.seed, static_cast<std::uint64_t>(model_layer), static_cast<std::uint64_t>(kv_head),
                 static_cast<std::uint64_t>(pos), kTagHeavy) < head(model_layer, kv_head).heavy_threshold;
}

void UniformHeads::key(int model_layer, int kv_head, int pos, std::uint64_t /*context*/, const float* cos_pos, const float* sin_pos, float* out) const {
  const HeadParams& p = head(model_layer, kv_head);
  const int dim = preset_.head_dim;
  NormalStream noise(hash_of(config_.seed, static_cast<std::uint64_t>(model_layer), static_cast<std::uint64_t>(kv_head),
                             static_cast<std::uint64_t>(pos), kTagKey));
  for (int i = 0; i < dim; ++i) out[i] = noise.next();  // isotropic: rotating it changes nothing
  float alpha = 0.0f;
  if (pos < config_.sinks) {
    alpha = p.alpha_sink;
  } else if (is_heavy(model_layer, kv_head, pos)) {
    alpha = p.alpha_heavy;
  }
  for (int i = 0; i < dim; ++i) out[i] += s_scale_ * alpha * p.u[static_cast<std::size_t>(i)];
  synth::add_rotated(p.m.data(), dim, s_scale_ * p.g_k, cos_pos, sin_pos, out);
  synth::add_rotated(p.mu.data(), dim, 1.0f, cos_pos, sin_pos, out);
  for (std::size_t k = 0; k < config_.needles.size(); ++k) {
    if (config_.needles[k] == pos) {
      const float lambda =
          (config_.needle_strength + std::log(static_cast<float>(config_.calibration_ctx))) / kNeedleQuery;
      for (int i = 0; i < dim; ++i) out[i] += s_scale_ * lambda * p.needle_dirs[k][static_cast<std::size_t>(i)];
    }
  }
  for (std::size_t k = 0; k < p.outliers.size(); ++k) out[p.outliers[k]] += p.offsets[k];
}

void UniformHeads::value(int model_layer, int kv_head, int pos, std::uint64_t /*context*/, float* out) const {
  const HeadParams& p = head(model_layer, kv_head);
  NormalStream noise(hash_of(config_.seed, static_cast<std::uint64_t>(model_layer), static_cast<std::uint64_t>(kv_head),
                             static_cast<std::uint64_t>(pos), kTagValue));
  for (int i = 0; i < preset_.head_dim; ++i) out[i] = noise.next() * p.v_scale[static_cast<std::size_t>(i)];
}

void UniformHeads::query(int model_layer, int q_head, int pos, int needle, const float* c, const float* s, float* out) const {
  const int kv_head = q_head / (preset_.q_heads / preset_.kv_heads);
  const HeadParams& p = head(model_layer, kv_head);
  const int dim = preset_.head_dim;
  NormalStream noise(hash_of(config_.seed, static_cast<std::uint64_t>(model_layer), static_cast<std::uint64_t>(q_head),
                             static_cast<std::uint64_t>(pos), kTagQuery));
  const float amplitude = std::sqrt(static_cast<float>(dim)) / s_scale_;
  // Query noise stays off the content direction u and the locality band: noise there would
  // move whole categories (all sinks share u) instead of single tokens.
  double along_u = 0.0;
  for (int i = 0; i < dim; ++i) {
    const bool locality = p.m[static_cast<std::size_t>(i)] != 0.0f;
    out[i] = locality ? 0.0f : noise_q_ * noise.next();
    along_u += static_cast<double>(out[i]) * p.u[static_cast<std::size_t>(i)];
  }
  for (int i = 0; i < dim; ++i) out[i] += (amplitude - static_cast<float>(along_u)) * p.u[static_cast<std::size_t>(i)];
  const bool question = needle >= 0 && needle < static_cast<int>(p.needle_dirs.size());
  // A question looks for content, not for the recent past: it drops the locality term, so a
  // needle far back is not penalised by where the RoPE kernel happens to be negative.
  if (!question) synth::add_rotated(p.m.data(), dim, amplitude, c, s, out);
  if (question) {
    const auto& d = p.needle_dirs[static_cast<std::size_t>(needle)];
    for (int i = 0; i < dim; ++i) out[i] += amplitude * kNeedleQuery * d[static_cast<std::size_t>(i)];
  }
}

std::vector<int> UniformHeads::needle_tokens(int needle) const {
  if (needle < 0 || needle >= static_cast<int>(config_.needles.size())) return {};
  return {config_.needles[static_cast<std::size_t>(needle)]};
}

}  // namespace kv
