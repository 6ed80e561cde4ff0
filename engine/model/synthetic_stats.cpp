#include "model/synthetic_stats.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>

#include "runtime/error.h"

namespace kv {

namespace {

constexpr int kPage = 64;

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

double outlier_gain(int outliers, const std::vector<float>& keys, int ctx, int dim) {
  if (outliers == 0) return 0.0;
  std::vector<double> mean_abs(static_cast<std::size_t>(dim), 0.0);
  for (int j = 0; j < ctx; ++j) {
    for (int c = 0; c < dim; ++c) mean_abs[static_cast<std::size_t>(c)] += std::fabs(keys[static_cast<std::size_t>(j) * dim + c]);
  }
  std::vector<double> sorted = mean_abs;
  std::nth_element(sorted.begin(), sorted.begin() + dim / 2, sorted.end());
  const double median = sorted[static_cast<std::size_t>(dim / 2)];
  std::sort(mean_abs.begin(), mean_abs.end(), std::greater<>());
  double sum = 0.0;
  for (int i = 0; i < outliers; ++i) sum += mean_abs[static_cast<std::size_t>(i)] / median;
  return sum / outliers;
}

std::vector<double> page_masses(const std::vector<double>& w) {
  std::vector<double> pages((w.size() + kPage - 1) / kPage, 0.0);
  for (std::size_t j = 0; j < w.size(); ++j) pages[j / kPage] += w[j];
  return pages;
}

// The best `share` of pages (at least one), heaviest first.
std::vector<int> best_pages(const std::vector<double>& pages, double share) {
  const auto n = std::max<std::size_t>(1, static_cast<std::size_t>(std::ceil(share * static_cast<double>(pages.size()))));
  std::vector<int> order(pages.size());
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(std::min(n, order.size())), order.end(),
                    [&](int a, int b) { return pages[static_cast<std::size_t>(a)] > pages[static_cast<std::size_t>(b)]; });
  order.resize(std::min(n, order.size()));
  return order;
}

double mass_of(const std::vector<double>& pages, const std::vector<int>& chosen) {
  double sum = 0.0;
  for (int p : chosen) sum += p < static_cast<int>(pages.size()) ? pages[static_cast<std::size_t>(p)] : 0.0;
  return sum;
}

struct HeadSample {  // one (layer, q head): means over its steps
  std::string type;
  double sink = 0, window = 0, heavy = 0, floor = 0, recall5 = 0, recall10 = 0, tokens90 = 0, reuse = 0;
  int reuse_samples = 0;
  double cosine = 0, needle_mass = 0, needle_top1 = 0;
  int needle_samples = 0;
  std::vector<std::vector<int>> best10;  // per step
};

struct KvResult {
  std::vector<HeadSample> heads;  // the group's q heads
  double outlier_gain = 0;
  int heavy_tokens = 0;
  std::vector<double> window_profile;  // mass by distance inside the window
};

// What every (layer, kv head) measurement shares, gathered once so the helpers below take one
// argument instead of a dozen.
struct MeasureSetup {
  const SyntheticModel& model;
  const SyntheticConfig& config;
  int ctx = 0, steps = 0, dim = 0, group = 0, total = 0;
  std::vector<int> needles;  // the needles inside the context
};

// Buffers a worker reuses across its q heads, so the per-step helpers do not allocate.
struct MeasureScratch {
  std::vector<double> w, sorted;
  std::vector<float> q, q_next;
};

// Adds one step's weights to the head's sink / window / heavy / floor masses (and the window's
// mass by distance), each token to exactly one category.
void add_step_masses(const std::vector<double>& w, int t, const SyntheticConfig& config, const std::vector<bool>& heavy,
                     HeadSample& h, std::vector<double>& window_profile) {
  for (int j = 0; j <= t; ++j) {
    const double x = w[static_cast<std::size_t>(j)];
    if (j < config.sinks) {
      h.sink += x;
    } else if (t - j < config.window) {
      h.window += x;
      window_profile[static_cast<std::size_t>(t - j)] += x;
    } else if (heavy[static_cast<std::size_t>(j)]) {
      h.heavy += x;
    } else {
      h.floor += x;
    }
  }
}

// Fewest tokens (heaviest first) that hold 90% of the mass; `sorted` is scratch.
int tokens_for_90pct(const std::vector<double>& w, std::vector<double>& sorted) {
  sorted = w;
  std::sort(sorted.begin(), sorted.end(), std::greater<>());
  double held = 0.0;
  int count = 0;
  while (count < static_cast<int>(sorted.size()) && held < 0.9) held += sorted[static_cast<std::size_t>(count++)];
  return count;
}

// Cosine of two consecutive queries, in double.
double query_cosine(const std::vector<float>& q, const std::vector<float>& q_next, int dim) {
  double dot = 0, a = 0, b = 0;
  for (int c = 0; c < dim; ++c) {
    dot += static_cast<double>(q[static_cast<std::size_t>(c)]) * q_next[static_cast<std::size_t>(c)];
    a += static_cast<double>(q[static_cast<std::size_t>(c)]) * q[static_cast<std::size_t>(c)];
    b += static_cast<double>(q_next[static_cast<std::size_t>(c)]) * q_next[static_cast<std::size_t>(c)];
  }
  return dot / std::sqrt(a * b);
}

// One step's page figures: the recall of the best 5% and 10% of pages; the 10% selection is kept
// for the reuse and adjacent-layer figures.
void add_page_recall(const std::vector<double>& p, HeadSample& h) {
  h.recall5 += mass_of(p, best_pages(p, 0.05));
  h.best10.push_back(best_pages(p, 0.10));
  h.recall10 += mass_of(p, h.best10.back());
}

// One step's selection reused for the next four; pages past its context count as kept.
void add_reuse_loss(const std::vector<std::vector<double>>& pages, int steps, HeadSample& h) {
  for (int s = 0; s + 4 < steps; ++s) {
    const auto& chosen = h.best10[static_cast<std::size_t>(s)];
    const int known = static_cast<int>(pages[static_cast<std::size_t>(s)].size()) - 1;  // its newest page grows
    double loss = 0.0;
    for (int i = 1; i <= 4; ++i) {
      const auto& later = pages[static_cast<std::size_t>(s + i)];
      double held = mass_of(later, chosen);
      for (int p = known; p < static_cast<int>(later.size()); ++p) {
        if (std::find(chosen.begin(), chosen.end(), p) == chosen.end()) held += later[static_cast<std::size_t>(p)];
      }
      loss += std::max(0.0, mass_of(later, best_pages(later, 0.10)) - held);
    }
    h.reuse += loss / 4.0;
    ++h.reuse_samples;
  }
}

// Asks every needle inside the context (heads that answer only): mass on its tokens and
// whether one of them is the top token.
void add_needles(const MeasureSetup& m, int layer, int q_head, const std::vector<float>& keys, MeasureScratch& scratch,
                 HeadSample& h) {
  const bool answers = m.model.head_type(layer, q_head) == HeadType::Uniform || m.model.head_type(layer, q_head) == HeadType::Retrieval;
  std::vector<double>& w = scratch.w;
  for (int n : m.needles) {
    if (!answers) break;
    m.model.query_asking(layer, q_head, m.ctx - 1, n, scratch.q.data());
    softmax_weights(scratch.q.data(), keys, m.ctx, m.dim, w);
    const std::vector<int> tokens = m.model.needle_tokens(n);
    double mass = 0.0;
    for (int t : tokens) mass += t < m.ctx ? w[static_cast<std::size_t>(t)] : 0.0;
    const int top = static_cast<int>(std::max_element(w.begin(), w.end()) - w.begin());
    h.needle_mass += mass;
    h.needle_top1 += std::find(tokens.begin(), tokens.end(), top) != tokens.end() ? 1.0 : 0.0;
    ++h.needle_samples;
  }
}

// One q head over the decode steps; adds its heavy tokens and window profile to the kv head's.
HeadSample measure_q_head(const MeasureSetup& m, int layer, int q_head, const std::vector<float>& keys, MeasureScratch& scratch,
                          KvResult& r) {
  const SyntheticConfig& config = m.config;
  const int ctx = m.ctx, steps = m.steps;
  HeadSample h;
  h.type = std::string(head_type_name(m.model.head_type(layer, q_head)));
  std::vector<bool> heavy(static_cast<std::size_t>(m.total));
  for (int j = 0; j < m.total; ++j) heavy[static_cast<std::size_t>(j)] = m.model.heavy_for(layer, q_head, j);
  for (int j = 0; j < ctx; ++j) r.heavy_tokens += heavy[static_cast<std::size_t>(j)] && j >= config.sinks ? 1 : 0;
  std::vector<std::vector<double>> pages(static_cast<std::size_t>(steps));
  for (int s = 0; s < steps; ++s) {
    const int t = ctx - 1 + s;
    m.model.query_asking(layer, q_head, t, -1, scratch.q.data());
    softmax_weights(scratch.q.data(), keys, t + 1, m.dim, scratch.w);
    add_step_masses(scratch.w, t, config, heavy, h, r.window_profile);
    pages[static_cast<std::size_t>(s)] = page_masses(scratch.w);
    add_page_recall(pages[static_cast<std::size_t>(s)], h);
    h.tokens90 += tokens_for_90pct(scratch.w, scratch.sorted);
    if (s + 1 < steps) {
      m.model.query_asking(layer, q_head, t + 1, -1, scratch.q_next.data());
      h.cosine += query_cosine(scratch.q, scratch.q_next, m.dim);
    }
  }
  add_reuse_loss(pages, steps, h);
  add_needles(m, layer, q_head, keys, scratch, h);
  for (double* x : {&h.sink, &h.window, &h.heavy, &h.floor, &h.recall5, &h.recall10, &h.tokens90}) *x /= steps;
  return h;
}

// One (layer, kv head): its keys once, then each of its group's q heads against them.
KvResult measure_kv_head(const MeasureSetup& m, int layer, int head) {
  KvResult r;
  r.window_profile.assign(static_cast<std::size_t>(m.config.window), 0.0);
  std::vector<float> keys(static_cast<std::size_t>(m.total) * m.dim);
  for (int j = 0; j < m.total; ++j) m.model.key(layer, head, j, keys.data() + static_cast<std::size_t>(j) * m.dim);
  r.outlier_gain = outlier_gain(m.config.outlier_channels, keys, m.ctx, m.dim);
  MeasureScratch scratch;
  scratch.q.resize(static_cast<std::size_t>(m.dim));
  scratch.q_next.resize(static_cast<std::size_t>(m.dim));
  for (int g = 0; g < m.group; ++g) r.heads.push_back(measure_q_head(m, layer, head * m.group + g, keys, scratch, r));
  return r;
}

// Adds one q head's means to a head type's sums (divided in finish_type_means).
void add_to_type(HeadTypeStats& t, const HeadSample& h) {
  ++t.heads;
  t.sink_mass += h.sink, t.window_mass += h.window, t.heavy_mass += h.heavy, t.floor_mass += h.floor;
  t.oracle_page_recall_5 += h.recall5, t.oracle_page_recall_10 += h.recall10, t.tokens_for_90pct_mass += h.tokens90;
  if (h.reuse_samples > 0) {
    t.reuse_loss_4 += h.reuse / h.reuse_samples;
    ++t.reuse_samples;
  }
  t.needle_mass += h.needle_mass;
  t.needle_samples += h.needle_samples;
}

// The sums over every measured head that the overall figures are divided from.
struct MeasureTotals {
  int samples = 0, needle_samples = 0, heavy_tokens = 0;
  std::vector<double> profile;  // window mass by distance
};

// Adds every kv head's results to the overall and per-type sums, in result order.
void add_results(const std::vector<KvResult>& results, SyntheticStats& stats, MeasureTotals& totals) {
  for (std::size_t i = 0; i < results.size(); ++i) {
    const KvResult& r = results[i];
    for (const HeadSample& h : r.heads) {
      stats.sink_mass += h.sink, stats.window_mass += h.window, stats.heavy_mass += h.heavy, stats.tail_mass += h.floor;
      stats.sink_mass_min = std::min(stats.sink_mass_min, h.sink), stats.sink_mass_max = std::max(stats.sink_mass_max, h.sink);
      stats.window_mass_min = std::min(stats.window_mass_min, h.window), stats.window_mass_max = std::max(stats.window_mass_max, h.window);
      stats.heavy_mass_min = std::min(stats.heavy_mass_min, h.heavy), stats.heavy_mass_max = std::max(stats.heavy_mass_max, h.heavy);
      stats.query_cosine += h.cosine;
      stats.needle_mass += h.needle_mass, stats.needle_top1 += h.needle_top1;
      totals.needle_samples += h.needle_samples;
      ++totals.samples;
      add_to_type(stats.types[h.type], h);
      add_to_type(stats.types["all"], h);
    }
    stats.outlier_gain += r.outlier_gain;
    stats.outlier_gain_min = std::min(stats.outlier_gain_min, r.outlier_gain);
    stats.outlier_gain_max = std::max(stats.outlier_gain_max, r.outlier_gain);
    totals.heavy_tokens += r.heavy_tokens;
    for (std::size_t d = 0; d < totals.profile.size(); ++d) totals.profile[d] += r.window_profile[d];
  }
}

// Adjacent layers: the same (kv head, q head) at layers l and l+1, when both were sampled.
void add_adjacent_overlap(const std::vector<KvResult>& results, const std::vector<int>& layers, int kv_heads, int steps,
                          SyntheticStats& stats) {
  for (std::size_t li = 0; li < layers.size(); ++li) {
    const auto next = std::find(layers.begin(), layers.end(), layers[li] + 1);
    if (next == layers.end()) continue;
    const auto lj = static_cast<std::size_t>(next - layers.begin());
    for (int head = 0; head < kv_heads; ++head) {
      const KvResult& a = results[li * static_cast<std::size_t>(kv_heads) + static_cast<std::size_t>(head)];
      const KvResult& b = results[lj * static_cast<std::size_t>(kv_heads) + static_cast<std::size_t>(head)];
      for (std::size_t g = 0; g < a.heads.size(); ++g) {
        double overlap = 0.0;
        for (int s = 0; s < steps; ++s) {
          const auto& x = a.heads[g].best10[static_cast<std::size_t>(s)];
          const auto& y = b.heads[g].best10[static_cast<std::size_t>(s)];
          int shared = 0;
          for (int p : x) shared += std::find(y.begin(), y.end(), p) != y.end() ? 1 : 0;
          overlap += static_cast<double>(shared) / static_cast<double>(x.size());
        }
        for (const std::string& type : {a.heads[g].type, std::string("all")}) {
          stats.types[type].adjacent_layer_overlap += overlap / steps;
          ++stats.types[type].overlap_samples;
        }
      }
    }
  }
}

// Turns each head type's sums into means.
void finish_type_means(SyntheticStats& stats) {
  for (auto& [name, t] : stats.types) {
    const double n = t.heads;
    for (double* x : {&t.sink_mass, &t.window_mass, &t.heavy_mass, &t.floor_mass, &t.oracle_page_recall_5,
                      &t.oracle_page_recall_10, &t.tokens_for_90pct_mass}) {
      *x /= n;
    }
    if (t.reuse_samples > 0) t.reuse_loss_4 /= t.reuse_samples;
    if (t.overlap_samples > 0) t.adjacent_layer_overlap /= t.overlap_samples;
    if (t.needle_samples > 0) t.needle_mass /= t.needle_samples;
  }
}

// The distance inside the window that holds half its mass (left as is when none does).
void set_window_half_distance(const std::vector<double>& profile, SyntheticStats& stats) {
  const double window_total = std::accumulate(profile.begin(), profile.end(), 0.0);
  double running = 0.0;
  for (std::size_t d = 0; d < profile.size(); ++d) {
    running += profile[d];
    if (running >= 0.5 * window_total) {
      stats.window_half_distance = static_cast<double>(d);
      break;
    }
  }
}

}  // namespace

