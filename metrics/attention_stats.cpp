#include "attention_stats.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "model/llama_model.h"
#include "runtime/error.h"

namespace kvbench {

namespace {

void check(const kv::LlamaConfig& c, std::size_t text_tokens, const AttentionStatsOptions& o, int first) {
  const std::string where = "attention statistics";
  if (o.window < 2 || o.window > c.seq_len) {
    throw kv::InputError(where, "window", fmt::format("{} must be in 2..{} (the model's context)", o.window, c.seq_len));
  }
  if (o.max_windows < 0) throw kv::InputError(where, "max_windows", "must be >= 0");
  if (o.sinks < 0 || o.sinks >= o.window) throw kv::InputError(where, "sinks", fmt::format("{} must be in 0..{}", o.sinks, o.window - 1));
  if (o.recent < 1 || o.recent > o.window) throw kv::InputError(where, "recent", fmt::format("{} must be in 1..{}", o.recent, o.window));
  if (!(o.top_share > 0.0 && o.top_share <= 1.0)) throw kv::InputError(where, "top_share", "must be in (0, 1]");
  if (first < 0 || first >= o.window) throw kv::InputError(where, "first_query", fmt::format("{} must be in 0..{}", first, o.window - 1));
  if (text_tokens < static_cast<std::size_t>(o.window)) {
    throw kv::InputError(where, "text", fmt::format("{} tokens, fewer than one window of {}", text_tokens, o.window));
  }
}

// Exact causal attention of one q head over keys 0..p for every query p of the window, in
// double; `out` gets the head's output rows, `probs` row p the distribution of query p.
void attend_head(const float* q, const float* k, const float* v, int n, int dim, int kv_dim, int head, int kv_head, int head_dim,
                 std::vector<double>& probs, float* out) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
  for (int p = 0; p < n; ++p) {
    const float* qp = q + static_cast<std::size_t>(p) * dim + static_cast<std::size_t>(head) * head_dim;
    double* row = probs.data() + static_cast<std::size_t>(p) * n;
    double top = -INFINITY;
    for (int j = 0; j <= p; ++j) {
      const float* kj = k + static_cast<std::size_t>(j) * kv_dim + static_cast<std::size_t>(kv_head) * head_dim;
      double s = 0.0;
      for (int c = 0; c < head_dim; ++c) s += static_cast<double>(qp[c]) * kj[c];
      row[j] = s * scale;
      top = std::max(top, row[j]);
    }
    double sum = 0.0;
    for (int j = 0; j <= p; ++j) sum += (row[j] = std::exp(row[j] - top));
    for (int j = 0; j <= p; ++j) row[j] /= sum;
    float* op = out + static_cast<std::size_t>(p) * dim + static_cast<std::size_t>(head) * head_dim;
    for (int c = 0; c < head_dim; ++c) {
      double acc = 0.0;
      for (int j = 0; j <= p; ++j) acc += row[j] * v[static_cast<std::size_t>(j) * kv_dim + static_cast<std::size_t>(kv_head) * head_dim + c];
      op[c] = static_cast<float>(acc);
    }
  }
}

}  // namespace

