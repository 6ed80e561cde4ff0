#include "attention/attention_ref.h"

#include <cmath>
#include <limits>

#include "quant/quantizer.h"
#include "runtime/error.h"

namespace kv {

void attention_ref(const AttentionShape& shape, const float* q, int n_queries, const float* k, const float* v, int ctx,
                   float* out) {
  const int dim = shape.head_dim;
  const int group = shape.group();
  const std::size_t kv_stride = static_cast<std::size_t>(shape.kv_heads) * static_cast<std::size_t>(dim);
  std::vector<double> scores(static_cast<std::size_t>(ctx));
  std::vector<double> acc(static_cast<std::size_t>(dim));
  for (int i = 0; i < n_queries; ++i) {
    const int visible = ctx - n_queries + i + 1;
    for (int h = 0; h < shape.q_heads; ++h) {
      const int kvh = h / group;
      const float* qh = q + (static_cast<std::size_t>(i) * shape.q_heads + h) * dim;
      double best = -std::numeric_limits<double>::infinity();
      for (int t = 0; t < visible; ++t) {
        const float* kt = k + t * kv_stride + static_cast<std::size_t>(kvh) * dim;
        double dot = 0.0;
        for (int c = 0; c < dim; ++c) dot += static_cast<double>(qh[c]) * kt[c];
        scores[t] = dot * shape.scale;
        best = std::max(best, scores[t]);
      }
      double total = 0.0;
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int t = 0; t < visible; ++t) {
        const double p = std::exp(scores[t] - best);
        total += p;
        const float* vt = v + t * kv_stride + static_cast<std::size_t>(kvh) * dim;
        for (int c = 0; c < dim; ++c) acc[c] += p * vt[c];
      }
      float* oh = out + (static_cast<std::size_t>(i) * shape.q_heads + h) * dim;
      for (int c = 0; c < dim; ++c) oh[c] = visible > 0 ? static_cast<float>(acc[c] / total) : 0.0f;
    }
  }
}

DenseKV gather_pages_ref(const AttentionShape& shape, const std::vector<std::vector<PageView>>& pages) {
  KV_ASSERT(static_cast<int>(pages.size()) == shape.kv_heads, "one page list per kv head");
  DenseKV dense;
  for (const PageView& page : pages[0]) dense.ctx += page.tokens;
  const auto dim = static_cast<std::size_t>(shape.head_dim);
  const std::size_t kv_stride = static_cast<std::size_t>(shape.kv_heads) * dim;
  dense.k.assign(static_cast<std::size_t>(dense.ctx) * kv_stride, 0.0f);
  dense.v.assign(dense.k.size(), 0.0f);
  for (int h = 0; h < shape.kv_heads; ++h) {
    std::size_t t = 0;
    for (const PageView& page : pages[h]) {
      for (int i = 0; i < page.tokens; ++i, ++t) {
        dequantize_k_row_ref(page, i, dense.k.data() + t * kv_stride + h * dim);
        dequantize_v_row_ref(page, i, dense.v.data() + t * kv_stride + h * dim);
      }
    }
    KV_ASSERT(static_cast<int>(t) == dense.ctx, "every kv head holds the same number of tokens");
  }
  return dense;
}

}  // namespace kv