SyntheticStats measure_synthetic(const SyntheticModel& model, const MeasureOptions& options, ThreadPool& pool) {
  const SyntheticConfig& config = model.config();
  const SyntheticPreset& preset = model.preset();
  const int ctx = options.ctx, steps = options.steps;
  if (ctx < config.sinks + config.window + 1) throw InputError("synth-stats", "ctx", "must exceed sinks + window");
  if (steps < 2) throw InputError("synth-stats", "steps", "must be >= 2");
  if (ctx + steps > model.geometry().max_seq) throw InputError("synth-stats", "ctx", "ctx + steps exceed the model's max_seq");
  const int kv_heads = options.kv_heads > 0 ? std::min(options.kv_heads, preset.kv_heads) : preset.kv_heads;
  MeasureSetup setup{model, config, ctx, steps, preset.head_dim, preset.q_heads / preset.kv_heads, ctx + steps, {}};
  for (std::size_t n = 0; n < config.needles.size(); ++n) {
    if (config.needles[n] < ctx) setup.needles.push_back(static_cast<int>(n));
  }
  const auto& layers = model.sampled_layers();
  std::vector<KvResult> results(layers.size() * static_cast<std::size_t>(kv_heads));
  pool.parallel_for(results.size(), [&](std::size_t item) {
    const int layer = layers[item / static_cast<std::size_t>(kv_heads)];
    const int head = static_cast<int>(item % static_cast<std::size_t>(kv_heads));
    results[item] = measure_kv_head(setup, layer, head);
  });

  SyntheticStats stats;
  stats.ctx = ctx;
  stats.steps = steps;
  stats.needles = static_cast<int>(setup.needles.size());
  stats.outlier_gain_min = INFINITY;
  MeasureTotals totals;
  totals.profile.assign(static_cast<std::size_t>(config.window), 0.0);
  add_results(results, stats, totals);
  add_adjacent_overlap(results, layers, kv_heads, steps, stats);
  finish_type_means(stats);
  const int samples = totals.samples;
  stats.sink_mass /= samples, stats.window_mass /= samples, stats.heavy_mass /= samples, stats.tail_mass /= samples;
  stats.query_cosine /= static_cast<double>(samples) * (steps - 1);
  stats.outlier_gain /= static_cast<double>(results.size());
  stats.heavy_token_share = static_cast<double>(totals.heavy_tokens) / (static_cast<double>(samples) * (ctx - config.sinks));
  set_window_half_distance(totals.profile, stats);
  if (totals.needle_samples > 0) {
    stats.needle_mass /= totals.needle_samples;
    stats.needle_top1 /= totals.needle_samples;
  }
  return stats;
}

}  // namespace kv