AttentionStats measure_attention(const std::shared_ptr<const kv::LlamaWeights>& weights, const std::vector<int>& tokens,
                                 const AttentionStatsOptions& o, kv::ThreadPool& pool) {
  const kv::LlamaConfig& c = weights->config;
  const int first = o.first_query > 0 ? o.first_query : o.window / 2;
  check(c, tokens.size(), o, first);
  const int available = static_cast<int>(tokens.size() / static_cast<std::size_t>(o.window));
  const int windows = o.max_windows > 0 ? std::min(o.max_windows, available) : available;
  const int n = o.window, dim = c.dim, kv_dim = c.kv_dim(), head_dim = c.head_dim(), group = c.heads / c.kv_heads;
  const int queries = n - first;

  AttentionStats stats;
  stats.windows = windows;
  stats.queries_per_window = queries;
  stats.first_query = first;
  stats.heads.resize(static_cast<std::size_t>(c.layers) * c.heads);
  for (int l = 0; l < c.layers; ++l) {
    for (int h = 0; h < c.heads; ++h) {
      HeadAttention& a = stats.heads[static_cast<std::size_t>(l) * c.heads + h];
      a.layer = l;
      a.head = h;
    }
  }

  kv::LlamaModel model(weights, n, pool);
  std::vector<float> q(static_cast<std::size_t>(n) * dim), k(static_cast<std::size_t>(n) * kv_dim), v(k.size()),
      out(q.size());
  std::vector<double> probs(static_cast<std::size_t>(n) * n);
  // The heaviest keys of each (head, query) at the previous layer, sorted by position.
  std::vector<std::vector<int>> previous(static_cast<std::size_t>(c.heads) * queries), current(previous.size());
  std::vector<int> order(static_cast<std::size_t>(n));
  for (int w = 0; w < windows; ++w) {
    model.begin_step(tokens.data() + static_cast<std::size_t>(w) * n, n, 0);
    for (int l = 0; l < c.layers; ++l) {
      model.layer_qkv(l, q.data(), k.data(), v.data());
      for (int h = 0; h < c.heads; ++h) {
        attend_head(q.data(), k.data(), v.data(), n, dim, kv_dim, h, h / group, head_dim, probs, out.data());
        HeadAttention& a = stats.heads[static_cast<std::size_t>(l) * c.heads + h];
        for (int p = first; p < n; ++p) {
          const double* row = probs.data() + static_cast<std::size_t>(p) * n;
          const int context = p + 1;
          double sink = 0.0, recent = 0.0, top = 0.0;
          for (int j = 0; j < std::min(o.sinks, context); ++j) sink += row[j];
          for (int j = std::max(0, context - o.recent); j < context; ++j) recent += row[j];
          const int keep = std::max(1, static_cast<int>(std::ceil(o.top_share * context - 1e-9)));
          for (int j = 0; j < context; ++j) order[static_cast<std::size_t>(j)] = j;
          // Heaviest first; the earlier key on a tie, so the set does not depend on the sort.
          std::partial_sort(order.begin(), order.begin() + keep, order.begin() + context,
                            [&](int x, int y) { return row[x] != row[y] ? row[x] > row[y] : x < y; });
          std::vector<int>& mine = current[static_cast<std::size_t>(h) * queries + (p - first)];
          mine.assign(order.begin(), order.begin() + keep);
          for (int j : mine) top += row[j];
          std::sort(mine.begin(), mine.end());
          a.sink_mass += sink;
          a.recent_mass += recent;
          a.top_mass += top;
          if (l > 0) {
            const std::vector<int>& before = previous[static_cast<std::size_t>(h) * queries + (p - first)];
            std::size_t common = 0;  // both sorted: one merge pass
            for (auto a = before.cbegin(), b = mine.cbegin(); a != before.cend() && b != mine.cend();) {
              if (*a < *b) {
                ++a;
              } else if (*b < *a) {
                ++b;
              } else {
                ++common, ++a, ++b;
              }
            }
            stats.heads[static_cast<std::size_t>(l - 1) * c.heads + h].next_layer_overlap +=
                static_cast<double>(common) / static_cast<double>(keep);
          }
        }
      }
      model.layer_output(l, out.data());
      std::swap(previous, current);
    }
  }

  const double samples = static_cast<double>(windows) * queries;
  double overlap_heads = 0.0;
  for (HeadAttention& a : stats.heads) {
    a.sink_mass /= samples;
    a.recent_mass /= samples;
    a.top_mass /= samples;
    a.next_layer_overlap /= samples;
    stats.mean.sink_mass += a.sink_mass;
    stats.mean.recent_mass += a.recent_mass;
    stats.mean.top_mass += a.top_mass;
    if (a.layer + 1 < c.layers) {
      stats.mean.next_layer_overlap += a.next_layer_overlap;
      overlap_heads += 1.0;
    }
  }
  const auto count = static_cast<double>(stats.heads.size());
  stats.mean.sink_mass /= count;
  stats.mean.recent_mass /= count;
  stats.mean.top_mass /= count;
  if (overlap_heads > 0.0) stats.mean.next_layer_overlap /= overlap_heads;
  stats.mean.layer = stats.mean.head = -1;
  return stats;
}

}  // namespace kvbench
