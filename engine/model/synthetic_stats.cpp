#include "model/synthetic_stats.h"

#include <algorithm>
#include <cmath>

#include "runtime/error.h"

namespace kv {

namespace {

struct HeadResult {
  double sink = 0, window = 0, heavy = 0, tail = 0, cosine = 0;
  double sink_min = 1, sink_max = 0, window_min = 1, window_max = 0, heavy_min = 1, heavy_max = 0;
  double outlier_gain = 0;
  double needle_mass = 0, needle_top1 = 0;
  int heavy_tokens = 0;
  int samples = 0, needle_samples = 0;
};

// Softmax weights of one query over keys[0..visible) (scale 1/sqrt(dim)), in double.
void softmax_weights(const float* q, const std::vector<float>& keys, int visible, int dim, std::vector<double>& w) {
  w.resize(static_cast<std::size_t>(visible));
  const double scale = 1.0 / std::sqrt(static_cast<double>(dim));
  double best = -INFINITY;
  for (int j = 0; j < visible; ++j) {
    double dot = 0.0;
    const float* k = keys.data() + static_cast<std::size_t>(j) * dim;
    for (int c = 0; c < dim; ++c) dot += static_cast<double>(q[c]) * k[c];
    w[static_cast<std::size_t>(j)] = dot * scale;
    best = std::max(best, w[static_cast<std::size_t>(j)]);
  }
  double total = 0.0;
  for (double& x : w) total += (x = std::exp(x - best));
  for (double& x : w) x /= total;
}

double outlier_gain(const SyntheticModel& model, const std::vector<float>& keys, int ctx, int dim, int layer, int head) {
  (void)layer;
  (void)head;
  std::vector<double> mean_abs(static_cast<std::size_t>(dim), 0.0);
  for (int j = 0; j < ctx; ++j) {
    for (int c = 0; c < dim; ++c) mean_abs[static_cast<std::size_t>(c)] += std::fabs(keys[static_cast<std::size_t>(j) * dim + c]);
  }
  std::vector<double> sorted = mean_abs;
  std::nth_element(sorted.begin(), sorted.begin() + dim / 2, sorted.end());
  const double median = sorted[static_cast<std::size_t>(dim / 2)];
  // The outlier channels are the top `outlier_channels` by mean |k|.
  const int count = model.config().outlier_channels;
  if (count == 0) return 0.0;
  std::vector<double> top = mean_abs;
  std::sort(top.begin(), top.end(), std::greater<>());
  double sum = 0.0;
  for (int i = 0; i < count; ++i) sum += top[static_cast<std::size_t>(i)] / median;
  return sum / count;
}

}  // namespace

SyntheticStats measure_synthetic(SyntheticModel& model, int ctx, int steps, ThreadPool& pool) {
  const SyntheticConfig& config = model.config();
  const SyntheticPreset& preset = model.preset();
  if (ctx < config.sinks + config.window + 1) throw InputError("synth-stats", "ctx", "must exceed sinks + window");
  if (steps < 2) throw InputError("synth-stats", "steps", "must be >= 2");
  const int dim = preset.head_dim;
  const int group = preset.q_heads / preset.kv_heads;
  const int total = ctx + steps;
  std::vector<int> needles;
  for (int pos : config.needles) {
    if (pos < ctx) needles.push_back(pos);
  }
  const auto& layers = model.sampled_layers();
  std::vector<HeadResult> results(layers.size() * static_cast<std::size_t>(preset.kv_heads));
  pool.parallel_for(results.size(), [&](std::size_t item) {
    const int layer = layers[item / static_cast<std::size_t>(preset.kv_heads)];
    const int head = static_cast<int>(item % static_cast<std::size_t>(preset.kv_heads));
    HeadResult& r = results[item];
    std::vector<float> keys(static_cast<std::size_t>(total) * dim);
    for (int j = 0; j < total; ++j) model.key(layer, head, j, keys.data() + static_cast<std::size_t>(j) * dim);
    for (int j = 0; j < ctx; ++j) r.heavy_tokens += model.is_heavy(layer, head, j) ? 1 : 0;
    r.outlier_gain = outlier_gain(model, keys, ctx, dim, layer, head);
    std::vector<double> w;
    std::vector<float> q(static_cast<std::size_t>(dim)), q_next(static_cast<std::size_t>(dim));
    for (int g = 0; g < group; ++g) {
      const int q_head = head * group + g;
      double sink = 0, window = 0, heavy = 0, tail = 0;
      for (int s = 0; s < steps; ++s) {
        const int t = ctx - 1 + s;
        model.query(layer, q_head, t, q.data());
        softmax_weights(q.data(), keys, t + 1, dim, w);
        for (int j = 0; j <= t; ++j) {
          const double x = w[static_cast<std::size_t>(j)];
          if (j < config.sinks) {
            sink += x;
          } else if (t - j < config.window) {
            window += x;
          } else if (model.is_heavy(layer, head, j)) {
            heavy += x;
          } else {
            tail += x;
          }
        }
        if (s + 1 < steps) {
          model.query(layer, q_head, t + 1, q_next.data());
          double dot = 0, a = 0, b = 0;
          for (int c = 0; c < dim; ++c) {
            dot += static_cast<double>(q[static_cast<std::size_t>(c)]) * q_next[static_cast<std::size_t>(c)];
            a += static_cast<double>(q[static_cast<std::size_t>(c)]) * q[static_cast<std::size_t>(c)];
            b += static_cast<double>(q_next[static_cast<std::size_t>(c)]) * q_next[static_cast<std::size_t>(c)];
          }
          r.cosine += dot / std::sqrt(a * b);
        }
      }
      sink /= steps, window /= steps, heavy /= steps, tail /= steps;
      r.sink += sink, r.window += window, r.heavy += heavy, r.tail += tail;
      r.sink_min = std::min(r.sink_min, sink), r.sink_max = std::max(r.sink_max, sink);
      r.window_min = std::min(r.window_min, window), r.window_max = std::max(r.window_max, window);
      r.heavy_min = std::min(r.heavy_min, heavy), r.heavy_max = std::max(r.heavy_max, heavy);
      ++r.samples;
      for (std::size_t n = 0; n < needles.size(); ++n) {
        // query_asking, not ask_needle: the model's asked needle is shared, and the other
        // threads' plain queries would see it (a race that made this measure flaky).
        model.query_asking(layer, q_head, ctx - 1, static_cast<int>(n), q.data());
        softmax_weights(q.data(), keys, ctx, dim, w);
        r.needle_mass += w[static_cast<std::size_t>(needles[n])];
        r.needle_top1 += (std::max_element(w.begin(), w.end()) - w.begin()) == needles[n] ? 1.0 : 0.0;
        ++r.needle_samples;
      }
    }
  });
  SyntheticStats stats;
  stats.ctx = ctx;
  stats.steps = steps;
  stats.needles = static_cast<int>(needles.size());
  int samples = 0, needle_samples = 0, heavy_tokens = 0;
  stats.outlier_gain_min = INFINITY;
  for (const HeadResult& r : results) {
    stats.sink_mass += r.sink, stats.window_mass += r.window, stats.heavy_mass += r.heavy, stats.tail_mass += r.tail;
    stats.query_cosine += r.cosine;
    stats.sink_mass_min = std::min(stats.sink_mass_min, r.sink_min), stats.sink_mass_max = std::max(stats.sink_mass_max, r.sink_max);
    stats.window_mass_min = std::min(stats.window_mass_min, r.window_min), stats.window_mass_max = std::max(stats.window_mass_max, r.window_max);
    stats.heavy_mass_min = std::min(stats.heavy_mass_min, r.heavy_min), stats.heavy_mass_max = std::max(stats.heavy_mass_max, r.heavy_max);
    stats.outlier_gain += r.outlier_gain;
    stats.outlier_gain_min = std::min(stats.outlier_gain_min, r.outlier_gain);
    stats.outlier_gain_max = std::max(stats.outlier_gain_max, r.outlier_gain);
    stats.needle_mass += r.needle_mass, stats.needle_top1 += r.needle_top1;
    samples += r.samples, needle_samples += r.needle_samples, heavy_tokens += r.heavy_tokens;
  }
  stats.sink_mass /= samples, stats.window_mass /= samples, stats.heavy_mass /= samples, stats.tail_mass /= samples;
  stats.query_cosine /= static_cast<double>(samples) * (steps - 1);
  stats.outlier_gain /= static_cast<double>(results.size());
  stats.heavy_token_share = static_cast<double>(heavy_tokens) / (static_cast<double>(results.size()) * ctx);
  if (needle_samples > 0) {
    stats.needle_mass /= needle_samples;
    stats.needle_top1 /= needle_samples;
  }
  return stats;
}

}  // namespace kv
